#include "gdal/raster_sources.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include <cpl_error.h>

#include "core/errors.h"

namespace gpugeo::gdal {

namespace {

Dataset openForReading(const GdalRaster& raster)
{
  Dataset dataset = openQuietly(raster.path, GA_ReadOnly);
  if (!dataset)
    throw InvalidInput("Could not open " + raster.path + ": " + lastGdalError());
  return dataset;
}

// Reads the window of the raster's band as `type` into `out`, its rows `stride` cells apart, under
// gdalTileMutex().
void readWindow(GDALDatasetH dataset, const GdalRaster& raster, const dem::tiled::Window& window, void* out,
                GDALDataType type, int64_t stride)
{
  const GSpacing cellBytes = GDALGetDataTypeSizeBytes(type);
  std::lock_guard<std::mutex> lock(gdalTileMutex());
  CPLErrorReset();
  if (GDALRasterIOEx(GDALGetRasterBand(dataset, raster.band), GF_Read, int(window.x0), int(window.y0),
                     int(window.width), int(window.height), out, int(window.width), int(window.height), type,
                     cellBytes, cellBytes * stride, nullptr) != CE_None)
  {
    const std::string columns = window.x0 == 0 && window.width == raster.width
                                  ? std::string()
                                  : "columns " + std::to_string(window.x0) + " to " +
                                      std::to_string(window.x0 + window.width - 1) + ", ";
    throw InvalidInput("Could not read " + columns + "rows " + std::to_string(window.y0) + " to " +
                       std::to_string(window.y0 + window.height - 1) + " of " + raster.path + ": " + lastGdalError());
  }
}

// Reads the window into `out` (rows `stride` cells apart) and replaces each cell by convert(raw
// value, the cell's index in the window): in place where the band's type converts exactly into T
// (`inPlace`), else through a float64 copy of the window.
template <typename T, typename Convert>
void readConverted(GDALDatasetH dataset, const GdalRaster& raster, const dem::tiled::Window& window, T* out,
                   int64_t stride, bool inPlace, GDALDataType type, Convert convert)
{
  if (inPlace)
  {
    readWindow(dataset, raster, window, out, type, stride);
    for (int64_t y = 0; y < window.height; ++y)
    {
      T* row = out + y * stride;
      for (int64_t x = 0; x < window.width; ++x)
        row[x] = convert(double(row[x]), y * window.width + x);
    }
    return;
  }
  std::vector<double> values(std::size_t(window.cells()));
  readWindow(dataset, raster, window, values.data(), GDT_Float64, window.width);
  for (int64_t y = 0; y < window.height; ++y)
  {
    T* row = out + y * stride;
    const double* in = values.data() + y * window.width;
    for (int64_t x = 0; x < window.width; ++x)
      row[x] = convert(in[x], y * window.width + x);
  }
}

// Whether every value of a band of `type` is a float32 value.
bool exactInFloat32(GDALDataType type)
{
  return type == GDT_Byte || type == GDT_Int16 || type == GDT_UInt16 || type == GDT_Float32;
}

}  // namespace

GdalElevationSource::GdalElevationSource(const GdalRaster& raster) : mRaster(raster), mDataset(openForReading(raster))
{
}

void GdalElevationSource::read(const dem::tiled::Window& window, float* out) const
{
  readCounted(window, out, window.width, nullptr);
}

void GdalElevationSource::readStrided(const dem::tiled::Window& window, float* out, int64_t stride) const
{
  readCounted(window, out, stride, nullptr);
}

void GdalElevationSource::readCounted(const dem::tiled::Window& window, float* out, int64_t stride,
                                      ElevationCounts* counts) const
{
  const BandValue value(mRaster);
  const bool hasNoData = mRaster.noData.has_value();
  const float noData32 = static_cast<float>(mRaster.noData.value_or(0.0));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  readConverted(mDataset.get(), mRaster, window, out, stride, exactInFloat32(mRaster.dataType), GDT_Float32,
                [&](double raw, int64_t) {
                  const double v = value(raw);
                  const float f = static_cast<float>(v);
                  if (std::isnan(v) || !std::isfinite(f))
                  {
                    if (counts)
                      counts->notFinite += !std::isnan(v);
                    return nan;
                  }
                  if (counts)
                  {
                    ++counts->valid;
                    counts->minimum = std::min(counts->minimum, double(f));
                    counts->maximum = std::max(counts->maximum, double(f));
                    counts->roundedToNoData += hasNoData && f == noData32;
                  }
                  return f;
                });
}

GdalValueSource::GdalValueSource(const GdalRaster& raster) : mRaster(raster), mDataset(openForReading(raster))
{
}

void GdalValueSource::read(const dem::tiled::Window& window, double* out) const
{
  const BandValue value(mRaster);
  readConverted(mDataset.get(), mRaster, window, out, window.width, true, GDT_Float64,
                [&](double raw, int64_t) { return value(raw); });
}

ElevationCounts GdalElevationSource::scan(int64_t tileWidth, int64_t tileHeight, float* z, const RunControl& control,
                                          const std::function<void(double)>& progress) const
{
  ElevationCounts counts;
  counts.minimum = std::numeric_limits<double>::infinity();
  counts.maximum = -std::numeric_limits<double>::infinity();
  std::vector<float> cells;
  for (int64_t y0 = 0; y0 < mRaster.height; y0 += tileHeight)
  {
    for (int64_t x0 = 0; x0 < mRaster.width; x0 += tileWidth)
    {
      if (control.isCanceled())
        throw Canceled();
      const dem::tiled::Window window{x0, y0, std::min(tileWidth, mRaster.width - x0),
                                      std::min(tileHeight, mRaster.height - y0)};
      if (z)
        readCounted(window, z + y0 * mRaster.width + x0, mRaster.width, &counts);
      else
      {
        cells.resize(std::size_t(window.cells()));
        readCounted(window, cells.data(), window.width, &counts);
      }
    }
    if (progress)
      progress(double(std::min(mRaster.height, y0 + tileHeight)) / double(mRaster.height));
  }
  if (counts.valid == 0)
    counts.minimum = counts.maximum = 0.0;
  return counts;
}

GdalCodeSource::GdalCodeSource(const GdalRaster& raster, const Table& table, const Table& otherTable)
  : mRaster(raster), mTable(table), mOtherTable(otherTable), mDataset(openForReading(raster))
{
}

int16_t GdalCodeSource::decode(const Table& table, double value)
{
  if (std::isnan(value))
    return 255;
  if (!(value >= 0.0 && value <= 255.0) || value != std::floor(value))
    return -1;
  return table[size_t(value)];
}

void GdalCodeSource::read(const dem::tiled::Window& window, uint8_t* out) const
{
  readCounted(window, out, window.width, nullptr);
}

void GdalCodeSource::readStrided(const dem::tiled::Window& window, uint8_t* out, int64_t stride) const
{
  readCounted(window, out, stride, nullptr);
}

void GdalCodeSource::readCounted(const dem::tiled::Window& window, uint8_t* out, int64_t stride, Counts* counts) const
{
  const BandValue value(mRaster);
  readConverted(mDataset.get(), mRaster, window, out, stride, mRaster.dataType == GDT_Byte, GDT_Byte,
                [&](double raw, int64_t index) {
                  const double v = value(raw);
                  const int16_t code = decode(mTable, v);
                  if (counts)
                  {
                    counts->otherTableFits = counts->otherTableFits && decode(mOtherTable, v) >= 0;
                    if (code < 0 && counts->invalid++ == 0)
                    {
                      counts->firstInvalid = v;
                      counts->firstInvalidCell =
                        (window.y0 + index / window.width) * mRaster.width + window.x0 + index % window.width;
                    }
                    counts->valid += code >= 0 && code != 255;
                  }
                  return uint8_t(code < 0 ? 255 : code);
                });
}

GdalCodeSource::Counts GdalCodeSource::scan(uint8_t* codes, const RunControl& control,
                                            const std::function<void(double)>& progress) const
{
  Counts counts;
  // Bands of whole rows (about 4 million cells), so that the first value the encoding lacks is the
  // first in row-major order.
  const int64_t bandRows = std::max<int64_t>(1, (int64_t(1) << 22) / mRaster.width);
  std::vector<uint8_t> cells;
  for (int64_t y0 = 0; y0 < mRaster.height; y0 += bandRows)
  {
    if (control.isCanceled())
      throw Canceled();
    const dem::tiled::Window rows{0, y0, mRaster.width, std::min(bandRows, mRaster.height - y0)};
    if (codes)
      readCounted(rows, codes + y0 * mRaster.width, rows.width, &counts);
    else
    {
      cells.resize(std::size_t(rows.cells()));
      readCounted(rows, cells.data(), rows.width, &counts);
    }
    if (progress)
      progress(double(rows.y0 + rows.height) / double(mRaster.height));
  }
  return counts;
}

}  // namespace gpugeo::gdal
