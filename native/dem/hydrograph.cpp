#include "dem/hydrograph.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/errors.h"

namespace gpugeo::dem {

namespace {

constexpr double kMmPerHourToMetresPerSecond = 1.0 / 3.6e6;

void checkStep(double step)
{
  if (!(step > 0) || !std::isfinite(step))
    throw InvalidInput("the hydrograph's time step must be more than 0 minutes");
}

}  // namespace

std::vector<double> constantExcess(double intensity, double duration, double step)
{
  checkStep(step);
  if (!(intensity >= 0) || !std::isfinite(intensity))
    throw InvalidInput("the rainfall excess intensity must be 0 mm/h or more");
  if (!(duration > 0) || !std::isfinite(duration))
    throw InvalidInput("the rainfall excess duration must be more than 0 minutes");
  const double steps = duration / step;
  if (!(steps <= double(kMaxHydrographSteps)))
    throw InvalidInput("the rainfall excess lasts more than " + std::to_string(kMaxHydrographSteps) +
                       " time steps: use a longer time step (the isochrone interval)");
  // Whole steps, then the part step (a duration within a millionth of a step of a whole number of
  // steps counts as whole, so that 60 minutes in steps of 10 is 6 steps, not 6 and a sliver).
  int64_t whole = int64_t(std::floor(steps));
  double part = steps - double(whole);
  if (part > 1.0 - 1e-6)
  {
    ++whole;
    part = 0;
  }
  else if (part < 1e-6)
    part = 0;
  std::vector<double> series(std::size_t(whole), intensity);
  if (part > 0)
    series.push_back(intensity * part);
  if (series.empty())  // a duration of under a millionth of a step: one step of its share
    series.push_back(intensity * steps);
  return series;
}

Hydrograph timeAreaHydrograph(const std::vector<double>& bandArea, const std::vector<double>& excess, double step)
{
  checkStep(step);
  if (excess.empty())
    throw InvalidInput("the rainfall excess series is empty");
  for (std::size_t j = 0; j < excess.size(); ++j)
    if (!(excess[j] >= 0) || !std::isfinite(excess[j]))
      throw InvalidInput("the rainfall excess of step " + std::to_string(j + 1) + " is not a number of 0 mm/h or more");
  for (const double a : bandArea)
    if (!(a >= 0) || !std::isfinite(a))
      throw InvalidInput("a band's area is negative or not a number");
  const int64_t steps = int64_t(bandArea.size()) + int64_t(excess.size()) - 1;
  if (steps > kMaxHydrographSteps)
    throw InvalidInput("the hydrograph would have more than " + std::to_string(kMaxHydrographSteps) +
                       " time steps: use a longer time step (the isochrone interval)");

  Hydrograph h;
  h.step = step;
  h.excess.assign(std::size_t(std::max<int64_t>(steps, 0)), 0.0);
  h.discharge.assign(h.excess.size(), 0.0);
  h.unit.assign(h.excess.size(), 0.0);
  for (std::size_t j = 0; j < excess.size(); ++j)
    h.excess[j] = excess[j];
  const double seconds = step * 60.0;
  for (std::size_t k = 0; k < bandArea.size(); ++k)
    h.unit[k] = bandArea[k] * 0.001 / seconds;
  // Q(n) = Σ_k A(k) · i(n − k), each step's products summed in the order of k.
  for (int64_t n = 0; n < steps; ++n)
  {
    const int64_t kFirst = std::max<int64_t>(0, n - int64_t(excess.size()) + 1);
    const int64_t kLast = std::min<int64_t>(n, int64_t(bandArea.size()) - 1);
    double q = 0;
    for (int64_t k = kFirst; k <= kLast; ++k)
      q += bandArea[std::size_t(k)] * (excess[std::size_t(n - k)] * kMmPerHourToMetresPerSecond);
    h.discharge[std::size_t(n)] = q;
  }
  double peak = 0;
  for (std::size_t n = 0; n < h.discharge.size(); ++n)
  {
    h.volume += h.discharge[n] * seconds;
    if (h.discharge[n] > peak)
    {
      peak = h.discharge[n];
      h.peakStep = int64_t(n);
    }
  }
  return h;
}

}  // namespace gpugeo::dem
