// The per-cell speeds and step times of the travel-time models (travel_time.h), shared by the CPU
// and the CUDA backends. (Powers and square roots may differ in the last bit between the two; the
// travel times are compared with a relative tolerance.)
#pragma once

#include <math.h>

#include <cstdint>

#include "core/hd.h"
#include "dem/detail/dem_math.h"
#include "dem/travel_time.h"

namespace gpugeo::dem::detail {

// The D8 flow length of a cell in direction d (its width when it has none).
GPUGEO_HD double flowLength(double width, double height, uint8_t d)
{
  if (d >= 8)
    return width;
  return (d & 1) ? exact::sqrt(exact::add(exact::mul(width, width), exact::mul(height, height))) : ((d & 2) ? height : width);
}

// The Zevenbergen & Thorne slope's tangent; a missing neighbour is extrapolated as 2 z - z_opposite
// (as SAGA does), both missing: no gradient on that axis.
GPUGEO_HD double slopeTangentAt(const float* z, int64_t w, int64_t h, int64_t x, int64_t y, double width,
                                double height)
{
  const double zc = z[y * w + x];
  auto at = [&](int64_t xx, int64_t yy) -> double {
    if (xx < 0 || yy < 0 || xx >= w || yy >= h)
      return NAN;
    return double(z[yy * w + xx]);
  };
  auto difference = [&](double a, double b) {
    if (isnan(a) && isnan(b))
      return 0.0;
    if (isnan(a))
      a = 2.0 * zc - b;
    if (isnan(b))
      b = 2.0 * zc - a;
    return a - b;
  };
  const double G = difference(at(x + 1, y), at(x - 1, y)) / (2 * width);
  const double H = difference(at(x, y - 1), at(x, y + 1)) / (2 * height);
  return sqrt(G * G + H * H);
}

// The overland speed's divisor for a cell of Manning coefficient n, n^0.6 (once per model where the
// coefficient is the same everywhere).
GPUGEO_HD double manningNPower(double n)
{
  return pow(n, 0.6);
}

// A cell's Manning-model speed; nPower = manningNPower(the cell's coefficient).
GPUGEO_HD double manningCellSpeed(const VelocityModel& m, double slopeTangent, double area, double nPower)
{
  const double S = 25400.0 / m.curveNumber - 254.0;
  const double runoff = m.rainfall < 0.2 * S ? 0.1 : (m.rainfall - 0.2 * S) * (m.rainfall - 0.2 * S) / (m.rainfall + 0.8 * S);
  const double I = runoff / 3600.0 / 1000.0;
  const double s = fmax(0.001, fabs(slopeTangent));
  if (area < m.mixedArea)
  {
    const double D = sqrt(2 * area / 3.14159);
    return fmax(m.minSpeed, pow(I * D, 0.4) * pow(s, 0.3) / nPower);
  }
  const double n = area < m.channelAreaManning ? m.mixedN : m.channelN;
  const double Q = I * area, z = m.sideSlope;
  auto wet = [&](double h) { return h * h / z; };
  auto flowError = [&](double h) {
    const double perimeter = 2 * (h / z + sqrt(h * h + (h / z) * (h / z)));
    return sqrt(s) * pow(wet(h), 5.0 / 3.0) / pow(perimeter, 2.0 / 3.0) / n - Q;
  };
  double lo = 0, hi = 60, h = 2, f = flowError(h);
  int steps = 0;
  do
  {
    if (f > 0)
    {
      hi = h;
      h = (lo + h) / 2;
    }
    else if (f < 0)
    {
      lo = h;
      h = (hi + h) / 2;
    }
    f = flowError(h);
  } while (fabs(f) > 0.1 && ++steps < m.maxIterations);
  return fmax(m.minSpeed, Q / wet(h));
}

// A watershed cell's speed (m/s); `receiver` is its D8 receiving cell or -1; `area` its
// accumulated area in 1e-6 m^2; `manning` the model's per-cell coefficients (or null);
// overlandNPower = manningNPower(m.overlandN).
GPUGEO_HD double cellSpeed(const VelocityModel& m, double overlandNPower, const float* z, const float* manning,
                           int64_t w, int64_t h, int64_t x, int64_t y, int64_t receiver, int64_t area, double width,
                           double height, uint8_t d)
{
  const int64_t c = y * w + x;
  switch (m.kind)
  {
    case VelocityModel::Kind::Constant:
      return m.speed;
    case VelocityModel::Kind::Slope:
    {
      const double length = flowLength(width, height, d);
      const double drop = receiver >= 0 ? double(z[c]) - double(z[receiver]) : 0.0;
      const double s = fmax(m.minSlope, drop / length);
      const double k = double(area) * 1e-6 >= m.channelArea ? m.kChannel : m.kOverland;
      return fmax(m.minSpeed, k * sqrt(s) * m.b / m.n);
    }
    case VelocityModel::Kind::Manning:
    {
      const double nPower =
        manning && isfinite(manning[c]) && manning[c] > 0 ? manningNPower(double(manning[c])) : overlandNPower;
      return manningCellSpeed(m, slopeTangentAt(z, w, h, x, y, width, height), double(area) * 1e-6, nPower);
    }
  }
  return m.minSpeed;
}

// The isochrone band of a travel time: band k holds [k, k + 1) x interval (both backends, one
// correctly rounded division and a floor, so the same bits give the same band).
GPUGEO_HD int32_t bandOfTime(double minutes, double interval)
{
  return int32_t(floor(minutes / interval));
}

}  // namespace gpugeo::dem::detail
