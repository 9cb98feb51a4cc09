#!/usr/bin/python3
"""gpugeo:breachdepressions against SAGA's sink removal on this machine, in one run per DEM, each tool a
whole process on the same DEM:

  ours      gpugeo:breachdepressions through qgis_process (DEVICE=1, the CPU; MAX_LENGTH=--max-length, no depth
            limit), the breached DEM written. Beside it QGIS's floor (gdal:translate of the DEM through
            qgis_process: start-up, a raster read and written) and our fill (gpugeo:filldepressions FLATS=1, the
            same drainage by filling alone).
  saga7     saga_cmd ta_preprocessor 7, "Breach Depressions" (O. Conrad 2020, after Lindsay 2016: channels of at
            most MAX_LENGTH=--max-length cells, no depth limit).
  saga2     saga_cmd ta_preprocessor 2 METHOD 0, "Sink Removal: Deepen Drainage Routes" (the issue's peer).
  saga4     saga_cmd ta_preprocessor 4, "Fill Sinks (Wang & Liu)", the filling peer.

For each output, against the input DEM: the cells lowered and raised, the volumes removed and added (cell
area from the geotransform), the deepest cut, and the valid cells that do not drain with plain D8 (not an
edge cell, and no neighbour lower: pits and flats left). SAGA's fills leave flats (their cells do not drain
by plain D8; SAGA's own routing drains them), ours raise them by float steps so that every cell drains.

The DEMs: bench_dem_tiled_cpu.py's synthetic terrain at --size (30 m, values rounded to 0.5 m: noise pits
and flats), and the shipped SRTM-3 DEM of Jacksboro (Int16, 403 x 344).

usage: bench_breach_peers.py PLUGIN_DIR [--size 2511] [--max-length 50] [--work DIR] [--skip-jacksboro]
                             [--timeout SECONDS]
"""
import argparse
import os
import shutil
import sys
import tempfile

import numpy as np
from osgeo import gdal

from bench_dem_grass import QGIS_PROCESS, timed
from bench_dem_tiled_cpu import write_big_dem
from whole_process import qgis_environment

gdal.UseExceptions()

HERE = os.path.dirname(os.path.abspath(__file__))
JACKSBORO = os.path.join(HERE, "..", "data", "jacksboro_srtm3.tif")


def read_dem(path):
    dataset = gdal.Open(path)
    band = dataset.GetRasterBand(1)
    z = band.ReadAsArray().astype(np.float64)
    nodata = band.GetNoDataValue()
    if nodata is not None:
        z[z == nodata] = np.nan
    return z, dataset.GetGeoTransform()


def cell_areas(z, gt):
    """m² per row: projected from the geotransform, geographic from WGS 84's sphere of equal area (enough
    for volumes side by side)."""
    rows = z.shape[0]
    if abs(gt[1]) < 1.0:  # degrees
        lat = np.radians(gt[3] + (np.arange(rows) + 0.5) * gt[5])
        r = 6371008.8
        return (np.radians(abs(gt[1])) * r * np.cos(lat) * np.radians(abs(gt[5])) * r)[:, None]
    return np.full((rows, 1), abs(gt[1] * gt[5]))


def undrained(z):
    """Valid cells that are not edge cells and have no lower neighbour."""
    p = np.pad(z, 1, constant_values=np.nan)
    h, w = z.shape
    around = np.stack([p[1 + dy:1 + dy + h, 1 + dx:1 + dx + w] for dx in (-1, 0, 1) for dy in (-1, 0, 1)
                       if dx or dy])
    valid = ~np.isnan(z)
    edge = np.isnan(around).any(axis=0)
    with np.errstate(invalid="ignore"):
        lower = (around < z).any(axis=0)
    return int((valid & ~edge & ~lower).sum())


def changes(dem, out, areas):
    d = out - dem
    valid = ~np.isnan(dem)
    lowered, raised = valid & (d < 0), valid & (d > 0)
    return {"lowered": int(lowered.sum()), "raised": int(raised.sum()),
            "over_mm": int((valid & (np.abs(d) > 1e-3)).sum()),
            "removed": float(np.where(lowered, -d * areas, 0).sum()),
            "added": float(np.where(raised, d * areas, 0).sum()),
            "deepest": float(-d[lowered].min()) if lowered.any() else 0.0,
            "undrained": undrained(out)}


def report(tag, name, seconds, peak, c, ours_seconds=None):
    ratio = f", ours {seconds / ours_seconds:.1f}x faster" if ours_seconds else ""
    print(f"[{tag}] {name:<34} {seconds:7.2f} s {peak:7.0f} MB | changed {c['lowered'] + c['raised']:9d} "
          f"(lowered {c['lowered']}, raised {c['raised']}; by more than 1 mm {c['over_mm']}) | removed {c['removed']:.4g} m3, added {c['added']:.4g} m3"
          f" | deepest cut {c['deepest']:.4g} m | undrained {c['undrained']}{ratio}")


