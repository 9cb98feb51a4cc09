#!/usr/bin/python3
"""Spherical Voronoi regions of N random points, ours and SciPy's side by side in one run.

Ours: bench_spherical_voronoi (the native core: unit vectors, hull, regions, areas and the lon/lat
polygons densified at 1 degree) on the sites written to a file. SciPy: SphericalVoronoi on the same
sites' unit vectors, then sort_vertices_of_regions and calculate_areas (SciPy makes no lon/lat
polygons). Medians of --reps runs each, the runs alternating; prints each and the ratio.

usage: bench_spherical_voronoi.py BUILD_DIR [--sites 100000] [--reps 5] [--seed 1] [--threads 0]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
from scipy.spatial import SphericalVoronoi


def sites(n, seed):
    rng = np.random.default_rng(seed)
    lon = rng.uniform(-180.0, 180.0, n)
    lat = np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, n)))
    return lon, lat


def scipy_once(lon, lat):
    lo, la = np.radians(lon), np.radians(lat)
    xyz = np.column_stack((np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)))
    start = time.perf_counter()
    sv = SphericalVoronoi(xyz, radius=1.0, center=np.zeros(3))
    sv.sort_vertices_of_regions()
    areas = sv.calculate_areas()
    return (time.perf_counter() - start) * 1000.0, float(areas.sum() - 4.0 * np.pi)


def ours_once(binary, path, threads):
    out = subprocess.run([binary, "--input", path, "--reps", "1", "--threads", str(threads)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("--sites", type=int, default=100000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    binary = os.path.join(args.build, "tests", "benchmarks", "bench_spherical_voronoi")
    lon, lat = sites(args.sites, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sites.f64")
        np.column_stack((lon, lat)).astype(np.float64).tofile(path)
        ours, theirs = [], []
        for _ in range(args.reps):
            result = ours_once(binary, path, args.threads)
            ours.append(result["median_ms"])
            ms, scipy_area = scipy_once(lon, lat)
            theirs.append(ms)
    ours_ms, scipy_ms = statistics.median(ours), statistics.median(theirs)
    print(json.dumps({"sites": args.sites, "cores": os.cpu_count(), "ours_ms": round(ours_ms, 1),
                      "ours_runs_ms": ours, "ours_area_minus_4pi": result["area_minus_4pi"],
                      "ours_polygon_points": result["polygon_points"], "scipy_ms": round(scipy_ms, 1),
                      "scipy_runs_ms": [round(t, 1) for t in theirs], "scipy_area_minus_4pi": scipy_area,
                      "scipy_over_ours": round(scipy_ms / ours_ms, 2)}))


if __name__ == "__main__":
    main()
