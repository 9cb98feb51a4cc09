#include <algorithm>
#include <cmath>
#include <string>

#include "core/errors.h"
#include "core/parallel.h"
#include "core/parallel_sort.h"
#include "sphere/earth.h"
#include "sphere/detail/site_prep.h"

namespace gpugeo::sphere {

int64_t countInvalidSites(const SiteSet& sites)
{
  int64_t bad = 0;
  for (int64_t i = 0; i < sites.count; ++i)
    if (!std::isfinite(sites.lon[i]) || !std::isfinite(sites.lat[i]) || std::fabs(sites.lat[i]) > 90.0 ||
        std::fabs(sites.lon[i]) > kMaxLongitude)
      ++bad;
  return bad;
}

const char* methodName(NearestMethod method)
{
  switch (method)
  {
    case NearestMethod::Auto: return "auto";
    case NearestMethod::Indexed: return "indexed";
    case NearestMethod::BruteGlobal: return "brute force, global memory";
    case NearestMethod::BruteShared: return "brute force, shared-memory tiles";
    case NearestMethod::BruteConstant: return "brute force, constant memory";
    case NearestMethod::BruteRegister: return "brute force, constant memory and register blocking";
  }
  return "?";
}

void requireValidSites(const SiteSet& sites)
{
  const int64_t bad = countInvalidSites(sites);
  if (bad > 0)
    throw InvalidInput(std::to_string(bad) + " of " + std::to_string(sites.count) +
                       " points have a NaN or infinite coordinate, a latitude outside -90..90 or a longitude outside "
                       "-720..720 degrees; fix or remove them");
}

}  // namespace gpugeo::sphere

namespace gpugeo::sphere::detail {

namespace {

uint64_t spreadBits(uint64_t v)
{
  v &= 0x1fffff;
  v = (v | v << 32) & 0x1f00000000ffffull;
  v = (v | v << 16) & 0x1f0000ff0000ffull;
  v = (v | v << 8) & 0x100f00f00f00f00full;
  v = (v | v << 4) & 0x10c30c30c30c30c3ull;
  v = (v | v << 2) & 0x1249249249249249ull;
  return v;
}

uint64_t mortonKey(const Vec3& v)
{
  const auto q = [](double c) {
    const double scaled = std::floor((c + 1.0) * 0.5 * double(1 << 21));
    return uint64_t(std::clamp(scaled, 0.0, double((1 << 21) - 1)));
  };
  return spreadBits(q(v.x)) | spreadBits(q(v.y)) << 1 | spreadBits(q(v.z)) << 2;
}

bool sameVector(const Vec3& a, const Vec3& b)
{
  return a.x == b.x && a.y == b.y && a.z == b.z;
}

}  // namespace

SiteTreeView PreparedSites::view(const Vec3* sites, const int32_t* original, const Box* boxArray) const
{
  SiteTreeView v;
  v.sites = sites;
  v.original = original;
  v.count = int32_t(treeSites.size());
  v.levels = levels;
  for (int l = 0; l < levels; ++l)
  {
    v.levelOffset[l] = levelOffset[l];
    v.levelSize[l] = levelSize[l];
  }
  v.boxes = boxArray;
  return v;
}

PreparedSites prepareSites(const SiteSet& sites, int threads, const RunControl& control)
{
  threads = threads > 0 ? threads : defaultThreadCount();
  if (sites.count < 1)
    throw InvalidInput("there are no sites");
  if (sites.count > kMaxSites)
    throw InvalidInput("too many sites: " + std::to_string(sites.count) + " (at most " + std::to_string(kMaxSites) + ")");
  requireValidSites(sites);

  PreparedSites prep;
  const int64_t n = sites.count;
  prep.vectors.resize(std::size_t(n));
  std::vector<std::pair<uint64_t, int32_t>> keyed;
  keyed.resize(std::size_t(n));
  parallelFor(n, 16384, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
    {
      const auto u = unitVector(sites.lon[i], sites.lat[i]);
      const Vec3 v{u[0], u[1], u[2]};
      prep.vectors[std::size_t(i)] = v;
      keyed[std::size_t(i)] = {mortonKey(v), int32_t(i)};
    }
  }, &control);
  parallelSort(keyed, threads, control);

  // Exact duplicates can never win (an identical vector with a lower index always does): drop them.
  // They share a key, and within a run of equal keys the lowest index comes first.
  constexpr std::size_t kDistinctChecked = 16;
  std::vector<Vec3> runDistinct;
  for (std::size_t i = 0; i < keyed.size(); ++i)
  {
    if (i == 0 || keyed[i].first != keyed[i - 1].first)
      runDistinct.clear();
    const Vec3& v = prep.vectors[std::size_t(keyed[i].second)];
    bool duplicate = false;
    for (const Vec3& seen : runDistinct)
      if (sameVector(seen, v))
      {
        duplicate = true;
        break;
      }
    if (duplicate)
      continue;
    if (runDistinct.size() < kDistinctChecked)
      runDistinct.push_back(v);
    prep.treeSites.push_back(v);
    prep.treeOriginal.push_back(keyed[i].second);
  }

