#!/usr/bin/python3
"""Mesh contours on the CPU, on this machine, through qgis_process, beside QGIS's own, in one run: the
benchmark mesh of mesh_field.h (an n x n vertex grid 10 m apart, two triangles a cell, z = terrain(i, j))
as a 2DM file written by make_mesh_2dm.py; the 20 levels of benchLevels(20) (-95.3 + 15 k) as
CONTOUR_LEVEL_LIST, DATASET_GROUPS 0 (the vertex z), DATASET_TIME 2021-01-01T00:00:00; lines and
polygons to GeoPackages.

  ours        gpugeo:meshcontours DEVICE=1 (the CPU path), whole process; medians of --reps runs
  QGIS        native:meshcontours, whole process; medians of --peer-reps runs (about 150 s a run for
              n = 1000, hence 1 by default)
  start-up    qgis_process help native:meshcontours in the same profile (QGIS and our plugin loaded,
              nothing read): the floor of any qgis_process run
  load mesh   native:exportmeshedges of the same 2DM, which has no edges, so nothing is written:
              start-up, MDAL reading the 2DM, and QGIS's preparation of a mesh layer for an export
              algorithm (its triangular mesh, with the spatial index); the floor of QGIS's mesh
              algorithms on this mesh (ours reads the native mesh without building that index)
  QGIS empty  native:meshcontours with two levels above the data (1e6, 2e6): nothing is drawn or
              written; QGIS's fixed cost before contouring (runs as often as QGIS; --skip-peer skips it)

Peak memory from /usr/bin/time. Our own stages are from the "Stage times" line of our log. Both
outputs are read back (GDAL): features, parts (lines and polygons), total length and area, and the
length of each level and the area of each band compared (they should agree within 1e-9 relative).

usage: bench_meshcontours_cpu.py [PLUGIN_DIR] [--grid N] [--reps N] [--peer-reps N] [--skip-peer]
                                 [--skip-ours] [--json out.json]
PLUGIN_DIR (the installed plugin folder, e.g. /tmp/gg_bench/gpugeo after
`cmake --install build --prefix /tmp/gg_bench`) defaults to $GPUGEO_PLUGIN_DIR.
"""
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from osgeo import ogr

from whole_process import qgis_environment, timed

ogr.UseExceptions()

HERE = os.path.dirname(os.path.abspath(__file__))
QGIS_PROCESS = "/usr/bin/qgis_process.bin"
TOLERANCE = 1e-9


def bench_levels(count):
    """mesh_field.h's benchLevels(count), in doubles."""
    return [-95.3 + 15.0 * k for k in range(count)]


def parts_of(geometry):
    if geometry is None:
        return 0
    flat = ogr.GT_Flatten(geometry.GetGeometryType())
    if flat in (ogr.wkbMultiLineString, ogr.wkbMultiPolygon, ogr.wkbGeometryCollection):
        return geometry.GetGeometryCount()
    return 1


def measure(path):
    """Features, parts, total measure and the measure per key of one output layer: length per level
    ("value") for lines, area per band ("min_value", "max_value") for polygons."""
    dataset = ogr.Open(path)
    layer = dataset.GetLayer(0)
    definition = layer.GetLayerDefn()
    names = [definition.GetFieldDefn(i).GetName() for i in range(definition.GetFieldCount())]
    polygons = ogr.GT_Flatten(layer.GetGeomType()) in (ogr.wkbPolygon, ogr.wkbMultiPolygon)
    keys = ("min_value", "max_value") if polygons else ("value",)
    result = {"kind": "polygons" if polygons else "lines", "geometry_type": ogr.GeometryTypeToName(layer.GetGeomType()),
              "features": 0, "parts": 0, "total": 0.0, "by_key": {}, "empty": 0}
    for feature in layer:
        geometry = feature.GetGeometryRef()
        value = 0.0
        if geometry is None or geometry.IsEmpty():
            result["empty"] += 1
        else:
            value = geometry.GetArea() if polygons else geometry.Length()
        key = ",".join(repr(feature.GetField(k)) if k in names else "?" for k in keys)
        result["features"] += 1
        result["parts"] += parts_of(geometry)
        result["total"] += value
        result["by_key"][key] = result["by_key"].get(key, 0.0) + value
    dataset = None
    return result


