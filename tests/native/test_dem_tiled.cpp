// The tiled DEM tools (dem/tiled) against the in-memory ones (dem.h), bit for bit, on tile sizes from
// one cell wide to larger than the DEM: random terrains with pits, plateaus and nodata blobs, a
// spiral valley through every tile, a flat across a tile corner, a DEM all flat, tiles all nodata;
// loops across tiles; the raw-file rasters and the scratch folder; bad input, progress and cancel.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/tiled/raster_io.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/tiled/tiling.h"
#include "dem_cases.h"

using namespace gpugeo;
using namespace gpugeo::dem;
using namespace gpugeo::dem::tiled;

namespace {

RunControl noCancel;

RowSizes rowsOf(const TestDem& d)
{
  return RowSizes{d.cellWidth, d.cellHeight};
}

struct TiledChain
{
  std::vector<float> filled;
  std::vector<uint8_t> directions;     // without flat resolution
  std::vector<int64_t> cells, area;    // along the in-memory directions with flats resolved
  DirectionCounts counts;              // of `directions`
  std::vector<int32_t> combined, towards;  // the flat masks of the filled DEM
  std::vector<uint8_t> resolved;           // the directions with flats resolved
  std::vector<float> raisedCombined, raisedTowards;  // the filled DEM with its flats raised
  int64_t raisedInTurn = 0;                          // by the Combined mask
};

// What directionsTiled counts, counted on the whole grid.
DirectionCounts countDirections(const TestDem& d, const std::vector<uint8_t>& directions)
{
  DirectionCounts counts;
  for (int64_t y = 0; y < d.height; ++y)
    for (int64_t x = 0; x < d.width; ++x)
    {
      const uint8_t dir = directions[std::size_t(y * d.width + x)];
      if (dir == kNoData)
        continue;
      ++counts.perDirection[dir < 8 ? dir : 8];
      if (dir >= 8)
        continue;
      const int64_t nx = x + kDx[dir], ny = y + kDy[dir];
      counts.drainingOut += nx < 0 || ny < 0 || nx >= d.width || ny >= d.height ||
                            directions[std::size_t(ny * d.width + nx)] == kNoData;
    }
  return counts;
}

// The in-memory chain; the accumulation follows directions with flats resolved, so that flows run
// the whole length of valleys and flats (the tiled tools resolve no flats yet).
TiledChain runInMemory(const TestDem& d, std::vector<uint8_t>* resolved = nullptr)
{
  TiledChain out;
  out.filled = fillDepressions(Backend::Cpu, d.grid(), 2, noCancel);
  const Grid filled = d.gridWith(out.filled);
  out.directions = flowDirections(Backend::Cpu, filled, false, 2, noCancel);
  std::vector<uint8_t> drained = flowDirections(Backend::Cpu, filled, true, 2, noCancel);
  const Accumulation acc = flowAccumulation(Backend::Cpu, filled, drained, 2, noCancel);
  out.cells = acc.cells;
  out.area = acc.area;
  out.resolved = drained;
  if (resolved)
    *resolved = std::move(drained);
  out.counts = countDirections(d, out.directions);
  out.combined = flatMask(Backend::Cpu, filled, 2, noCancel, nullptr, FlatGradient::Combined);
  out.towards = flatMask(Backend::Cpu, filled, 2, noCancel, nullptr, FlatGradient::TowardsOutlet);
  RaisedFlats combined = raiseFlats(filled, out.combined);
  out.raisedCombined = std::move(combined.z);
  out.raisedInTurn = combined.raisedInTurn;
  out.raisedTowards = raiseFlats(filled, out.towards).z;
  return out;
}

// The same, tiled, with the accumulation along `resolved`.
TiledChain runTiled(const TestDem& d, const std::vector<uint8_t>& resolved, const TiledOptions& options)
{
  const RowSizes rows = rowsOf(d);
  MemoryRaster<float> dem(d.width, d.height, d.z), filled(d.width, d.height);
  fillTiled(dem, rows, filled, options, noCancel);
  MemoryRaster<uint8_t> directions(d.width, d.height);
  const DirectionCounts counts = directionsTiled(filled, rows, directions, options, noCancel);
  MemoryRaster<uint8_t> drained(d.width, d.height, resolved);
  MemoryRaster<int64_t> cells(d.width, d.height), area(d.width, d.height);
  accumulationTiled(drained, rows, cells, area, options, noCancel);
  TiledChain out{filled.cells(), directions.cells(), cells.cells(), area.cells(), counts, {}, {}, {}};
  ScratchFolder scratch(testing::TempDir());
  MemoryRaster<int32_t> combined(d.width, d.height), towards(d.width, d.height);
  flatMaskTiled(filled, rows, combined, FlatGradient::Combined, scratch.path(), options, noCancel);
  flatMaskTiled(filled, rows, towards, FlatGradient::TowardsOutlet, scratch.path(), options, noCancel);
  MemoryRaster<uint8_t> withFlats(d.width, d.height);
  directionsTiled(filled, rows, withFlats, options, noCancel, nullptr, &combined);
  out.combined = combined.cells();
  out.towards = towards.cells();
  out.resolved = withFlats.cells();
  RawFileRaster<float> work(scratch.path() + "/work.f32", d.width, d.height);
  MemoryRaster<float> raisedCombined(d.width, d.height), raisedTowards(d.width, d.height);
  out.raisedInTurn = raiseFlatsTiled(filled, combined, rows, work, raisedCombined, options, noCancel).raisedInTurn;
  raiseFlatsTiled(filled, towards, rows, work, raisedTowards, options, noCancel);
  out.raisedCombined = raisedCombined.cells();
  out.raisedTowards = raisedTowards.cells();
  return out;
}

// The tile sizes every case runs: tiny and odd, one cell wide or high, square, and the whole DEM.
std::vector<std::pair<int64_t, int64_t>> tileSizes(const TestDem& d)
{
  return {{7, 5}, {1, d.height}, {d.width, 1}, {3, 3}, {2, 9}, {16, 16}, {64, 40}, {d.width + 5, d.height + 5}};
}

void expectSameChain(const TestDem& d, const std::string& what)
{
  std::vector<uint8_t> resolved;
  const TiledChain expected = runInMemory(d, &resolved);
  for (const auto& [tw, th] : tileSizes(d))
    for (const int threads : {1, 3})
    {
      SCOPED_TRACE(what + ": tiles " + std::to_string(tw) + " x " + std::to_string(th) + ", " +
                   std::to_string(threads) + " threads");
      const TiledChain got = runTiled(d, resolved, tiles(tw, th, threads));
      EXPECT_TRUE(sameBits(got.filled, expected.filled));
      EXPECT_EQ(got.directions, expected.directions);
      EXPECT_EQ(got.cells, expected.cells);
      EXPECT_EQ(got.area, expected.area);
      for (int k = 0; k < 9; ++k)
        EXPECT_EQ(got.counts.perDirection[k], expected.counts.perDirection[k]) << k;
      EXPECT_EQ(got.counts.drainingOut, expected.counts.drainingOut);
      EXPECT_EQ(got.combined, expected.combined);
      EXPECT_EQ(got.towards, expected.towards);
      EXPECT_EQ(got.resolved, expected.resolved);
      EXPECT_TRUE(sameBits(got.raisedCombined, expected.raisedCombined));
      EXPECT_TRUE(sameBits(got.raisedTowards, expected.raisedTowards));
      EXPECT_EQ(got.raisedInTurn, expected.raisedInTurn);
    }
}

}  // namespace