  const int32_t count = int32_t(prep.treeSites.size());
  int32_t size = (count + kLeafSites - 1) / kLeafSites;
  prep.levelSize[0] = size;
  prep.levelOffset[0] = 0;
  prep.boxes.resize(std::size_t(size));
  for (int32_t leaf = 0; leaf < size; ++leaf)
  {
    Box b{{1e300, 1e300, 1e300}, {-1e300, -1e300, -1e300}};
    for (int32_t i = leaf * kLeafSites; i < std::min(count, (leaf + 1) * kLeafSites); ++i)
    {
      const double c[3] = {prep.treeSites[std::size_t(i)].x, prep.treeSites[std::size_t(i)].y, prep.treeSites[std::size_t(i)].z};
      for (int k = 0; k < 3; ++k)
      {
        b.lo[k] = std::min(b.lo[k], c[k]);
        b.hi[k] = std::max(b.hi[k], c[k]);
      }
    }
    prep.boxes[std::size_t(leaf)] = b;
  }
  prep.levels = 1;
  while (size > 1)
  {
    const int32_t below = prep.levelOffset[prep.levels - 1];
    const int32_t parents = (size + kFanout - 1) / kFanout;
    prep.levelOffset[prep.levels] = int32_t(prep.boxes.size());
    prep.levelSize[prep.levels] = parents;
    for (int32_t p = 0; p < parents; ++p)
    {
      Box b{{1e300, 1e300, 1e300}, {-1e300, -1e300, -1e300}};
      for (int32_t c = p * kFanout; c < std::min(size, (p + 1) * kFanout); ++c)
        for (int k = 0; k < 3; ++k)
        {
          b.lo[k] = std::min(b.lo[k], prep.boxes[std::size_t(below + c)].lo[k]);
          b.hi[k] = std::max(b.hi[k], prep.boxes[std::size_t(below + c)].hi[k]);
        }
      prep.boxes.push_back(b);
    }
    size = parents;
    ++prep.levels;
  }
  return prep;
}

std::vector<double> qtmSineTable(int level)
{
  const int32_t n = int32_t(1) << level;
  std::vector<double> table(std::size_t(n) + 1);
  const long double quarter = 1.57079632679489661923132169163975144L;
  for (int32_t m = 0; m <= n; ++m)
    table[std::size_t(m)] = double(sinl(quarter * (long double)m / (long double)n));
  table[0] = 0.0;
  table[std::size_t(n)] = 1.0;
  return table;
}

GridTables gridTables(const LonLatGrid& grid, int64_t row0, int64_t rows)
{
  GridTables t;
  constexpr long double toRad = 3.14159265358979323846264338327950288L / 180.0L;
  t.colSin.resize(std::size_t(grid.width));
  t.colCos.resize(std::size_t(grid.width));
  for (int64_t c = 0; c < grid.width; ++c)
  {
    const long double lon = ((long double)grid.west + ((long double)c + 0.5L) * grid.pixelWidth) * toRad;
    t.colSin[std::size_t(c)] = double(sinl(lon));
    t.colCos[std::size_t(c)] = double(cosl(lon));
  }
  t.rowSin.resize(std::size_t(rows));
  t.rowCos.resize(std::size_t(rows));
  for (int64_t r = 0; r < rows; ++r)
  {
    const long double lat = ((long double)grid.north - ((long double)(row0 + r) + 0.5L) * grid.pixelHeight) * toRad;
    t.rowSin[std::size_t(r)] = double(sinl(lat));
    t.rowCos[std::size_t(r)] = double(cosl(lat));
  }
  return t;
}

void checkQtmRange(int level, uint64_t first, int64_t count)
{
  if (level < 0 || level > kMaxQtmLevel)
    throw InvalidInput("QTM level " + std::to_string(level) + " is outside 0.." + std::to_string(kMaxQtmLevel));
  if (count < 0 || count > kMaxPointsPerCall || first > qtmCellCount(level) ||
      uint64_t(count) > qtmCellCount(level) - first)
    throw InvalidInput("QTM cell range [" + std::to_string(first) + ", +" + std::to_string(count) +
                       ") is outside level " + std::to_string(level) + " or too long for one call");
}

void checkGridBand(const LonLatGrid& grid, int64_t row0, int64_t rows)
{
  if (!(grid.width > 0 && grid.height > 0 && grid.pixelWidth > 0 && grid.pixelHeight > 0) ||
      !std::isfinite(grid.west) || !std::isfinite(grid.north) || !std::isfinite(grid.pixelWidth) ||
      !std::isfinite(grid.pixelHeight))
    throw InvalidInput("the grid needs a positive size and finite, positive pixel sizes");
  if (grid.north > 90.0 || grid.north - double(grid.height) * grid.pixelHeight < -90.0)
    throw InvalidInput("the grid reaches past a pole");
  if (row0 < 0 || rows < 0 || row0 + rows > grid.height || rows * grid.width > kMaxPointsPerCall)
    throw InvalidInput("grid rows [" + std::to_string(row0) + ", +" + std::to_string(rows) +
                       ") are outside the grid or too many for one call");
}

NearestMethod resolveMethod(NearestMethod requested, bool gpu, int64_t sites)
{
  if (requested != NearestMethod::Auto)
    return requested;
  if (gpu)
    return sites <= kBruteForceSitesGpu ? NearestMethod::BruteShared : NearestMethod::Indexed;
  return sites <= kBruteForceSitesCpu ? NearestMethod::BruteGlobal : NearestMethod::Indexed;
}

}  // namespace gpugeo::sphere::detail
