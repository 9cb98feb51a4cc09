// The GPU backend's bands of sites (voronoi/detail/site_bands.h), on the host: the partition, and
// that every site that can be a pixel's nearest lies in a band its labelling waits for.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "voronoi/detail/site_bands.h"

using namespace gpugeo::voronoi::detail;

namespace {

constexpr int kSide = 512;

struct BandCase
{
  std::string name;
  std::vector<Point> points;
  int shift = 1;
};

std::vector<BandCase> cases()
{
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<BandCase> out;
  {
    BandCase c{"uniform, some outside the grid", {}, 1};
    for (int i = 0; i < 30000; ++i)
      c.points.push_back(Point{-40 + (kSide + 80) * u(rng), -40 + (kSide + 80) * u(rng)});
    out.push_back(c);
  }
  {
    BandCase c{"a dense cluster and a few sites elsewhere", {}, 1};
    for (int i = 0; i < 25000; ++i)
      c.points.push_back(Point{230 + 60 * u(rng), 300 + 60 * u(rng)});
    for (int i = 0; i < 100; ++i)
      c.points.push_back(Point{kSide * u(rng), kSide * u(rng)});
    out.push_back(c);
  }
  {
    BandCase c{"sites in the top rows only, one far below the grid", {}, 2};
    for (int i = 0; i < 6000; ++i)
      c.points.push_back(Point{kSide * u(rng), 200 * u(rng)});
    c.points.push_back(Point{100.5, 5000.0});
    out.push_back(c);
  }
  {
    BandCase c{"whole coordinates: ties and copies", {}, 1};
    std::uniform_int_distribution<int> k(0, kSide);
    for (int i = 0; i < 20000; ++i)
      c.points.push_back(Point{double(k(rng)), double(k(rng))});
    out.push_back(c);
  }
  return out;
}

int bandOf(const SiteBands& b, const Point& p)
{
  const int row = bucketRow(p, b.shift, b.by);
  return int(std::upper_bound(b.row0.begin(), b.row0.end(), row) - b.row0.begin()) - 1;
}

// Where band k comes in the upload order.
int arrival(const SiteBands& b, int k)
{
  return int(std::find(b.order.begin(), b.order.end(), k) - b.order.begin());
}

// The point of the upload order after which a root's piece is labelled.
int readyAt(const SiteBands& b, int32_t root)
{
  for (int p = 0; p < b.pieces(); ++p)
    if (std::binary_search(b.pieceRoots.begin() + b.pieceAt[size_t(p)], b.pieceRoots.begin() + b.pieceAt[size_t(p) + 1],
                           root))
      return b.pieceReady[size_t(p)];
  return -1;
}

}  // namespace