// A raster that has only read(): readStrided goes through RasterSource's copy.
class ReadOnlyRaster : public RasterSource<int32_t>
{
public:
  explicit ReadOnlyRaster(const MemoryRaster<int32_t>& cells) : mCells(cells) {}
  int64_t width() const override { return mCells.width(); }
  int64_t height() const override { return mCells.height(); }
  void read(const Window& window, int32_t* out) const override { mCells.read(window, out); }

private:
  const MemoryRaster<int32_t>& mCells;
};

TEST(DemTiled, PerimeterPlacesAndCellsAreInverse)
{
  for (int64_t w = 1; w <= 9; ++w)
    for (int64_t h = 1; h <= 9; ++h)
    {
      const Window t{3, 4, w, h};
      int64_t count = 0;
      detail::forPerimeter(t, [&](int64_t x, int64_t y, int64_t k) {
        EXPECT_EQ(k, count++);
        EXPECT_EQ(detail::perimeterIndex(t, x, y), k);
        int64_t cx = -1, cy = -1;
        detail::perimeterCell(w, h, k, cx, cy);
        EXPECT_EQ(cx, x) << w << " x " << h << ", place " << k;
        EXPECT_EQ(cy, y) << w << " x " << h << ", place " << k;
      });
      EXPECT_EQ(count, detail::perimeterSize(t));
    }
}

