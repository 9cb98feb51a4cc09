#!/usr/bin/python3
"""gpugeo:watersheds against GRASS r.water.outlet on this machine, on the same D8 directions, in one run:

  ours     gpugeo:watersheds through qgis_process (DEVICE=1, the CPU), every outlet in one run, the raster
           and the polygons written; a whole process. Its floor beside it: gdal:translate of the same
           directions through qgis_process (QGIS's start-up, a raster read and written).
  grass    r.water.outlet once per outlet (it takes one), on the directions imported into a GRASS database
           in its drainage encoding (1 = NE ... 8 = E, counter-clockwise); the import is timed apart.

The directions: bench_dem_tiled_cpu.py's terrain at --size², filled with flats resolved and drained by
gpugeo:filldepressions and gpugeo:flowdirection (not timed). The outlets: --outlets random cells with at
least 1,000 cells upstream (SNAP_DISTANCE 0). Each r.water.outlet basin is checked against ours: its
cells are our outlet's total (its own and every nested outlet's), by count. The ratio is GRASS's sum
over the outlets against our run; past --timeout the GRASS loop stops and the ratio is extrapolated from
the outlets done (said so).

usage: bench_watersheds_grass.py [PLUGIN_DIR] [--size N] [--outlets K] [--timeout S] [--work DIR]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
from osgeo import gdal, ogr, osr

from bench_dem_grass import QGIS_PROCESS, grass, timed
from bench_dem_tiled_cpu import write_big_dem
from whole_process import qgis_environment

gdal.UseExceptions()
ESRI_TO_GRASS = {1: 8, 2: 7, 4: 6, 8: 5, 16: 4, 32: 3, 64: 2, 128: 1}


def prepare_directions(plugin, size, work):
    """bench_dem_tiled_cpu.py's terrain at size² in `work`, filled with its flats raised and drained by
    gpugeo:filldepressions (FLATS=1), gpugeo:flowdirection and gpugeo:flowaccumulation on the CPU (not
    timed; kept from an earlier run in the same folder): the QGIS environment and the paths of the filled
    DEM, the directions and the upstream cells."""
    os.makedirs(work, exist_ok=True)
    dem = os.path.join(work, f"dem_{size}.tif")
    write_big_dem(dem, size)
    env = qgis_environment(tempfile.mkdtemp(prefix="profile_", dir=work), plugin)
    filled, directions, cells = (os.path.join(work, name) for name in ("filled.tif", "dir.tif", "cells.tif"))
    for name, extra, output, source in (("filldepressions", [f"INPUT={dem}", "FLATS=1", f"OUTPUT={filled}"], filled, dem),
                                        ("flowdirection", [f"INPUT={filled}", f"OUTPUT={directions}"], directions,
                                         filled),
                                        ("flowaccumulation", [f"INPUT={directions}", f"OUTPUT_CELLS={cells}"], cells,
                                         directions)):
        if not made_from(output, source, size):  # a work folder shared by several scripts prepares once
            timed([QGIS_PROCESS, "run", f"gpugeo:{name}", "--", "DEVICE=1"] + extra, env=env)
    return env, filled, directions, cells


def made_from(output, source, size):
    """Whether `output` exists, is size² and newer than `source`."""
    if not os.path.exists(output) or os.path.getmtime(output) < os.path.getmtime(source):
        return False
    dataset = gdal.Open(output)
    return dataset.RasterXSize == size and dataset.RasterYSize == size


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("plugin", nargs="?", default=os.environ.get("GPUGEO_PLUGIN_DIR"))
    parser.add_argument("--size", type=int, default=2511)
    parser.add_argument("--outlets", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--work")
    a = parser.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="gg_ws_")
    env, _, directions, cells = prepare_directions(a.plugin, a.size, work)

    # The outlets: random cells with at least 1,000 cells upstream, at cell centres.
    ds = gdal.Open(cells)
    gt = ds.GetGeoTransform()
    upstream = ds.GetRasterBand(1).ReadAsArray()
    h, w = upstream.shape
    rng = np.random.default_rng(5)
    candidates = np.flatnonzero(upstream.ravel() >= 1000)
    chosen = rng.choice(candidates, size=min(a.outlets, len(candidates)), replace=False)
    points = [(gt[0] + (c % w + 0.5) * gt[1], gt[3] + (c // w + 0.5) * gt[5]) for c in chosen]
    outlets = os.path.join(work, "outlets.gpkg")
    driver = ogr.GetDriverByName("GPKG")
    out = driver.CreateDataSource(outlets)
    srs = osr.SpatialReference()
    srs.ImportFromWkt(ds.GetProjection())
    layer = out.CreateLayer("outlets", srs, ogr.wkbPoint)
    for x, y in points:
        f = ogr.Feature(layer.GetLayerDefn())
        f.SetGeometry(ogr.CreateGeometryFromWkt(f"POINT ({x!r} {y!r})"))
        layer.CreateFeature(f)
    out = None
    print(f"directions {a.size} x {a.size}; {len(points)} outlets")

    # Ours, and QGIS's floor.
    polygons = os.path.join(work, "sheds.gpkg")
    s, p, _, log = timed([QGIS_PROCESS, "run", "gpugeo:watersheds", "--", "DEVICE=1", f"INPUT={directions}",
                          f"OUTLETS={outlets}", "SNAP_DISTANCE=0", f"OUTPUT={work}/sheds.tif",
                          f"OUTPUT_POLYGONS={polygons}"], env=env)
    stages = re.search(r"Stage times: [^\n]*\(total ([0-9.]+) ms\)", log)
    core = float(stages.group(1)) / 1000.0 if stages else float("nan")
    print(f"ours, gpugeo:watersheds: {s:.2f} s, peak {p:.0f} MB; {stages.group(0) if stages else ''}")
    floor, _, _, _ = timed([QGIS_PROCESS, "run", "gdal:translate", "--", f"INPUT={directions}",
                            f"OUTPUT={work}/copy.tif"], env=env)
    print(f"QGIS's floor (gdal:translate of the directions): {floor:.2f} s; ours above it: {s - floor:.2f} s")
    totals = {}
    layer_ds = ogr.Open(polygons)
    sheds = layer_ds.GetLayer(0)
    feature = sheds.GetNextFeature()
    while feature is not None:
        down = feature.GetField("down") if feature.IsFieldSetAndNotNull("down") else None
        totals[feature.GetField("outlet")] = (feature.GetField("cells"), down)
        feature = sheds.GetNextFeature()
    sheds = None
    layer_ds = None
    total_cells = {k: own for k, (own, _) in totals.items()}
    for k, (own, _) in totals.items():  # add each outlet's own cells down its chain
        j, steps = totals[k][1], 0
        while j is not None and steps < len(totals):
            total_cells[j] += own
            j, steps = totals[j][1], steps + 1

    # GRASS: the directions in its encoding, imported (timed apart), then r.water.outlet per outlet.
    direction_ds = gdal.Open(directions)  # kept while its band is read
    codes = direction_ds.GetRasterBand(1).ReadAsArray()
    direction_ds = None
    drain = np.zeros(codes.shape, np.int16)
    for esri, g in ESRI_TO_GRASS.items():
        drain[codes == esri] = g
    drain_tif = os.path.join(work, "drain.tif")
    d = gdal.GetDriverByName("GTiff").Create(drain_tif, w, h, 1, gdal.GDT_Int16, ["TILED=YES"])
    d.SetGeoTransform(gt)
    d.SetProjection(ds.GetProjection())
    d.GetRasterBand(1).SetNoDataValue(-32768)
    d.GetRasterBand(1).WriteArray(np.where(codes == 255, -32768, drain))
    d = None
    database = os.path.join(work, "grassdb")
    shutil.rmtree(database, ignore_errors=True)
    os.makedirs(database)
    subprocess.run(["grass", "-c", drain_tif, "-e", os.path.join(database, "loc")], check=True, capture_output=True)
    s_import, _, _, _ = grass(database, ["r.in.gdal", f"input={drain_tif}", "output=drain", "--overwrite"])
    grass(database, ["g.region", "raster=drain"])
    print(f"GRASS import (not counted): {s_import:.1f} s")
    spent, done, mismatches = 0.0, 0, 0
    start = time.perf_counter()
    for k, (x, y) in enumerate(points, start=1):
        s_k, _, _, _ = grass(database, ["r.water.outlet", "input=drain", f"output=basin{k}",
                                        f"coordinates={x!r},{y!r}", "--overwrite"])
        spent += s_k
        _, _, _, stats = grass(database, ["r.univar", "-g", f"map=basin{k}"])
        n = int(re.search(r"^n=(\d+)", stats, re.M).group(1))
        mismatches += n != total_cells[k]
        done += 1
        if time.perf_counter() - start > a.timeout:
            break
    line = f"GRASS r.water.outlet, {done} of {len(points)} outlets: {spent:.1f} s"
    if done < len(points):
        spent *= len(points) / done
        line += f" (extrapolated to all: {spent:.0f} s)"
    print(line + f"; basins equal to ours (cells): {done - mismatches} of {done}")
    above = (f"{spent / (s - floor):.1f}x above QGIS's floor" if s - floor > 0.1 * floor else
             "ours runs within QGIS's floor")
    print(f"ratio GRASS / ours: {spent / s:.1f}x end to end ({above}); {spent / core:.0f}x against our stages' "
          f"total {core:.2f} s")


if __name__ == "__main__":
    sys.exit(main())
