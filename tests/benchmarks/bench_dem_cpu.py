#!/usr/bin/python3
"""The DEM isochrone chain on the CPU, on this machine, through qgis_process, beside SAGA's chain, in one
run. The DEM is bench_dem.cpp's synthetic terrain (waves + a slope + uniform noise of 2.5 m, rounded to
0.5 m, so it has pits and flats; numpy's RNG seeded with 7, not bit-identical to the C++ one), float32,
EPSG:32633, 30 m cells, 2,511 x 2,550 by default, written as a GeoTIFF.

  SAGA        four saga_cmd runs, each timed as a whole process (medians of --reps):
              ta_preprocessor 4  Fill Sinks (Wang & Liu), MINSLOPE 0.1 (its default)
              ta_morphometry 0   slope of the filled DEM (default method 6, Zevenbergen & Thorne, radians)
              ta_hydrology 0     D8 catchment area (-METHOD 0) of the filled DEM, m²
              ta_hydrology 30    Isochrones Variable Speed, default parameters, target = the outlet our
                                 run found (OUTLET_X / OUTLET_Y of our JSON output)
              The SAGA chain time is the sum of the four medians. GeoTIFF in and out (SAGA 8.5 reads and
              writes .tif through GDAL).
  ours        gpugeo:isochrones DEVICE=1 (the CPU path), VELOCITY_MODEL=2 (Manning, SAGA's model) with its
              defaults, automatic outlet, INTERVAL=60; TRAVEL_TIME to a GeoTIFF, WATERSHED, ISOCHRONES and
              TIME_AREA to GeoPackages; whole process (medians of --reps); our own stages from the
              "Stage times" line of the log
  start-up    qgis_process help gpugeo:isochrones in the same profile: the floor of any qgis_process run

Peak memory from /usr/bin/time. The results are compared where it makes sense: the watershed (SAGA's TIME
cells that are not nodata, our TRAVEL_TIME cells that are valid, and the cells valid in both) and the
longest travel time (SAGA's hours x 60, our minutes). They are not expected to agree: SAGA's D8 has no
direction at the grid edge or next to nodata and runs on a DEM filled with a minimum slope of 0.1°, ours on
an exact fill with the flats resolved.

usage: bench_dem_cpu.py [PLUGIN_DIR] [--width W] [--height H] [--reps N] [--skip-saga] [--json out.json]
PLUGIN_DIR (the installed plugin folder, e.g. /tmp/gg_bench_dem/gpugeo after
`cmake --install build --prefix /tmp/gg_bench_dem`) defaults to $GPUGEO_PLUGIN_DIR.
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

import numpy as np
from osgeo import gdal, osr

from whole_process import qgis_environment, timed

gdal.UseExceptions()

QGIS_PROCESS = "/usr/bin/qgis_process.bin"
SAGA = "saga_cmd"
CELL = 30.0
ORIGIN_X, ORIGIN_Y = 500000.0, 5200000.0  # the top-left corner, EPSG:32633


def write_dem(path, w, h, seed=7):
    """bench_dem.cpp's terrain: the same landscape at any size (coordinates scaled to 2,511 x 2,550)."""
    sx, sy = 2511.0 / w, 2550.0 / h
    fx = (np.arange(w, dtype=np.float64) * sx)[np.newaxis, :]
    fy = (np.arange(h, dtype=np.float64) * sy)[:, np.newaxis]
    noise = np.random.default_rng(seed).random((h, w))
    v = (300 + 120 * np.sin(fx * 0.004) * np.cos(fy * 0.0031) + 40 * np.sin(fx * 0.021 + fy * 0.017) + 0.03 * fx +
         2.5 * noise)
    z = (np.round(v * 2) / 2).astype(np.float32)
    driver = gdal.GetDriverByName("GTiff")
    dataset = driver.Create(path, w, h, 1, gdal.GDT_Float32, options=["TILED=YES"])
    dataset.SetGeoTransform((ORIGIN_X, CELL, 0.0, ORIGIN_Y, 0.0, -CELL))
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(32633)
    dataset.SetProjection(srs.ExportToWkt())
    band = dataset.GetRasterBand(1)
    band.WriteArray(z)
    band.SetNoDataValue(-9999.0)
    dataset = None
    return z