TEST(DemTiled, TilesAreReadWithTheirHaloInPlace)
{
  // Every cell's value its index + 1; the halo off the raster -7. Vectors reused from a larger tile
  // (holding stale values) and read through both readStrided paths.
  const int64_t w = 23, h = 17;
  std::vector<int32_t> values(std::size_t(w * h));
  for (int64_t c = 0; c < w * h; ++c)
    values[std::size_t(c)] = int32_t(c + 1);
  const MemoryRaster<int32_t> memory(w, h, values);
  const ReadOnlyRaster copying(memory);
  std::vector<int32_t> inPlace(5000, 99), throughCopy(5000, 99);
  for (const int64_t pad : {1, 2})
    for (const Window t : {Window{0, 0, 7, 5}, Window{7, 5, 7, 5}, Window{21, 15, 2, 2}, Window{0, 0, w, h},
                           Window{0, 8, w, 1}, Window{11, 0, 1, h}})
    {
      detail::readWithHalo<int32_t>(memory, t, -7, inPlace, pad);
      detail::readWithHalo<int32_t>(copying, t, -7, throughCopy, pad);
      const int64_t pw = t.width + 2 * pad, ph = t.height + 2 * pad;
      ASSERT_EQ(int64_t(inPlace.size()), pw * ph);
      EXPECT_EQ(inPlace, throughCopy);
      for (int64_t py = 0; py < ph; ++py)
        for (int64_t px = 0; px < pw; ++px)
        {
          const int64_t x = t.x0 + px - pad, y = t.y0 + py - pad;
          const int32_t expected = x < 0 || y < 0 || x >= w || y >= h ? -7 : int32_t(y * w + x + 1);
          ASSERT_EQ(inPlace[std::size_t(py * pw + px)], expected) << "pad " << pad << ", cell " << px << ", " << py;
        }
    }
}

TEST(DemTiled, RandomTerrainsAreTheInMemoryChainBitForBit)
{
  for (const uint64_t seed : {1u, 2u, 3u})
  {
    // Plateaus (values rounded to 2 m), nodata blobs, and cells that change size by row.
    const TestDem d = randomDem(seed, 61 + int64_t(seed) * 7, 47 + int64_t(seed) * 5, seed == 2 ? 0.0 : 2.0,
                                int(6 * seed), 30, 30, seed == 3);
    expectSameChain(d, "seed " + std::to_string(seed));
  }
  // A larger one on tiles of 37 x 23 and 64 x 64: depressions and paths over many tiles.
  const TestDem d = randomDem(4, 310, 270, 0.5, 30, 25, 25, true);
  std::vector<uint8_t> resolved;
  const TiledChain expected = runInMemory(d, &resolved);
  for (const auto& [tw, th] : {std::pair<int64_t, int64_t>{37, 23}, {64, 64}})
  {
    const TiledChain got = runTiled(d, resolved, tiles(tw, th, 2));
    EXPECT_EQ(got.combined, expected.combined) << tw << " x " << th;
    EXPECT_EQ(got.resolved, expected.resolved) << tw << " x " << th;
    EXPECT_TRUE(sameBits(got.filled, expected.filled)) << tw << " x " << th;
    EXPECT_EQ(got.directions, expected.directions) << tw << " x " << th;
    EXPECT_EQ(got.cells, expected.cells) << tw << " x " << th;
    EXPECT_EQ(got.area, expected.area) << tw << " x " << th;
  }
}

