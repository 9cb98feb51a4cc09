#include "gdal/gdal_raster.h"

#include <cmath>
#include <cstdio>

#include <cpl_error.h>
#include <ogr_spatialref.h>

#include "core/errors.h"

namespace gpugeo::gdal {

namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kWgs84SemiMajor = 6378137.0;
constexpr double kWgs84SemiMinor = 6356752.314245179;

// A CRS as QGIS names it to a user: "EPSG:32633 - WGS 84 / UTM zone 33N".
std::string crsName(const OGRSpatialReference& srs)
{
  const char* authority = srs.GetAuthorityName(nullptr);
  const char* code = srs.GetAuthorityCode(nullptr);
  const char* name = srs.GetName();
  std::string out = authority && code ? std::string(authority) + ":" + code : std::string();
  if (name && *name)
    out += (out.empty() ? "" : " - ") + std::string(name);
  return out.empty() ? std::string("a CRS without a name") : out;
}

void projectedCellSizes(GdalRaster& raster, const OGRSpatialReference* srs)
{
  double toMetres = 1.0;
  std::string unitName = "metres";
  if (!srs)
  {
    raster.warnings.push_back("The DEM has no CRS: its cell sizes are taken to be in metres.");
  }
  else
  {
    const char* name = nullptr;
    const double factor = srs->GetLinearUnits(&name);
    if (!(factor > 0.0) || !std::isfinite(factor) || !name || !*name || EQUAL(name, "unknown"))
      raster.warnings.push_back("The units of the DEM's CRS (" + crsName(*srs) +
                                ") are unknown: its cell sizes are taken to be in metres.");
    else
    {
      toMetres = factor;
      unitName = name;
    }
  }
  const double width = raster.geoTransform[1] * toMetres;
  const double height = -raster.geoTransform[5] * toMetres;
  raster.cellWidth.assign(static_cast<size_t>(raster.height), width);
  raster.cellHeight.assign(static_cast<size_t>(raster.height), height);
  raster.cellSizeNote = "Cells of " + numberText(width) + " x " + numberText(height) + " m (" +
                        numberText(raster.geoTransform[1]) + " x " + numberText(-raster.geoTransform[5]) + " " +
                        unitName + ").";
}

void geographicCellSizes(GdalRaster& raster, const OGRSpatialReference& srs)
{
  const double radiansPerUnit = srs.GetAngularUnits(nullptr);
  if (!(std::fabs(radiansPerUnit / (kPi / 180.0) - 1.0) < 1e-9))
    throw InvalidInput("The DEM's geographic CRS (" + crsName(srs) + ") is not in degrees; reproject it first.");
  const double* gt = raster.geoTransform;
  const double top = gt[3], bottom = gt[3] + double(raster.height) * gt[5];
  if (top > 90.0 + 1e-9 || bottom < -90.0 - 1e-9)
    throw InvalidInput("The DEM's rows run from latitude " + numberText(top) + " to " + numberText(bottom) +
                       ", beyond the poles: is its CRS (" + crsName(srs) + ") right?");
  OGRErr semiMajorError = OGRERR_NONE, flatteningError = OGRERR_NONE;
  double a = srs.GetSemiMajor(&semiMajorError);
  const double inverseFlattening = srs.GetInvFlattening(&flatteningError);
  double b = inverseFlattening > 0.0 ? a * (1.0 - 1.0 / inverseFlattening) : a;  // 0: a sphere
  const char* spheroid = srs.GetAttrValue("SPHEROID");
  std::string ellipsoidName = spheroid && *spheroid ? spheroid : crsName(srs);
  if (semiMajorError != OGRERR_NONE || flatteningError != OGRERR_NONE || !(a > 0) || !(b > 0) || b > a)
  {
    raster.warnings.push_back("The ellipsoid of the DEM's CRS (" + ellipsoidName +
                              ") is unknown: WGS 84's is used for the cell sizes.");
    a = kWgs84SemiMajor;
    b = kWgs84SemiMinor;
    ellipsoidName = "WGS 84";
  }
  const double e2 = 1.0 - (b * b) / (a * a);
  const double toRadians = kPi / 180.0;
  const double dLon = gt[1] * toRadians, dLat = -gt[5] * toRadians;
  raster.cellWidth.resize(static_cast<size_t>(raster.height));
  raster.cellHeight.resize(static_cast<size_t>(raster.height));
  for (int64_t y = 0; y < raster.height; ++y)
  {
    const double phi = (gt[3] + (double(y) + 0.5) * gt[5]) * toRadians;
    const double s = std::sin(phi);
    const double w = 1.0 - e2 * s * s;
    const double n = a / std::sqrt(w);                     // prime vertical radius of curvature
    const double m = a * (1.0 - e2) / (w * std::sqrt(w));  // meridian radius of curvature
    raster.cellWidth[static_cast<size_t>(y)] = n * std::cos(phi) * dLon;
    raster.cellHeight[static_cast<size_t>(y)] = m * dLat;
  }
  const size_t last = static_cast<size_t>(raster.height - 1);
  raster.cellSizeNote = "Cells of " + numberText(gt[1]) + " x " + numberText(-gt[5]) +
                        " degrees; in metres from the ellipsoid " + ellipsoidName + " (a = " + numberText(a) +
                        " m, b = " + numberText(b) + " m) at each row's latitude: " +
                        numberText(raster.cellWidth[0]) + " x " + numberText(raster.cellHeight[0]) +
                        " m in the first row, " + numberText(raster.cellWidth[last]) + " x " +
                        numberText(raster.cellHeight[last]) + " m in the last.";
}

// The checks and the cell sizes; `crsWkt` null: the dataset's CRS.
GdalRaster open(const std::string& path, int band, const std::string* crsWkt)
{
  GdalRaster raster;
  raster.path = path;
  raster.band = band;
  Dataset dataset = openQuietly(path, GA_ReadOnly);
  if (!dataset)
    throw InvalidInput("Could not open " + path + ": " + lastGdalError());
  const int bands = GDALGetRasterCount(dataset.get());
  if (band < 1 || band > bands)
    throw InvalidInput("The raster has " + std::to_string(bands) + " band(s); there is no band " +
                       std::to_string(band) + " (bands count from 1).");
  raster.width = GDALGetRasterXSize(dataset.get());
  raster.height = GDALGetRasterYSize(dataset.get());
  if (raster.width * raster.height > dem::kMaxCells)
    throw InvalidInput("The DEM has " + std::to_string(raster.width) + " x " + std::to_string(raster.height) +
                       " = " + std::to_string(raster.width * raster.height) +
                       " cells, more than the limit of 2,147,483,647 (2^31 - 1) cells: clip it into pieces or "
                       "resample it to larger cells.");
  double* gt = raster.geoTransform;
  if (GDALGetGeoTransform(dataset.get(), gt) != CE_None)
    throw InvalidInput(path + " has no georeference (geotransform), so its cell sizes are unknown: georeference "
                              "it first.");
  for (int i = 0; i < 6; ++i)
    if (!std::isfinite(gt[i]))
      throw InvalidInput("The geotransform of " + path + " holds a value that is not a number.");
  if (gt[2] != 0.0 || gt[4] != 0.0)
    throw InvalidInput("The DEM's geotransform is rotated or sheared (rotation terms " + numberText(gt[2]) + " and " +
                       numberText(gt[4]) +
                       "): the tools need a north-up grid. Warp it first (GDAL's Warp (reproject), gdalwarp).");
  if (!(gt[1] > 0.0) || !(gt[5] < 0.0))
    throw InvalidInput("The DEM is not stored north-up (pixel width " + numberText(gt[1]) + ", pixel height " +
                       numberText(gt[5]) +
                       "; a positive width and a negative height are expected): warp it first (GDAL's Warp "
                       "(reproject), gdalwarp).");
  GDALRasterBandH handle = GDALGetRasterBand(dataset.get(), band);
  raster.dataType = GDALGetRasterDataType(handle);
  if (GDALDataTypeIsComplex(raster.dataType))
    throw InvalidInput("Band " + std::to_string(band) + " holds complex numbers (" +
                       GDALGetDataTypeName(raster.dataType) +
                       "), not elevations or codes: make a real raster of it first (its real part or its magnitude, "
                       "with a raster calculator).");
  int hasNoData = 0;
  const double noData = GDALGetRasterNoDataValue(handle, &hasNoData);
  if (hasNoData)
    raster.noData = noData;
  int hasScale = 0, hasOffset = 0;
  const double scale = GDALGetRasterScale(handle, &hasScale);
  const double offset = GDALGetRasterOffset(handle, &hasOffset);
  if (hasScale && std::isfinite(scale) && scale != 0.0)
    raster.scale = scale;
  if (hasOffset && std::isfinite(offset))
    raster.offset = offset;
  if (raster.scale != 1.0 || raster.offset != 0.0)
    raster.warnings.push_back("The band's values are scaled: elevation = " + numberText(raster.scale) +
                              " x value + " + numberText(raster.offset) + ".");

  OGRSpatialReference srs;
  bool hasCrs = false;
  if (crsWkt)
  {
    hasCrs = !crsWkt->empty() && srs.SetFromUserInput(crsWkt->c_str()) == OGRERR_NONE;
    if (hasCrs)
      raster.crsWkt = *crsWkt;
  }
  else if (const OGRSpatialReferenceH own = GDALGetSpatialRef(dataset.get()))
  {
    srs = *OGRSpatialReference::FromHandle(own);
    char* wkt = nullptr;
    const char* const options[] = {"FORMAT=WKT2_2019", nullptr};
    hasCrs = srs.exportToWkt(&wkt, options) == OGRERR_NONE && wkt;
    if (hasCrs)
      raster.crsWkt = wkt;
    CPLFree(wkt);
  }
  if (hasCrs && srs.IsGeographic())
    geographicCellSizes(raster, srs);
  else
    projectedCellSizes(raster, hasCrs ? &srs : nullptr);
  return raster;
}

}  // namespace

GdalRaster openGdalRaster(const std::string& path, int band)
{
  return open(path, band, nullptr);
}

GdalRaster openGdalRaster(const std::string& path, int band, const std::string& crsWkt)
{
  return open(path, band, &crsWkt);
}

void DatasetCloser::operator()(void* dataset) const
{
  if (dataset)
    GDALClose(dataset);
}

Dataset openQuietly(const std::string& name, GDALAccess access)
{
  GDALAllRegister();
  CPLErrorReset();
  CPLPushErrorHandler(CPLQuietErrorHandler);
  Dataset dataset(GDALOpen(name.c_str(), access));
  CPLPopErrorHandler();
  return dataset;
}

std::string lastGdalError()
{
  const char* message = CPLGetLastErrorMsg();
  return message && *message ? std::string(message) : std::string("unknown GDAL error");
}

std::mutex& gdalTileMutex()
{
  static std::mutex mutex;
  return mutex;
}

std::string numberText(double value)
{
  char text[32];
  std::snprintf(text, sizeof text, "%.10g", value);
  return text;
}

}  // namespace gpugeo::gdal
