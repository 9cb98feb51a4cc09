#!/usr/bin/python3
"""Plane Voronoi raster on the CPU, on this machine, beside its peers, in one run: 8192^2 pixels,
1,000 sites at pixel centres (the same sites as the GPU benchmark).

  ours, native core   bench_voronoi --backend cpu (labels + distances, in memory)
  ours, qgis_process  gpugeo:voronoiraster DEVICE=1 writing the allocation and distance GeoTIFFs
  SciPy               scipy.ndimage.distance_transform_edt(return_indices=True), whole process
  GDAL                gdal_proximity.py (distances only), whole process, writing a GeoTIFF

Times are medians of --reps runs; whole-process times include start-up; peak memory from
/usr/bin/time. Our distances are checked against SciPy's at every pixel.

usage: bench_voronoi_cpu.py BENCH_BINARY PLUGIN_DIR [--reps N] [--size S] [--sites N]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np
from osgeo import gdal, ogr, osr

from whole_process import qgis_environment, timed

gdal.UseExceptions()

SCIPY_SCRIPT = """
import sys, time, numpy as np
from scipy import ndimage
size = int(sys.argv[1]); rows, cols = np.load(sys.argv[2])
image = np.ones((size, size), dtype=np.uint8)
image[rows, cols] = 0
start = time.perf_counter()
distances, indices = ndimage.distance_transform_edt(image, return_indices=True)
print("compute_ms", 1000 * (time.perf_counter() - start))
if len(sys.argv) > 3:
    np.save(sys.argv[3], distances.astype(np.float32))
"""


def site_cells(size, count):
    """The benchmark's sites: `count` distinct pixels of a size x size grid (rows, columns), seeded."""
    rng = np.random.default_rng(size + count)
    return np.divmod(rng.choice(size * size, size=count, replace=False), size)


def write_site_layer(path, rows, cols, size):
    """The sites at their pixels' centres as a GeoPackage point layer (EPSG:32633, 1-unit pixels, the
    grid's top-left corner at (0, size))."""
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(32633)
    dataset = ogr.GetDriverByName("GPKG").CreateDataSource(path)
    layer = dataset.CreateLayer("sites", srs, ogr.wkbPoint)
    layer.StartTransaction()
    for c, r in zip(cols, rows):
        feature = ogr.Feature(layer.GetLayerDefn())
        feature.SetGeometry(ogr.CreateGeometryFromWkt(f"POINT ({c + 0.5} {size - r - 0.5})"))
        layer.CreateFeature(feature)
    layer.CommitTransaction()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("plugin_dir")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--sites", type=int, default=1000)
    args = parser.parse_args()
    size, count = args.size, args.sites

    tmp = tempfile.mkdtemp(prefix="gpugeo-bench-")
    try:
        rows, cols = site_cells(size, count)
        np.save(os.path.join(tmp, "sites.npy"), np.stack([rows, cols]))
        np.stack([cols + 0.5, rows + 0.5], axis=1).astype(np.float64).tofile(os.path.join(tmp, "sites.bin"))
        # The same sites as a point layer (1-unit pixels, top-left corner (0, size)) and as a raster
        # of targets for gdal_proximity.
        gpkg = os.path.join(tmp, "sites.gpkg")
        write_site_layer(gpkg, rows, cols, size)
        srs = osr.SpatialReference()
        srs.ImportFromEPSG(32633)
        targets = os.path.join(tmp, "targets.tif")
        raster = gdal.GetDriverByName("GTiff").Create(targets, size, size, 1, gdal.GDT_Byte, ["TILED=YES"])
        raster.SetGeoTransform((0, 1, 0, size, 0, -1))
        raster.SetProjection(srs.ExportToWkt())
        image = np.zeros((size, size), dtype=np.uint8)
        image[rows, cols] = 1
        raster.GetRasterBand(1).WriteArray(image)
        raster = None
        del image

        env = qgis_environment(tmp, args.plugin_dir)

        results = {}
        native = subprocess.run([args.binary, "--width", str(size), "--height", str(size), "--sites",
                                 os.path.join(tmp, "sites.bin"), "--backend", "cpu", "--reps", str(args.reps)],
                                capture_output=True, text=True, check=True)
        ours = json.loads([line for line in native.stdout.splitlines() if line.startswith("{")][-1])
        results["ours_native_s"] = (ours["index_ms"] + ours["compute_ms"]) / 1000
        results["device"] = ours["device"]

        runs = {"ours_qgis_process": [], "scipy": [], "gdal_proximity": []}
        peaks = {key: [] for key in runs}
        scipy_compute = []
        for rep in range(args.reps):
            wall, peak, _, _ = timed(["/usr/bin/qgis_process.bin", "run", "gpugeo:voronoiraster", "--",
                                   f"INPUT={gpkg}", f"EXTENT=0,{size},0,{size} [EPSG:32633]", "PIXEL_SIZE=1",
                                   "DEVICE=1", f"OUTPUT={tmp}/alloc.tif", f"OUTPUT_DISTANCE={tmp}/dist.tif"], env=env)
            runs["ours_qgis_process"].append(wall)
            peaks["ours_qgis_process"].append(peak)
            extra = [os.path.join(tmp, "scipy_distances.npy")] if rep == 0 else []
            wall, peak, out, _ = timed([sys.executable, "-c", SCIPY_SCRIPT, str(size), os.path.join(tmp, "sites.npy")] + extra)
            runs["scipy"].append(wall)
            peaks["scipy"].append(peak)
            scipy_compute.append(float(out.split()[1]) / 1000)
            wall, peak, _, _ = timed(["gdal_proximity.py", "-q", targets, f"{tmp}/proximity.tif", "-values", "1",
                                   "-distunits", "PIXEL", "-ot", "Float32"])
            runs["gdal_proximity"].append(wall)
            peaks["gdal_proximity"].append(peak)

        ours_distances = gdal.Open(f"{tmp}/dist.tif").ReadAsArray()
        scipy_distances = np.load(os.path.join(tmp, "scipy_distances.npy"))
        mismatches = int(np.count_nonzero(ours_distances != scipy_distances))
        del ours_distances, scipy_distances

        median = {key: statistics.median(values) for key, values in runs.items()}
        peak = {key: max(values) for key, values in peaks.items()}
        print(f"Plane Voronoi raster, CPU, {size}^2 pixels, {count} sites; {results['device']}; "
              f"medians of {args.reps} runs")
        print("| what | ours, native core | ours, qgis_process (writes labels + distances) | SciPy EDT + indices "
              "(whole process) | gdal_proximity (distances only, whole process) |")
        print("|---|---|---|---|---|")
        print(f"| time | {results['ours_native_s']:.2f} s | {median['ours_qgis_process']:.2f} s "
              f"| {median['scipy']:.2f} s (EDT alone {statistics.median(scipy_compute):.2f} s) "
              f"| {median['gdal_proximity']:.2f} s |")
        print(f"| peak memory | - | {peak['ours_qgis_process']:.0f} MB | {peak['scipy']:.0f} MB "
              f"| {peak['gdal_proximity']:.0f} MB |")
        print(f"| SciPy / ours | {median['scipy'] / results['ours_native_s']:.1f}x "
              f"| {median['scipy'] / median['ours_qgis_process']:.1f}x | | |")
        print(f"| gdal_proximity / ours | {median['gdal_proximity'] / results['ours_native_s']:.1f}x "
              f"| {median['gdal_proximity'] / median['ours_qgis_process']:.1f}x | | |")
        print(f"distance mismatches against SciPy: {mismatches} of {size * size}")
        return 0 if mismatches == 0 else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
