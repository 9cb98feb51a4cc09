// openGdalRaster: the cell sizes of a projected raster (metres, international and US survey feet), of
// a geographic one (each row against gdal_raster.h's formula, on two ellipsoids), of one without CRS
// (metres, with a warning) and with the CRS given in place of the file's; nodata, scale and offset;
// and each refusal: a missing file, no such band, no georeference, a rotated or a south-up grid, more
// than dem::kMaxCells cells, complex values, latitudes beyond the poles, a geographic CRS not in
// degrees.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "core/errors.h"
#include "gdal/gdal_raster.h"
#include "gdal_test_support.h"

using namespace gpugeo;
using namespace gpugeo::gdal;
using namespace gpugeo::gdal::test;

namespace {

constexpr double kPi = 3.14159265358979323846;

TiffSpec smallDem(int64_t width = 20, int64_t height = 15)
{
  return tiffOf(width, height, GDT_Float32, std::vector<double>(size_t(width * height), 100.0));
}

// The message of the InvalidInput that opening throws ("" when it throws none).
std::string refusal(const std::string& path, int band)
{
  try
  {
    openGdalRaster(path, band);
  }
  catch (const InvalidInput& e)
  {
    return e.what();
  }
  return "";
}

// gdal_raster.h's cell size at latitude phi (degrees) on the ellipsoid (a, 1/f), for pixels of
// dLon x dLat degrees.
void expectEllipsoidSizes(const GdalRaster& raster, double a, double inverseFlattening, int64_t row)
{
  const double* gt = raster.geoTransform;
  const double b = a * (1.0 - 1.0 / inverseFlattening);
  const double e2 = 1.0 - b * b / (a * a);
  const double phi = (gt[3] + (double(row) + 0.5) * gt[5]) * kPi / 180.0;
  const double w = 1.0 - e2 * std::sin(phi) * std::sin(phi);
  const double width = a / std::sqrt(w) * std::cos(phi) * gt[1] * kPi / 180.0;
  const double height = a * (1.0 - e2) / (w * std::sqrt(w)) * -gt[5] * kPi / 180.0;
  EXPECT_NEAR(raster.cellWidth[size_t(row)], width, 1e-12 * width) << "row " << row;
  EXPECT_NEAR(raster.cellHeight[size_t(row)], height, 1e-12 * height) << "row " << row;
}

}  // namespace

TEST(GdalRasterTest, ProjectedInMetresTakesThePixelSize)
{
  const TempFolder folder;
  writeTiff(folder.file("utm.tif"), smallDem());
  const GdalRaster raster = openGdalRaster(folder.file("utm.tif"), 1);
  EXPECT_EQ(raster.width, 20);
  EXPECT_EQ(raster.height, 15);
  EXPECT_EQ(raster.band, 1);
  EXPECT_EQ(raster.dataType, GDT_Float32);
  EXPECT_FALSE(raster.noData.has_value());
  EXPECT_EQ(raster.scale, 1.0);
  EXPECT_EQ(raster.offset, 0.0);
  EXPECT_FALSE(raster.crsWkt.empty());
  ASSERT_EQ(raster.cellWidth.size(), 15u);
  ASSERT_EQ(raster.cellHeight.size(), 15u);
  for (size_t y = 0; y < 15; ++y)
  {
    EXPECT_EQ(raster.cellWidth[y], 10.0) << y;
    EXPECT_EQ(raster.cellHeight[y], 7.5) << y;
  }
  EXPECT_NE(raster.cellSizeNote.find("Cells of 10 x 7.5 m"), std::string::npos) << raster.cellSizeNote;
  EXPECT_TRUE(raster.warnings.empty());
  const dem::Grid grid = raster.grid(nullptr);
  EXPECT_EQ(grid.width, 20);
  EXPECT_EQ(grid.cellHeight, raster.cellHeight.data());
}