TEST(SiteBands, ThePartitionKeepsEverySiteOnceInBandOrder)
{
  for (const BandCase& c : cases())
  {
    const int64_t n = int64_t(c.points.size());
    const SiteBands b = planSiteBands(c.points.data(), n, kSide, kSide, c.shift, 16, 8, 2);
    ASSERT_GE(b.count(), 3) << c.name;
    ASSERT_LE(b.count(), 8) << c.name;
    EXPECT_EQ(b.offset.front(), 0) << c.name;
    EXPECT_EQ(b.offset.back(), n) << c.name;
    EXPECT_EQ(b.row0.back(), b.by) << c.name;
    for (int k = 0; k < b.count(); ++k)
    {
      EXPECT_EQ((b.row0[size_t(k)] << c.shift) % 64, 0) << c.name << ": bands are whole root rows";
      EXPECT_LE(b.needFirst[size_t(k)], k) << c.name;
      EXPECT_GE(b.needLast[size_t(k)], k) << c.name;
    }
    std::vector<int> order = b.order;
    std::sort(order.begin(), order.end());
    for (int k = 0; k < b.count(); ++k)
      EXPECT_EQ(order[size_t(k)], k) << c.name << ": the upload order takes every band once";
    // The labelling's pieces: every root of the grid in one of them, increasing within each, the
    // pieces in the order their bands arrive.
    const int rootsY = (kSide + kRootSide - 1) / kRootSide;
    EXPECT_EQ(b.rootsX, (kSide + kRootSide - 1) / kRootSide) << c.name;
    const int pieces = b.pieces();
    ASSERT_GE(pieces, 1) << c.name;
    ASSERT_EQ(b.pieceAt.size(), size_t(pieces) + 1) << c.name;
    EXPECT_EQ(b.pieceAt.front(), 0) << c.name;
    EXPECT_EQ(size_t(b.pieceAt.back()), b.pieceRoots.size()) << c.name;
    std::vector<int> rootSeen(size_t(b.rootsX) * size_t(rootsY), 0);
    for (int p = 0; p < pieces; ++p)
    {
      EXPECT_LT(b.pieceAt[size_t(p)], b.pieceAt[size_t(p) + 1]) << c.name << ": no empty piece";
      EXPECT_GE(b.pieceReady[size_t(p)], 0) << c.name;
      EXPECT_LT(b.pieceReady[size_t(p)], b.count()) << c.name;
      if (p > 0)
        EXPECT_LT(b.pieceReady[size_t(p) - 1], b.pieceReady[size_t(p)]) << c.name;
      for (int32_t i = b.pieceAt[size_t(p)]; i < b.pieceAt[size_t(p) + 1]; ++i)
      {
        const int32_t root = b.pieceRoots[size_t(i)];
        ASSERT_GE(root, 0) << c.name;
        ASSERT_LT(size_t(root), rootSeen.size()) << c.name;
        ++rootSeen[size_t(root)];
        if (i > b.pieceAt[size_t(p)])
          EXPECT_LT(b.pieceRoots[size_t(i) - 1], root) << c.name << ": increasing within a piece";
      }
    }
    EXPECT_TRUE(std::all_of(rootSeen.begin(), rootSeen.end(), [](int k) { return k == 1; }))
      << c.name << ": every root labelled once";
    std::vector<Point> banded(c.points.size());
    std::vector<int32_t> original(c.points.size(), -1);
    partitionSites(b, c.points.data(), n, banded.data(), original.data(), 3);
    std::vector<int> seen(c.points.size(), 0);
    for (int k = 0; k < b.count(); ++k)
      for (int32_t i = b.offset[size_t(k)]; i < b.offset[size_t(k) + 1]; ++i)
      {
        ASSERT_GE(original[size_t(i)], 0) << c.name;
        ++seen[size_t(original[size_t(i)])];
        const Point& p = c.points[size_t(original[size_t(i)])];
        EXPECT_TRUE(banded[size_t(i)].x == p.x && banded[size_t(i)].y == p.y) << c.name;
        EXPECT_EQ(bandOf(b, p), k) << c.name;
        if (i > b.offset[size_t(k)])
          EXPECT_LT(original[size_t(i) - 1], original[size_t(i)]) << c.name << ": stable within a band";
      }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; })) << c.name;
    // The input indices as gaps (what goes up), restored as the device's scan does.
    const IndexGaps gaps = planIndexGaps(b, original.data(), 2);
    std::vector<uint8_t> bytes(size_t(gaps.at.back()));
    writeIndexGaps(b, gaps, original.data(), bytes.data(), 2);
    for (int k = 0; k < b.count(); ++k)
    {
      EXPECT_EQ(gaps.at[size_t(k)] % 16, 0) << c.name;
      int64_t restored = gaps.first[size_t(k)];
      for (int32_t i = b.offset[size_t(k)]; i < b.offset[size_t(k) + 1]; ++i)
      {
        ASSERT_EQ(restored, original[size_t(i)]) << c.name << ": band " << k << " site " << i;
        const uint8_t* at = bytes.data() + gaps.at[size_t(k)];
        const int64_t j = i - b.offset[size_t(k)];
        int64_t gap = 0;
        if (gaps.bytes[size_t(k)] == 1)
          gap = at[j];
        else if (gaps.bytes[size_t(k)] == 2)
          gap = reinterpret_cast<const uint16_t*>(at)[j];
        else
          gap = reinterpret_cast<const int32_t*>(at)[j];
        restored += gap;
      }
    }
    // The fullest bucket, counted the plain way.
    std::vector<int32_t> perBucket(size_t(b.bx) * size_t(b.by), 0);
    for (const Point& p : c.points)
    {
      const int column = bucketOf(p.x, c.shift, b.bx);
      ++perBucket[size_t(bucketRow(p, c.shift, b.by)) * size_t(b.bx) + size_t(column)];
    }
    const int32_t fullest = *std::max_element(perBucket.begin(), perBucket.end());
    EXPECT_EQ(fullestBucket(b, banded.data(), 2), fullest) << c.name;
    EXPECT_GE(b.fullestCell, fullest) << c.name << ": buckets of at most a cell's side";
  }
}

