// The benchmarks' synthetic terrain (bench_dem_tiled, bench_dem_mpi): bench_dem's landscape (waves
// and a slope on 30 m cells, noise for pits, elevations rounded to 0.5 m for flats), with its noise
// from a hash of the cell so that any window can be generated alone, by any process.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "dem/tiled/raster_io.h"

namespace gpugeo::dem::tiled {

// bench_dem's landscape, with a hash of (x, y) for its noise.
class GeneratedTerrain : public RasterSource<float>
{
public:
  GeneratedTerrain(int64_t w, int64_t h) : mW(w), mH(h) {}
  int64_t width() const override { return mW; }
  int64_t height() const override { return mH; }
  void read(const Window& window, float* out) const override
  {
    const double sx = 2511.0 / double(mW), sy = 2550.0 / double(mH);
    // The waves' factors of x alone and of y alone, once per column and row of the window (the same
    // values as per cell: the terrain is the same bits, generated faster).
    std::vector<double> waveX(std::size_t(window.width)), waveY(std::size_t(window.height));
    for (int64_t x = 0; x < window.width; ++x)
      waveX[std::size_t(x)] = std::sin(double(window.x0 + x) * sx * 0.004);
    for (int64_t y = 0; y < window.height; ++y)
      waveY[std::size_t(y)] = std::cos(double(window.y0 + y) * sy * 0.0031);
    for (int64_t y = 0; y < window.height; ++y)
      for (int64_t x = 0; x < window.width; ++x)
      {
        const int64_t gx = window.x0 + x, gy = window.y0 + y;
        uint64_t k = uint64_t(gy) * 0x9E3779B97F4A7C15ull ^ uint64_t(gx) * 0xC2B2AE3D27D4EB4Full;
        k ^= k >> 29;
        k *= 0xBF58476D1CE4E5B9ull;
        k ^= k >> 32;
        const double noise = double(k >> 11) * 0x1.0p-53;
        const double fx = double(gx) * sx, fy = double(gy) * sy;
        const double v = 300 + 120 * waveX[std::size_t(x)] * waveY[std::size_t(y)] +
                         40 * std::sin(fx * 0.021 + fy * 0.017) + 0.03 * fx + 2.5 * noise;
        out[y * window.width + x] = float(std::round(v * 2) / 2);
      }
  }

private:
  int64_t mW, mH;
};

}  // namespace gpugeo::dem::tiled
