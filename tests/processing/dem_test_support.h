// What the DEM algorithms' processing tests share: a test DEM (row 0 at the top, NaN for nodata,
// cells 10 m wide and 7.5 m high in EPSG:32633) and its random terrain.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <qgspointxy.h>

namespace gpugeo::test {

constexpr float kDemNaN = std::numeric_limits<float>::quiet_NaN();

struct TestDem
{
  int width = 0;
  int height = 0;
  double geoTransform[6] = {500000.0, 10.0, 0.0, 4100000.0, 0.0, -7.5};
  std::vector<float> z;

  float& at(int x, int y) { return z[size_t(y) * size_t(width) + size_t(x)]; }
  double cellArea() const { return geoTransform[1] * -geoTransform[5]; }
  // The centre of cell (x, y).
  QgsPointXY centre(int x, int y) const
  {
    return {geoTransform[0] + (x + 0.5) * geoTransform[1], geoTransform[3] + (y + 0.5) * geoTransform[5]};
  }
};

// Smooth hills quantised to 0.5 m (flats and ties), noise (pits), `holes` nodata blocks of 5 x 4.
inline TestDem randomHills(int width, int height, uint32_t seed, int holes)
{
  TestDem d;
  d.width = width;
  d.height = height;
  d.z.resize(size_t(width) * size_t(height));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(-1.5, 1.5);
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
    {
      const double v = 100.0 + 12.0 * std::sin(x / 9.0) * std::cos(y / 7.0) + 0.15 * x + 0.1 * y + noise(rng);
      d.at(x, y) = float(std::round(v * 2.0) / 2.0);
    }
  std::uniform_int_distribution<int> px(2, width - 8), py(2, height - 8);
  for (int k = 0; k < holes; ++k)
  {
    const int x0 = px(rng), y0 = py(rng);
    for (int y = y0; y < y0 + 4; ++y)
      for (int x = x0; x < x0 + 5; ++x)
        d.at(x, y) = kDemNaN;
  }
  return d;
}

}  // namespace gpugeo::test