TEST(DemTiled, ASpiralValleyThroughEveryTile)
{
  const TestDem d = spiralValley(57);
  // The valley's water reaches the outlet through every turn: the outlet drains most of the DEM.
  const TiledChain expected = runInMemory(d);
  EXPECT_GT(expected.cells[std::size_t(1 * 57 + 0)], 57 * 57 / 3);
  expectSameChain(d, "spiral");
}

TEST(DemTiled, AFlatWindingThroughEveryTile)
{
  // The spiral valley with a level floor: after the fill one flat, hundreds of cells long, that
  // crosses the tiles' edges again and again on its way to the outlet.
  TestDem d = spiralValley(45);
  for (float& v : d.z)
    if (v < 500.f && v > 0.f)
      v = 7.f;
  const TiledChain expected = runInMemory(d);
  EXPECT_GT(*std::max_element(expected.towards.begin(), expected.towards.end()), 300);
  expectSameChain(d, "winding flat");
  // The rounds it took on 8 x 8 tiles, in the report.
  MemoryRaster<float> filled(d.width, d.height, expected.filled);
  MemoryRaster<int32_t> mask(d.width, d.height);
  TiledReport report;
  ScratchFolder scratch(testing::TempDir());
  flatMaskTiled(filled, rowsOf(d), mask, FlatGradient::Combined, scratch.path(), tiles(8, 8), noCancel, &report);
  EXPECT_GT(report.passes, 5);
  EXPECT_EQ(mask.cells(), expected.combined);
}

TEST(DemTiled, OvertakenRimCellsAreRaisedAcrossTiles)
{
  // Flats rimmed a few float32 steps above them: many cells raised in turn, on both sides of the
  // tiles' edges.
  int64_t inTurn = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed)
  {
    const TestDem d = nearlyFlatDem(seed, 83 + int64_t(seed) * 7, 61 + int64_t(seed) * 5, seed == 2 ? -4.0 : 312.5,
                                    1.0, int(seed % 4) + 1, seed % 2 ? 6 : 0);
    std::vector<uint8_t> resolved;
    const TiledChain expected = runInMemory(d, &resolved);
    inTurn += expected.raisedInTurn;
    for (const auto& [tw, th] : {std::pair<int64_t, int64_t>{7, 5}, {1, d.height}, {16, 16}, {40, 23}})
    {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", tiles " + std::to_string(tw) + " x " + std::to_string(th));
      const TiledChain got = runTiled(d, resolved, tiles(tw, th, 2));
      EXPECT_TRUE(sameBits(got.raisedCombined, expected.raisedCombined));
      EXPECT_TRUE(sameBits(got.raisedTowards, expected.raisedTowards));
      EXPECT_EQ(got.raisedInTurn, expected.raisedInTurn);
      // The raise again with its tiles kept between rounds: one or three full tiles with their frame (a
      // band of 1 at these sizes: 2 cells a side; each visit evicts another), every one.
      for (const int64_t keep : {(tw + 4) * (th + 4) * kRaiseKeptBytesPerTileCell,
                                 3 * (tw + 4) * (th + 4) * kRaiseKeptBytesPerTileCell, int64_t(1) << 30})
      {
        SCOPED_TRACE("kept " + std::to_string(keep) + " bytes");
        TiledOptions options = tiles(tw, th, 2);
        options.hostKeepBytes = keep;
        ScratchFolder scratch(testing::TempDir());
        MemoryRaster<float> filled(d.width, d.height, got.filled), raised(d.width, d.height);
        MemoryRaster<int32_t> mask(d.width, d.height, got.combined);
        RawFileRaster<float> work(scratch.path() + "/work.f32", d.width, d.height);
        EXPECT_EQ(raiseFlatsTiled(filled, mask, rowsOf(d), work, raised, options, noCancel).raisedInTurn,
                  expected.raisedInTurn);
        EXPECT_TRUE(sameBits(raised.cells(), expected.raisedCombined));
      }
    }
  }
  EXPECT_GT(inTurn, 1000);
}

