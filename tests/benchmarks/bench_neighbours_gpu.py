#!/usr/bin/env python3
"""Neighbour counts, pairs and DBSCAN: our index (GPU and CPU) against scipy's cKDTree with all
cores on the same points, in one run; checks that the counts agree.

usage: bench_neighbours_gpu.py BENCH_BINARY [--quick]
"""
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from scipy.spatial import cKDTree


def ours(binary, *args):
    done = subprocess.run([binary, *map(str, args)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def total(run):
    """Upload + index + query + download: what BENCHMARKS.md's bars count."""
    return run["upload_ms"] + run["index_ms"] + run["compute_ms"] + run["pairs_ms"] + run["allocate_ms"] + run["download_ms"]


def stages(run):
    return {k: run[k] for k in ("upload_ms", "index_ms", "compute_ms", "pairs_ms", "allocate_ms", "download_ms") if run[k]}


def main():
    binary = sys.argv[1]
    quick = "--quick" in sys.argv
    tmp = tempfile.mkdtemp()
    configs = [(1_000_000, False), (10_000_000, False), (10_000_000, True)] if not quick else [(1_000_000, False)]
    for n, skewed in configs:
        prefix = os.path.join(tmp, f"p{n}")
        flags = ["--points", n, "--reps", 5] + (["--skewed"] if skewed else [])
        gpu = ours(binary, *flags, "--backend", "gpu", "--dump", prefix)
        summary = ours(binary, *flags, "--backend", "gpu", "--mode", "summary")
        pageable = ours(binary, *flags, "--backend", "gpu", "--pageable")
        cpu = ours(binary, *flags[:2], "--reps", 1, *(["--skewed"] if skewed else []), "--backend", "cpu")
        pts = np.fromfile(prefix + ".points", dtype=np.float64).reshape(-1, 2)
        counts = np.fromfile(prefix + ".counts", dtype=np.int32)
        t0 = time.perf_counter()
        tree = cKDTree(pts)
        t1 = time.perf_counter()
        peer = tree.query_ball_point(pts, gpu["radius"], return_length=True, workers=-1) - 1
        t2 = time.perf_counter()
        same = bool(np.array_equal(peer, counts))
        device_ms = gpu["index_ms"] + gpu["compute_ms"]
        print(json.dumps({"points": n, "skewed": skewed, "mean_neighbours": float(counts.mean()),
                          "ours_gpu_counts": stages(gpu), "ours_gpu_device_ms": device_ms,
                          "ours_gpu_with_transfers_ms": total(gpu),
                          "ours_gpu_counts_pageable": stages(pageable), "ours_gpu_pageable_total_ms": total(pageable),
                          "ours_gpu_all_four_arrays": stages(summary), "ours_gpu_all_four_total_ms": total(summary),
                          "ours_cpu_ms": cpu["index_ms"] + cpu["compute_ms"],
                          "ckdtree_build_ms": (t1 - t0) * 1e3, "ckdtree_count_ms": (t2 - t1) * 1e3,
                          "ratio_ckdtree_over_gpu_with_transfers": ((t2 - t0) * 1e3) / total(gpu),
                          "ratio_ckdtree_over_cpu": ((t2 - t0) * 1e3) / (cpu["index_ms"] + cpu["compute_ms"]),
                          "counts_equal_ckdtree": same}), flush=True)
        os.remove(prefix + ".points")
        os.remove(prefix + ".counts")
    if not quick:
        three = ours(binary, "--points", 1_000_000, "--dims", 3, "--reps", 5, "--backend", "gpu")
        print(json.dumps({"points_3d": 1_000_000, "ours_gpu_counts": stages(three),
                          "ours_gpu_with_transfers_ms": total(three), "mean_neighbours": three["result"] / 1e6}),
              flush=True)
    # All pairs of 1,000,000 points (about 16 million), uniform and skewed.
    for skewed in (False, True):
        extra = ["--skewed"] if skewed else []
        gpu = ours(binary, "--points", 1_000_000, "--mode", "pairs", "--reps", 5, "--backend", "gpu", *extra)
        bare = ours(binary, "--points", 1_000_000, "--mode", "pairs", "--reps", 5, "--backend", "gpu", "--no-distance",
                    *extra)
        record = {"pairs_points": 1_000_000, "skewed": skewed, "ours_gpu_pairs": gpu["result"],
                  "ours_gpu": stages(gpu), "ours_gpu_device_ms": total(gpu) - gpu["upload_ms"] - gpu["download_ms"],
                  "ours_gpu_with_transfers_ms": total(gpu),
                  "ours_gpu_without_distances": stages(bare), "ours_gpu_without_distances_total_ms": total(bare)}
        if not skewed:
            pts_prefix = os.path.join(tmp, "pairs")
            ours(binary, "--points", 1_000_000, "--reps", 1, "--backend", "cpu", "--dump", pts_prefix)
            pts = np.fromfile(pts_prefix + ".points", dtype=np.float64).reshape(-1, 2)
            t0 = time.perf_counter()
            pairs = cKDTree(pts).query_pairs(gpu["radius"], output_type="ndarray")
            t1 = time.perf_counter()
            record.update({"ckdtree_pairs": len(pairs), "ckdtree_query_pairs_ms": (t1 - t0) * 1e3})
        print(json.dumps(record), flush=True)
    for neighbours in (32, 6):
        db = ours(binary, "--points", 1_000_000, "--neighbours", neighbours, "--mode", "dbscan", "--reps", 5,
                  "--backend", "gpu")
        cpu = ours(binary, "--points", 1_000_000, "--neighbours", neighbours, "--mode", "dbscan", "--reps", 1,
                   "--backend", "cpu")
        print(json.dumps({"dbscan_points": 1_000_000, "neighbours": neighbours, "clusters": db["result"],
                          "cpu_clusters": cpu["result"], "ours_gpu": stages(db),
                          "ours_gpu_device_ms": db["index_ms"] + db["compute_ms"],
                          "ours_gpu_with_transfers_ms": total(db),
                          "ours_cpu_ms": cpu["index_ms"] + cpu["compute_ms"]}), flush=True)


if __name__ == "__main__":
    main()
