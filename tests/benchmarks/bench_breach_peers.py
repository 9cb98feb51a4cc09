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
                             [--timeout SECONDS] [--limit FACTOR] [--saga-tools 7,2,4] [--skip-fill]

--limit 5 stops each SAGA run at 5 times our time (the issue's bar shown without waiting for SAGA); the
statistics are computed strip by strip, so that a 20,000² DEM fits this machine's memory.
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


STRIP = 2048  # rows read at a time: the statistics of a 20,000² DEM in bounded memory


def read_dem(path, first=0, rows=None):
    """Rows [first, first + rows) of the first band as float64 (nodata as NaN), with the geotransform."""
    dataset = gdal.Open(path)
    band = dataset.GetRasterBand(1)
    rows = dataset.RasterYSize - first if rows is None else rows
    z = band.ReadAsArray(0, first, dataset.RasterXSize, rows).astype(np.float64)
    nodata = band.GetNoDataValue()
    if nodata is not None:
        z[z == nodata] = np.nan
    return z, dataset.GetGeoTransform()


def strips(path):
    """(first row, the strip with one row of halo above and below where the raster has one, rows of halo
    above) for every strip of STRIP rows."""
    height = gdal.Open(path).RasterYSize
    for first in range(0, height, STRIP):
        top = min(first, 1)
        rows = min(STRIP, height - first)
        below = min(1, height - first - rows)
        yield first, read_dem(path, first - top, top + rows + below)[0], top, rows


def cell_areas(first, rows, gt):
    """m² per row: projected from the geotransform, geographic from WGS 84's sphere of equal area (enough
    for volumes side by side)."""
    if abs(gt[1]) < 1.0:  # degrees
        lat = np.radians(gt[3] + (first + np.arange(rows) + 0.5) * gt[5])
        r = 6371008.8
        return (np.radians(abs(gt[1])) * r * np.cos(lat) * np.radians(abs(gt[5])) * r)[:, None]
    return np.full((rows, 1), abs(gt[1] * gt[5]))


def undrained(z, top, rows):
    """Of rows [top, top + rows) of a strip with its halo: valid cells that are not edge cells and have no
    lower neighbour."""
    p = np.pad(z, ((1 if top == 0 else 0, 1 if top + rows == z.shape[0] else 0), (1, 1)),
               constant_values=np.nan)
    if top == 0:
        top = 1
    w = z.shape[1]
    centre = p[top:top + rows, 1:1 + w]
    valid = ~np.isnan(centre)
    edge = np.zeros(centre.shape, bool)
    lower = np.zeros(centre.shape, bool)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            if dx or dy:
                around = p[top + dy:top + dy + rows, 1 + dx:1 + dx + w]
                edge |= np.isnan(around)
                with np.errstate(invalid="ignore"):
                    lower |= around < centre
    return int((valid & ~edge & ~lower).sum())


def undrained_in(path):
    return sum(undrained(z, top, rows) for _, z, top, rows in strips(path))


def changes(dem, out):
    """The cells and volumes `out` changes against `dem` (two rasters of one grid), strip by strip."""
    c = {"lowered": 0, "raised": 0, "over_mm": 0, "removed": 0.0, "added": 0.0, "deepest": 0.0, "undrained": 0}
    gt = gdal.Open(dem).GetGeoTransform()
    for first, o, top, rows in strips(out):
        z = read_dem(dem, first, rows)[0]
        o_rows = o[top:top + rows]
        d = o_rows - z
        valid = ~np.isnan(z)
        lowered, raised = valid & (d < 0), valid & (d > 0)
        areas = cell_areas(first, rows, gt)
        c["lowered"] += int(lowered.sum())
        c["raised"] += int(raised.sum())
        c["over_mm"] += int((valid & (np.abs(d) > 1e-3)).sum())
        c["removed"] += float(np.where(lowered, -d * areas, 0).sum())
        c["added"] += float(np.where(raised, d * areas, 0).sum())
        c["deepest"] = max(c["deepest"], float(-d[lowered].min()) if lowered.any() else 0.0)
        c["undrained"] += undrained(o, top, rows)
    return c


def report(tag, name, seconds, peak, c, ours_seconds=None):
    ratio = f", ours {seconds / ours_seconds:.1f}x faster" if ours_seconds else ""
    print(f"[{tag}] {name:<34} {seconds:7.2f} s {peak:7.0f} MB | changed {c['lowered'] + c['raised']:9d} "
          f"(lowered {c['lowered']}, raised {c['raised']}; by more than 1 mm {c['over_mm']}) | removed {c['removed']:.4g} m3, added {c['added']:.4g} m3"
          f" | deepest cut {c['deepest']:.4g} m | undrained {c['undrained']}{ratio}")


def compare(a, env, dem, folder, tag):
    size = gdal.Open(dem)
    valid = sum(int((~np.isnan(z[top:top + rows])).sum()) for _, z, top, rows in strips(dem))
    print(f"[{tag}] DEM {size.RasterXSize} x {size.RasterYSize}, {valid} valid cells, "
          f"undrained before: {undrained_in(dem)}")
    floor, fpeak, _, _ = timed([QGIS_PROCESS, "run", "gdal:translate", "--", f"INPUT={dem}",
                                f"OUTPUT={folder}/copy.tif"], env=env)
    print(f"[{tag}] QGIS's floor (gdal:translate of the DEM): {floor:.2f} s, {fpeak:.0f} MB")
    ours_s, ours_peak, _, log = timed([QGIS_PROCESS, "run", "gpugeo:breachdepressions", "--", "DEVICE=1",
                                       f"INPUT={dem}", f"MAX_LENGTH={a.max_length}",
                                       f"OUTPUT={folder}/ours_breached.tif"], env=env)
    for line in log.splitlines():
        if "Stage times" in line or "depression bottoms" in line or "tile" in line.lower():
            print(f"[{tag}]   {line.strip()}")
    report(tag, "ours: gpugeo:breachdepressions", ours_s, ours_peak, changes(dem, f"{folder}/ours_breached.tif"))
    print(f"[{tag}]   ours above the floor: {ours_s - floor:.2f} s")
    if not a.skip_fill:
        fill_s, fill_peak, _, _ = timed([QGIS_PROCESS, "run", "gpugeo:filldepressions", "--", "DEVICE=1",
                                         f"INPUT={dem}", "FLATS=1", f"OUTPUT={folder}/ours_filled.tif"], env=env)
        report(tag, "ours: gpugeo:filldepressions FLATS=1", fill_s, fill_peak,
               changes(dem, f"{folder}/ours_filled.tif"))
    runs = {"7": ("SAGA ta_preprocessor 7 (breach)", ["7", "-DEM", dem, "-NOSINKS", f"{folder}/saga7.sdat",
                                                      "-MAX_LENGTH", str(a.max_length)], "saga7.sdat"),
            "2": ("SAGA ta_preprocessor 2 (deepen)", ["2", "-DEM", dem, "-DEM_PREPROC", f"{folder}/saga2.sdat",
                                                      "-METHOD", "0"], "saga2.sdat"),
            "4": ("SAGA ta_preprocessor 4 (fill W&L)", ["4", "-ELEV", dem, "-FILLED", f"{folder}/saga4.sdat"],
                  "saga4.sdat")}
    # A limit of `--limit` times ours stops a peer as soon as the bar (ours that many times faster) is shown.
    timeout = min(a.timeout, a.limit * ours_s) if a.limit else a.timeout
    for tool in filter(None, a.saga_tools.split(",")):
        name, arguments, output = runs[tool]
        seconds, peak, finished, _ = timed(["saga_cmd", "-f=q", "ta_preprocessor"] + arguments, timeout=timeout)
        if not finished:
            print(f"[{tag}] {name:<34} did not finish in {seconds:.0f} s (stopped): ours at least "
                  f"{seconds / ours_s:.1f}x faster")
            continue
        report(tag, name, seconds, peak, changes(dem, f"{folder}/{output}"), ours_s)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("plugin", nargs="?", default=os.environ.get("GPUGEO_PLUGIN_DIR"))
    parser.add_argument("--size", type=int, default=2511)
    parser.add_argument("--max-length", type=int, default=50)
    parser.add_argument("--skip-jacksboro", action="store_true")
    parser.add_argument("--timeout", type=float, default=1200, help="a SAGA run's limit in seconds")
    parser.add_argument("--limit", type=float, help="also stop a SAGA run at this many times our time")
    parser.add_argument("--saga-tools", default="7,2,4", help="which of ta_preprocessor 7, 2, 4 to run (empty: none)")
    parser.add_argument("--skip-fill", action="store_true", help="leave our fill out")
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
