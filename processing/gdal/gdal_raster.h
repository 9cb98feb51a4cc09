// The DEM tools' rasters through GDAL alone, with no QGIS and no Qt: the QGIS provider's adapters
// and the command-line program that runs the tiled DEM tools on a cluster both open, read and write
// rasters here. This header: one band of a raster opened and checked, with each row's cell width and
// height in metres.
//
// Cell sizes. A projected CRS (or a raster without CRS, taken as metres): the geotransform's pixel
// width and height times the CRS unit in metres, the same for every row. A geographic CRS: at the
// latitude phi of each row's centre, on the CRS's ellipsoid (semi-major axis a, eccentricity e,
// e^2 = 1 - b^2/a^2): width = N(phi) cos(phi) dlon and height = M(phi) dlat, with the radii of
// curvature N = a / sqrt(1 - e^2 sin^2 phi) (prime vertical) and M = a (1 - e^2) / (1 - e^2
// sin^2 phi)^(3/2) (meridian), dlon and dlat the pixel's size in radians. The units and the ellipsoid
// come from GDAL's OGRSpatialReference.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <gdal.h>

#include "dem/dem.h"

namespace gpugeo::gdal {

struct GdalRaster
{
  std::string path;  // what GDAL opens: a file, or any name GDAL takes (a VRT, /vsi...)
  int band = 1;
  int64_t width = 0;
  int64_t height = 0;
  double geoTransform[6] = {0, 1, 0, 0, 0, -1};
  std::string crsWkt;  // empty: no CRS
  GDALDataType dataType = GDT_Unknown;
  std::optional<double> noData;  // the band's nodata value, if it has one
  double scale = 1.0;            // the band's scale and offset, applied to the values read
  double offset = 0.0;
  std::vector<double> cellWidth;  // per row, metres
  std::vector<double> cellHeight;
  std::string cellSizeNote;           // how the cell sizes were found, for the log
  std::vector<std::string> warnings;  // for the log (e.g. no CRS, scaled values)

  // The grid the native core takes, over `z` (width x height values).
  dem::Grid grid(const float* z) const { return {z, width, height, cellWidth.data(), cellHeight.data()}; }
};

// Opens band `band` (1-based) of `path` and works out the cell sizes from the dataset's CRS; reads
// no pixel. Throws InvalidInput: the file does not open, no such band, no georeference, a rotated or
// sheared geotransform, a raster not stored north-up, more than dem::kMaxCells cells, a band of
// complex numbers, latitudes beyond the poles, a geographic CRS not in degrees.
GdalRaster openGdalRaster(const std::string& path, int band);
// The same with the CRS `crsWkt` (any definition OGRSpatialReference takes; empty: none) in place of
// the dataset's: the QGIS layer's, which the user may have set.
GdalRaster openGdalRaster(const std::string& path, int band, const std::string& crsWkt);

// GDAL's datasets, closed when the handle goes.
struct DatasetCloser
{
  void operator()(void* dataset) const;
};
using Dataset = std::unique_ptr<void, DatasetCloser>;

// Opens a dataset without GDAL's messages on stderr (its error, if any, stays for lastGdalError()).
// Null when it fails.
Dataset openQuietly(const std::string& name, GDALAccess access);

// GDAL's last error message on this thread, or "unknown GDAL error".
std::string lastGdalError();

// The lock every read and write of the tiled runs' GDAL datasets takes: GDAL's block cache is shared
// by the whole process, and a read that fills it may write back another dataset's dirty blocks; with
// the writes to that dataset on another thread, blocks shared by two tiles lost one tile's cells.
std::mutex& gdalTileMutex();

// A number for a message: at most 10 significant digits, in exponent form when very large or small.
std::string numberText(double value);

}  // namespace gpugeo::gdal
