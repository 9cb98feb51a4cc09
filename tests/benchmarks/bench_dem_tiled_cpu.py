#!/usr/bin/python3
"""The DEM chain past memory, on this machine, through qgis_process: gpugeo:isochrones tile by tile (fill,
flats and directions, accumulation, travel times, bands and their polygons in one run, every output
written: FILLED, FLOWDIR, ACCUMULATION, TRAVEL_TIME, WATERSHED, ISOCHRONES, TIME_AREA) on a synthetic DEM
larger than memory, with its wall time and peak resident memory (/usr/bin/time -v), and the log's tiles,
passes, scratch space and stage times. With --compare, the same run in memory beside it (for DEMs that fit)
and the outputs compared: rasters bit for bit (travel times within 1e-12 relative), vectors feature for
feature.

The DEM is bench_dem.cpp's synthetic terrain (bench_dem_cpu.py's write_dem: waves, a slope, uniform noise
of 2.5 m rounded to 0.5 m: pits and flats), written window by window as a tiled BigTIFF (256² blocks,
uncompressed), float32, EPSG:32633, 30 m cells; an existing file of the right size is reused.

usage: bench_dem_tiled_cpu.py [PLUGIN_DIR] [--size N] [--budget MiB] [--dem PATH] [--work DIR] [--compare] [--keep]
PLUGIN_DIR (the installed plugin folder, e.g. /tmp/qp/stage/gpugeo after
`cmake --install build --prefix /tmp/qp/stage`) defaults to $GPUGEO_PLUGIN_DIR.
The runs' outputs (21 GB at 40,000²) and the QGIS profile are removed at the end, and a work folder the
script made itself (no --work) with them, its DEM included; --keep keeps everything.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
from osgeo import gdal, ogr, osr

from whole_process import qgis_environment

gdal.UseExceptions()

QGIS_PROCESS = "/usr/bin/qgis_process.bin"
CELL = 30.0
ORIGIN_X, ORIGIN_Y = 500000.0, 5200000.0


def write_big_dem(path, n, rows_per_block=1024, seed=7):
    """bench_dem_cpu.py's terrain at n x n, block of rows by block of rows."""
    if os.path.exists(path):
        d = gdal.Open(path)
        if d.RasterXSize == n and d.RasterYSize == n:
            return
    driver = gdal.GetDriverByName("GTiff")
    dataset = driver.Create(path, n, n, 1, gdal.GDT_Float32,
                            options=["TILED=YES", "BLOCKXSIZE=256", "BLOCKYSIZE=256", "BIGTIFF=YES"])
    dataset.SetGeoTransform((ORIGIN_X, CELL, 0.0, ORIGIN_Y, 0.0, -CELL))
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(32633)
    dataset.SetProjection(srs.ExportToWkt())
    band = dataset.GetRasterBand(1)
    band.SetNoDataValue(-9999.0)
    rng = np.random.default_rng(seed)
    sx = sy = 2511.0 / n
    fx = (np.arange(n, dtype=np.float64) * sx)[np.newaxis, :]
    for y0 in range(0, n, rows_per_block):
        rows = min(rows_per_block, n - y0)
        fy = ((y0 + np.arange(rows, dtype=np.float64)) * sy)[:, np.newaxis]
        v = (300 + 120 * np.sin(fx * 0.004) * np.cos(fy * 0.0031) + 40 * np.sin(fx * 0.021 + fy * 0.017) +
             0.03 * fx + 2.5 * rng.random((rows, n)))
        band.WriteArray((np.round(v * 2) / 2).astype(np.float32), 0, y0)
    dataset = None


def run_isochrones(env, dem, out, prefix, budget, tiled):
    """One qgis_process run with every output; returns (seconds, peak MB, log)."""
    outputs = {"TRAVEL_TIME": f"{prefix}_time.tif", "FILLED": f"{prefix}_filled.tif",
               "FLOWDIR": f"{prefix}_dir.tif", "ACCUMULATION": f"{prefix}_acc.tif",
               "WATERSHED": f"{prefix}_watershed.gpkg", "ISOCHRONES": f"{prefix}_isochrones.gpkg",
               "TIME_AREA": f"{prefix}_table.gpkg"}
    args = ["/usr/bin/time", "-v", QGIS_PROCESS, "run", "gpugeo:isochrones", "--", f"INPUT={dem}", "DEVICE=1"]
    if tiled:
        args += [f"MEMORY_BUDGET={budget}", "TILED=true"]
    args += [f"{k}={os.path.join(out, v)}" for k, v in outputs.items()]
    start = time.perf_counter()
    process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # The resident memory of qgis_process (time's child) sampled every second: when the peak came.
    samples = []

    def sample():
        while process.poll() is None:
            try:
                with open(f"/proc/{process.pid}/task/{process.pid}/children") as f:
                    child = f.read().split()
                if child:
                    with open(f"/proc/{child[0]}/status") as f:
                        rss = int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)) / 1024.0
                    samples.append((time.perf_counter() - start, rss))
            except (OSError, AttributeError):
                pass
            time.sleep(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - start
    sampler.join()
    if process.returncode != 0:
        sys.exit(f"qgis_process failed ({process.returncode}):\n{stdout[-4000:]}\n{stderr[-4000:]}")
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr).group(1)) / 1024.0
    if samples:
        at, most = max(samples, key=lambda s: s[1])
        stdout += f"\nSampled resident memory: most {most:.0f} MB at {at:.0f} s of {seconds:.0f} s\n"
    return seconds, peak, stdout