def compare(ours, qgis):
    """The largest relative difference of the measure of a key both have, the keys one lacks."""
    worst, worst_key = 0.0, None
    for key in set(ours["by_key"]) & set(qgis["by_key"]):
        a, b = ours["by_key"][key], qgis["by_key"][key]
        scale = max(abs(a), abs(b))
        difference = abs(a - b) / scale if scale > 0 else 0.0
        if difference > worst:
            worst, worst_key = difference, key
    return {"max_relative_difference": worst, "at": worst_key,
            "only_ours": sorted(set(ours["by_key"]) - set(qgis["by_key"])),
            "only_qgis": sorted(set(qgis["by_key"]) - set(ours["by_key"]))}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("plugin_dir", nargs="?", default=os.environ.get("GPUGEO_PLUGIN_DIR"))
    parser.add_argument("--grid", type=int, default=1000, help="vertices a side (default 1000)")
    parser.add_argument("--reps", type=int, default=3, help="runs of ours and of the floors (median)")
    parser.add_argument("--peer-reps", type=int, default=1, help="runs of native:meshcontours (median)")
    parser.add_argument("--skip-peer", action="store_true", help="no native:meshcontours")
    parser.add_argument("--skip-ours", action="store_true", help="no gpugeo:meshcontours (plugin not built yet)")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    if not args.plugin_dir or not os.path.isdir(args.plugin_dir):
        sys.exit(f"PLUGIN_DIR {args.plugin_dir!r} is not the installed plugin folder (give it, or set GPUGEO_PLUGIN_DIR)")
    n = args.grid
    levels = bench_levels(20)
    level_list = ",".join(repr(level) for level in levels)
    ours_reps = 0 if args.skip_ours else args.reps
    peer_reps = 0 if args.skip_peer else args.peer_reps

    tmp = tempfile.mkdtemp(prefix="gpugeo-bench-")
    try:
        mesh = os.path.join(tmp, f"mesh_{n}.2dm")
        start = time.perf_counter()
        subprocess.run([sys.executable, os.path.join(HERE, "make_mesh_2dm.py"), str(n), mesh], check=True,
                       capture_output=True)
        generated = time.perf_counter() - start
        env = qgis_environment(tmp, args.plugin_dir)
        listed = subprocess.run([QGIS_PROCESS, "list"], env=env, capture_output=True, text=True).stdout
        if ours_reps and "gpugeo:meshcontours" not in listed:
            sys.exit(f"gpugeo:meshcontours is not in the plugin at {args.plugin_dir} (rebuild and install it, "
                     "or run with --skip-ours)")
        vertices, triangles = n * n, 2 * (n - 1) * (n - 1)
        load = os.getloadavg()
        print(f"Mesh contours, {n} x {n} grid mesh (mesh_field.h): {vertices:,} vertices, {triangles:,} triangles, "
              f"2DM {os.path.getsize(mesh) / 2**20:.0f} MiB (written in {generated:.1f} s); 20 levels "
              f"{levels[0]!r} .. {levels[-1]!r}; ours: medians of {ours_reps} runs, QGIS: of {peer_reps}; "
              f"{os.cpu_count()} cores, load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)

        common = [f"INPUT={mesh}", "DATASET_GROUPS=0", "DATASET_TIME=2021-01-01T00:00:00",
                  f"CONTOUR_LEVEL_LIST={level_list}"]

        def contour_command(algorithm, key, rep, extra=()):
            return ([QGIS_PROCESS, "run", algorithm, "--"] + common + list(extra) +
                    [f"OUTPUT_LINES={os.path.join(tmp, f'{key}_{rep}_lines.gpkg')}",
                     f"OUTPUT_POLYGONS={os.path.join(tmp, f'{key}_{rep}_polygons.gpkg')}"])

        commands = {
            "ours": lambda rep: contour_command("gpugeo:meshcontours", "ours", rep, ["DEVICE=1"]),
            "qgis": lambda rep: contour_command("native:meshcontours", "qgis", rep),
            "startup": lambda rep: [QGIS_PROCESS, "help", "native:meshcontours"],
            "load_mesh": lambda rep: [QGIS_PROCESS, "run", "native:exportmeshedges", "--", f"INPUT={mesh}",
                                      "DATASET_GROUPS=0", "DATASET_TIME=2021-01-01T00:00:00",
                                      f"OUTPUT={os.path.join(tmp, f'edges_{rep}.gpkg')}"],
            "qgis_empty": lambda rep: [QGIS_PROCESS, "run", "native:meshcontours", "--", f"INPUT={mesh}",
                                       "DATASET_GROUPS=0", "DATASET_TIME=2021-01-01T00:00:00",
                                       "CONTOUR_LEVEL_LIST=1000000.0,2000000.0",
                                       f"OUTPUT_LINES={os.path.join(tmp, f'empty_{rep}_lines.gpkg')}",
                                       f"OUTPUT_POLYGONS={os.path.join(tmp, f'empty_{rep}_polygons.gpkg')}"],
        }
        wanted = {"ours": ours_reps, "qgis": peer_reps, "startup": args.reps, "load_mesh": args.reps,
                  "qgis_empty": peer_reps}
        runs = {key: [] for key in commands}
        peaks = {key: [] for key in commands}
        stages = []
        measured = {}
        for rep in range(max(wanted.values())):
            for key, command in commands.items():
                if rep >= wanted[key]:
                    continue
                wall, peak, out, err = timed(command(rep), env=env)
                runs[key].append(wall)
                peaks[key].append(peak)
                print(f"  {key} run {rep + 1}: {wall:.2f} s, {peak:.0f} MB", flush=True)
                if key == "ours":
                    match = re.search(r"Stage times: (.*) \(total ([0-9.]+) ms\)", out + err)
                    stages.append((match.group(1), float(match.group(2)) / 1000) if match else ("?", math.nan))
                if key in ("ours", "qgis"):
                    for kind in ("lines", "polygons"):
                        path = os.path.join(tmp, f"{key}_{rep}_{kind}.gpkg")
                        if rep == 0:
                            measured[(key, kind)] = measure(path)
                        os.remove(path)

        median = {key: statistics.median(values) if values else None for key, values in runs.items()}
        peak = {key: max(values) if values else None for key, values in peaks.items()}

        def cell(key):
            return f"{median[key]:.2f} s ({peak[key]:.0f} MB)" if median[key] is not None else "-"

        stage = sorted(stages, key=lambda s: s[1])[len(stages) // 2] if stages else None
        ratio = (f"{median['qgis'] / median['ours']:.1f}×" if median["ours"] and median["qgis"] else "-")
        print()
        print("| workload | ours (gpugeo:meshcontours, CPU) | of which our stages | QGIS native:meshcontours "
              "| QGIS ÷ ours | start-up floor (qgis_process help) | mesh-load floor (native:exportmeshedges, "
              "nothing written) | QGIS with nothing to draw (levels above the data) |")
        print("|---|---|---|---|---|---|---|---|")
        print(f"| {n}×{n} grid, {triangles:,} triangles, 20 levels, lines + polygons to GPKG | {cell('ours')} "
              f"| {f'{stage[1]:.2f} s: {stage[0]}' if stage else '-'} | {cell('qgis')} | {ratio} "
              f"| {cell('startup')} | {cell('load_mesh')} | {cell('qgis_empty')} |")

        print()
        print("| output | features ours / QGIS | parts ours / QGIS | total ours | total QGIS "
              "| largest relative difference per level / band | keys in one only |")
        print("|---|---|---|---|---|---|---|")
        comparisons = {}
        for kind, unit in (("lines", "m"), ("polygons", "m²")):
            ours, qgis = measured.get(("ours", kind)), measured.get(("qgis", kind))
            if ours and qgis:
                comparisons[kind] = compare(ours, qgis)
            c = comparisons.get(kind)

            def both(field):
                return f"{ours[field] if ours else '-'} / {qgis[field] if qgis else '-'}"

            def total(of):
                return f"{of['total']!r} {unit}" if of else "-"

            difference = f"{c['max_relative_difference']:.2e} (at {c['at']})" if c else "-"
            only = "-"
            if c:
                only = f"ours {c['only_ours']}, QGIS {c['only_qgis']}" if c["only_ours"] or c["only_qgis"] else "none"
            print(f"| {kind} | {both('features')} | {both('parts')} | {total(ours)} | {total(qgis)} | {difference} "
                  f"| {only} |")
        disagree = [kind for kind, c in comparisons.items()
                    if c["max_relative_difference"] > TOLERANCE or c["only_ours"] or c["only_qgis"]]
        if comparisons:
            print("lengths per level and areas per band " + (f"DISAGREE beyond {TOLERANCE:g}: {', '.join(disagree)}"
                                                             if disagree else f"agree within {TOLERANCE:g} relative"))
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"grid": n, "vertices": vertices, "triangles": triangles, "levels": levels,
                           "cores": os.cpu_count(), "load_average_at_start": load, "mesh_generation_s": generated,
                           "runs_s": runs, "peak_mb": peaks, "median_s": median, "ours_stages": stages,
                           "outputs": {f"{key}_{kind}": value for (key, kind), value in measured.items()},
                           "comparison": comparisons, "tolerance": TOLERANCE}, out, indent=1)
        return 1 if disagree else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
