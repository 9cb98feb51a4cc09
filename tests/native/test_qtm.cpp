// The QTM grid: counts, addresses, lattice round trips, areas, neighbours, geometry.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "core/errors.h"
#include "sphere/qtm.h"

using namespace gpugeo::sphere;

TEST(Qtm, CellCountAndAddressRoundTrip)
{
  EXPECT_EQ(qtmCellCount(0), 8u);
  EXPECT_EQ(qtmCellCount(9), 2097152u);
  EXPECT_EQ(qtmCellCount(13), 536870912u);
  for (int level = 0; level <= 6; ++level)
    for (uint64_t id = 0; id < qtmCellCount(level); ++id)
    {
      const QtmLattice c = qtmLatticeFromId(id, level);
      ASSERT_GE(c.pos, 0) << "level " << level << " id " << id;
      ASSERT_LE(c.pos, 2 * c.row) << "level " << level << " id " << id;
      ASSERT_LT(c.row, 1 << level) << "level " << level << " id " << id;
      ASSERT_EQ(qtmIdFromLattice(c, level), id) << "level " << level;
      ASSERT_EQ(qtmIdFromAddress(qtmAddress(id, level)), id) << "level " << level;
    }
  EXPECT_EQ(qtmAddress(0, 0), "0");
  EXPECT_EQ(qtmAddress(3 * 256 + 0b00011011, 4), "30123");
  EXPECT_EQ(qtmAddress(qtmCellCount(13) - 1, 13), "73333333333333");
  EXPECT_THROW(qtmIdFromAddress("8"), gpugeo::InvalidInput);
  EXPECT_THROW(qtmIdFromAddress("34"), gpugeo::InvalidInput);
  EXPECT_THROW(qtmIdFromAddress(""), gpugeo::InvalidInput);
}

TEST(Qtm, EveryLatticePositionHasOneCell)
{
  for (int level = 0; level <= 7; ++level)
  {
    std::set<std::tuple<int, int, int>> seen;
    for (uint64_t id = 0; id < qtmCellCount(level); ++id)
    {
      const QtmLattice c = qtmLatticeFromId(id, level);
      ASSERT_TRUE(seen.insert({c.octant, c.row, c.pos}).second) << "level " << level << " id " << id;
    }
    ASSERT_EQ(seen.size(), qtmCellCount(level));
  }
}

TEST(Qtm, AreasSumToTheSphereAndChildrenToTheirParent)
{
  for (int level = 0; level <= 8; ++level)
  {
    long double total = 0;
    for (uint64_t id = 0; id < qtmCellCount(level); ++id)
    {
      const double a = qtmCellArea(id, level);
      ASSERT_GT(a, 0.0) << "level " << level << " id " << id;
      total += a;
    }
    EXPECT_NEAR(double(total), 4.0 * M_PI, 4.0 * M_PI * 1e-13) << "level " << level;
  }
  for (int level = 0; level <= 5; ++level)
    for (uint64_t id = 0; id < qtmCellCount(level); ++id)
    {
      double children = 0;
      for (uint64_t k = 0; k < 4; ++k)
        children += qtmCellArea(id * 4 + k, level + 1);
      ASSERT_NEAR(children, qtmCellArea(id, level), 1e-14) << "level " << level << " id " << id;
    }
}

TEST(Qtm, ChildrenTileTheirParentAndCornersAreTheParents)
{
  // The corner children contain the parent's corners; every child corner lies on the parent.
  for (int level = 0; level <= 6; ++level)
    for (uint64_t id = 0; id < qtmCellCount(level); ++id)
    {
      const QtmCorners p = qtmCellCorners(qtmLatticeFromId(id, level), level);
      for (int k = 1; k <= 3; ++k)
      {
        const QtmCorners c = qtmCellCorners(qtmLatticeFromId(id * 4 + uint64_t(k), level + 1), level + 1);
        // child digit 1 holds the apex, 2 the west corner, 3 the east corner (corner order apex, west, east)
        const int corner = k - 1;
        const bool pole = std::abs(p.latUnits[corner]) == (1 << level);
        ASSERT_EQ(c.latUnits[corner], 2 * p.latUnits[corner]) << "level " << level << " id " << id << " child " << k;
        if (!pole)
          ASSERT_EQ(c.lonUnits[corner], 2 * p.lonUnits[corner]) << "level " << level << " id " << id << " child " << k;
      }
    }
}

TEST(Qtm, NeighboursAreMutualAndShareAnEdge)
{
  for (int level = 0; level <= 6; ++level)
  {
    const int32_t n = 1 << level;
    for (uint64_t id = 0; id < qtmCellCount(level); ++id)
    {
      uint64_t nb[3];
      qtmNeighbours(id, level, nb);
      const QtmCorners a = qtmCellCorners(qtmLatticeFromId(id, level), level);
      for (int e = 0; e < 3; ++e)
      {
        ASSERT_NE(nb[e], id);
        uint64_t back[3];
        qtmNeighbours(nb[e], level, back);
        ASSERT_TRUE(back[0] == id || back[1] == id || back[2] == id) << "level " << level << " id " << id;
        // two shared corners (a pole counts once, whatever its longitude; +-180 are the same meridian)
        const QtmCorners b = qtmCellCorners(qtmLatticeFromId(nb[e], level), level);
        int shared = 0;
        for (int i = 0; i < 3; ++i)
          for (int j = 0; j < 3; ++j)
          {
            const bool samePole = a.latUnits[i] == b.latUnits[j] && std::abs(a.latUnits[i]) == n;
            const bool sameLon = (a.lonUnits[i] - b.lonUnits[j]) % (4 * n) == 0;
            if (a.latUnits[i] == b.latUnits[j] && (samePole || sameLon))
              ++shared;
          }
        ASSERT_EQ(shared, 2) << "level " << level << " id " << id << " edge " << e;
      }
    }
  }
}

TEST(Qtm, PolygonsAreCounterClockwiseAndOnTheLattice)
{
  std::vector<double> lon, lat;
  qtmCellPolygon(0, 0, lon, lat);  // the octant -180..-90 north: a quadrilateral reaching the pole
  ASSERT_EQ(lon.size(), 5u);
  EXPECT_EQ(lon[0], -180.0);
  EXPECT_EQ(lat[0], 0.0);
  EXPECT_EQ(lat[2], 90.0);
  EXPECT_NEAR(lonLatPolygonArea(lon.data(), lat.data(), 4), M_PI / 2, 1e-15);
  for (int level = 1; level <= 5; ++level)
    for (uint64_t id = 0; id < qtmCellCount(level); id += 7)
    {
      qtmCellPolygon(id, level, lon, lat);
      ASSERT_EQ(lon.front(), lon.back());
      ASSERT_EQ(lat.front(), lat.back());
      ASSERT_GT(lonLatPolygonArea(lon.data(), lat.data(), lon.size() - 1), 0.0);
      for (double v : lon)
        ASSERT_TRUE(v >= -180.0 && v <= 180.0);
    }
}
