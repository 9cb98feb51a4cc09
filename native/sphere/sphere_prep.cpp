#include <algorithm>
#include <atomic>
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
    if (!(std::isfinite(sites.lon[i]) && std::isfinite(sites.lat[i]) && std::fabs(sites.lat[i]) <= 90.0 &&
          std::fabs(sites.lon[i]) <= kMaxLongitude))
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

namespace {

bool validSite(double lon, double lat)
{
  return std::isfinite(lon) && std::isfinite(lat) && std::fabs(lat) <= 90.0 && std::fabs(lon) <= kMaxLongitude;
}

[[noreturn]] void throwInvalidSites(int64_t bad, int64_t count)
{
  throw InvalidInput(std::to_string(bad) + " of " + std::to_string(count) +
                     " points have a NaN or infinite coordinate, a latitude outside -90..90 or a longitude outside "
                     "-720..720 degrees; fix or remove them");
}

}  // namespace

void requireValidSites(const SiteSet& sites)
{
  const int64_t bad = countInvalidSites(sites);
  if (bad > 0)
    throwInvalidSites(bad, sites.count);
}

}  // namespace gpugeo::sphere

namespace gpugeo::sphere::detail {

namespace {

// A site's place in the tree's order: (Morton key, coordinate bits, input index).
struct TreeKey
{
  uint64_t morton, x, y, z;
  int32_t index;

  bool sameSite(const TreeKey& o) const { return morton == o.morton && x == o.x && y == o.y && z == o.z; }
  bool operator<(const TreeKey& o) const
  {
    if (morton != o.morton) return morton < o.morton;
    if (x != o.x) return x < o.x;
    if (y != o.y) return y < o.y;
    if (z != o.z) return z < o.z;
    return index < o.index;
  }
};

}  // namespace

void PreparedSites::shapeTree(int32_t count)
{
  treeCount = count;
  levels = 0;
  boxCount = 0;
  int32_t size = (count + kLeafSites - 1) / kLeafSites;
  while (true)
  {
    levelOffset[levels] = boxCount;
    levelSize[levels] = size;
    boxCount += size;
    ++levels;
    if (size <= 1)
      break;
    size = (size + kFanout - 1) / kFanout;
  }
}

SiteTreeView PreparedSites::view(const Vec3* sites, const int32_t* original, const Box* boxArray) const
{
  SiteTreeView v;
  v.sites = sites;
  v.original = original;
  v.count = treeCount;
  v.levels = levels;
  for (int l = 0; l < levels; ++l)
  {
    v.levelOffset[l] = levelOffset[l];
    v.levelSize[l] = levelSize[l];
  }
  v.boxes = boxArray;
  return v;
}

void siteVectorsInto(const SiteSet& sites, Vec3* vectors, int threads, const RunControl& control)
{
  if (sites.count < 1)
    throw InvalidInput("there are no sites");
  if (sites.count > kMaxSites)
    throw InvalidInput("too many sites: " + std::to_string(sites.count) + " (at most " + std::to_string(kMaxSites) + ")");
  std::atomic<int64_t> bad{0};
  parallelFor(sites.count, 16384, threads > 0 ? threads : defaultThreadCount(), [&](int64_t b, int64_t e) {
    int64_t badHere = 0;
    for (int64_t i = b; i < e; ++i)
    {
      if (!validSite(sites.lon[i], sites.lat[i]))
      {
        ++badHere;
        continue;
      }
      const auto u = unitVector(sites.lon[i], sites.lat[i]);
      vectors[i] = {u[0], u[1], u[2]};
    }
    bad += badHere;
  }, &control);
  if (bad > 0)
    throwInvalidSites(bad, sites.count);
}

std::vector<Vec3> siteVectors(const SiteSet& sites, int threads, const RunControl& control)
{
  if (sites.count < 1 || sites.count > kMaxSites)
    siteVectorsInto(sites, nullptr, threads, control);  // throws
  std::vector<Vec3> vectors(static_cast<std::size_t>(sites.count));
  siteVectorsInto(sites, vectors.data(), threads, control);
  return vectors;
}

PreparedSites prepareSites(const SiteSet& sites, int threads, const RunControl& control)
{
  threads = threads > 0 ? threads : defaultThreadCount();
  PreparedSites prep;
  prep.vectors = siteVectors(sites, threads, control);
  const int64_t n = sites.count;
  std::vector<TreeKey> keyed(static_cast<std::size_t>(n));
  parallelFor(n, 16384, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
    {
      const Vec3& v = prep.vectors[std::size_t(i)];
      keyed[std::size_t(i)] = {mortonKey(v), coordinateBits(v.x), coordinateBits(v.y), coordinateBits(v.z), int32_t(i)};
    }
  }, &control);
  parallelSort(keyed, threads, control);

  // Exact duplicates can never win (an identical vector with a lower index always does): only the
  // first of each run of equal sites, the lowest index, goes into the tree.
  for (std::size_t i = 0; i < keyed.size(); ++i)
    if (i == 0 || !keyed[i].sameSite(keyed[i - 1]))
    {
      prep.treeSites.push_back(prep.vectors[std::size_t(keyed[i].index)]);
      prep.treeOriginal.push_back(keyed[i].index);
    }

  const int32_t count = int32_t(prep.treeSites.size());
  prep.shapeTree(count);
  prep.boxes.resize(std::size_t(prep.boxCount));
  parallelFor(prep.levelSize[0], 4096, threads, [&](int64_t b, int64_t e) {
    for (int64_t leaf = b; leaf < e; ++leaf)
    {
      Box box = emptyBox();
      for (int64_t i = leaf * kLeafSites; i < std::min<int64_t>(count, (leaf + 1) * kLeafSites); ++i)
        growBox(box, prep.treeSites[std::size_t(i)]);
      prep.boxes[std::size_t(leaf)] = box;
    }
  }, &control);
  for (int l = 1; l < prep.levels; ++l)
  {
    const int32_t below = prep.levelOffset[l - 1], belowSize = prep.levelSize[l - 1], at = prep.levelOffset[l];
    parallelFor(prep.levelSize[l], 4096, threads, [&](int64_t b, int64_t e) {
      for (int64_t p = b; p < e; ++p)
      {
        Box box = emptyBox();
        for (int64_t c = p * kFanout; c < std::min<int64_t>(belowSize, (p + 1) * kFanout); ++c)
          growBox(box, prep.boxes[std::size_t(below + c)]);
        prep.boxes[std::size_t(at + p)] = box;
      }
    }, &control);
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
