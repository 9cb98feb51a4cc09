// CPU backend of the spherical labelling: blocks of 64 points handed to std::thread workers.
#include <atomic>

#include "core/errors.h"
#include "core/parallel.h"
#include "sphere/detail/labeller_base.h"
#include "sphere/earth.h"

namespace gpugeo::sphere::detail {

namespace {

class CpuSphereLabeller final : public LabellerBase
{
public:
  CpuSphereLabeller(const SiteSet& sites, const SphereOptions& options, const RunControl& control)
    : mThreads(options.threads > 0 ? options.threads : defaultThreadCount())
  {
    ScopedStage stage(mTimes, "prepare");
    mSites = prepareSites(sites, mThreads, control);
    mMethod = resolveMethod(options.method, false, sites.count);
    mStats.uniqueSites = mSites.treeCount;
  }

  void labelQtm(int level, uint64_t first, int64_t count, int32_t* site, float* distanceKm,
                const RunControl& control) override
  {
    checkQtmRange(level, first, count);
    ScopedStage stage(mTimes, "compute");
    const std::vector<double> sines = qtmSineTable(level);
    QtmQueries q;
    q.trig = {sines.data(), int32_t(1) << level};
    q.level = level;
    q.first = first;
    q.count = count;
    run(q, site, distanceKm, control);
  }

  void labelGridRows(const LonLatGrid& grid, int64_t row0, int64_t rows, int32_t* site, float* distanceKm,
                     const RunControl& control) override
  {
    checkGridBand(grid, row0, rows);
    ScopedStage stage(mTimes, "compute");
    const GridTables t = gridTables(grid, row0, rows);
    GridQueries q;
    q.colSin = t.colSin.data();
    q.colCos = t.colCos.data();
    q.rowSin = t.rowSin.data();
    q.rowCos = t.rowCos.data();
    q.width = grid.width;
    q.rows = rows;
    run(q, site, distanceKm, control);
  }

  Backend backend() const override { return Backend::Cpu; }
  std::string deviceName() const override { return cpuDescription(mThreads); }

private:
  template <class Queries>
  void run(const Queries& q, int32_t* site, float* distanceKm, const RunControl& control)
  {
    const SiteTreeView tree = mSites.hostView();
    const bool brute = mMethod != NearestMethod::Indexed;
    std::atomic<int64_t> blocks{0}, candidates{0}, overflow{0};
    parallelFor(
      q.blocks(), 64, mThreads,
      [&](int64_t begin, int64_t end) {
        int64_t localCandidates = 0, localOverflow = 0;
        Vec3 points[kBlockPoints];
        int64_t out[kBlockPoints];
        int32_t list[kBlockCandidates];
        for (int64_t b = begin; b < end; ++b)
        {
          int valid = 0;
          for (int j = 0; j < kBlockPoints; ++j)
            if (q.point(b, j, points[valid], out[valid]))
              ++valid;
          if (brute)
          {
            bruteForce(points, out, valid, site, distanceKm);
            continue;
          }
          Vec3 sum{0, 0, 0};
          for (int j = 0; j < valid; ++j)
          {
            sum.x = exact::add(sum.x, points[j].x);
            sum.y = exact::add(sum.y, points[j].y);
            sum.z = exact::add(sum.z, points[j].z);
          }
          const Vec3 c = normalised(sum.x, sum.y, sum.z);
          double rho2 = 0.0;
          for (int j = 0; j < valid; ++j)
          {
            const double d2 = chord2(c, points[j]);
            rho2 = d2 > rho2 ? d2 : rho2;
          }
          const Nearest centre = treeNearest(tree, c);
          const int32_t found = treeGather(tree, c, gatherRadius2(rho2, centre.d2), list, kBlockCandidates);
          localCandidates += found;
          for (int j = 0; j < valid; ++j)
          {
            Nearest best{1e300, 0x7fffffff};
            if (found > kBlockCandidates)
              best = treeNearest(tree, points[j]);
            else
              for (int32_t k = 0; k < found; ++k)
              {
                const double d2 = chord2(points[j], tree.sites[list[k]]);
                if (better(d2, tree.original[list[k]], best))
                  best = {d2, tree.original[list[k]]};
              }
            site[out[j]] = best.site;
            if (distanceKm)
              distanceKm[out[j]] = chordToKm(best.d2, kEarthRadiusKm);
          }
          if (found > kBlockCandidates)
            ++localOverflow;
        }
        if (!brute)
        {
          blocks += end - begin;
          candidates += localCandidates;
          overflow += localOverflow;
        }
      },
      &control);
    mStats.blocks += blocks;
    mStats.candidates += candidates;
    mStats.overflowBlocks += overflow;
  }

  // Every site in input order; strict "smaller" keeps the lowest index on ties. Four points at a time
  // share each site load.
  void bruteForce(const Vec3* points, const int64_t* out, int valid, int32_t* site, float* distanceKm) const
  {
    const std::vector<Vec3>& s = mSites.vectors;
    for (int j0 = 0; j0 < valid; j0 += 4)
    {
      const int lanes = valid - j0 < 4 ? valid - j0 : 4;
      double best[4] = {1e300, 1e300, 1e300, 1e300};
      int32_t bestSite[4] = {0, 0, 0, 0};
      for (std::size_t i = 0; i < s.size(); ++i)
        for (int k = 0; k < lanes; ++k)
        {
          const double d2 = chord2(points[j0 + k], s[i]);
          if (d2 < best[k])
          {
            best[k] = d2;
            bestSite[k] = int32_t(i);
          }
        }
      for (int k = 0; k < lanes; ++k)
      {
        site[out[j0 + k]] = bestSite[k];
        if (distanceKm)
          distanceKm[out[j0 + k]] = chordToKm(best[k], kEarthRadiusKm);
      }
    }
  }

  int mThreads;
};

}  // namespace

std::unique_ptr<SphereLabeller> makeCpuSphereLabeller(const SiteSet& sites, const SphereOptions& options,
                                                      const RunControl& control)
{
  return std::make_unique<CpuSphereLabeller>(sites, options, control);
}

}  // namespace gpugeo::sphere::detail

namespace gpugeo::sphere {

void qtmCellDistancesKm(const SiteSet& sites, int level, uint64_t first, int64_t count, const int32_t* site,
                        double* distanceKm, int threads, const RunControl& control)
{
  detail::checkQtmRange(level, first, count);
  const std::vector<double> sines = detail::qtmSineTable(level);
  const detail::QtmTrig trig{sines.data(), int32_t(1) << level};
  parallelFor(count, 4096, threads, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
    {
      const int32_t s = site[i];
      if (s < 0 || s >= sites.count)
        throw InvalidInput("a cell's site index is outside the sites");
      const auto u = unitVector(sites.lon[s], sites.lat[s]);
      const detail::Vec3 centre = detail::qtmCellCentre(trig, first + uint64_t(i), level);
      distanceKm[i] = detail::chordToKmDouble(detail::chord2(centre, detail::Vec3{u[0], u[1], u[2]}), kEarthRadiusKm);
    }
  }, &control);
}

std::unique_ptr<SphereLabeller> makeSphereLabeller(Backend backend, const SiteSet& sites, const SphereOptions& options,
                                                   const RunControl& control)
{
  if (backend == Backend::Gpu)
    return detail::makeCudaSphereLabeller(sites, options, control);
  return detail::makeCpuSphereLabeller(sites, options, control);
}

}  // namespace gpugeo::sphere
