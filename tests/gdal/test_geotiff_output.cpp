// The GeoTIFF outputs: round trips of the DEM tools' outputs (float32 with NaN as nodata, uint8 codes,
// int64 counts as Int32 and as Float64) written window by window from several threads, with the
// input's non-square geotransform and CRS; the creation options geotiff_writer.cpp has always set
// (blocks, DEFLATE for integers (no predictor) and small floating rasters (the floating-point one), none for large
// floating ones, BigTIFF only when needed); finish, discard and unfinished writers; the COG rewrite.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <ogr_spatialref.h>

#include "core/errors.h"
#include "gdal/gdal_raster.h"
#include "gdal/geotiff_output.h"
#include "gdal_test_support.h"

using namespace gpugeo;
using namespace gpugeo::gdal;
using namespace gpugeo::gdal::test;
using gpugeo::dem::tiled::Window;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// What GDAL says of a written file.
struct Layout
{
  std::string compression, predictor, layout;
  int blockX = 0, blockY = 0, overviews = 0;
  GDALDataType type = GDT_Unknown;
  std::optional<double> noData;
  double geoTransform[6] = {};
  std::string wkt;
  bool bigTiff = false;
};

Layout layoutOf(const std::string& path)
{
  Layout out;
  GDALDatasetH dataset = GDALOpen(path.c_str(), GA_ReadOnly);
  EXPECT_NE(dataset, nullptr) << path;
  if (!dataset)
    return out;
  const auto item = [&](const char* name) {
    const char* value = GDALGetMetadataItem(dataset, name, "IMAGE_STRUCTURE");
    return std::string(value ? value : "");
  };
  out.compression = item("COMPRESSION");
  out.predictor = item("PREDICTOR");
  out.layout = item("LAYOUT");
  GDALRasterBandH band = GDALGetRasterBand(dataset, 1);
  GDALGetBlockSize(band, &out.blockX, &out.blockY);
  out.overviews = GDALGetOverviewCount(band);
  out.type = GDALGetRasterDataType(band);
  int hasNoData = 0;
  const double noData = GDALGetRasterNoDataValue(band, &hasNoData);
  if (hasNoData)
    out.noData = noData;
  GDALGetGeoTransform(dataset, out.geoTransform);
  out.wkt = GDALGetProjectionRef(dataset);
  GDALClose(dataset);
  std::ifstream file(path, std::ios::binary);
  char header[4] = {};
  file.read(header, 4);
  out.bigTiff = header[2] == 43;  // 42: classic TIFF
  return out;
}

// The input the outputs copy: 300 x 260 cells of 10 x 7.5 m in UTM 33N.
GdalRaster input(const TempFolder& folder, int64_t width = 300, int64_t height = 260)
{
  writeTiff(folder.file("input.tif"), tiffOf(width, height, GDT_Float32, std::vector<double>(size_t(width * height), 1.0)));
  return openGdalRaster(folder.file("input.tif"), 1);
}

// Writes `cells` (the raster's, row-major) through a GeoTiffSink in windows of 64 x 48, four threads
// taking every fourth window.
template <typename T>
void writeInWindows(GeoTiffSink<T>& sink, const std::vector<T>& cells, int64_t width, int64_t height)
{
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      int64_t index = 0;
      for (int64_t y0 = 0; y0 < height; y0 += 48)
        for (int64_t x0 = 0; x0 < width; x0 += 64)
        {
          if (index++ % 4 != t)
            continue;
          const Window window{x0, y0, std::min<int64_t>(64, width - x0), std::min<int64_t>(48, height - y0)};
          std::vector<T> in(size_t(window.cells()));
          for (int64_t y = 0; y < window.height; ++y)
            for (int64_t x = 0; x < window.width; ++x)
              in[size_t(y * window.width + x)] = cells[size_t((y0 + y) * width + x0 + x)];
          sink.write(window, in.data());
        }
    });
  for (std::thread& thread : threads)
    thread.join();
}

bool sameCrs(const std::string& a, const std::string& b)
{
  OGRSpatialReference sa, sb;
  return sa.SetFromUserInput(a.c_str()) == OGRERR_NONE && sb.SetFromUserInput(b.c_str()) == OGRERR_NONE &&
         sa.IsSame(&sb);
}

}  // namespace

