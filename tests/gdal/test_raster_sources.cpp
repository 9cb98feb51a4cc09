// The window sources: elevations with nodata (compared in the band's own type), scale and offset,
// NaN, infinities and values beyond float32, on the bands read in place (Float32, Int16) and through
// float64 (Float64, Int32); readStrided into a larger array; scan's counts, cancel and progress;
// reads from several threads at once; the code source's decoding and counts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <thread>
#include <vector>

#include <cpl_error.h>

#include "core/errors.h"
#include "gdal/gdal_raster.h"
#include "gdal/raster_sources.h"
#include "gdal_test_support.h"

using namespace gpugeo;
using namespace gpugeo::gdal;
using namespace gpugeo::gdal::test;
using gpugeo::dem::tiled::Window;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool sameFloat(float a, float b)
{
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

// A raster of 7 x 5 cells whose cell i holds 10 + i, with `special` values put at cells 0, 1, ...
TiffSpec cells(GDALDataType type, const std::vector<double>& special, std::optional<double> noData = std::nullopt)
{
  std::vector<double> values;
  for (int i = 0; i < 35; ++i)
    values.push_back(10.0 + i);
  std::copy(special.begin(), special.end(), values.begin());
  return tiffOf(7, 5, type, values, noData);
}

std::vector<float> readAll(const GdalElevationSource& source)
{
  std::vector<float> out(size_t(source.width() * source.height()));
  source.read(Window{0, 0, source.width(), source.height()}, out.data());
  return out;
}

void expectCells(const std::vector<float>& got, const std::vector<float>& expected)
{
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(sameFloat(got[i], expected[i])) << "cell " << i << ": " << got[i] << " vs " << expected[i];
}

}  // namespace

TEST(GdalElevationSourceTest, Float32NoDataNanAndInfinitiesBecomeNan)
{
  const TempFolder folder;
  writeTiff(folder.file("f32.tif"), cells(GDT_Float32, {-9999.0, kNaN, kInf, -kInf, 1.5}, -9999.0));
  const GdalElevationSource source(openGdalRaster(folder.file("f32.tif"), 1));
  std::vector<float> expected;
  for (int i = 0; i < 35; ++i)
    expected.push_back(i < 4 ? std::numeric_limits<float>::quiet_NaN() : i == 4 ? 1.5f : float(10 + i));
  expectCells(readAll(source), expected);

  const ElevationCounts counts = source.scan(3, 2, nullptr, RunControl());
  EXPECT_EQ(counts.valid, 31);
  EXPECT_EQ(counts.notFinite, 2);  // the infinities; nodata and NaN are not counted
  EXPECT_EQ(counts.minimum, 1.5);
  EXPECT_EQ(counts.maximum, 44.0);
  EXPECT_EQ(counts.roundedToNoData, 0);
}

// A float32 band's nodata tag "1.1" matches its value 1.1f; a float64 band's only 1.1 itself, and
// a value that rounds to float32(1.1) is counted as rounded onto nodata.
TEST(GdalElevationSourceTest, NoDataIsComparedInTheBandsType)
{
  const TempFolder folder;
  writeTiff(folder.file("f32.tif"), cells(GDT_Float32, {1.1}, 1.1));
  const std::vector<float> f32 = readAll(GdalElevationSource(openGdalRaster(folder.file("f32.tif"), 1)));
  EXPECT_TRUE(std::isnan(f32[0])) << f32[0];

  writeTiff(folder.file("f64.tif"), cells(GDT_Float64, {1.1, double(1.1f)}, 1.1));
  const GdalElevationSource source(openGdalRaster(folder.file("f64.tif"), 1));
  const std::vector<float> f64 = readAll(source);
  EXPECT_TRUE(std::isnan(f64[0])) << f64[0];
  EXPECT_EQ(f64[1], 1.1f);
  EXPECT_EQ(source.scan(7, 5, nullptr, RunControl()).roundedToNoData, 1);
}