def log_lines(log):
    keep = ("In memory", "Tile by tile", "Tiles of", "Tiled run", "Scratch space", "Stage times", "Watershed:",
            "Outlet", "Flats", "Sampled resident memory")
    return [line for line in log.splitlines() if line.startswith(keep)]


def same_vectors(a, b):
    da, db = ogr.Open(a), ogr.Open(b)
    la, lb = da.GetLayer(0), db.GetLayer(0)
    if la.GetFeatureCount() != lb.GetFeatureCount():
        return False
    for fa, fb in zip(la, lb):
        ga, gb = fa.GetGeometryRef(), fb.GetGeometryRef()
        if (ga is None) != (gb is None) or (ga is not None and ga.ExportToWkb() != gb.ExportToWkb()):
            return False
        for i in range(fa.GetFieldCount()):
            x, y = fa.GetField(i), fb.GetField(i)
            if isinstance(x, float) and isinstance(y, float):
                if abs(x - y) > 1e-12 * abs(x):
                    return False
            elif x != y:
                return False
    return True


def compare(out):
    for name in ("filled", "dir", "acc"):
        a = gdal.Open(os.path.join(out, f"t_{name}.tif")).ReadAsArray()
        b = gdal.Open(os.path.join(out, f"m_{name}.tif")).ReadAsArray()
        print(f"  {name}: {'identical' if np.array_equal(a, b, equal_nan=True) else 'DIFFERENT'}")
    a = gdal.Open(os.path.join(out, "t_time.tif")).ReadAsArray()
    b = gdal.Open(os.path.join(out, "m_time.tif")).ReadAsArray()
    same = np.array_equal(a < 0, b < 0) and np.all(np.abs(a - b) <= 1e-12 * np.abs(b))
    print(f"  travel time: {'within 1e-12 relative' if same else 'DIFFERENT'}; {int((b >= 0).sum())} cells")
    for name in ("watershed", "isochrones", "table"):
        same = same_vectors(os.path.join(out, f"t_{name}.gpkg"), os.path.join(out, f"m_{name}.gpkg"))
        print(f"  {name}: {'identical' if same else 'DIFFERENT'}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("plugin", nargs="?", default=os.environ.get("GPUGEO_PLUGIN_DIR"))
    parser.add_argument("--size", type=int, default=6000)
    parser.add_argument("--budget", type=int, default=200)
    parser.add_argument("--dem")
    parser.add_argument("--work")
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the outputs and the work folder")
    a = parser.parse_args()
    if not a.plugin:
        sys.exit("give the installed plugin folder (or set GPUGEO_PLUGIN_DIR)")
    work = a.work or tempfile.mkdtemp(prefix="gg_tiled_")
    os.makedirs(work, exist_ok=True)
    try:
        run(a, work)
    finally:
        if not a.keep:
            clean(work, whole=not a.work and not a.dem)


def clean(work, whole):
    """Removes the runs' outputs and profiles from `work` (the whole folder when `whole`)."""
    if whole:
        shutil.rmtree(work, ignore_errors=True)
        return
    for name in os.listdir(work):
        path = os.path.join(work, name)
        if name.startswith("profile_"):
            shutil.rmtree(path, ignore_errors=True)
        elif name.startswith(("t_", "m_")):
            os.remove(path)


def run(a, work):
    dem = a.dem or os.path.join(work, f"dem_{a.size}.tif")
    env = qgis_environment(tempfile.mkdtemp(prefix="profile_", dir=work), a.plugin)
    start = time.perf_counter()
    write_big_dem(dem, a.size)
    print(f"DEM {a.size} x {a.size} ({a.size * a.size / 1e9:.2f}e9 cells) at {dem} "
          f"({time.perf_counter() - start:.0f} s to write or check)")
    seconds, peak, log = run_isochrones(env, dem, work, "t", a.budget, True)
    print(f"tiled, MEMORY_BUDGET={a.budget}: {seconds:.1f} s, peak {peak:.0f} MB")
    for line in log_lines(log):
        print("  " + line)
    if a.compare:
        seconds, peak, log = run_isochrones(env, dem, work, "m", 0, False)
        print(f"in memory: {seconds:.1f} s, peak {peak:.0f} MB")
        for line in log_lines(log):
            print("  " + line)
        compare(work)


if __name__ == "__main__":
    main()