TEST(GeoTiffOutputTest, Float32WindowsFromThreadsRoundTripWithNanAsNoData)
{
  const TempFolder folder;
  const GdalRaster like = input(folder);
  std::vector<float> cells(size_t(like.width * like.height));
  for (size_t i = 0; i < cells.size(); ++i)
    cells[i] = i % 13 == 0 ? kNaN : float(i) * 0.25f;
  {
    GeoTiffWriter writer(folder.file("filled.tif"), like, GDT_Float32, -9999.0);
    GeoTiffSink<float> sink(writer, nanAsNoData(-9999.0f));
    writeInWindows(sink, cells, like.width, like.height);
    EXPECT_EQ(writer.finish(), folder.file("filled.tif"));
  }
  const std::vector<double> back = readTiff(folder.file("filled.tif"));
  ASSERT_EQ(back.size(), cells.size());
  for (size_t i = 0; i < cells.size(); ++i)
    ASSERT_EQ(back[i], std::isnan(cells[i]) ? -9999.0 : double(cells[i])) << "cell " << i;

  const Layout layout = layoutOf(folder.file("filled.tif"));
  EXPECT_EQ(layout.type, GDT_Float32);
  ASSERT_TRUE(layout.noData.has_value());
  EXPECT_EQ(*layout.noData, -9999.0);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(layout.geoTransform[i], like.geoTransform[i]) << i;  // 10 x 7.5: not square
  EXPECT_TRUE(sameCrs(layout.wkt, like.crsWkt)) << layout.wkt;
  // A small floating raster (up to kSmallRaster cells): DEFLATE with the floating-point predictor,
  // blocks of 256 (the raster's side rounded up to 16 where smaller).
  EXPECT_EQ(layout.compression, "DEFLATE");
  EXPECT_EQ(layout.predictor, "3");
  EXPECT_EQ(layout.blockX, 256);
  EXPECT_EQ(layout.blockY, 256);
  EXPECT_FALSE(layout.bigTiff);
}

