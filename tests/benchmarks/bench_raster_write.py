#!/usr/bin/python3
"""The write stage of a plane Voronoi raster run through qgis_process, two builds of the plugin side by
side in one run: 8192^2 pixels, 1,000 sites (bench_voronoi_cpu.py's sites), the allocation (Int32) and
distance (Float32) GeoTIFFs written, DEVICE=1 (the CPU). The runs alternate between the builds; each
build's "write" stage time comes from the run's log ("Stage times: ..."), with the whole process's
time. The rasters of every run are compared with the first build's, value for value (bit for bit).

--options adds runs of the second build with CREATION_OPTIONS (and COG) variants, each a string as
the parameter takes it ("COG" alone for the COG parameter), which show what the options cost.

usage: bench_raster_write.py OLD_PLUGIN_DIR NEW_PLUGIN_DIR [--reps 5] [--size 8192] [--sites 1000]
                             [--options "COMPRESS=ZSTD" "COG" ...]
"""
import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile

from osgeo import gdal

from bench_voronoi_cpu import site_cells, write_site_layer
from whole_process import qgis_environment, timed

gdal.UseExceptions()


def stage_ms(log, stage):
    found = re.findall(r"Stage times: (.*) \(total", log)
    if not found:
        sys.exit("no stage times in the log:\n" + log[-2000:])
    for part in found[-1].split(", "):
        name, ms, _ = part.rsplit(" ", 2)
        if name == stage:
            return float(ms)
    return 0.0


def raster_bytes(path):
    dataset = gdal.Open(path)
    return dataset.GetRasterBand(1).ReadAsArray().tobytes()


def structure(path):
    info = gdal.Info(path, format="json")["metadata"].get("IMAGE_STRUCTURE", {})
    return "/".join(v for v in (info.get("COMPRESSION", "none"), info.get("LAYOUT", "")) if v)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("old_plugin")
    parser.add_argument("new_plugin")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--sites", type=int, default=1000)
    parser.add_argument("--options", nargs="*", default=[])
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="gpugeo-write-")
    try:
        gpkg = os.path.join(tmp, "sites.gpkg")
        rows, cols = site_cells(args.size, args.sites)
        write_site_layer(gpkg, rows, cols, args.size)
        builds = {"old": qgis_environment(os.path.join(tmp, "old"), args.old_plugin),
                  "new": qgis_environment(os.path.join(tmp, "new"), args.new_plugin)}
        variants = [("old", "old", None), ("new", "new", None)] + [("new " + o, "new", o) for o in args.options]
        times = {name: {"write": [], "whole": []} for name, _, _ in variants}
        reference, same, layout = {}, {name: True for name, _, _ in variants}, {}
        for rep in range(args.reps):
            for name, build, option in variants:
                out = os.path.join(tmp, re.sub(r"[^a-z0-9]+", "_", name.lower()))
                command = ["/usr/bin/qgis_process.bin", "run", "gpugeo:voronoiraster", "--", f"INPUT={gpkg}",
                           f"EXTENT=0,{args.size},0,{args.size} [EPSG:32633]", "PIXEL_SIZE=1", "DEVICE=1",
                           f"OUTPUT={out}_alloc.tif", f"OUTPUT_DISTANCE={out}_dist.tif"]
                if option == "COG":
                    command.append("COG=true")
                elif option:
                    command.append(f"CREATION_OPTIONS={option}")
                wall, _, stdout, stderr = timed(command, env=builds[build])
                times[name]["write"].append(stage_ms(stdout + stderr, "write") / 1000)
                times[name]["whole"].append(wall)
                if rep == 0:
                    rasters = [raster_bytes(f"{out}_alloc.tif"), raster_bytes(f"{out}_dist.tif")]
                    if not reference:
                        reference["rasters"] = rasters
                    same[name] = rasters == reference["rasters"]
                    layout[name] = f"{structure(out + '_alloc.tif')}, {structure(out + '_dist.tif')}"
                for suffix in ("_alloc.tif", "_dist.tif"):
                    os.remove(out + suffix)
        print(f"Voronoi raster {args.size}^2, {args.sites} sites, qgis_process DEVICE=1; medians of {args.reps} "
              f"(runs alternating)")
        print("| build | write stage | whole process | old write ÷ this | files (allocation, distance) | "
              "values as old's |")
        print("|---|---|---|---|---|---|")
        old_write = statistics.median(times["old"]["write"])
        for name, _, _ in variants:
            write = statistics.median(times[name]["write"])
            print(f"| {name} | {write:.3f} s | {statistics.median(times[name]['whole']):.2f} s "
                  f"| {old_write / write:.2f}x | {layout[name]} | {'bit for bit' if same[name] else 'DIFFERENT'} |")
        print("write stage times (s): " + "; ".join(
            f"{name}: {', '.join(f'{t:.3f}' for t in times[name]['write'])}" for name, _, _ in variants))
        return 0 if all(same.values()) else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
