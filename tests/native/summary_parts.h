// A summary assembled from summarizeInto() calls that each ask for some of the arrays, so a test can
// compare it with the whole summary: what is asked for must not depend on what else is.
#pragma once

#include <cstdint>
#include <vector>

#include "core/run_control.h"
#include "neighbours/neighbours.h"

namespace gpugeo::neighbours::test {

inline Summary summaryByParts(NeighbourIndex& index, const Query& query)
{
  const std::size_t n = static_cast<std::size_t>(index.pointCount());
  Summary s;
  // Filled with values no query gives, so an entry left unwritten shows.
  s.count.assign(n, -7);
  s.nearest.assign(n, -7);
  s.nearestDistance.assign(n, -7.0);
  s.meanDistance.assign(n, -7.0);
  index.summarizeInto(query, SummaryOutput{s.count.data(), nullptr, nullptr, nullptr}, RunControl{});
  index.summarizeInto(query, SummaryOutput{nullptr, s.nearest.data(), nullptr, nullptr}, RunControl{});
  index.summarizeInto(query, SummaryOutput{nullptr, nullptr, s.nearestDistance.data(), nullptr}, RunControl{});
  index.summarizeInto(query, SummaryOutput{nullptr, nullptr, nullptr, s.meanDistance.data()}, RunControl{});
  index.summarizeInto(query, SummaryOutput{}, RunControl{});  // nothing asked for: returns at once
  return s;
}

}  // namespace gpugeo::neighbours::test