TEST(DemTiled, RaiseBandsWiderThanACellAreTheInMemoryRaise)
{
  // Tiles of 64 x 64 raise a band of 2 of their neighbours' cells; the DEMs are a cell wider and
  // higher than a whole number of tiles, so that the last column and row of tiles are one cell and
  // the bands run off the grid; 8 threads at once, tiles kept or not.
  int64_t inTurn = 0;
  for (uint64_t seed = 5; seed <= 7; ++seed)
  {
    const TestDem d = nearlyFlatDem(seed, 129, 193, seed == 6 ? -4.0 : 312.5, 1.0, int(seed % 4) + 1, seed % 2 ? 6 : 0);
    const std::vector<float> filledCells = fillDepressions(Backend::Cpu, d.grid(), 2, noCancel);
    const Grid filled = d.gridWith(filledCells);
    const std::vector<int32_t> mask = flatMask(Backend::Cpu, filled, 2, noCancel, nullptr, FlatGradient::Combined);
    const RaisedFlats expected = raiseFlats(filled, mask);
    inTurn += expected.raisedInTurn;
    // Kept: none, one whole tile with its frame (64 + 2 x 3 cells a side; each visit evicts another), every one.
    for (const int64_t keep : {int64_t(0), 70 * 70 * kRaiseKeptBytesPerTileCell, int64_t(1) << 30})
    {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", kept " + std::to_string(keep) + " bytes");
      TiledOptions options = tiles(64, 64, 8);
      options.hostKeepBytes = keep;
      ScratchFolder scratch(testing::TempDir());
      MemoryRaster<float> source(d.width, d.height, filledCells), raised(d.width, d.height);
      MemoryRaster<int32_t> masks(d.width, d.height, mask);
      RawFileRaster<float> work(scratch.path() + "/work.f32", d.width, d.height);
      const RaisedCounts counts = raiseFlatsTiled(source, masks, rowsOf(d), work, raised, options, noCancel);
      EXPECT_TRUE(sameBits(raised.cells(), expected.z));
      EXPECT_EQ(counts.raisedInTurn, expected.raisedInTurn);
    }
  }
  EXPECT_GT(inTurn, 100);
}

TEST(DemTiled, FlatsAcrossCornersAllFlatAndNodataTiles)
{
  // A depression whose flat floor lies across the corner of four 8 x 8 tiles.
  TestDem corner = randomDem(7, 40, 40, 0.0, 0);
  for (int64_t y = 4; y < 13; ++y)
    for (int64_t x = 3; x < 14; ++x)
      corner.z[std::size_t(y * 40 + x)] = -20.f;
  expectSameChain(corner, "flat across a corner");

  TestDem flat = randomDem(8, 33, 21, 0.0, 0);
  std::fill(flat.z.begin(), flat.z.end(), 12.5f);
  expectSameChain(flat, "all flat");

  // Whole tiles of nodata (8 x 8 tiles from column 8 to 23), and a DEM all nodata.
  TestDem holes = randomDem(9, 40, 30, 1.0, 3);
  for (int64_t y = 0; y < 30; ++y)
    for (int64_t x = 8; x < 24; ++x)
      holes.z[std::size_t(y * 40 + x)] = std::nanf("");
  expectSameChain(holes, "nodata tiles");

  TestDem none = randomDem(10, 12, 9, 0.0, 0);
  std::fill(none.z.begin(), none.z.end(), std::nanf(""));
  expectSameChain(none, "all nodata");

  TestDem row = randomDem(11, 80, 1, 0.0, 0);
  expectSameChain(row, "one row");
  TestDem column = randomDem(12, 1, 70, 0.0, 0);
  expectSameChain(column, "one column");
}

TEST(DemTiled, LoopsAcrossTilesAreRefused)
{
  // Four cells going round across the corner of four tiles, and a loop inside one tile.
  for (const int64_t tileSize : {int64_t(4), int64_t(64)})
  {
    MemoryRaster<uint8_t> directions(8, 8, loopAcrossTileCorners());
    MemoryRaster<int64_t> cells(8, 8), area(8, 8);
    const RowSizes rows{std::vector<double>(8, 10.0), std::vector<double>(8, 10.0)};
    EXPECT_THROW(accumulationTiled(directions, rows, cells, area, tiles(tileSize, tileSize), noCancel),
                 LoopedDirections)
      << "tiles of " << tileSize;
  }
}

