// What the DEM tools' rasters hold, the same from the QGIS algorithms and from the command-line
// program: the flow directions' two encodings, the accumulation's nodata values, the filled DEM's
// nodata value.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "dem/dem.h"

namespace gpugeo::gdal {

// The ENCODING parameter's options: ESRI's powers of two (1 = E ... 128 = NE, no direction 0), or 0
// to 7 clockwise from east (no direction 8); nodata 255 in both.
enum DirectionEncoding
{
  kEsri = 0,
  kClockwise = 1
};

inline uint8_t encodeDirection(uint8_t direction, int encoding)
{
  if (direction == dem::kNoData)
    return 255;
  if (encoding == kEsri)
    return direction < 8 ? uint8_t(dem::kEsriCode[direction]) : 0;
  return direction < 8 ? direction : 8;
}

// Value 0..255 -> direction (0..7, dem::kNoFlow), dem::kNoData for 255, -1 for a value the encoding
// lacks (GdalCodeSource's table).
inline std::array<int16_t, 256> decodingTable(int encoding)
{
  std::array<int16_t, 256> table;
  table.fill(-1);
  for (int d = 0; d < 8; ++d)
    table[encodeDirection(uint8_t(d), encoding)] = int16_t(d);
  table[encodeDirection(dem::kNoFlow, encoding)] = dem::kNoFlow;
  table[255] = dem::kNoData;
  return table;
}

// The accumulation's outputs: upstream cells (Int32, or Float64 past 2^31 cells) and upstream area.
constexpr int32_t kCellsNoData = -1;
constexpr double kAreaNoData = -1.0;

// The filled DEM's nodata value: the input's, where float32 holds it and no elevation rounds to it
// (`roundedToNoData`: valid cells whose float32 value equals it), else NaN with a warning in `why`.
inline float filledNoData(const std::optional<double>& inputNoData, int64_t roundedToNoData, std::string* why)
{
  if (!inputNoData)
    return std::numeric_limits<float>::quiet_NaN();
  const float wanted = static_cast<float>(*inputNoData);
  if (std::isfinite(wanted) && roundedToNoData == 0)
    return wanted;
  if (why)
    *why = "The input's nodata value " + std::to_string(*inputNoData) +
           " cannot mark nodata in a float32 raster here (out of range, or equal to an elevation once rounded to "
           "float32): the output's nodata is NaN.";
  return std::numeric_limits<float>::quiet_NaN();
}

}  // namespace gpugeo::gdal
