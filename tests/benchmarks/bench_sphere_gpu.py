#!/usr/bin/env python3
"""Spherical Voronoi benchmark on the GPU machine: our native core against its peers, in one run.

Runs bench_sphere (every kernel of the paper, the indexed path, the CPU path with all cores) at QTM
level 9 with 100, 1,000, 10,000 and 50,000 uniform sites and at level 12 with 1,000,000, and on the
same cell centres and sites: a CuPy brute-force kernel (naive and shared-memory tiles, float64
squared chords) and scipy's cKDTree query with all cores. Prints the table, the agreement of each
peer's labels with ours, and the paper's experiment (Wang et al. 2015, Table 1: serial CPU times at
level 9) redone on today's GPU.

    bench_sphere_gpu.py BUILD/tests/benchmarks/bench_sphere [--out results.json] [--quick]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

PAPER_SERIAL_MS = {100: 2950, 1000: 27499, 10000: 287545, 50000: 1458757}

NAIVE = r"""
extern "C" __global__ void nearest_naive(const double* c, const double* s, int n, long long m, int* out) {
  long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= m) return;
  double x = c[3*t], y = c[3*t+1], z = c[3*t+2];
  double best = 1e300; int bi = 0;
  for (int i = 0; i < n; ++i) {
    double dx = __dsub_rn(x, s[3*i]), dy = __dsub_rn(y, s[3*i+1]), dz = __dsub_rn(z, s[3*i+2]);
    double d = __dadd_rn(__dadd_rn(__dmul_rn(dx,dx), __dmul_rn(dy,dy)), __dmul_rn(dz,dz));
    if (d < best) { best = d; bi = i; }
  }
  out[t] = bi;
}
"""
TILED = r"""
extern "C" __global__ void nearest_tiled(const double* c, const double* s, int n, long long m, int* out) {
  __shared__ double tile[3*256];
  long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  bool active = t < m;
  double x = active ? c[3*t] : 0, y = active ? c[3*t+1] : 0, z = active ? c[3*t+2] : 0;
  double best = 1e300; int bi = 0;
  for (int base = 0; base < n; base += 256) {
    int k = base + threadIdx.x;
    if (k < n) { tile[3*threadIdx.x] = s[3*k]; tile[3*threadIdx.x+1] = s[3*k+1]; tile[3*threadIdx.x+2] = s[3*k+2]; }
    __syncthreads();
    int len = min(256, n - base);
    for (int j = 0; j < len; ++j) {
      double dx = __dsub_rn(x, tile[3*j]), dy = __dsub_rn(y, tile[3*j+1]), dz = __dsub_rn(z, tile[3*j+2]);
      double d = __dadd_rn(__dadd_rn(__dmul_rn(dx,dx), __dmul_rn(dy,dy)), __dmul_rn(dz,dz));
      if (d < best) { best = d; bi = base + j; }
    }
    __syncthreads();
  }
  if (active) out[t] = bi;
}
"""


def ours(binary, level, sites, backend, methods, reps, dump=None):
    cmd = [binary, "--level", str(level), "--sites", str(sites), "--backend", backend, "--method", methods,
           "--reps", str(reps)]
    if dump:
        cmd += ["--dump", dump]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def cupy_peer(kernel_src, name, centres, sites, reps):
    import cupy as cp
    kernel = cp.RawKernel(kernel_src, name)
    c = cp.asarray(centres)
    s = cp.asarray(sites)
    m = centres.shape[0]
    out = cp.empty(m, dtype=cp.int32)
    args = (c, s, np.int32(sites.shape[0]), np.int64(m), out)
    grid = ((m + 255) // 256,)
    kernel(grid, (256,), args)
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        kernel(grid, (256,), args)
        b.record()
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b))
    return float(np.median(times)), cp.asnumpy(out)


def ckdtree_peer(centres, sites, reps):
    from scipy.spatial import cKDTree
    builds, queries, labels = [], [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        tree = cKDTree(sites)
        t1 = time.perf_counter()
        _, labels = tree.query(centres, workers=-1)
        t2 = time.perf_counter()
        builds.append((t1 - t0) * 1e3)
        queries.append((t2 - t1) * 1e3)
    return float(np.median(builds)), float(np.median(queries)), labels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    results = []
    work = tempfile.mkdtemp(prefix="bench_sphere_")
    configs = [(9, n) for n in (100, 1000, 10000, 50000)] + [(12, 1000000)]
    if args.quick:
        configs = [(9, 1000), (9, 50000)]
    print(f"cores: {os.cpu_count()}")
    for level, n in configs:
        brute = level == 9
        methods = "indexed,register,constant,shared,global" if brute else "indexed"
        gpu = ours(args.binary, level, n, "gpu", methods, 5, dump=work)
        cpu = ours(args.binary, level, n, "cpu", "indexed", 3 if level == 9 else 1)
        centres = np.fromfile(os.path.join(work, "centres.f64")).reshape(-1, 3)
        sites = np.fromfile(os.path.join(work, "sites.f64")).reshape(-1, 3)
        labels = np.fromfile(os.path.join(work, "labels.i32"), dtype=np.int32)
        row = {"level": level, "cells": int(centres.shape[0]), "sites": n, "ours_gpu": gpu, "ours_cpu": cpu}
        if brute:
            row["cupy_naive_ms"], lab = cupy_peer(NAIVE, "nearest_naive", centres, sites, 5)
            row["cupy_naive_agree"] = float((lab == labels).mean())
            row["cupy_tiled_ms"], lab = cupy_peer(TILED, "nearest_tiled", centres, sites, 5)
            row["cupy_tiled_agree"] = float((lab == labels).mean())
        b, q, lab = ckdtree_peer(centres, sites, 3 if level == 9 else 1)
        row["ckdtree_build_ms"], row["ckdtree_query_ms"] = b, q
        row["ckdtree_agree"] = float((lab == labels).mean())
        results.append(row)
        idx = gpu[0]
        print(f"\nQTM level {level} ({row['cells']:,} cells) x {n:,} sites")
        print(f"  ours GPU indexed: compute {idx['compute_ms']:.3f} ms + download {idx['download_ms']:.3f} ms "
              f"+ upload {idx['upload_ms']:.3f} ms = {idx['kernel_plus_transfer_ms']:.3f} ms "
              f"(host prepare {idx['prepare_ms']:.1f} ms; {idx['candidates_per_block']:.1f} candidates a block, "
              f"{idx['overflow_blocks']} overflow blocks)")
        for g in gpu[1:]:
            print(f"  ours GPU {g['method']}: compute {g['compute_ms']:.3f} ms")
        print(f"  ours CPU indexed ({cpu[0]['device']}): {cpu[0]['compute_ms']:.1f} ms (+ prepare {cpu[0]['prepare_ms']:.1f} ms)")
        if brute:
            print(f"  CuPy naive: {row['cupy_naive_ms']:.3f} ms (labels agree {row['cupy_naive_agree']:.6f}); "
                  f"ratio {row['cupy_naive_ms'] / idx['kernel_plus_transfer_ms']:.1f}x")
            print(f"  CuPy tiled: {row['cupy_tiled_ms']:.3f} ms (labels agree {row['cupy_tiled_agree']:.6f}); "
                  f"ratio {row['cupy_tiled_ms'] / idx['kernel_plus_transfer_ms']:.1f}x")
        print(f"  cKDTree ({os.cpu_count()} cores): build {b:.1f} ms + query {q:.1f} ms (labels agree "
              f"{row['ckdtree_agree']:.6f}); GPU ratio {(b + q) / idx['kernel_plus_transfer_ms']:.1f}x, "
              f"CPU ratio {(b + q) / (cpu[0]['compute_ms'] + cpu[0]['prepare_ms']):.2f}x")
        sys.stdout.flush()

    print("\nThe paper's experiment (level 9): serial CPU 2015 vs each kernel today (compute only)")
    print("sites | paper serial CPU ms | global | shared | constant | register | indexed | "
          "shared/global | constant/global | register/global")
    for row in results:
        if row["level"] != 9:
            continue
        t = {g["method"]: g["compute_ms"] for g in row["ours_gpu"]}
        g = t["brute force, global memory"]
        sh = t["brute force, shared-memory tiles"]
        co = t["brute force, constant memory"]
        re = t["brute force, constant memory and register blocking"]
        ix = t["indexed"]
        print(f"{row['sites']} | {PAPER_SERIAL_MS[row['sites']]} | {g:.3f} | {sh:.3f} | {co:.3f} | {re:.3f} | {ix:.3f} | "
              f"{g / sh:.2f}x | {g / co:.2f}x | {g / re:.2f}x")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