TEST(GdalRasterTest, ProjectedInFeetIsConvertedToMetres)
{
  const TempFolder folder;
  for (const auto& [units, metres] : {std::pair<std::string, double>{"ft", 0.3048}, {"us-ft", 1200.0 / 3937.0}})
  {
    SCOPED_TRACE(units);
    TiffSpec spec = smallDem();
    spec.crs = "+proj=tmerc +lat_0=0 +lon_0=15 +k=0.9996 +x_0=500000 +y_0=0 +datum=WGS84 +units=" + units +
               " +no_defs";
    writeTiff(folder.file(units + ".tif"), spec);
    const GdalRaster raster = openGdalRaster(folder.file(units + ".tif"), 1);
    EXPECT_NEAR(raster.cellWidth[0], 10.0 * metres, 1e-12);
    EXPECT_NEAR(raster.cellHeight[14], 7.5 * metres, 1e-12);
    EXPECT_TRUE(raster.warnings.empty());
  }
}

TEST(GdalRasterTest, GeographicCellSizesFollowTheEllipsoidRowByRow)
{
  const TempFolder folder;
  struct Case
  {
    std::string crs;
    double a, inverseFlattening;
    std::string ellipsoid;
  };
  for (const Case& c : {Case{"EPSG:4326", 6378137.0, 298.257223563, "WGS 84"},
                        Case{"EPSG:4230", 6378388.0, 297.0, "International 1924"}})
  {
    SCOPED_TRACE(c.crs);
    TiffSpec spec = smallDem(40, 30);
    const double gt[6] = {10.0, 0.001, 0.0, 50.0, 0.0, -0.002};
    std::copy(gt, gt + 6, spec.geoTransform);
    spec.crs = c.crs;
    writeTiff(folder.file("geo.tif"), spec);
    const GdalRaster raster = openGdalRaster(folder.file("geo.tif"), 1);
    for (int64_t row : {0, 1, 15, 29})
      expectEllipsoidSizes(raster, c.a, c.inverseFlattening, row);
    EXPECT_GT(raster.cellWidth[29], raster.cellWidth[0]);  // wider towards the equator
    EXPECT_NE(raster.cellSizeNote.find(c.ellipsoid), std::string::npos) << raster.cellSizeNote;
    EXPECT_TRUE(raster.warnings.empty());
  }
}

TEST(GdalRasterTest, NoCrsIsTakenAsMetresWithAWarning)
{
  const TempFolder folder;
  TiffSpec spec = smallDem();
  spec.crs.clear();
  writeTiff(folder.file("nocrs.tif"), spec);
  const GdalRaster raster = openGdalRaster(folder.file("nocrs.tif"), 1);
  EXPECT_TRUE(raster.crsWkt.empty());
  EXPECT_EQ(raster.cellWidth[0], 10.0);
  EXPECT_EQ(raster.cellHeight[0], 7.5);
  ASSERT_EQ(raster.warnings.size(), 1u);
  EXPECT_NE(raster.warnings[0].find("no CRS"), std::string::npos) << raster.warnings[0];
}

TEST(GdalRasterTest, AGivenCrsReplacesTheFiles)
{
  const TempFolder folder;
  TiffSpec spec = smallDem();
  spec.crs = "EPSG:4326";
  const double gt[6] = {10.0, 0.001, 0.0, 50.0, 0.0, -0.002};
  std::copy(gt, gt + 6, spec.geoTransform);
  writeTiff(folder.file("geo.tif"), spec);
  const std::string utm = wktOf("EPSG:32633");
  const GdalRaster projected = openGdalRaster(folder.file("geo.tif"), 1, utm);
  EXPECT_EQ(projected.crsWkt, utm);
  EXPECT_EQ(projected.cellWidth[0], 0.001);
  EXPECT_EQ(projected.cellHeight[0], 0.002);
  const GdalRaster none = openGdalRaster(folder.file("geo.tif"), 1, "");
  EXPECT_TRUE(none.crsWkt.empty());
  ASSERT_EQ(none.warnings.size(), 1u);
  EXPECT_NE(none.warnings[0].find("no CRS"), std::string::npos);
}