TEST(DemTiled, RawFilesInAScratchFolderThatGoesAway)
{
  const TestDem d = randomDem(21, 50, 37, 1.0, 4);
  const TiledChain expected = runInMemory(d);
  const std::vector<int64_t> expectedArea =
    flowAccumulation(Backend::Cpu, d.gridWith(expected.filled), expected.directions, 2, noCancel).area;
  std::string folder;
  {
    ScratchFolder scratch(testing::TempDir());
    folder = scratch.path();
    ASSERT_TRUE(std::filesystem::is_directory(folder));
    RawFileRaster<float> dem(folder + "/dem.f32", d.width, d.height);
    dem.write(Window{0, 0, d.width, d.height}, d.z.data());
    RawFileRaster<float> filled(folder + "/filled.f32", d.width, d.height);
    RawFileRaster<uint8_t> directions(folder + "/dir.u8", d.width, d.height);
    RawFileRaster<int64_t> cells(folder + "/cells.i64", d.width, d.height), area(folder + "/area.i64", d.width, d.height);
    TiledReport report;
    fillTiled(dem, rowsOf(d), filled, tiles(9, 11), noCancel, &report);
    EXPECT_EQ(report.passes, 2);
    EXPECT_EQ(report.tiles, 6 * 4);
    EXPECT_GT(report.graphBytes, 0);
    directionsTiled(filled, rowsOf(d), directions, tiles(9, 11), noCancel);
    accumulationTiled(directions, rowsOf(d), cells, area, tiles(9, 11), noCancel);
    std::vector<float> gotFilled(d.z.size());
    filled.read(Window{0, 0, d.width, d.height}, gotFilled.data());
    EXPECT_TRUE(sameBits(gotFilled, expected.filled));
    std::vector<int64_t> gotArea(d.z.size());
    area.read(Window{0, 0, d.width, d.height}, gotArea.data());
    EXPECT_EQ(gotArea, expectedArea);
    EXPECT_GE(scratch.bytes(), int64_t(d.z.size() * (4 + 4 + 1 + 8 + 8)) - 4096 * 5);
  }
  EXPECT_FALSE(std::filesystem::exists(folder));

  // Removed after an error too.
  try
  {
    ScratchFolder scratch(testing::TempDir());
    folder = scratch.path();
    RawFileRaster<float> dem(folder + "/dem.f32", 3, 3);
    throw InvalidInput("a failing run");
  }
  catch (const InvalidInput&)
  {
  }
  EXPECT_FALSE(std::filesystem::exists(folder));
  EXPECT_THROW(RawFileRaster<float>("/proc/gpugeo-cannot-write", 3, 3), WriteFailed);
  EXPECT_THROW(ScratchFolder("/proc/gpugeo-no-such-folder"), WriteFailed);
}

