// What the GDAL layer's tests share: a temporary folder removed at the end, and GeoTIFFs written there
// with GDAL's own API (not with the layer under test).
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <cpl_conv.h>
#include <gdal.h>
#include <ogr_spatialref.h>
#include <unistd.h>

namespace gpugeo::gdal::test {

// A folder under the system's temporary folder, removed with all it holds when the object goes.
class TempFolder
{
public:
  TempFolder()
  {
    static std::atomic<int> serial{0};
    mPath = std::filesystem::temp_directory_path() /
            ("gpugeo_gdal_tests_" + std::to_string(::getpid()) + "_" + std::to_string(serial++));
    std::filesystem::create_directories(mPath);
  }
  ~TempFolder() { std::filesystem::remove_all(mPath); }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  std::string file(const std::string& name) const { return (mPath / name).string(); }

private:
  std::filesystem::path mPath;
};

// A CRS as WKT from anything OGRSpatialReference takes ("EPSG:32633", a PROJ string).
inline std::string wktOf(const std::string& definition)
{
  OGRSpatialReference srs;
  EXPECT_EQ(srs.SetFromUserInput(definition.c_str()), OGRERR_NONE) << definition;
  char* wkt = nullptr;
  srs.exportToWkt(&wkt);
  std::string out = wkt ? wkt : "";
  CPLFree(wkt);
  return out;
}

struct TiffSpec
{
  int64_t width = 0, height = 0;
  GDALDataType type = GDT_Float32;
  std::vector<double> values;  // width x height, row-major (written as `type`); empty: left unwritten
  double geoTransform[6] = {500000.0, 10.0, 0.0, 4000000.0, 0.0, -7.5};
  bool georeferenced = true;
  std::string crs = "EPSG:32633";  // empty: none
  std::optional<double> noData;
  std::optional<double> scale, offset;
  int bands = 1;
  bool sparse = false;  // SPARSE_OK: a large raster written without its blocks
};

// A raster of width x height cells of `type` holding `values`, in UTM 33N with cells of 10 x 7.5 m.
inline TiffSpec tiffOf(int64_t width, int64_t height, GDALDataType type, std::vector<double> values,
                       std::optional<double> noData = std::nullopt)
{
  TiffSpec spec;
  spec.width = width;
  spec.height = height;
  spec.type = type;
  spec.values = std::move(values);
  spec.noData = noData;
  return spec;
}

// Writes `spec` as a GeoTIFF at `path` (band 1 holds the values; any others are left empty).
inline void writeTiff(const std::string& path, const TiffSpec& spec)
{
  GDALAllRegister();
  char** options = nullptr;
  options = CSLSetNameValue(options, "TILED", "YES");
  if (spec.sparse)
    options = CSLSetNameValue(options, "SPARSE_OK", "TRUE");
  GDALDatasetH dataset = GDALCreate(GDALGetDriverByName("GTiff"), path.c_str(), int(spec.width), int(spec.height),
                                    spec.bands, spec.type, options);
  CSLDestroy(options);
  ASSERT_NE(dataset, nullptr) << path << ": " << CPLGetLastErrorMsg();
  if (spec.georeferenced)
    GDALSetGeoTransform(dataset, const_cast<double*>(spec.geoTransform));
  if (!spec.crs.empty())
    GDALSetProjection(dataset, wktOf(spec.crs).c_str());
  GDALRasterBandH band = GDALGetRasterBand(dataset, 1);
  if (spec.noData)
    GDALSetRasterNoDataValue(band, *spec.noData);
  if (spec.scale)
    GDALSetRasterScale(band, *spec.scale);
  if (spec.offset)
    GDALSetRasterOffset(band, *spec.offset);
  if (!spec.values.empty())
  {
    ASSERT_EQ(int64_t(spec.values.size()), spec.width * spec.height);
    ASSERT_EQ(GDALRasterIO(band, GF_Write, 0, 0, int(spec.width), int(spec.height),
                           const_cast<double*>(spec.values.data()), int(spec.width), int(spec.height), GDT_Float64, 0,
                           0),
              CE_None);
  }
  GDALClose(dataset);
}

// Band 1 of a GeoTIFF as float64.
inline std::vector<double> readTiff(const std::string& path)
{
  GDALDatasetH dataset = GDALOpen(path.c_str(), GA_ReadOnly);
  EXPECT_NE(dataset, nullptr) << path;
  if (!dataset)
    return {};
  const int w = GDALGetRasterXSize(dataset), h = GDALGetRasterYSize(dataset);
  std::vector<double> values(size_t(w) * size_t(h));
  EXPECT_EQ(GDALRasterIO(GDALGetRasterBand(dataset, 1), GF_Read, 0, 0, w, h, values.data(), w, h, GDT_Float64, 0, 0),
            CE_None);
  GDALClose(dataset);
  return values;
}

}  // namespace gpugeo::gdal::test