def compare(a, env, dem, folder, tag):
    z, gt = read_dem(dem)
    areas = cell_areas(z, gt)
    print(f"[{tag}] DEM {z.shape[1]} x {z.shape[0]}, {int((~np.isnan(z)).sum())} valid cells, "
          f"undrained before: {undrained(z)}")
    floor, fpeak, _, _ = timed([QGIS_PROCESS, "run", "gdal:translate", "--", f"INPUT={dem}",
                                f"OUTPUT={folder}/copy.tif"], env=env)
    print(f"[{tag}] QGIS's floor (gdal:translate of the DEM): {floor:.2f} s, {fpeak:.0f} MB")
    ours_s, ours_peak, _, log = timed([QGIS_PROCESS, "run", "gpugeo:breachdepressions", "--", "DEVICE=1",
                                       f"INPUT={dem}", f"MAX_LENGTH={a.max_length}",
                                       f"OUTPUT={folder}/ours_breached.tif"], env=env)
    for line in log.splitlines():
        if "Stage times" in line or "depression bottoms" in line:
            print(f"[{tag}]   {line.strip()}")
    ours = changes(z, read_dem(f"{folder}/ours_breached.tif")[0], areas)
    report(tag, "ours: gpugeo:breachdepressions", ours_s, ours_peak, ours)
    print(f"[{tag}]   ours above the floor: {ours_s - floor:.2f} s")
    fill_s, fill_peak, _, _ = timed([QGIS_PROCESS, "run", "gpugeo:filldepressions", "--", "DEVICE=1", f"INPUT={dem}",
                                     "FLATS=1", f"OUTPUT={folder}/ours_filled.tif"], env=env)
    report(tag, "ours: gpugeo:filldepressions FLATS=1", fill_s, fill_peak,
           changes(z, read_dem(f"{folder}/ours_filled.tif")[0], areas))
    runs = [("SAGA ta_preprocessor 7 (breach)", ["7", "-DEM", dem, "-NOSINKS", f"{folder}/saga7.sdat",
                                                "-MAX_LENGTH", str(a.max_length)], "saga7.sdat"),
            ("SAGA ta_preprocessor 2 (deepen)", ["2", "-DEM", dem, "-DEM_PREPROC", f"{folder}/saga2.sdat",
                                                "-METHOD", "0"], "saga2.sdat"),
            ("SAGA ta_preprocessor 4 (fill W&L)", ["4", "-ELEV", dem, "-FILLED", f"{folder}/saga4.sdat"],
             "saga4.sdat")]
    for name, arguments, output in runs:
        seconds, peak, finished, _ = timed(["saga_cmd", "-f=q", "ta_preprocessor"] + arguments, timeout=a.timeout)
        if not finished:
            print(f"[{tag}] {name:<34} did not finish in {a.timeout:.0f} s (stopped): ours at least "
                  f"{a.timeout / ours_s:.1f}x faster")
            continue
        report(tag, name, seconds, peak, changes(z, read_dem(f"{folder}/{output}")[0], areas), ours_s)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("plugin", nargs="?", default=os.environ.get("GPUGEO_PLUGIN_DIR"))
    parser.add_argument("--size", type=int, default=2511)
    parser.add_argument("--max-length", type=int, default=50)
    parser.add_argument("--skip-jacksboro", action="store_true")
    parser.add_argument("--timeout", type=float, default=1200, help="a SAGA run's limit in seconds")
    parser.add_argument("--work")
    a = parser.parse_args()
    plugin = a.plugin
    if plugin and not os.path.exists(os.path.join(plugin, "metadata.txt")) and \
            os.path.exists(os.path.join(plugin, "gpugeo", "metadata.txt")):
        plugin = os.path.join(plugin, "gpugeo")
    work = a.work or tempfile.mkdtemp(prefix="gg_breach_")
    os.makedirs(work, exist_ok=True)
    env = qgis_environment(tempfile.mkdtemp(prefix="gg_breach_profile_"), plugin)
    dems = []
    terrain = os.path.join(work, f"terrain_{a.size}.tif")
    write_big_dem(terrain, a.size)
    dems.append(("terrain", terrain, os.path.join(work, "terrain")))
    if not a.skip_jacksboro:
        dems.append(("jacksboro", JACKSBORO, os.path.join(work, "jacksboro")))
    for tag, dem, folder in dems:
        os.makedirs(folder, exist_ok=True)
        compare(a, env, dem, folder, tag)
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
