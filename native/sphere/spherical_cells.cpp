// The GPU path's Voronoi cells made on the host (for the tests), and the words for their failures:
// see detail/spherical_cells.h.
#include <algorithm>
#include <cmath>

#include "core/parallel.h"
#include "sphere/detail/spherical_cells.h"
#include "sphere/detail/spherical_cells_math.h"

namespace gpugeo::sphere::detail {

std::string cellFailureText(int bits)
{
  std::string text;
  auto add = [&](int bit, const char* what) {
    if (bits & bit)
      text += (text.empty() ? "" : ", ") + std::string(what);
  };
  add(cells::kFailTooMany, "a cell needs more than 128 nearby sites");
  add(cells::kFailEdges, "a cell has more than 32 edges");
  add(cells::kFailOpen, "a cell reaches beyond 45 degrees of its site");
  add(cells::kFailRounding, "a cell too close to degenerate to cut in floating point");
  return text;
}

SphereCells hostCells(const double* xyz, const uint64_t* key, int32_t n, int threads, const RunControl& control)
{
  const auto* site = reinterpret_cast<const cells::D3*>(xyz);
  const double radius0 = 2.0 * std::sqrt(24.0 / double(n));
  std::vector<int32_t> degree(static_cast<size_t>(n)), wide(static_cast<size_t>(n) * cells::kCellEdges);
  parallelFor(n, 1024, threads, [&](int64_t begin, int64_t end) {
    for (int32_t i = int32_t(begin); i < int32_t(end); ++i)
      degree[size_t(i)] = cells::clipCell(i, site, key, n, radius0, wide.data() + size_t(i) * cells::kCellEdges);
  }, &control);
  SphereCells out;
  int failed = 0;
  for (const int32_t d : degree)
    failed |= d > 0 ? 0 : d < 0 ? -d : cells::kFailRounding;
  if (failed)
  {
    out.failure = cellFailureText(failed);
    return out;
  }
  out.start.resize(static_cast<size_t>(n) + 1, 0);
  for (size_t i = 0; i < degree.size(); ++i)
    out.start[i + 1] = out.start[i] + degree[i];
  out.neighbor.resize(static_cast<size_t>(out.start.back()));
  for (size_t i = 0; i < degree.size(); ++i)
    std::copy_n(wide.data() + i * cells::kCellEdges, degree[i], out.neighbor.data() + out.start[i]);
  out.complete = true;
  return out;
}

}  // namespace gpugeo::sphere::detail