def valid_grid(path):
    """The grid as float64 with nodata as NaN."""
    dataset = gdal.Open(path)
    band = dataset.GetRasterBand(1)
    values = band.ReadAsArray().astype(np.float64)
    nodata = band.GetNoDataValue()
    if nodata is not None:
        values[values == nodata] = np.nan
    dataset = None
    return values


def stage_line(text):
    match = re.search(r"Stage times: (.*) \(total ([0-9.]+) ms\)", text)
    return (match.group(1), float(match.group(2)) / 1000) if match else ("?", math.nan)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("plugin_dir", nargs="?", default=os.environ.get("GPUGEO_PLUGIN_DIR"))
    parser.add_argument("--width", type=int, default=2511, help="columns (default 2511)")
    parser.add_argument("--height", type=int, default=2550, help="rows (default 2550)")
    parser.add_argument("--reps", type=int, default=3, help="runs of each (median; default 3)")
    parser.add_argument("--skip-saga", action="store_true", help="no SAGA chain")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    if not args.plugin_dir or not os.path.isdir(args.plugin_dir):
        sys.exit(f"PLUGIN_DIR {args.plugin_dir!r} is not the installed plugin folder (give it, or set GPUGEO_PLUGIN_DIR)")
    if not args.skip_saga and shutil.which(SAGA) is None:
        sys.exit("saga_cmd is not installed (apt-get install saga), or run with --skip-saga")
    w, h = args.width, args.height
    saga_reps = 0 if args.skip_saga else args.reps

    tmp = tempfile.mkdtemp(prefix="gpugeo-bench-dem-")
    try:
        dem = os.path.join(tmp, "dem.tif")
        start = time.perf_counter()
        z = write_dem(dem, w, h)
        generated = time.perf_counter() - start
        env = qgis_environment(tmp, args.plugin_dir)
        listed = subprocess.run([QGIS_PROCESS, "list"], env=env, capture_output=True, text=True).stdout
        if "gpugeo:isochrones" not in listed:
            sys.exit(f"gpugeo:isochrones is not in the plugin at {args.plugin_dir} (rebuild and install it)")
        saga_version = ""
        if saga_reps:
            version = subprocess.run([SAGA, "--version"], capture_output=True, text=True).stdout
            saga_version = next((line.split(":", 1)[1].strip() for line in version.splitlines()
                                 if line.startswith("SAGA Version")), "?")
        load = os.getloadavg()
        print(f"DEM chain, {w} x {h} synthetic DEM (bench_dem.cpp's terrain, 30 m, EPSG:32633, float32, "
              f"{z.min():.1f} .. {z.max():.1f} m; written in {generated:.1f} s); medians of {args.reps} runs; "
              f"SAGA {saga_version or '-'}; {os.cpu_count()} cores, load average at start "
              f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
        del z

        def path(name):
            return os.path.join(tmp, name)

        outlet = {}

        def ours_command(rep):
            return [QGIS_PROCESS, "--json", "run", "gpugeo:isochrones", "--", f"INPUT={dem}", "DEVICE=1",
                    "VELOCITY_MODEL=2", "INTERVAL=60", f"TRAVEL_TIME={path(f'ours_{rep}_time.tif')}",
                    f"WATERSHED={path(f'ours_{rep}_watershed.gpkg')}",
                    f"ISOCHRONES={path(f'ours_{rep}_isochrones.gpkg')}",
                    f"TIME_AREA={path(f'ours_{rep}_timearea.gpkg')}"]

        commands = {
            "startup": lambda rep: [QGIS_PROCESS, "help", "gpugeo:isochrones"],
            "ours": ours_command,
            "saga_fill": lambda rep: [SAGA, "-f=q", "ta_preprocessor", "4", "-ELEV", dem,
                                      "-FILLED", path("saga_filled.tif"), "-MINSLOPE", "0.1"],
            "saga_slope": lambda rep: [SAGA, "-f=q", "ta_morphometry", "0", "-ELEVATION", path("saga_filled.tif"),
                                       "-SLOPE", path("saga_slope.tif")],
            "saga_area": lambda rep: [SAGA, "-f=q", "ta_hydrology", "0", "-ELEVATION", path("saga_filled.tif"),
                                      "-FLOW", path("saga_area.tif"), "-METHOD", "0"],
            "saga_isochrones": lambda rep: [SAGA, "-f=q", "ta_hydrology", "30", "-DEM", path("saga_filled.tif"),
                                            "-SLOPE", path("saga_slope.tif"), "-FLOWACC", path("saga_area.tif"),
                                            "-TIME", path("saga_time.tif"), "-SPEED", path("saga_speed.tif"),
                                            "-TARGET_PT_X", repr(outlet["x"]), "-TARGET_PT_Y", repr(outlet["y"])],
        }
        saga_keys = ["saga_fill", "saga_slope", "saga_area", "saga_isochrones"]
        wanted = {"startup": args.reps, "ours": args.reps, **{key: saga_reps for key in saga_keys}}
        runs = {key: [] for key in commands}
        peaks = {key: [] for key in commands}
        stages = []
        results = None
        comparison = {}
        for rep in range(args.reps):
            for key, command in commands.items():
                if rep >= wanted[key]:
                    continue
                if key.startswith("saga_"):
                    for name in ("filled", "slope", "area", "time", "speed") if key == "saga_fill" else ():
                        for suffix in (".tif", ".tif.aux.xml", ".mgrd", ".prj", ".sgrd"):
                            if os.path.exists(path(f"saga_{name}{suffix}")):
                                os.remove(path(f"saga_{name}{suffix}"))
                wall, peak, out, err = timed(command(rep), env=env)
                runs[key].append(wall)
                peaks[key].append(peak)
                print(f"  {key} run {rep + 1}: {wall:.2f} s, {peak:.0f} MB", flush=True)
                if key == "ours":
                    start = out.find("{")
                    parsed = json.loads(out[start:])
                    info = "\n".join(parsed.get("log", {}).get("info", [])) if isinstance(parsed.get("log"), dict) \
                        else out + err
                    stages.append(stage_line(info if "Stage times" in info else out + err))
                    if rep == 0:
                        results = parsed["results"]
                        outlet.update(x=float(results["OUTLET_X"]), y=float(results["OUTLET_Y"]))
                        ours_time = valid_grid(path("ours_0_time.tif"))
                        comparison["ours_cells"] = int(np.count_nonzero(~np.isnan(ours_time)))
                        comparison["ours_max_min"] = float(np.nanmax(ours_time))
                        comparison["ours_watershed_km2"] = results.get("WATERSHED_AREA_KM2")
                        comparison["outlet"] = dict(outlet)
                        comparison["outlet_log"] = next((line for line in info.splitlines()
                                                         if line.startswith("Outlet")), "")
                        speeds = re.search(r"Speeds from (\S+) to (\S+) m/s", info)
                        comparison["ours_speed_range"] = [float(speeds.group(1)), float(speeds.group(2))] if speeds \
                            else None
                    else:
                        for name in ("time.tif", "watershed.gpkg", "isochrones.gpkg", "timearea.gpkg"):
                            if os.path.exists(path(f"ours_{rep}_{name}")):
                                os.remove(path(f"ours_{rep}_{name}"))
                if key == "saga_isochrones" and rep == 0:
                    saga_time = valid_grid(path("saga_time.tif"))
                    valid = ~np.isnan(saga_time)
                    comparison["saga_cells"] = int(np.count_nonzero(valid))
                    comparison["saga_max_min"] = float(np.nanmax(saga_time)) * 60 if valid.any() else math.nan
                    comparison["both_cells"] = int(np.count_nonzero(valid & ~np.isnan(ours_time)))
                    speed = valid_grid(path("saga_speed.tif"))
                    comparison["saga_speed_range"] = [float(np.nanmin(speed)), float(np.nanmax(speed))]
                    del saga_time, speed

        median = {key: statistics.median(values) if values else None for key, values in runs.items()}
        peak = {key: max(values) if values else None for key, values in peaks.items()}
        saga_sum = sum(median[key] for key in saga_keys) if saga_reps else None
        saga_peak = max(peak[key] for key in saga_keys) if saga_reps else None
        stage = sorted(stages, key=lambda s: s[1])[len(stages) // 2] if stages else None
        load_end = os.getloadavg()

        def cell(key):
            return f"{median[key]:.2f} s ({peak[key]:.0f} MB)" if median[key] is not None else "-"

        print()
        print("| workload | SAGA Fill Sinks (Wang & Liu) | SAGA slope | SAGA catchment area (D8) "
              "| SAGA Isochrones Variable Speed | SAGA chain (sum) | ours (gpugeo:isochrones, CPU, whole process) "
              "| of which our stages | SAGA ÷ ours | start-up floor (qgis_process help) |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        ratio = f"{saga_sum / median['ours']:.1f}×" if saga_sum else "-"
        print(f"| {w}×{h} DEM, 30 m, pits and flats | {cell('saga_fill')} | {cell('saga_slope')} | {cell('saga_area')} "
              f"| {cell('saga_isochrones')} | {f'{saga_sum:.2f} s ({saga_peak:.0f} MB)' if saga_sum else '-'} "
              f"| {cell('ours')} | {f'{stage[1]:.2f} s: {stage[0]}' if stage else '-'} | {ratio} "
              f"| {cell('startup')} |")
        print()
        print(f"Outlet (ours, automatic): x {outlet['x']!r}, y {outlet['y']!r}. {comparison.get('outlet_log', '')}")
        print()
        print("| result | SAGA | ours |")
        print("|---|---|---|")
        both = comparison.get("both_cells")
        print(f"| watershed cells (SAGA TIME not nodata / our TRAVEL_TIME valid) | {comparison.get('saga_cells', '-')} "
              f"| {comparison['ours_cells']} (in both: {both if both is not None else '-'}) |")
        saga_max = comparison.get("saga_max_min")
        print(f"| longest travel time (minutes; SAGA hours × 60) | {f'{saga_max:.1f}' if saga_max is not None else '-'} "
              f"| {comparison['ours_max_min']:.1f} |")
        if "saga_speed_range" in comparison:
            ours_speeds = comparison.get("ours_speed_range")
            print(f"| speeds (m/s) | {comparison['saga_speed_range'][0]:.3g} .. {comparison['saga_speed_range'][1]:.3g} "
                  f"| {f'{ours_speeds[0]:.3g} .. {ours_speeds[1]:.3g}' if ours_speeds else '-'} |")
        print(f"load average at the end {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f}")
        if args.json:
            with open(args.json, "w") as out:
                json.dump({"width": w, "height": h, "cell": CELL, "cores": os.cpu_count(), "saga_version": saga_version,
                           "load_average_at_start": load, "load_average_at_end": load_end,
                           "dem_generation_s": generated, "runs_s": runs, "peak_mb": peaks, "median_s": median,
                           "saga_sum_s": saga_sum, "ratio_saga_over_ours": saga_sum / median["ours"] if saga_sum
                           else None, "ours_stages": stages, "ours_results": results, "comparison": comparison},
                          out, indent=1)
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
