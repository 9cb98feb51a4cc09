#!/usr/bin/env python3
"""Allocation to lines on the GPU machine: our native core (GPU, and CPU for the cross-check) beside
CuPy's exact Euclidean distance transform with indices (cupyx.scipy.ndimage.distance_transform_edt)
on the same lines rasterized, in one run; prints a table with the ratio.

The lines are random walks (fixed seed): N lines of S segments, steps of up to 8 pixels a side. The
EDT gets the raster of every pixel a line touches (sampled along each segment every 1/8 pixel),
which measures to pixel centres, not to the lines: its distance differs from ours by at most half
a pixel's diagonal, checked here at every pixel. Our GPU labels and distances must equal our CPU's
bit for bit.

usage: bench_feature_allocation_gpu.py BENCH_BINARY [--size 8192] [--lines 10000] [--segments 100]
                                       [--reps N] [--out FILE.json]
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np


def make_lines(size, count, segments, seed=7):
    """Random walks kept half a pixel inside the raster (a line along its outer edge burns no pixel
    in gdal:rasterize, which the CPU bench compares with)."""
    rng = np.random.default_rng(seed)
    start = rng.uniform(0, size, (count, 1, 2))
    steps = rng.uniform(-8, 8, (count, segments, 2))
    return np.clip(np.concatenate([start, start + np.cumsum(steps, axis=1)], axis=1), 0.5, size - 0.5)


def write_lines(lines, path):
    count = lines.shape[0]
    nan = np.full((count, 1, 2), np.nan)
    np.concatenate([lines, nan], axis=1).reshape(-1, 2).astype(np.float64).tofile(path)


def touched_pixels(lines, size):
    """Row and column of every pixel a segment passes through (dense sampling along each one)."""
    a = lines[:, :-1, :].reshape(-1, 2)
    b = lines[:, 1:, :].reshape(-1, 2)
    t = np.linspace(0.0, 1.0, 8 * 12 + 1)
    rows, cols = [], []
    for chunk in range(0, a.shape[0], 100000):
        pa, pb = a[chunk:chunk + 100000], b[chunk:chunk + 100000]
        p = pa[:, None, :] + (pb - pa)[:, None, :] * t[None, :, None]
        c = np.clip(np.floor(p[..., 0]).astype(np.int64), 0, size - 1).ravel()
        r = np.clip(np.floor(p[..., 1]).astype(np.int64), 0, size - 1).ravel()
        rows.append(r)
        cols.append(c)
    return np.concatenate(rows), np.concatenate(cols)


def time_cupy(size, rows, cols, reps):
    import cupy as cp
    from cupyx.scipy import ndimage

    image = cp.ones((size, size), dtype=cp.uint8)
    image[cp.asarray(rows), cp.asarray(cols)] = 0
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    result = None
    for rep in range(reps + 1):
        start.record()
        result = ndimage.distance_transform_edt(image, return_indices=True)
        stop.record()
        stop.synchronize()
        if rep:
            times.append(cp.cuda.get_elapsed_time(start, stop))
    return float(np.median(times)), result[0].get().astype(np.float32)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--lines", type=int, default=10000)
    parser.add_argument("--segments", type=int, default=100)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out")
    args = parser.parse_args()
    size = args.size
    lines = make_lines(size, args.lines, args.segments)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "lines.bin")
        write_lines(lines, path)
        labels = os.path.join(tmp, "labels")
        out = subprocess.run([args.binary, "--width", str(size), "--height", str(size), "--lines", path, "--backend",
                              "both", "--reps", str(args.reps), "--labels-out", labels],
                             check=True, capture_output=True, text=True)
        runs = {r["backend"]: r for r in (json.loads(l) for l in out.stdout.splitlines() if l.startswith("{"))}
        pixels = size * size
        cpu_raw = np.fromfile(labels + ".cpu", dtype=np.uint8)
        gpu_raw = np.fromfile(labels + ".gpu", dtype=np.uint8)
        identical = bool(np.array_equal(cpu_raw, gpu_raw))
        ours = gpu_raw[pixels * 4:].view(np.float32).reshape(size, size)
    rows, cols = touched_pixels(lines, size)
    peer_ms, peer_dist = time_cupy(size, rows, cols, args.reps)
    worst = float(np.max(np.abs(ours - peer_dist)))
    gpu = runs["gpu"]
    row = dict(workload=f"{size}^2, {args.lines:,} lines x {args.segments} segments", ours=gpu, cpu=runs["cpu"],
               cupy_ms=peer_ms, ratio_device_total=peer_ms / gpu["device_total_ms"],
               ratio_compute=peer_ms / gpu["compute_ms"], gpu_equals_cpu=identical,
               largest_difference_from_edt_pixels=worst, bar=5.0)
    print(json.dumps(row), flush=True)
    print()
    print(f"Allocation to lines, labels + distances, {gpu['device']}; medians of {args.reps} runs after a warm-up")
    print("| workload | ours: upload | ours: index | ours: labelling | ours: device total | CuPy EDT+indices "
          "(rasterized) | ratio | bar | GPU = CPU | largest |ours - EDT| (px) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {row['workload']} | {gpu['upload_ms']:.2f} ms | {gpu['index_ms']:.2f} ms | {gpu['compute_ms']:.2f} ms "
          f"| {gpu['device_total_ms']:.2f} ms | {peer_ms:.2f} ms | {row['ratio_device_total']:.2f}x | >= 5x "
          f"| {identical} | {worst:.3f} |")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(row, f, indent=1)


if __name__ == "__main__":
    main()