TEST(GeoTiffOutputTest, CodesAndCountsAsTheDemToolsWriteThem)
{
  const TempFolder folder;
  const GdalRaster like = input(folder);
  const int64_t n = like.width * like.height;
  std::vector<uint8_t> codes(static_cast<size_t>(n));
  std::vector<int64_t> counts(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
  {
    codes[size_t(i)] = uint8_t(i % 10 == 0 ? 255 : 1 << (i % 8));
    counts[size_t(i)] = i % 10 == 0 ? 0 : (i * 7919) % 100000 + 1;
  }
  {
    GeoTiffWriter directions(folder.file("directions.tif"), like, GDT_Byte, 255.0);
    GeoTiffSink<uint8_t> sink(directions, [](const uint8_t* in, int64_t count, void* buffer) {
      std::copy(in, in + count, static_cast<uint8_t*>(buffer));
    });
    writeInWindows(sink, codes, like.width, like.height);
    directions.finish();
  }
  // Counts as the accumulation writes them: Int32 (Float64 past 2^31 cells), 0 as nodata -1; the area
  // as Float64.
  for (const GDALDataType type : {GDT_Int32, GDT_Float64})
  {
    GeoTiffWriter writer(folder.file("cells.tif"), like, type, -1.0);
    GeoTiffSink<int64_t> sink(writer, [type](const int64_t* in, int64_t count, void* buffer) {
      for (int64_t i = 0; i < count; ++i)
        if (type == GDT_Int32)
          static_cast<int32_t*>(buffer)[i] = in[i] > 0 ? int32_t(in[i]) : -1;
        else
          static_cast<double*>(buffer)[i] = in[i] > 0 ? double(in[i]) : -1.0;
    });
    writeInWindows(sink, counts, like.width, like.height);
    writer.finish();
    const std::vector<double> back = readTiff(folder.file("cells.tif"));
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(back[size_t(i)], counts[size_t(i)] > 0 ? double(counts[size_t(i)]) : -1.0)
        << GDALGetDataTypeName(type) << " cell " << i;
    const Layout layout = layoutOf(folder.file("cells.tif"));
    EXPECT_EQ(layout.type, type);
    EXPECT_EQ(layout.compression, "DEFLATE");
    EXPECT_EQ(layout.predictor, type == GDT_Int32 ? "" : "3");  // integers without a predictor
  }
  const std::vector<double> back = readTiff(folder.file("directions.tif"));
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(back[size_t(i)], double(codes[size_t(i)])) << "cell " << i;
  const Layout layout = layoutOf(folder.file("directions.tif"));
  EXPECT_EQ(layout.type, GDT_Byte);
  EXPECT_EQ(layout.compression, "DEFLATE");
  EXPECT_EQ(layout.predictor, "");  // codes: no predictor
  EXPECT_EQ(layout.blockX, 256);
}

// Rows written band by band; a large floating raster is written plain, a raster smaller than a
// block gets blocks of its size rounded up to 16.
TEST(GeoTiffOutputTest, BlocksAndCompressionFollowTheRastersTypeAndSize)
{
  const TempFolder folder;
  const double gt[6] = {0.0, 1.0, 0.0, 0.0, 0.0, -1.0};
  {
    GeoTiffWriter writer(folder.file("large.tif"), 1100, 1000, gt, "", GDT_Float32, std::nullopt);
    std::vector<float> rows(1100 * 256);
    for (int64_t row0 = 0; row0 < 1000; row0 += 256)
    {
      const int64_t count = std::min<int64_t>(256, 1000 - row0);
      for (int64_t i = 0; i < count * 1100; ++i)
        rows[size_t(i)] = float(row0 * 1100 + i);
      writer.writeRows(row0, count, rows.data());
    }
    writer.finish();
  }
  const Layout large = layoutOf(folder.file("large.tif"));
  EXPECT_EQ(large.compression, "");
  EXPECT_EQ(large.blockX, 256);
  EXPECT_EQ(large.blockY, 256);
  EXPECT_FALSE(large.noData.has_value());
  EXPECT_TRUE(large.wkt.empty());
  const std::vector<double> back = readTiff(folder.file("large.tif"));
  EXPECT_EQ(back[0], 0.0);
  EXPECT_EQ(back[1099999], 1099999.0);

  {
    GeoTiffWriter writer(folder.file("small.tif"), 20, 33, gt, "", GDT_Int16, std::nullopt);
    std::vector<int16_t> values(20 * 33, 7);
    writer.writeRows(0, 33, values.data());
    writer.finish();
  }
  const Layout small = layoutOf(folder.file("small.tif"));
  EXPECT_EQ(small.blockX, 32);
  EXPECT_EQ(small.blockY, 48);
  EXPECT_EQ(small.compression, "DEFLATE");
}

// BIGTIFF=IF_SAFER: a raster that could pass 4 GB is made a BigTIFF from the start.
TEST(GeoTiffOutputTest, ALargeRasterIsABigTiff)
{
  const TempFolder folder;
  const double gt[6] = {0.0, 1.0, 0.0, 0.0, 0.0, -1.0};
  GeoTiffWriter writer(folder.file("huge.tif"), 50000, 50000, gt, "", GDT_Byte, 255.0);
  const std::vector<uint8_t> row(50000, 1);
  writer.writeRows(0, 1, row.data());  // flushed: the header is on disk
  std::ifstream file(folder.file("huge.tif"), std::ios::binary);
  char header[4] = {};
  file.read(header, 4);
  EXPECT_EQ(header[2], 43) << "not a BigTIFF";
  writer.discard();
  EXPECT_FALSE(std::filesystem::exists(folder.file("huge.tif")));
}

TEST(GeoTiffOutputTest, AnUnfinishedWriterLeavesNoFile)
{
  const TempFolder folder;
  const GdalRaster like = input(folder);
  {
    GeoTiffWriter writer(folder.file("dropped.tif"), like, GDT_Float32, -9999.0);
    EXPECT_TRUE(std::filesystem::exists(folder.file("dropped.tif")));
  }
  EXPECT_FALSE(std::filesystem::exists(folder.file("dropped.tif")));
  GeoTiffWriter writer(folder.file("discarded.tif"), like, GDT_Float32, -9999.0);
  writer.discard();
  EXPECT_FALSE(std::filesystem::exists(folder.file("discarded.tif")));
  EXPECT_THROW(writer.finish(), WriteFailed);
  std::vector<float> cells(16, 1.0f);
  EXPECT_THROW(writer.writeWindow(0, 0, 4, 4, cells.data()), WriteFailed);

  EXPECT_THROW(GeoTiffWriter(folder.file("out.png"), like, GDT_Float32, std::nullopt), InvalidInput);
  EXPECT_THROW(GeoTiffWriter(folder.file("no/such/folder/out.tif"), like, GDT_Float32, std::nullopt), WriteFailed);
}

TEST(GeoTiffOutputTest, CloudOptimizedRewriteKeepsTheCells)
{
  const TempFolder folder;
  const GdalRaster like = input(folder, 600, 500);
  std::vector<int32_t> cells(size_t(600 * 500));
  for (size_t i = 0; i < cells.size(); ++i)
    cells[i] = int32_t(i % 1000) - 1;
  {
    GeoTiffWriter writer(folder.file("cog.tif"), like, GDT_Int32, -1.0);
    writer.writeRows(0, 500, cells.data());
    makeCloudOptimized(writer.finish());
  }
  EXPECT_FALSE(std::filesystem::exists(folder.file("cog.tif.cog.tif")));
  const Layout layout = layoutOf(folder.file("cog.tif"));
  EXPECT_EQ(layout.layout, "COG");
  EXPECT_EQ(layout.compression, "DEFLATE");
  EXPECT_EQ(layout.predictor, "");  // integers without the predictor, as the plain GeoTIFF
  EXPECT_EQ(layout.blockX, GeoTiffWriter::kBlockSizeForCog);
  EXPECT_GE(layout.overviews, 1);
  ASSERT_TRUE(layout.noData.has_value());
  EXPECT_EQ(*layout.noData, -1.0);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(layout.geoTransform[i], like.geoTransform[i]) << i;
  const std::vector<double> back = readTiff(folder.file("cog.tif"));
  for (size_t i = 0; i < cells.size(); ++i)
    ASSERT_EQ(back[i], double(cells[i])) << "cell " << i;
  EXPECT_THROW(makeCloudOptimized(folder.file("missing.tif")), WriteFailed);
  // Floating rasters keep the floating-point predictor.
  std::vector<float> heights(cells.begin(), cells.end());
  {
    GeoTiffWriter writer(folder.file("cog_float.tif"), like, GDT_Float32, -1.0);
    writer.writeRows(0, 500, heights.data());
    makeCloudOptimized(writer.finish());
  }
  EXPECT_EQ(layoutOf(folder.file("cog_float.tif")).predictor, "3");
}

// The user's creation options: QGIS's "KEY=VALUE|KEY=VALUE" (or white space) parsed; what GDAL's
// GeoTIFF driver does not know, or its COG driver with COG, refused with GDAL's words, and items
// without a key or '='.
TEST(GeoTiffOutputTest, CreationOptionsAreParsedAndCheckedAgainstTheirDriver)
{
  EXPECT_TRUE(outputFormat("", false).creationOptions.empty());
  EXPECT_TRUE(outputFormat(" | ", true).creationOptions.empty());
  EXPECT_TRUE(outputFormat("", true).cog);
  const OutputFormat format = outputFormat("COMPRESS=ZSTD|PREDICTOR=2  ZSTD_LEVEL=3", false);
  EXPECT_EQ(format.creationOptions, (std::vector<std::string>{"COMPRESS=ZSTD", "PREDICTOR=2", "ZSTD_LEVEL=3"}));
  EXPECT_FALSE(format.cog);
  for (const char* bad : {"FOO=BAR", "COMPRESS=NOPE", "COMPRESS", "=DEFLATE", "TILED=YES|BLOCKXSIZE"})
    EXPECT_THROW(outputFormat(bad, false), InvalidInput) << bad;
  try
  {
    outputFormat("COMPRESS=DEFLATE|NOT_AN_OPTION=1", false);
    ADD_FAILURE() << "an unknown option was taken";
  }
  catch (const InvalidInput& e)
  {
    EXPECT_NE(std::string(e.what()).find("NOT_AN_OPTION"), std::string::npos) << e.what();
  }
  // The COG driver's options with COG: LEVEL is its, ZLEVEL the GeoTIFF driver's.
  EXPECT_NO_THROW(outputFormat("COMPRESS=LZW|LEVEL=6", true));
  EXPECT_THROW(outputFormat("ZLEVEL=6", true), InvalidInput);
  EXPECT_THROW(outputFormat("LEVEL=6", false), InvalidInput);
}

// The options over the writer's own: another compression (floating rasters with their predictor where
// it takes one, integers without), none at all, a compressed large floating raster; the cells bit for bit in
// every case; COG with the COG driver's options, made by finish().
TEST(GeoTiffOutputTest, CreationOptionsGoOverTheWritersOwn)
{
  const TempFolder folder;
  const GdalRaster like = input(folder, 1100, 1000);  // past kSmallRaster: floating rasters plain by default
  std::vector<float> heights(size_t(1100 * 1000));
  std::vector<int32_t> labels(heights.size());
  for (size_t i = 0; i < heights.size(); ++i)
  {
    heights[i] = i % 97 == 0 ? kNaN : float(std::sin(double(i) * 1e-3) * 1000.0);
    labels[i] = int32_t(i / 5000) - 3;
  }
  const auto write = [&](const std::string& name, GDALDataType type, const void* cells, const OutputFormat& format) {
    GeoTiffWriter writer(folder.file(name), like, type, type == GDT_Float32 ? std::optional<double>() : -1.0, format);
    writer.writeRows(0, 1000, cells);
    return writer.finish();
  };
  const auto sameCells = [&](const std::string& path, GDALDataType type) {
    const std::vector<double> back = readTiff(path);
    ASSERT_EQ(back.size(), heights.size());
    for (size_t i = 0; i < back.size(); ++i)
    {
      const double expected = type == GDT_Float32 ? double(heights[i]) : double(labels[i]);
      if (std::isnan(expected))
        ASSERT_TRUE(std::isnan(back[i])) << path << " cell " << i;
      else
        ASSERT_EQ(back[i], expected) << path << " cell " << i;
    }
  };
  const std::string lzw = write("lzw.tif", GDT_Int32, labels.data(), outputFormat("COMPRESS=LZW", false));
  EXPECT_EQ(layoutOf(lzw).compression, "LZW");
  EXPECT_EQ(layoutOf(lzw).predictor, "");
  sameCells(lzw, GDT_Int32);
  const std::string plain = write("plain.tif", GDT_Int32, labels.data(), outputFormat("COMPRESS=NONE", false));
  EXPECT_EQ(layoutOf(plain).compression, "");
  sameCells(plain, GDT_Int32);
  const std::string floating =
    write("zstd.tif", GDT_Float32, heights.data(), outputFormat("COMPRESS=ZSTD|BLOCKXSIZE=512|BLOCKYSIZE=512", false));
  EXPECT_EQ(layoutOf(floating).compression, "ZSTD");
  EXPECT_EQ(layoutOf(floating).predictor, "3");
  EXPECT_EQ(layoutOf(floating).blockX, 512);
  sameCells(floating, GDT_Float32);
  const std::string cog = write("cog.tif", GDT_Float32, heights.data(), outputFormat("COMPRESS=LZW", true));
  EXPECT_FALSE(std::filesystem::exists(folder.file("cog.tif.cog.tif")));
  EXPECT_EQ(layoutOf(cog).layout, "COG");
  EXPECT_EQ(layoutOf(cog).compression, "LZW");
  sameCells(cog, GDT_Float32);
  // A bad option that only the writing shows (PREDICTOR=3 on integers) fails the writer, leaving no file.
  EXPECT_THROW(write("bad.tif", GDT_Int32, labels.data(), outputFormat("PREDICTOR=3", false)), WriteFailed);
  EXPECT_FALSE(std::filesystem::exists(folder.file("bad.tif")));
}
