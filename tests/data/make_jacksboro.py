#!/usr/bin/python3
"""Writes jacksboro_srtm3.tif, the real DEM the DEM end-to-end tests run on, from matplotlib's sample
data (jacksboro_fault_dem.npz in Debian's python-matplotlib-data): Int16 elevations in metres, 403 x
344 cells of 3 arc-seconds (an SRTM-3 tile's cut), north-up, EPSG:4326, the georeference from the
npz's bounds (its "xmin" is the western cell edge, its "ymin" the northern one: row 0 is north).
DEFLATE with horizontal differencing, so the file stays small. Run it only to make the file again.

usage: make_jacksboro.py [NPZ] [OUT.tif]
"""
import math
import os
import sys

import numpy as np
from osgeo import gdal, osr

gdal.UseExceptions()
NPZ = "/usr/share/matplotlib/mpl-data/sample_data/jacksboro_fault_dem.npz"
GEOTRANSFORM = (-84.41375, 1.0 / 1200.0, 0.0, 36.73291666666667, 0.0, -1.0 / 1200.0)


def main():
    npz = sys.argv[1] if len(sys.argv) > 1 else NPZ
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "jacksboro_srtm3.tif")
    with np.load(npz) as data:
        z = data["elevation"]
        assert z.shape == (344, 403) and z.dtype == np.int16
        assert math.isclose(float(data["xmin"]), GEOTRANSFORM[0]) and math.isclose(float(data["ymin"]), GEOTRANSFORM[3])
    dataset = gdal.GetDriverByName("GTiff").Create(out, z.shape[1], z.shape[0], 1, gdal.GDT_Int16,
                                                   ["COMPRESS=DEFLATE", "PREDICTOR=2", "ZLEVEL=9"])
    dataset.SetGeoTransform(GEOTRANSFORM)
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(4326)
    dataset.SetProjection(srs.ExportToWkt())
    dataset.GetRasterBand(1).WriteArray(z)
    dataset.SetMetadataItem("SOURCE", "SRTM 3 arc-second elevations (NASA/USGS, public domain), as cut in "
                                      "matplotlib's sample data jacksboro_fault_dem.npz")
    dataset = None
    print(out, os.path.getsize(out), "bytes")


if __name__ == "__main__":
    main()