TEST(GdalElevationSourceTest, ValuesBeyondFloat32BecomeNanAndAreCounted)
{
  const TempFolder folder;
  writeTiff(folder.file("f64.tif"), cells(GDT_Float64, {1e39, -1e39, kInf, 3.5e38}));
  const GdalElevationSource source(openGdalRaster(folder.file("f64.tif"), 1));
  const std::vector<float> z = readAll(source);
  EXPECT_TRUE(std::isnan(z[0]) && std::isnan(z[1]) && std::isnan(z[2]) && std::isnan(z[3]));
  EXPECT_EQ(z[4], 14.0f);
  const ElevationCounts counts = source.scan(4, 4, nullptr, RunControl());
  EXPECT_EQ(counts.notFinite, 4);
  EXPECT_EQ(counts.valid, 31);
}

// Scale and offset on a band read in place (Int16) and on one read through float64 (Int32): the
// nodata value compared before scaling; a scaled value past float32 is counted.
TEST(GdalElevationSourceTest, ScaleAndOffsetApplyAfterNoData)
{
  const TempFolder folder;
  for (const GDALDataType type : {GDT_Int16, GDT_Int32})
  {
    SCOPED_TRACE(GDALGetDataTypeName(type));
    TiffSpec spec = cells(type, {-32768.0, 3.0}, -32768.0);
    spec.scale = 0.5;
    spec.offset = 100.0;
    writeTiff(folder.file("scaled.tif"), spec);
    const GdalElevationSource source(openGdalRaster(folder.file("scaled.tif"), 1));
    const std::vector<float> z = readAll(source);
    EXPECT_TRUE(std::isnan(z[0]));
    EXPECT_EQ(z[1], 101.5f);
    EXPECT_EQ(z[34], float(44 * 0.5 + 100.0));
  }
  TiffSpec huge = cells(GDT_Float32, {3e38});
  huge.scale = 10.0;
  writeTiff(folder.file("huge.tif"), huge);
  const GdalElevationSource source(openGdalRaster(folder.file("huge.tif"), 1));
  EXPECT_TRUE(std::isnan(readAll(source)[0]));
  EXPECT_EQ(source.scan(7, 5, nullptr, RunControl()).notFinite, 1);
}

// A window read into its place in a larger array: the cells around it untouched, on bands read in
// place and through float64; the same cells as read() gives.
TEST(GdalElevationSourceTest, ReadStridedPutsTheWindowInPlace)
{
  const TempFolder folder;
  for (const GDALDataType type : {GDT_Float32, GDT_Int16, GDT_Float64, GDT_UInt32})
  {
    SCOPED_TRACE(GDALGetDataTypeName(type));
    writeTiff(folder.file("dem.tif"), cells(type, {7.0, 0.0}, 0.0));
    const GdalElevationSource source(openGdalRaster(folder.file("dem.tif"), 1));
    const Window window{2, 1, 4, 3};
    std::vector<float> direct(size_t(window.cells()));
    source.read(window, direct.data());
    const int64_t stride = 9;
    std::vector<float> big(size_t(stride * 6), -1.0f);
    source.readStrided(window, big.data() + stride + 3, stride);
    for (int64_t y = 0; y < 6; ++y)
      for (int64_t x = 0; x < stride; ++x)
      {
        const float got = big[size_t(y * stride + x)];
        if (y >= 1 && y < 4 && x >= 3 && x < 7)
        {
          const float want = direct[size_t((y - 1) * window.width + (x - 3))];
          EXPECT_TRUE(sameFloat(got, want)) << "(" << x << ", " << y << ")";
          EXPECT_EQ(got, float(10 + (y - 1 + window.y0) * 7 + (x - 3 + window.x0))) << "(" << x << ", " << y << ")";
        }
        else
          EXPECT_EQ(got, -1.0f) << "(" << x << ", " << y << ") outside the window";
      }
  }
}