TEST(SiteBands, EveryPixelsNearestSitesLieInTheBandsItsLabellingWaitsFor)
{
  for (const BandCase& c : cases())
  {
    const int64_t n = int64_t(c.points.size());
    const SiteBands b = planSiteBands(c.points.data(), n, kSide, kSide, c.shift, 16, 8, 2);
    ASSERT_GE(b.count(), 3) << c.name;
    int64_t checked = 0;
    for (int row = 0; row < kSide; row += 9)
      for (int column = (row / 9) % 11; column < kSide; column += 11)
      {
        const double px = column + 0.5, py = row + 0.5;
        double best = std::numeric_limits<double>::infinity();
        for (const Point& p : c.points)
          best = std::min(best, squaredDistance(px, py, p));
        const int band = bandOf(b, Point{px, py});
        const int ready = readyAt(b, (row / kRootSide) * b.rootsX + column / kRootSide);
        for (const Point& p : c.points)
          if (squaredDistance(px, py, p) <= best)
          {
            const int k = bandOf(b, p);
            EXPECT_TRUE(k >= b.needFirst[size_t(band)] && k <= b.needLast[size_t(band)])
              << c.name << ": pixel (" << column << ", " << row << ") in band " << band << " has a nearest site in band "
              << k;
            EXPECT_LE(arrival(b, k), ready) << c.name << ": pixel (" << column << ", " << row
                                            << ") is labelled before its nearest site's band " << k << " is there";
          }
        ++checked;
      }
    EXPECT_GT(checked, 2000) << c.name;
  }
  // A crowded square's roots start with the bands of their few rows, while the sparse roots beside
  // them in the same rows wait for the bands far above and below (400,000 sites on 4096 x 4096, 90 %
  // of them in a square of 400 pixels at (1000, 2200)).
  {
    std::mt19937_64 rng(79);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    std::vector<Point> points;
    for (int i = 0; i < 400000; ++i)
      points.push_back(i % 10 == 0 ? Point{4096 * u(rng), 4096 * u(rng)} : Point{1000 + 400 * u(rng), 2200 + 400 * u(rng)});
    const SiteBands b = planSiteBands(points.data(), int64_t(points.size()), 4096, 4096, 0, 16, 16, 2);
    ASSERT_GE(b.count(), 8);
    int earlier = 0;  // root rows whose crowded roots start before the sparse ones beside them
    for (int ry = 2200 / kRootSide + 1; ry < 2600 / kRootSide; ++ry)
    {
      int sparse = 0, crowded = 0;
      for (int rx = 0; rx < b.rootsX; ++rx)
      {
        const int ready = readyAt(b, ry * b.rootsX + rx);
        if (rx > 1000 / kRootSide && rx < 1400 / kRootSide - 1)
          crowded = std::max(crowded, ready);
        else
          sparse = std::max(sparse, ready);
      }
      earlier += crowded < sparse ? 1 : 0;
    }
    EXPECT_GE(earlier, 3);
  }
  // Uniform sites: a band waits for its neighbours, not for every band.
  const BandCase uniform = cases().front();
  const SiteBands b = planSiteBands(uniform.points.data(), int64_t(uniform.points.size()), kSide, kSide, 1, 16, 8, 2);
  ASSERT_GE(b.count(), 6);
  EXPECT_EQ(b.needFirst[0], 0);
  EXPECT_LE(b.needLast[0], 2);
  EXPECT_GE(b.needFirst[size_t(b.count()) - 1], b.count() - 3);
}

TEST(SiteBands, NoBandsWhereTheyCannotHelp)
{
  std::vector<Point> oneRow;
  for (int i = 0; i < 1000; ++i)
    oneRow.push_back(Point{i * 0.5, 10.25});
  EXPECT_EQ(planSiteBands(oneRow.data(), 1000, kSide, kSide, 1, 16, 8, 2).count(), 0) << "one root row holds all";
  std::vector<Point> outside;
  for (int i = 0; i < 1000; ++i)
    outside.push_back(Point{-5.0 - i, 3.0 * i});
  EXPECT_EQ(planSiteBands(outside.data(), 1000, kSide, kSide, 1, 16, 8, 2).count(), 0) << "no site inside the grid";
  std::vector<Point> uniform;
  for (int i = 0; i < 1000; ++i)
    uniform.push_back(Point{double(i % 500), double(i / 2)});
  EXPECT_EQ(planSiteBands(uniform.data(), 1000, kSide, kSide, 7, 16, 8, 2).count(), 0) << "buckets above a root";
  EXPECT_GE(planSiteBands(uniform.data(), 1000, kSide, kSide, 1, 16, 8, 2).count(), 3);
}

// The input indices' gaps take 1, 2 or 4 bytes by the widest gap of each band; an empty band none.
TEST(SiteBands, IndexGapsTakeTheFewestBytesThatHoldABandsGaps)
{
  SiteBands b;
  b.row0 = {0, 1, 2, 3, 4};
  b.offset = {0, 3, 6, 6, 9};
  const std::vector<int32_t> original = {0, 70000, 70001, 5, 300, 1000, 7, 8, 255 + 8};
  const IndexGaps gaps = planIndexGaps(b, original.data(), 2);
  EXPECT_EQ(gaps.bytes, (std::vector<int>{4, 2, 1, 1}));
  EXPECT_EQ(gaps.first, (std::vector<int32_t>{0, 5, 0, 7}));
  EXPECT_EQ(gaps.at, (std::vector<int64_t>{0, 16, 32, 32, 48}));
  std::vector<uint8_t> bytes(size_t(gaps.at.back()), 0xee);
  writeIndexGaps(b, gaps, original.data(), bytes.data(), 2);
  const int32_t* wide = reinterpret_cast<const int32_t*>(bytes.data());
  EXPECT_EQ(wide[0], 70000);
  EXPECT_EQ(wide[1], 1);
  EXPECT_EQ(wide[2], 0);
  const uint16_t* mid = reinterpret_cast<const uint16_t*>(bytes.data() + 16);
  EXPECT_EQ(mid[0], 295);
  EXPECT_EQ(mid[1], 700);
  EXPECT_EQ(bytes[32], 1);
  EXPECT_EQ(bytes[33], 255);
  EXPECT_EQ(bytes[34], 0);
}
