// The tiled DEM tools run by several ranks (threads of this process, distributed_ranks.h) whose
// tiles go to the GPU: all the workers on the GPU (the flats' rounds then on the GPUs, with and
// without tiles kept between them), and one on the GPU beside CPU workers (the MPI job's "1 GPU rank
// + CPU ranks"): the fill, the flat masks, the directions, the accumulation and the
// raised flats equal to the single-process CPU run bit for bit, the travel times within 1e-12
// relative and the same watershed. Each test skips itself where no GPU can be used.
#include <gtest/gtest.h>

#include <cmath>

#include "core/backend.h"
#include "distributed_ranks.h"

using namespace gpugeo::dem::tiled::testing_ranks;

namespace {

bool gpuUsable()
{
  return probeGpu().usable;
}

// Rank r's device: the GPU for ranks in `onGpu` (a bit per rank), the CPU for the others; each GPU
// rank keeps `keepBytes` of the flats' tiles between rounds.
PerRank gpuRanks(unsigned onGpu, int64_t keepBytes = 0)
{
  return [onGpu, keepBytes](TiledOptions& o, int rank) {
    o.backend = (onGpu >> rank) & 1u ? Backend::Gpu : Backend::Cpu;
    o.gpuKeepBytes = keepBytes;
  };
}

}  // namespace

TEST(DemDistributedGpu, GpuAndMixedRanksGiveTheSingleProcessRun)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  const std::vector<TestDem> dems{randomDem(31, 173, 141, 2.0, 8), spiralValley(61)};
  for (std::size_t k = 0; k < dems.size(); ++k)
    for (const auto& [tw, th] : {std::pair<int64_t, int64_t>{16, 16}, {37, 23}})
    {
      const Outputs expected = runChain(dems[k], tiles(tw, th), 0);
      for (const unsigned onGpu : {0b1110u, 0b0010u, 0b0110u})
      {
        SCOPED_TRACE("DEM " + std::to_string(k) + ", tiles " + std::to_string(tw) + " x " + std::to_string(th) +
                     ", GPU ranks " + std::to_string(onGpu));
        expectSame(runChain(dems[k], tiles(tw, th), 4, gpuRanks(onGpu)), expected);
      }
      // Every worker on the GPU: the flats' rounds on the GPUs, each keeping all its tiles, or about
      // three between the rounds (a tile's later visit on another rank, or on its own after it was
      // dropped, starts again from the elevations; one on a rank that kept it from an earlier round
      // lowers those older distances).
      for (const int64_t keep : {int64_t(1) << 30, 3 * kFlatsKeptBytesPerTileCell * (tw + 4) * (th + 4)})
      {
        SCOPED_TRACE("DEM " + std::to_string(k) + ", tiles " + std::to_string(tw) + " x " + std::to_string(th) +
                     ", every worker on the GPU, keeping " + std::to_string(keep) + " bytes");
        expectSame(runChain(dems[k], tiles(tw, th), 4, gpuRanks(0b1110u, keep)), expected);
      }
    }
}

TEST(DemDistributedGpu, IsochronesOnGpuRanksAreTheSingleProcessRuns)
{
  if (!gpuUsable())
    GTEST_SKIP() << "no usable GPU: " << probeGpu().reason;
  const TestDem d = randomDem(32, 151, 127, 1.0, 5, 30, 30, true);
  ChainOptions o;
  o.model.kind = VelocityModel::Kind::Slope;
  o.model.channelArea = 0.05;
  o.interval = 0.5;
  o.maxBands = 100000;
  o.keepFilled = o.keepDirections = o.keepAccumulation = true;
  const ChainResult chain = isochroneChain(Backend::Cpu, d.grid(), o, 2, noCancel);
  const Isochrones expected = runIsochrones(d, chain, o.model, nullptr, tiles(16, 16), 0);
  for (const unsigned onGpu : {0b110u, 0b010u})
  {
    const Isochrones got = runIsochrones(d, chain, o.model, nullptr, tiles(16, 16), 3, gpuRanks(onGpu));
    int64_t off = 0;
    for (std::size_t i = 0; i < got.minutes.size(); ++i)
    {
      const double a = got.minutes[i], b = expected.minutes[i];
      off += std::isnan(a) != std::isnan(b) || (!std::isnan(b) && !(std::fabs(a - b) <= 1e-12 * std::fabs(b)));
    }
    EXPECT_EQ(off, 0) << onGpu;
    EXPECT_EQ(got.travel.watershedCells, expected.travel.watershedCells) << onGpu;
    EXPECT_EQ(got.travel.tilesWithTimes, expected.travel.tilesWithTimes) << onGpu;
  }
}
