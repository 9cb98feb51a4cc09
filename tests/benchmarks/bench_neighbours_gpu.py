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


def main():
    binary = sys.argv[1]
    quick = "--quick" in sys.argv
    tmp = tempfile.mkdtemp()
    configs = [(1_000_000, False), (10_000_000, False), (10_000_000, True)] if not quick else [(1_000_000, False)]
    for n, skewed in configs:
        prefix = os.path.join(tmp, f"p{n}")
        flags = ["--points", n, "--reps", 5] + (["--skewed"] if skewed else [])
        gpu = ours(binary, *flags, "--backend", "gpu", "--dump", prefix)
        cpu = ours(binary, *flags[:2], "--reps", 1, *(["--skewed"] if skewed else []), "--backend", "cpu")
        pts = np.fromfile(prefix + ".points", dtype=np.float64).reshape(-1, 2)
        counts = np.fromfile(prefix + ".counts", dtype=np.int32)
        t0 = time.perf_counter()
        tree = cKDTree(pts)
        t1 = time.perf_counter()
        peer = tree.query_ball_point(pts, gpu["radius"], return_length=True, workers=-1) - 1
        t2 = time.perf_counter()
        same = bool(np.array_equal(peer, counts))
        gpu_ms = gpu["index_ms"] + gpu["compute_ms"]
        print(json.dumps({"points": n, "skewed": skewed, "mean_neighbours": float(counts.mean()),
                          "ours_gpu_index_ms": gpu["index_ms"], "ours_gpu_count_ms": gpu["compute_ms"],
                          "ours_gpu_build_plus_count_ms": gpu_ms, "ours_gpu_transfers_ms": gpu["transfer_ms"],
                          "ours_cpu_ms": cpu["index_ms"] + cpu["compute_ms"],
                          "ckdtree_build_ms": (t1 - t0) * 1e3, "ckdtree_count_ms": (t2 - t1) * 1e3,
                          "ratio_ckdtree_over_gpu": ((t2 - t0) * 1e3) / gpu_ms,
                          "ratio_ckdtree_over_cpu": ((t2 - t0) * 1e3) / (cpu["index_ms"] + cpu["compute_ms"]),
                          "counts_equal_ckdtree": same}), flush=True)
        os.remove(prefix + ".points")
        os.remove(prefix + ".counts")
    # All pairs of 1,000,000 points (about 16 million).
    gpu = ours(binary, "--points", 1_000_000, "--mode", "pairs", "--reps", 5, "--backend", "gpu")
    pts_prefix = os.path.join(tmp, "pairs")
    ours(binary, "--points", 1_000_000, "--reps", 1, "--backend", "cpu", "--dump", pts_prefix)
    pts = np.fromfile(pts_prefix + ".points", dtype=np.float64).reshape(-1, 2)
    t0 = time.perf_counter()
    pairs = cKDTree(pts).query_pairs(gpu["radius"], output_type="ndarray")
    t1 = time.perf_counter()
    print(json.dumps({"pairs_points": 1_000_000, "ours_gpu_pairs": gpu["result"], "ckdtree_pairs": len(pairs),
                      "ours_gpu_index_ms": gpu["index_ms"], "ours_gpu_count_ms": gpu["compute_ms"],
                      "ours_gpu_write_pairs_ms": gpu["pairs_ms"], "ours_gpu_allocate_ms": gpu["allocate_ms"],
                      "ours_gpu_transfers_ms": gpu["transfer_ms"],
                      "ckdtree_query_pairs_ms": (t1 - t0) * 1e3}), flush=True)
    db = ours(binary, "--points", 1_000_000, "--neighbours", 6, "--mode", "dbscan", "--reps", 5, "--backend", "gpu")
    print(json.dumps({"dbscan_points": 1_000_000, "clusters": db["result"], "ours_gpu_index_ms": db["index_ms"],
                      "ours_gpu_dbscan_ms": db["compute_ms"], "ours_gpu_transfers_ms": db["transfer_ms"]}), flush=True)


if __name__ == "__main__":
    main()
