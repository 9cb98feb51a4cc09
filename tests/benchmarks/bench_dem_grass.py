#!/usr/bin/python3
"""The DEM chain past memory against GRASS's out-of-core tools, on this machine, on the same DEM under the
same memory cap, in one run:

  ours        gpugeo:filldepressions, gpugeo:flowdirection (flats resolved) and gpugeo:flowaccumulation
              (the cells, as the peers give them; with --area the m² too) through qgis_process with
              MEMORY_BUDGET=CAP, each a whole process; the chain is their sum. GeoTIFF in and out.
  terraflow   GRASS r.terraflow (fill, directions, flow accumulation, plus its watershed and TCI outputs,
              which it always writes) with memory=CAP, on the DEM imported into a GRASS database
  watershed   GRASS r.watershed -m -s (segmented, out of core; single flow direction: D8) with
              memory=CAP: accumulation and drainage directions (it needs no separate fill)

The GRASS import (r.in.gdal) is timed apart and not counted. A GRASS tool that passes --timeout seconds
is stopped; the ratio is then a lower bound (given as ">"). Peak resident memory from /usr/bin/time -v.
The DEM is bench_dem_tiled_cpu.py's synthetic terrain.

usage: bench_dem_grass.py [PLUGIN_DIR] [--size N] [--cap MiB] [--timeout S] [--work DIR] [--skip-ours]
                          [--skip-grass] [--skip-terraflow] [--ours-seconds S] [--area]
                          [--timeout-watershed S]
(GRASS's tools use one core: --skip-grass, then --skip-ours --ours-seconds S, runs ours alone first.)
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from bench_dem_tiled_cpu import write_big_dem
from whole_process import qgis_environment

QGIS_PROCESS = "/usr/bin/qgis_process.bin"


def timed(args, env=None, timeout=None):
    """(seconds, peak MB, finished, output) of a whole process under /usr/bin/time -v; past `timeout` its
    whole process group (GRASS's module under it included) is stopped."""
    start = time.perf_counter()
    process = subprocess.Popen(["/usr/bin/time", "-v"] + args, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return time.perf_counter() - start, float("nan"), False, ""
    seconds = time.perf_counter() - start
    if process.returncode != 0:
        sys.exit(f"{args[0]} failed ({process.returncode}):\n{stdout[-3000:]}\n{stderr[-3000:]}")
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr).group(1)) / 1024.0
    return seconds, peak, True, stdout + stderr


def grass(database, command, timeout=None):
    """A GRASS module in the database's one mapset, as a whole process."""
    return timed(["grass", os.path.join(database, "loc", "PERMANENT"), "--exec"] + command, timeout=timeout)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("plugin", nargs="?", default=os.environ.get("GPUGEO_PLUGIN_DIR"))
    parser.add_argument("--size", type=int, default=20000)
    parser.add_argument("--cap", type=int, default=1000)
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--timeout-watershed", type=float, help="r.watershed's own limit (default: --timeout)")
    parser.add_argument("--work")
    parser.add_argument("--dem")
    parser.add_argument("--skip-ours", action="store_true")
    parser.add_argument("--skip-grass", action="store_true")
    parser.add_argument("--ours-seconds", type=float, help="our chain's time from an earlier run, for the ratios")
    parser.add_argument("--skip-terraflow", action="store_true")
    parser.add_argument("--area", action="store_true", help="our accumulation writes the m² raster too")
    a = parser.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="gg_grass_")
    os.makedirs(work, exist_ok=True)
    dem = a.dem or os.path.join(work, f"dem_{a.size}.tif")
    write_big_dem(dem, a.size)
    print(f"DEM {a.size} x {a.size} at {dem}; memory cap {a.cap} MiB")

    results = {}
    if not a.skip_ours:
        env = qgis_environment(tempfile.mkdtemp(prefix="profile_", dir=work), a.plugin)
        total = 0.0
        peak = 0.0
        for name, extra in (("filldepressions", [f"INPUT={dem}", f"OUTPUT={work}/o_filled.tif"]),
                            ("flowdirection", [f"INPUT={work}/o_filled.tif", f"OUTPUT={work}/o_dir.tif"]),
                            ("flowaccumulation", [f"INPUT={work}/o_dir.tif", f"OUTPUT_CELLS={work}/o_cells.tif"] +
                             ([f"OUTPUT_AREA={work}/o_area.tif"] if a.area else []))):
            s, p, _, out = timed([QGIS_PROCESS, "run", f"gpugeo:{name}", "--", "DEVICE=1",
                                  f"MEMORY_BUDGET={a.cap}"] + extra, env=env)
            tiles = re.search(r"Tiled run: [^\n]*", out)
            print(f"ours {name}: {s:.1f} s, peak {p:.0f} MB; {tiles.group(0) if tiles else 'in memory'}")
            total += s
            peak = max(peak, p)
        results["ours"] = total
        print(f"ours, the chain: {total:.1f} s, peak {peak:.0f} MB")

    if a.ours_seconds:
        results["ours"] = a.ours_seconds
    if a.skip_grass:
        return
    database = os.path.join(work, "grassdb")
    shutil.rmtree(database, ignore_errors=True)
    os.makedirs(database)
    subprocess.run(["grass", "-c", dem, "-e", os.path.join(database, "loc")], check=True, capture_output=True)
    s, _, _, _ = grass(database, ["r.in.gdal", f"input={dem}", "output=dem", "--overwrite"])
    grass(database, ["g.region", "raster=dem"])
    print(f"GRASS import (r.in.gdal, not counted): {s:.1f} s")
    s, p, finished, _ = grass(database, ["r.watershed", "-m", "-s", "elevation=dem", "accumulation=ws_acc",
                                         "drainage=ws_dir", f"memory={a.cap}", "--overwrite"],
                                 timeout=a.timeout_watershed or a.timeout)
    results["watershed"] = (s, finished)
    print(f"r.watershed -m -s memory={a.cap}: " + (f"{s:.1f} s, peak {p:.0f} MB" if finished else
                                                    f"stopped after {s:.0f} s (--timeout)"))
    if not a.skip_terraflow:
        tmp = os.path.join(work, "terraflow_tmp")
        os.makedirs(tmp, exist_ok=True)
        s, p, finished, _ = grass(database, ["r.terraflow", "elevation=dem", "filled=tf_filled", "direction=tf_dir",
                                             "swatershed=tf_shed", "accumulation=tf_acc", "tci=tf_tci",
                                             f"memory={a.cap}", f"directory={tmp}", "--overwrite"], timeout=a.timeout)
        results["terraflow"] = (s, finished)
        print(f"r.terraflow memory={a.cap}: " + (f"{s:.1f} s, peak {p:.0f} MB" if finished else
                                                  f"stopped after {s:.0f} s (--timeout)"))
    if "ours" in results:
        for name in ("terraflow", "watershed"):
            if name in results:
                s, finished = results[name]
                print(f"ratio {name} / ours: {'' if finished else '> '}{s / results['ours']:.1f}x")

if __name__ == "__main__":
    main()
