// The outlet's hydrograph by the time–area method: the watershed's time–area diagram (the area of
// each isochrone band, band k the cells whose travel time lies in [k, k + 1) steps) convolved with a
// rainfall-excess series of the same step,
//   Q(n) = Σ_k A(k) · i(n − k),   i in m/s (the excess intensity of step n − k, mm/h / 3.6·10⁶),
// so that the excess that falls on a cell during step j reaches the outlet during step j + k (the
// time–area method of Ross 1921, the translation half of Clark 1945's unit hydrograph). Q(n)
// is the mean discharge (m³/s) over step n; the hydrograph has as many steps as the bands and the
// excess series together, less one, and conserves volume: Σ Q(n)·Δt = Σ A(k) · Σ i(j)·Δt.
// The unit hydrograph is the response to 1 mm of excess falling evenly during one step:
// U(k) = A(k) · 0.001 m / Δt.
#pragma once

#include <cstdint>
#include <vector>

namespace gpugeo::dem {

struct Hydrograph
{
  double step = 0;                 // minutes
  std::vector<double> excess;      // mm/h per step (the series as given, zeros after it)
  std::vector<double> discharge;   // m³/s per step
  std::vector<double> unit;        // m³/s per step: the unit hydrograph (1 mm in one step), zeros after it
  int64_t peakStep = -1;           // the first step of the highest discharge (-1 when all are 0)
  double volume = 0;               // m³ of excess delivered (Σ discharge · Δt)
};

// The most steps a series or a hydrograph may have (a convolution of 10⁴ bands with 10⁶ steps is
// 10¹⁰ products; past that a user is better served by a coarser step).
constexpr int64_t kMaxHydrographSteps = 1000000;

// A constant intensity (mm/h) for `duration` minutes in steps of `step` minutes: whole steps of the
// intensity, then the last part step's share of it (its mean over the step). Throws InvalidInput for
// a negative or non-finite intensity, a duration not above 0 or a step not above 0, or more than
// kMaxHydrographSteps steps.
std::vector<double> constantExcess(double intensity, double duration, double step);

// The hydrograph of `bandArea` (m² per band of `step` minutes, the time–area diagram) under `excess`
// (mm/h per step). Throws InvalidInput for an empty series, a value negative or not finite (naming
// its step, from 1), a band area negative or not finite, a step not above 0, or a hydrograph past
// kMaxHydrographSteps steps.
Hydrograph timeAreaHydrograph(const std::vector<double>& bandArea, const std::vector<double>& excess, double step);

}  // namespace gpugeo::dem
