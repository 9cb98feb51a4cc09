// A GDAL band read window by window for the tiled DEM tools (dem/tiled/raster_io.h): as float32
// elevations, or as codes (flow directions) through a decoding table. Both take the band's values
// as the in-memory readers do (BandValue): the same cells, bit for bit, whichever path reads them.
//
// read() and readStrided() are called from several threads at once: each takes gdalTileMutex()
// for GDAL's part (the dataset handle and GDAL's block cache are shared) and converts the values
// outside it.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include "core/run_control.h"
#include "dem/tiled/raster_io.h"
#include "gdal/gdal_raster.h"

namespace gpugeo::gdal {

// A band's value as the DEM tools take it: NaN where it is NaN or the band's nodata value (compared
// in the band's own type: a float32 band's value 1.1f against a nodata tag written "1.1"), else
// scale x value + offset.
class BandValue
{
public:
  explicit BandValue(const GdalRaster& raster)
    : mHasNoData(raster.noData.has_value()),
      mFloat32(raster.dataType == GDT_Float32),
      mScaled(raster.scale != 1.0 || raster.offset != 0.0),
      mNoData(raster.noData.value_or(0.0)),
      mNoData32(static_cast<float>(mNoData)),
      mScale(raster.scale),
      mOffset(raster.offset)
  {
  }
  double operator()(double raw) const
  {
    if (std::isnan(raw) || (mHasNoData && (mFloat32 ? static_cast<float>(raw) == mNoData32 : raw == mNoData)))
      return std::numeric_limits<double>::quiet_NaN();
    return mScaled ? raw * mScale + mOffset : raw;
  }

private:
  bool mHasNoData, mFloat32, mScaled;
  double mNoData;
  float mNoData32;
  double mScale, mOffset;
};

// What a read of elevations found, for the log.
struct ElevationCounts
{
  int64_t valid = 0;             // cells with a value
  int64_t notFinite = 0;         // infinite values (or beyond the float32 range), made nodata
  double minimum = 0.0;          // of the valid cells (0 when none)
  double maximum = 0.0;
  int64_t roundedToNoData = 0;   // valid cells whose float32 value equals float32(nodata)
};

// A band as float32 elevations: BandValue's NaN for nodata, and NaN for infinite values and values
// beyond the float32 range (counted as notFinite).
class GdalElevationSource : public dem::tiled::RasterSource<float>
{
public:
  // Opens the raster's dataset (openGdalRaster's); throws InvalidInput when it does not open.
  explicit GdalElevationSource(const GdalRaster& raster);
  int64_t width() const override { return mRaster.width; }
  int64_t height() const override { return mRaster.height; }
  void read(const dem::tiled::Window& window, float* out) const override;
  // Bands whose values float32 holds exactly (Byte, Int16, UInt16, Float32) are read straight into
  // `out` and converted there; the others through a float64 copy of the window.
  void readStrided(const dem::tiled::Window& window, float* out, int64_t stride) const override;

  // Reads the whole band in windows of tileWidth x tileHeight cells, a row of windows after another,
  // into `z` (width x height cells, row-major) when it is not null, and counts the cells. Checks
  // `control` before each window (throws Canceled) and calls progress(fraction done) after each row
  // of windows. Throws InvalidInput on a read error.
  ElevationCounts scan(int64_t tileWidth, int64_t tileHeight, float* z, const RunControl& control,
                       const std::function<void(double)>& progress = nullptr) const;

private:
  // readStrided, counting into `counts` when it is not null (minimum and maximum from +inf and -inf).
  void readCounted(const dem::tiled::Window& window, float* out, int64_t stride, ElevationCounts* counts) const;

  GdalRaster mRaster;
  Dataset mDataset;
};

// A band as float64 values (BandValue's: NaN for nodata and NaN, scale and offset applied), window by
// window: an accumulation raster of any type read for the snapping of pour points.
class GdalValueSource : public dem::tiled::RasterSource<double>
{
public:
  // Opens the raster's dataset (openGdalRaster's); throws InvalidInput when it does not open.
  explicit GdalValueSource(const GdalRaster& raster);
  int64_t width() const override { return mRaster.width; }
  int64_t height() const override { return mRaster.height; }
  void read(const dem::tiled::Window& window, double* out) const override;

private:
  GdalRaster mRaster;
  Dataset mDataset;
};

// A band of codes (flow directions) decoded through `table`: value 0..255 -> code, -1 for a value
// the encoding lacks. A value that is NaN or nodata (BandValue) decodes to 255 (nodata); so does
// one the table lacks, which scan() counts.
class GdalCodeSource : public dem::tiled::RasterSource<uint8_t>
{
public:
  using Table = std::array<int16_t, 256>;

  struct Counts
  {
    int64_t valid = 0, invalid = 0;  // cells with a code other than 255; cells the table lacks
    double firstInvalid = 0.0;       // the first value the table lacks, in row-major order
    int64_t firstInvalidCell = -1;   // its y * width + x
    bool otherTableFits = true;      // whether every value decodes in `otherTable`
  };

  // Opens the raster's dataset; throws InvalidInput when it does not open. `otherTable` (another
  // encoding's) is only for scan()'s otherTableFits.
  GdalCodeSource(const GdalRaster& raster, const Table& table, const Table& otherTable);
  int64_t width() const override { return mRaster.width; }
  int64_t height() const override { return mRaster.height; }
  void read(const dem::tiled::Window& window, uint8_t* out) const override;
  // A Byte band is read straight into `out` and decoded there; the others through a float64 copy.
  void readStrided(const dem::tiled::Window& window, uint8_t* out, int64_t stride) const override;

  // Reads every cell once, in bands of whole rows, into `codes` (width x height, row-major) when it
  // is not null, and counts them. Cancel and progress as GdalElevationSource::scan.
  Counts scan(uint8_t* codes, const RunControl& control, const std::function<void(double)>& progress = nullptr) const;

  // A value (BandValue's) in `table`: the code, 255 for NaN, -1 where the table lacks it.
  static int16_t decode(const Table& table, double value);

private:
  void readCounted(const dem::tiled::Window& window, uint8_t* out, int64_t stride, Counts* counts) const;

  GdalRaster mRaster;
  Table mTable, mOtherTable;
  Dataset mDataset;
};

}  // namespace gpugeo::gdal
