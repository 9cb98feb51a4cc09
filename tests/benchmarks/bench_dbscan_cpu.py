#!/usr/bin/python3
"""DBSCAN on the CPU, on this machine, through qgis_process, beside QGIS's own, in one run:
1,000,000 uniform random points in a GeoPackage (EPSG:32633, one integer field), EPS giving about
32 neighbours a point, MIN_SIZE 5; output to a GeoPackage and to a FlatGeobuf.

  ours          gpugeo:dbscan DEVICE=1 (the CPU path), whole process
  QGIS          native:dbscanclustering, whole process
  QGIS, copy    native:addautoincrementalfield on the same layer, whole process: QGIS's start-up,
                reading and writing 1,000,000 features with one added field, and no clustering;
                the floor of any algorithm that writes its features through QGIS
  GDAL, copy    ogr2ogr of the same layer to the same format: the floor of writing that format

Times are medians of --reps runs; peak memory from /usr/bin/time. Our own stages (read, index,
clustering, handing features to QGIS) are from the "Stage times" line of our log. The clusters of
both algorithms are counted and compared.

usage: bench_dbscan_cpu.py PLUGIN_DIR [--reps N] [--points N] [--formats gpkg,fgb]
"""
import argparse
import math
import os
import re
import shutil
import statistics
import sys
import tempfile

import numpy as np
from osgeo import ogr, osr

from whole_process import qgis_environment, timed

ogr.UseExceptions()


def write_points(path, n, side, seed=42):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, side, (n, 2)) + np.array([500000.0, 4000000.0])
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(32633)
    dataset = ogr.GetDriverByName("GPKG").CreateDataSource(path)
    layer = dataset.CreateLayer("points", srs, ogr.wkbPoint)
    layer.CreateField(ogr.FieldDefn("val", ogr.OFTInteger))
    dataset.StartTransaction()
    definition = layer.GetLayerDefn()
    for i, (x, y) in enumerate(xy):
        feature = ogr.Feature(definition)
        feature.SetField(0, i)
        point = ogr.Geometry(ogr.wkbPoint)
        point.AddPoint_2D(float(x), float(y))
        feature.SetGeometry(point)
        layer.CreateFeature(feature)
    dataset.CommitTransaction()
    dataset = None


def clusters_of(path, field):
    dataset = ogr.Open(path)
    layer = dataset.GetLayer(0)
    values = {feature.GetField(field) for feature in layer}
    dataset = None
    return len(values - {None})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("plugin_dir")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--formats", default="gpkg,fgb")
    args = parser.parse_args()
    n = args.points
    side = 100000.0
    eps = side * math.sqrt(32 / (n * math.pi))

    tmp = tempfile.mkdtemp(prefix="gpugeo-bench-")
    try:
        source = os.path.join(tmp, "points.gpkg")
        write_points(source, n, side)
        env = qgis_environment(tmp, args.plugin_dir)
        qgis = ["/usr/bin/qgis_process.bin", "run"]
        print(f"DBSCAN, {n:,} uniform points, EPS {eps:.2f} m (about 32 neighbours), MIN_SIZE 5; "
              f"medians of {args.reps} runs; {os.cpu_count()} cores", flush=True)
        print("| output | ours (gpugeo:dbscan, CPU) | of which our stages | QGIS native:dbscanclustering | "
              "QGIS ÷ ours | QGIS copy (addautoincrementalfield) | GDAL copy (ogr2ogr) | clusters ours / QGIS |")
        print("|---|---|---|---|---|---|---|---|")
        for extension in args.formats.split(","):
            driver = {"gpkg": "GPKG", "fgb": "FlatGeobuf"}[extension]
            runs = {key: [] for key in ("ours", "native", "copy", "ogr2ogr")}
            peaks = {key: [] for key in runs}
            stages = []
            for rep in range(args.reps):
                outputs = {key: os.path.join(tmp, f"{key}_{rep}.{extension}") for key in runs}
                commands = {
                    "ours": qgis + ["gpugeo:dbscan", "--", f"INPUT={source}", "MIN_SIZE=5", f"EPS={eps!r}",
                                    "DEVICE=1", f"OUTPUT={outputs['ours']}"],
                    "native": qgis + ["native:dbscanclustering", "--", f"INPUT={source}", "MIN_SIZE=5",
                                      f"EPS={eps!r}", f"OUTPUT={outputs['native']}"],
                    "copy": qgis + ["native:addautoincrementalfield", "--", f"INPUT={source}",
                                    f"OUTPUT={outputs['copy']}"],
                    "ogr2ogr": ["ogr2ogr", "-f", driver, outputs["ogr2ogr"], source],
                }
                for key, command in commands.items():
                    wall, peak, out, err = timed(command, env=env)
                    log = out + err
                    runs[key].append(wall)
                    peaks[key].append(peak)
                    if key == "ours":
                        match = re.search(r"Stage times: (.*) \(total ([0-9.]+) ms\)", log)
                        stages.append((match.group(1), float(match.group(2)) / 1000) if match else ("?", math.nan))
                if rep == 0:
                    counted = (clusters_of(outputs["ours"], "CLUSTER_ID"), clusters_of(outputs["native"], "CLUSTER_ID"))
                for path in outputs.values():
                    if os.path.exists(path):
                        os.remove(path)
            median = {key: statistics.median(values) for key, values in runs.items()}
            stage = sorted(stages, key=lambda s: s[1])[len(stages) // 2]
            print(f"| {driver} | {median['ours']:.1f} s ({max(peaks['ours']):.0f} MB) | {stage[1]:.1f} s: {stage[0]} "
                  f"| {median['native']:.1f} s ({max(peaks['native']):.0f} MB) | {median['native'] / median['ours']:.1f}× "
                  f"| {median['copy']:.1f} s | {median['ogr2ogr']:.1f} s | {counted[0]} / {counted[1]} |", flush=True)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
