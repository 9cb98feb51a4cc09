#!/usr/bin/python3
"""Voronoi polygons on this machine, through qgis_process, beside QGIS's own, in one run: N uniform
random points in a GeoPackage (EPSG:32633, one integer field), BUFFER 10, FlatGeobuf output.

  ours          gpugeo:voronoipolygons, whole process
  QGIS          qgis:voronoipolygons (3.22: Fortune's sweep in Python), whole process; skipped above
                --qgis-max points, or stopped after --qgis-timeout seconds (said so)
  QGIS, copy    native:addautoincrementalfield on the same points, whole process: QGIS's start-up, reading
                and writing N features and no geometry work; the floor of any algorithm that writes its
                features through QGIS (ours writes polygons of about 7 vertices, more bytes than points)
  GDAL, copy    ogr2ogr of the points to FlatGeobuf: the floor of writing that format

Times are medians of --reps runs; peak memory from /usr/bin/time. Our own stages (read, unique, delaunay,
cells, write) are from the "Stage times" line of our log. The polygon counts and the sums of the areas are
compared between ours and QGIS's.

usage: bench_voronoi_polygons.py PLUGIN_DIR [--reps N] [--points 100000,1000000] [--qgis-max N]
                                 [--qgis-timeout S]
"""
import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from osgeo import ogr

from bench_dbscan_cpu import write_points
from whole_process import qgis_environment, timed

ogr.UseExceptions()


def count_and_area(path):
    dataset = ogr.Open(path)
    layer = dataset.GetLayer(0)
    count, area = 0, 0.0
    for feature in layer:
        count += 1
        area += feature.GetGeometryRef().GetArea()
    dataset = None
    return count, area


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("plugin_dir")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--points", default="100000,1000000")
    parser.add_argument("--qgis-max", type=int, default=100000)
    parser.add_argument("--qgis-timeout", type=float, default=900)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="gpugeo-bench-")
    try:
        env = qgis_environment(tmp, args.plugin_dir)
        qgis = ["/usr/bin/qgis_process.bin", "run"]
        print(f"Voronoi polygons, uniform points, BUFFER 10, FlatGeobuf; medians of {args.reps} runs; "
              f"{os.cpu_count()} cores", flush=True)
        print("| points | ours (gpugeo:voronoipolygons) | of which our stages | QGIS qgis:voronoipolygons | QGIS ÷ ours "
              "| QGIS copy (addautoincrementalfield) | GDAL copy (ogr2ogr) | polygons, area ours / QGIS |")
        print("|---|---|---|---|---|---|---|---|")
        for n in (int(v) for v in args.points.split(",")):
            source = os.path.join(tmp, f"points_{n}.gpkg")
            write_points(source, n, 100000.0)
            keys = ["ours", "copy", "ogr2ogr"] + (["qgis"] if n <= args.qgis_max else [])
            runs = {key: [] for key in keys}
            peaks = {key: [] for key in keys}
            stages, checked = [], None
            for rep in range(args.reps):
                outputs = {key: os.path.join(tmp, f"{key}_{rep}.fgb") for key in keys}
                commands = {
                    "ours": qgis + ["gpugeo:voronoipolygons", "--", f"INPUT={source}", "BUFFER=10",
                                    f"OUTPUT={outputs['ours']}"],
                    "qgis": qgis + ["qgis:voronoipolygons", "--", f"INPUT={source}", "BUFFER=10",
                                    f"OUTPUT={outputs.get('qgis', '')}"],
                    "copy": qgis + ["native:addautoincrementalfield", "--", f"INPUT={source}",
                                    f"OUTPUT={outputs['copy']}"],
                    "ogr2ogr": ["ogr2ogr", "-f", "FlatGeobuf", outputs["ogr2ogr"], source],
                }
                for key in keys:
                    if key == "qgis" and rep > 0 and runs["qgis"] and math.isinf(runs["qgis"][0]):
                        continue
                    command = commands[key]
                    if key == "qgis":
                        command = ["timeout", str(args.qgis_timeout)] + command
                        try:
                            wall, peak, out, err = timed(command, env=env)
                        except SystemExit:
                            wall, peak, out, err = math.inf, math.nan, "", ""
                    else:
                        wall, peak, out, err = timed(command, env=env)
                    runs[key].append(wall)
                    peaks[key].append(peak)
                    if key == "ours":
                        match = re.search(r"Stage times: (.*) \(total ([0-9.]+) ms\)", out + err)
                        stages.append((match.group(1), float(match.group(2)) / 1000) if match else ("?", math.nan))
                if rep == 0:
                    ours = count_and_area(outputs["ours"])
                    theirs = count_and_area(outputs["qgis"]) if "qgis" in keys and os.path.exists(outputs["qgis"]) \
                        and not math.isinf(runs["qgis"][0]) else None
                    checked = (ours, theirs)
                for path in outputs.values():
                    if os.path.exists(path):
                        os.remove(path)
            median = {key: statistics.median(values) for key, values in runs.items()}
            stage = sorted(stages, key=lambda s: s[1])[len(stages) // 2]
            if "qgis" not in keys:
                qgis_cell, ratio = f"not run (above {args.qgis_max:,} points)", "-"
            elif math.isinf(median["qgis"]):
                qgis_cell, ratio = f"stopped at {args.qgis_timeout:.0f} s", f"> {args.qgis_timeout / median['ours']:.0f}×"
            else:
                qgis_cell = f"{median['qgis']:.1f} s ({max(peaks['qgis']):.0f} MB)"
                ratio = f"{median['qgis'] / median['ours']:.1f}×"
            ours, theirs = checked
            compared = f"{ours[0]:,} / {ours[1]:.6e}" + (f" — {theirs[0]:,} / {theirs[1]:.6e}" if theirs else "")
            print(f"| {n:,} | {median['ours']:.1f} s ({max(peaks['ours']):.0f} MB) | {stage[1]:.1f} s: {stage[0]} "
                  f"| {qgis_cell} | {ratio} | {median['copy']:.1f} s | {median['ogr2ogr']:.1f} s | {compared} |",
                  flush=True)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