TEST(GdalElevationSourceTest, ScanReadsIntoZCancelsAndReportsProgress)
{
  const TempFolder folder;
  std::vector<double> values;
  for (int i = 0; i < 2000; ++i)
    values.push_back(i % 17 == 0 ? -1.0 : std::sin(i * 0.1) * 100.0);
  const TiffSpec spec = tiffOf(50, 40, GDT_Float32, values, -1.0);
  writeTiff(folder.file("dem.tif"), spec);
  const GdalElevationSource source(openGdalRaster(folder.file("dem.tif"), 1));
  const std::vector<float> whole = readAll(source);

  std::vector<float> z(2000, 0.0f);
  std::vector<double> progress;
  const ElevationCounts counts = source.scan(16, 12, z.data(), RunControl(), [&](double f) { progress.push_back(f); });
  expectCells(z, whole);
  EXPECT_EQ(counts.valid, 2000 - 118);
  ASSERT_EQ(progress.size(), 4u);  // rows of windows: 12, 24, 36, 40
  EXPECT_DOUBLE_EQ(progress[0], 12.0 / 40.0);
  EXPECT_EQ(progress.back(), 1.0);

  RunControl cancel;
  cancel.canceled = [] { return true; };
  EXPECT_THROW(source.scan(16, 16, nullptr, cancel), Canceled);

  TiffSpec empty = spec;
  std::fill(empty.values.begin(), empty.values.end(), -1.0);
  writeTiff(folder.file("empty.tif"), empty);
  const ElevationCounts none =
    GdalElevationSource(openGdalRaster(folder.file("empty.tif"), 1)).scan(50, 40, nullptr, RunControl());
  EXPECT_EQ(none.valid, 0);
  EXPECT_EQ(none.minimum, 0.0);
  EXPECT_EQ(none.maximum, 0.0);
}

// A file cut in half opens but cannot be read: the error names the rows (and the columns of a window
// narrower than the raster) and the file.
TEST(GdalElevationSourceTest, AReadErrorNamesTheCells)
{
  const TempFolder folder;
  const std::string path = folder.file("half.tif");
  writeTiff(path, tiffOf(300, 200, GDT_Float32, std::vector<double>(300 * 200, 5.0)));
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  const GdalElevationSource source(openGdalRaster(path, 1));
  std::vector<float> z(size_t(300 * 200));
  const auto messageOf = [&](const Window& window) {
    CPLPushErrorHandler(CPLQuietErrorHandler);
    std::string message;
    try
    {
      source.read(window, z.data());
    }
    catch (const InvalidInput& e)
    {
      message = e.what();
    }
    CPLPopErrorHandler();
    return message;
  };
  EXPECT_NE(messageOf(Window{0, 0, 300, 200}).find("Could not read rows 0 to 199 of " + path + ": "), std::string::npos);
  EXPECT_NE(messageOf(Window{10, 150, 20, 50}).find("Could not read columns 10 to 29, rows 150 to 199 of " + path),
            std::string::npos);
}

// Tiles read from several threads at once give the cells one thread reads.
TEST(GdalElevationSourceTest, ReadsFromSeveralThreadsAgree)
{
  const TempFolder folder;
  std::vector<double> values;
  for (int64_t i = 0; i < 300 * 280; ++i)
    values.push_back(double(i % 3001));
  const TiffSpec spec = tiffOf(300, 280, GDT_Int16, values);
  writeTiff(folder.file("dem.tif"), spec);
  const GdalElevationSource source(openGdalRaster(folder.file("dem.tif"), 1));
  const std::vector<float> whole = readAll(source);
  std::vector<float> tiled(whole.size(), -1.0f);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int64_t y0 = 0; y0 < spec.height; y0 += 37)
        for (int64_t x0 = 37 * t; x0 < spec.width; x0 += 4 * 37)
        {
          const Window window{x0, y0, std::min<int64_t>(37, spec.width - x0), std::min<int64_t>(37, spec.height - y0)};
          source.readStrided(window, tiled.data() + y0 * spec.width + x0, spec.width);
        }
    });
  for (std::thread& thread : threads)
    thread.join();
  expectCells(tiled, whole);
}