TEST(GdalRasterTest, NoDataScaleAndOffsetAreTheBands)
{
  const TempFolder folder;
  TiffSpec spec = smallDem();
  spec.type = GDT_Int16;
  spec.noData = -32768.0;
  spec.scale = 0.5;
  spec.offset = 100.0;
  spec.bands = 2;
  writeTiff(folder.file("scaled.tif"), spec);
  const GdalRaster raster = openGdalRaster(folder.file("scaled.tif"), 1);
  EXPECT_EQ(raster.dataType, GDT_Int16);
  ASSERT_TRUE(raster.noData.has_value());
  EXPECT_EQ(*raster.noData, -32768.0);
  EXPECT_EQ(raster.scale, 0.5);
  EXPECT_EQ(raster.offset, 100.0);
  ASSERT_EQ(raster.warnings.size(), 1u);
  EXPECT_NE(raster.warnings[0].find("elevation = 0.5 x value + 100"), std::string::npos) << raster.warnings[0];
  EXPECT_EQ(openGdalRaster(folder.file("scaled.tif"), 2).band, 2);
}

TEST(GdalRasterTest, EachBadInputIsRefusedWithItsReason)
{
  const TempFolder folder;
  writeTiff(folder.file("good.tif"), smallDem());
  TiffSpec nogeo = smallDem();
  nogeo.georeferenced = false;
  nogeo.crs.clear();
  writeTiff(folder.file("nogeo.tif"), nogeo);
  TiffSpec rotated = smallDem();
  rotated.geoTransform[2] = 0.5;
  writeTiff(folder.file("rotated.tif"), rotated);
  TiffSpec southUp = smallDem();
  southUp.geoTransform[5] = 7.5;
  writeTiff(folder.file("southup.tif"), southUp);
  TiffSpec huge;  // 50,000^2 cells, none written
  huge.width = huge.height = 50000;
  huge.type = GDT_Byte;
  huge.sparse = true;
  writeTiff(folder.file("huge.tif"), huge);
  TiffSpec complex = smallDem();
  complex.type = GDT_CInt16;
  complex.values.clear();
  writeTiff(folder.file("complex.tif"), complex);
  TiffSpec polar = smallDem();
  polar.crs = "EPSG:4326";
  const double gt[6] = {10.0, 0.1, 0.0, 90.5, 0.0, -0.1};
  std::copy(gt, gt + 6, polar.geoTransform);
  writeTiff(folder.file("polar.tif"), polar);

  struct Case
  {
    std::string file;
    int band;
    std::string expected;
  };
  for (const Case& c : {Case{"missing.tif", 1, "Could not open"}, Case{"good.tif", 2, "there is no band 2"},
                        Case{"good.tif", 0, "there is no band 0"}, Case{"nogeo.tif", 1, "no georeference"},
                        Case{"rotated.tif", 1, "rotated or sheared"}, Case{"southup.tif", 1, "not stored north-up"},
                        Case{"huge.tif", 1, "more than the limit of 2,147,483,647"},
                        Case{"complex.tif", 1, "complex numbers"}, Case{"polar.tif", 1, "beyond the poles"}})
  {
    const std::string message = refusal(folder.file(c.file), c.band);
    EXPECT_NE(message.find(c.expected), std::string::npos)
      << c.file << " band " << c.band << ": expected \"" << c.expected << "\", got \"" << message << "\"";
  }

  // A geographic CRS in grads.
  const std::string grads =
    "GEOGCS[\"WGS 84 in grads\",DATUM[\"WGS_1984\",SPHEROID[\"WGS 84\",6378137,298.257223563]],"
    "PRIMEM[\"Greenwich\",0],UNIT[\"grad\",0.015707963267949]]";
  try
  {
    openGdalRaster(folder.file("good.tif"), 1, grads);
    ADD_FAILURE() << "a geographic CRS in grads was taken";
  }
  catch (const InvalidInput& e)
  {
    EXPECT_NE(std::string(e.what()).find("is not in degrees"), std::string::npos) << e.what();
  }
}