// A raw raster in bands of columns, each its own file: any window reads what was written, the same as
// the one-file raster's, for bands of 1 column, of widths that do and do not divide the raster's, and
// of the whole width (one file, named as given).
TEST(DemTiled, RawFilesInBandsOfColumnsHoldTheRaster)
{
  const TestDem d = randomDem(23, 37, 29, 1.0, 4);
  const MemoryRaster<float> expected(d.width, d.height, d.z);
  ScratchFolder scratch(testing::TempDir());
  int serial = 0;
  for (const int64_t band : {int64_t(0), int64_t(1), int64_t(5), int64_t(8), int64_t(36), int64_t(37), int64_t(100)})
  {
    SCOPED_TRACE("bands of " + std::to_string(band) + " columns");
    const std::string path = scratch.path() + "/banded" + std::to_string(serial++) + ".f32";
    RawFileRaster<float> raster(path, d.width, d.height, RawFile::Mode::Create, band);
    const int64_t files = band > 0 && band < d.width ? (d.width + band - 1) / band : 1;
    EXPECT_EQ(std::filesystem::exists(path), files == 1);
    EXPECT_EQ(std::filesystem::exists(path + "." + std::to_string(files - 1)), files > 1);
    // Written in odd windows that cross the bands, then read back in others.
    for (int64_t y = 0; y < d.height; y += 6)
      for (int64_t x = 0; x < d.width; x += 7)
      {
        const Window w{x, y, std::min<int64_t>(7, d.width - x), std::min<int64_t>(6, d.height - y)};
        std::vector<float> cells(std::size_t(w.cells()));
        expected.read(w, cells.data());
        raster.write(w, cells.data());
      }
    std::vector<float> got0(4, 0.f);
    for (const Window w : {Window{0, 0, d.width, d.height}, Window{3, 2, 11, 9}, Window{35, 28, 2, 1}, Window{4, 0, 1, d.height}})
    {
      std::vector<float> got(std::size_t(w.cells())), want(std::size_t(w.cells()));
      raster.read(w, got.data());
      expected.read(w, want.data());
      EXPECT_TRUE(sameBits(got, want)) << w.x0 << " " << w.y0 << " " << w.width << " " << w.height;
    }
    EXPECT_THROW(raster.read(Window{d.width - 1, 0, 2, 1}, got0.data()), InvalidInput);
    EXPECT_THROW(raster.write(Window{0, d.height, 1, 1}, got0.data()), InvalidInput);
    // readStrided puts each row at its stride.
    std::vector<float> strided(3 * 10, -1.f), want(3 * 8);
    raster.readStrided(Window{20, 5, 8, 3}, strided.data(), 10);
    expected.read(Window{20, 5, 8, 3}, want.data());
    for (int64_t y = 0; y < 3; ++y)
      for (int64_t x = 0; x < 10; ++x)
      {
        const float expectedCell = x < 8 ? want[std::size_t(y * 8 + x)] : -1.f;
        EXPECT_EQ(std::memcmp(&strided[std::size_t(y * 10 + x)], &expectedCell, sizeof(float)), 0) << x << " " << y;
      }
  }
}

// A raster in a file mapped into memory: what one mapping writes, another of the same file (a worker's,
// mapped when first used) reads, and a read-only mapping too; a file shorter than the raster, a file
// that cannot be created, a write to a read-only mapping and a window outside the raster are clear
// errors, not faults.
TEST(DemTiled, MappedRastersShareTheirFile)
{
  const TestDem d = randomDem(24, 41, 23, 1.0, 4);
  ScratchFolder scratch(testing::TempDir());
  const std::string path = scratch.path() + "/mapped.f32";
  MappedRaster<float> created(path, d.width, d.height, RawFile::Mode::Create);
  MappedRaster<float> opened(path, d.width, d.height, RawFile::Mode::Update);
  created.write(Window{0, 0, d.width, d.height}, d.z.data());
  std::vector<float> got(d.z.size());
  opened.read(Window{0, 0, d.width, d.height}, got.data());
  EXPECT_TRUE(sameBits(got, d.z));
  // A window written through the second mapping, read through the first at a stride.
  const std::vector<float> block(6, 7.5f);
  opened.write(Window{30, 20, 3, 2}, block.data());
  std::vector<float> strided(2 * 5, -1.f);
  created.readStrided(Window{30, 20, 3, 2}, strided.data(), 5);
  EXPECT_EQ(strided, (std::vector<float>{7.5f, 7.5f, 7.5f, -1.f, -1.f, 7.5f, 7.5f, 7.5f, -1.f, -1.f}));
  EXPECT_EQ(std::filesystem::file_size(path), d.z.size() * sizeof(float));

  const MappedRaster<float> readOnly(path, d.width, d.height, RawFile::Mode::Read);
  std::vector<float> again(d.z.size());
  readOnly.read(Window{0, 0, d.width, d.height}, again.data());
  std::vector<float> now(d.z.size());
  created.read(Window{0, 0, d.width, d.height}, now.data());
  EXPECT_TRUE(sameBits(again, now));
  EXPECT_EQ(again[std::size_t(21 * d.width + 32)], 7.5f);
  MappedRaster<float> readOnlyToo(path, d.width, d.height, RawFile::Mode::Read);
  EXPECT_THROW(readOnlyToo.write(Window{0, 0, 1, 1}, block.data()), WriteFailed);
  EXPECT_THROW(created.read(Window{40, 0, 2, 1}, got.data()), InvalidInput);
  EXPECT_THROW(created.write(Window{-1, 0, 1, 1}, block.data()), InvalidInput);

  MappedRaster<float> tooLarge(path, d.width, d.height + 1, RawFile::Mode::Update);
  EXPECT_THROW(tooLarge.read(Window{0, 0, 1, 1}, got.data()), InvalidInput);
  EXPECT_THROW(MappedRaster<float>(scratch.path() + "/none.f32", 3, 3, RawFile::Mode::Read), InvalidInput);
  EXPECT_THROW(MappedRaster<float>("/proc/gpugeo-cannot-write", 3, 3, RawFile::Mode::Create), WriteFailed);
}