namespace {

// An encoding of the directions 0..7 as 1, 2, 4, ..., 128, no flow as 0, nodata as 255; and the
// codes 0..7 themselves as the other.
GdalCodeSource::Table powersOfTwo()
{
  GdalCodeSource::Table table;
  table.fill(-1);
  for (int d = 0; d < 8; ++d)
    table[size_t(1 << d)] = int16_t(d);
  table[0] = 8;
  table[255] = 255;
  return table;
}

GdalCodeSource::Table zeroToSeven()
{
  GdalCodeSource::Table table;
  table.fill(-1);
  for (int d = 0; d < 8; ++d)
    table[size_t(d)] = int16_t(d);
  table[8] = 8;
  table[255] = 255;
  return table;
}

}  // namespace

TEST(GdalCodeSourceTest, DecodesThroughTheTableAndCountsWhatItLacks)
{
  const TempFolder folder;
  writeTiff(folder.file("codes.tif"),
            tiffOf(6, 4, GDT_Byte, {1, 2, 4, 8, 16, 32, 64, 128, 0, 255, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 5, 1}, 255.0));
  const GdalCodeSource source(openGdalRaster(folder.file("codes.tif"), 1), powersOfTwo(), zeroToSeven());
  std::vector<uint8_t> codes(24);
  source.read(Window{0, 0, 6, 4}, codes.data());
  const std::vector<uint8_t> expected = {0, 1, 2, 3, 4, 5, 6, 7, 8, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 0};
  EXPECT_EQ(codes, expected);

  std::vector<uint8_t> scanned(24, 77);
  const GdalCodeSource::Counts counts = source.scan(scanned.data(), RunControl());
  EXPECT_EQ(scanned, expected);
  EXPECT_EQ(counts.valid, 21);
  EXPECT_EQ(counts.invalid, 2);
  EXPECT_EQ(counts.firstInvalid, 3.0);
  EXPECT_EQ(counts.firstInvalidCell, 10);
  EXPECT_FALSE(counts.otherTableFits);  // 16, 32, 64, 128 are not 0..7 codes

  // A window in place in a larger array.
  std::vector<uint8_t> big(4 * 10, 99);
  source.readStrided(Window{1, 1, 3, 2}, big.data() + 10 + 2, 10);
  for (int64_t y = 0; y < 4; ++y)
    for (int64_t x = 0; x < 10; ++x)
    {
      const bool inside = y >= 1 && y < 3 && x >= 2 && x < 5;
      const uint8_t want = inside ? expected[size_t(y * 6 + (x - 1))] : 99;
      EXPECT_EQ(big[size_t(y * 10 + x)], want) << "(" << x << ", " << y << ")";
    }
}

// A band that is not Byte: NaN and its nodata value decode to 255, as the in-memory reader takes
// them; a value that is not a whole number is one the table lacks.
TEST(GdalCodeSourceTest, NanAndNoDataAreNoDataOnAnyBand)
{
  const TempFolder folder;
  writeTiff(folder.file("codes.tif"), tiffOf(5, 1, GDT_Float32, {kNaN, -1.0, 1.5, 2.0, 7.0}, -1.0));
  const GdalCodeSource source(openGdalRaster(folder.file("codes.tif"), 1), zeroToSeven(), powersOfTwo());
  std::vector<uint8_t> codes(5);
  const GdalCodeSource::Counts counts = source.scan(codes.data(), RunControl());
  EXPECT_EQ(codes, (std::vector<uint8_t>{255, 255, 255, 2, 7}));
  EXPECT_EQ(counts.valid, 2);
  EXPECT_EQ(counts.invalid, 1);
  EXPECT_EQ(counts.firstInvalid, 1.5);
  EXPECT_EQ(counts.firstInvalidCell, 2);
  EXPECT_EQ(GdalCodeSource::decode(zeroToSeven(), kNaN), 255);
  EXPECT_EQ(GdalCodeSource::decode(zeroToSeven(), 256.0), -1);
  EXPECT_EQ(GdalCodeSource::decode(zeroToSeven(), -0.0), 0);
}
