#!/usr/bin/python3
"""Allocation to lines on the CPU (this machine): our native core beside GDAL's proximity
(gdal.ComputeProximity, the engine of gdal:proximity and gdal_proximity.py) on the same lines, in
one run; prints a table with the ratio.

GDAL measures to the centres of the pixels the lines were burned into (gdal.RasterizeLayer with
ALL_TOUCHED, timed apart); ours measures to the lines. Ours must be within half a pixel's diagonal
of the exact distance transform of that raster (SciPy's) at every pixel; GDAL's own propagation
overestimates that transform by up to about a quarter of a pixel, so against GDAL the difference
can reach about 0.96 pixel. Both are printed. The lines are bench_feature_allocation_gpu.py's random
walks.

usage: bench_feature_allocation_cpu.py BENCH_BINARY [--size 8192] [--lines 10000] [--segments 100]
                                       [--reps 3] [--threads 0]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from osgeo import gdal, ogr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_feature_allocation_gpu import make_lines, write_lines  # noqa: E402

gdal.UseExceptions()


def gdal_proximity(lines, size, reps):
    """Rasterize (all touched) once, then the median of `reps` ComputeProximity runs; distances."""
    memory = gdal.GetDriverByName("MEM")
    burned = memory.Create("", size, size, 1, gdal.GDT_Byte)
    burned.SetGeoTransform((0, 1, 0, size, 0, -1))
    source = ogr.GetDriverByName("Memory").CreateDataSource("lines")
    layer = source.CreateLayer("lines", geom_type=ogr.wkbLineString)
    for path in lines:
        geometry = ogr.Geometry(ogr.wkbLineString)
        for x, y in path:
            geometry.AddPoint_2D(float(x), float(size - y))
        feature = ogr.Feature(layer.GetLayerDefn())
        feature.SetGeometry(geometry)
        layer.CreateFeature(feature)
    start = time.perf_counter()
    gdal.RasterizeLayer(burned, [1], layer, burn_values=[1], options=["ALL_TOUCHED=TRUE"])
    rasterize = time.perf_counter() - start
    times = []
    out = None
    for _ in range(reps):
        out = memory.Create("", size, size, 1, gdal.GDT_Float32)
        out.SetGeoTransform((0, 1, 0, size, 0, -1))
        start = time.perf_counter()
        gdal.ComputeProximity(burned.GetRasterBand(1), out.GetRasterBand(1), ["VALUES=1", "DISTUNITS=PIXEL"])
        times.append(time.perf_counter() - start)
    return float(np.median(times)), rasterize, out.GetRasterBand(1).ReadAsArray(), burned.GetRasterBand(1).ReadAsArray()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--lines", type=int, default=10000)
    parser.add_argument("--segments", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    size = args.size
    lines = make_lines(size, args.lines, args.segments)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "lines.bin")
        write_lines(lines, path)
        labels = os.path.join(tmp, "labels")
        out = subprocess.run([args.binary, "--width", str(size), "--height", str(size), "--lines", path, "--backend",
                              "cpu", "--reps", str(args.reps), "--threads", str(args.threads), "--labels-out", labels],
                             check=True, capture_output=True, text=True)
        ours = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")][-1]
        distance = np.fromfile(labels + ".cpu", dtype=np.float32, offset=size * size * 4).reshape(size, size)
    peer_s, rasterize_s, theirs, burned = gdal_proximity(lines, size, args.reps)
    worst = float(np.max(np.abs(distance - theirs)))
    from scipy import ndimage
    exact = ndimage.distance_transform_edt(burned == 0)
    worst_exact = float(np.max(np.abs(distance - exact)))
    gdal_excess = float(np.max(theirs - exact))
    del exact
    ours_s = (ours["prepare_ms"] + ours["compute_ms"]) / 1000.0
    row = dict(workload=f"{size}^2, {args.lines:,} lines x {args.segments} segments", ours=ours,
               gdal_proximity_s=peer_s, gdal_rasterize_s=rasterize_s, ours_s=ours_s, ratio=peer_s / ours_s,
               largest_difference_pixels=worst, largest_difference_from_exact_edt_pixels=worst_exact,
               gdal_excess_over_exact_edt_pixels=gdal_excess, bar=3.0)
    print(json.dumps(row), flush=True)
    print()
    print(f"Allocation to lines on {ours['device']}; medians of {args.reps} runs")
    print("| workload | ours: prepare + index | ours: labelling | ours: total | gdal:proximity (ComputeProximity) "
          "| ratio | bar | gdal:rasterize (all touched, not counted) | largest |ours - GDAL| (px) "
          "| largest |ours - exact EDT of the raster| (px) | GDAL above that EDT (px) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {row['workload']} | {ours['prepare_ms'] / 1000:.2f} s | {ours['compute_ms'] / 1000:.2f} s | {ours_s:.2f} s "
          f"| {peer_s:.2f} s | {row['ratio']:.2f}x | >= 3x | {rasterize_s:.2f} s | {worst:.3f} | {worst_exact:.3f} "
          f"| {gdal_excess:.3f} |")


if __name__ == "__main__":
    main()