// A scratch disk that fills mid-run (a 1 MiB tmpfs, where this process may mount one): the write that
// finds no room throws WriteFailed naming the file and the full disk, and the scratch folder goes.
TEST(DemTiled, AFullScratchDiskIsAClearError)
{
  const std::string mountPoint = testing::TempDir() + "gpugeo-full-disk";
  std::filesystem::create_directories(mountPoint);
  if (std::system(("mount -t tmpfs -o size=1m tmpfs " + mountPoint + " 2>/dev/null").c_str()) != 0)
  {
    std::filesystem::remove(mountPoint);
    GTEST_SKIP() << "cannot mount a small tmpfs here (not root, or no CAP_SYS_ADMIN)";
  }
  std::string folder, message;
  const TestDem d = randomDem(12, 700, 600, 1.0, 0);  // 1.6 MiB of float32: more than the disk
  const MemoryRaster<float> dem(d.width, d.height, d.z);
  try
  {
    ScratchFolder scratch(mountPoint);
    folder = scratch.path();
    RawFileRaster<float> filled(folder + "/filled.f32", d.width, d.height);  // sparse until written
    fillTiled(dem, rowsOf(d), filled, tiles(64, 64), noCancel);
  }
  catch (const WriteFailed& e)
  {
    message = e.what();
  }
  EXPECT_NE(message.find("filled.f32"), std::string::npos) << message;
  EXPECT_NE(message.find("the disk is full"), std::string::npos) << message;
  EXPECT_FALSE(folder.empty());
  EXPECT_FALSE(std::filesystem::exists(folder));
  EXPECT_EQ(std::system(("umount " + mountPoint).c_str()), 0);
  std::filesystem::remove(mountPoint);
}

TEST(DemTiled, ProgressBadInputAndCancel)
{
  const TestDem d = randomDem(31, 30, 20, 1.0, 0);
  MemoryRaster<float> dem(d.width, d.height, d.z), filled(d.width, d.height);
  TiledOptions options = tiles(7, 5);
  std::vector<std::pair<int, int64_t>> seen;
  options.onTile = [&](int pass, int64_t done, int64_t count) {
    EXPECT_EQ(count, 5 * 4);
    seen.emplace_back(pass, done);
  };
  fillTiled(dem, rowsOf(d), filled, options, noCancel);
  ASSERT_EQ(seen.size(), 2u * 20u);
  EXPECT_EQ(seen[19], std::make_pair(1, int64_t(20)));
  EXPECT_EQ(seen.back(), std::make_pair(2, int64_t(20)));

  EXPECT_THROW(fillTiled(dem, rowsOf(d), filled, tiles(0, 5), noCancel), InvalidInput);
  EXPECT_THROW(fillTiled(dem, RowSizes{{30.0}, {30.0}}, filled, tiles(7, 5), noCancel), InvalidInput);
  RowSizes tiny = rowsOf(d);
  tiny.cellWidth[3] = 1e-300;
  EXPECT_THROW(fillTiled(dem, tiny, filled, tiles(7, 5), noCancel), InvalidInput);
  MemoryRaster<float> empty(0, 0);
  EXPECT_THROW(fillTiled(empty, RowSizes{}, filled, tiles(7, 5), noCancel), InvalidInput);

  RunControl cancel;
  std::atomic<int> polls{0};
  cancel.canceled = [&] { return ++polls > 3; };
  EXPECT_THROW(fillTiled(dem, rowsOf(d), filled, tiles(3, 3, 1), cancel), Canceled);
}
