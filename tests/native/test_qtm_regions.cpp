// QTM region polygons from labels: areas equal the cells', rings are simple and closed, every label
// with cells gets a region, the sphere is covered once.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "sphere/qtm.h"
#include "sphere/qtm_regions.h"
#include "sphere/sphere_nearest.h"
#include "sphere_cases.h"

using namespace gpugeo;
using namespace gpugeo::sphere;

namespace {

void checkRing(const LatticeRing& r, const std::string& where)
{
  ASSERT_GE(r.lonUnits.size(), 4u) << where;
  ASSERT_EQ(r.lonUnits.front(), r.lonUnits.back()) << where;
  ASSERT_EQ(r.latUnits.front(), r.latUnits.back()) << where;
  std::set<std::pair<int32_t, int32_t>> seen;
  for (std::size_t i = 0; i + 1 < r.lonUnits.size(); ++i)
    ASSERT_TRUE(seen.insert({r.lonUnits[i], r.latUnits[i]}).second) << where << ": vertex visited twice";
}

void checkRegions(const std::vector<int32_t>& labels, int level, int32_t labelCount, const std::string& name)
{
  const auto regions = qtmRegions(level, labels.data(), labelCount, 0, RunControl{});
  std::vector<double> cellArea(std::size_t(labelCount), 0.0);
  std::vector<int64_t> cells(std::size_t(labelCount), 0);
  for (std::size_t id = 0; id < labels.size(); ++id)
  {
    cellArea[std::size_t(labels[id])] += qtmCellArea(id, level);
    ++cells[std::size_t(labels[id])];
  }
  std::size_t withCells = 0;
  for (int64_t c : cells)
    withCells += c > 0;
  ASSERT_EQ(regions.size(), withCells) << name;
  double total = 0.0;
  for (const QtmRegion& r : regions)
  {
    const std::string where = name + " level " + std::to_string(level) + " label " + std::to_string(r.label);
    ASSERT_EQ(r.cells, cells[std::size_t(r.label)]) << where;
    ASSERT_NEAR(r.areaSteradians, cellArea[std::size_t(r.label)], 1e-12) << where;
    ASSERT_FALSE(r.polygons.empty()) << where;
    for (const LatticePolygon& p : r.polygons)
    {
      checkRing(p.shell, where);
      for (const LatticeRing& h : p.holes)
        checkRing(h, where + " hole");
    }
    total += r.areaSteradians;
  }
  EXPECT_NEAR(total, 4.0 * M_PI, 1e-11) << name;
}

}  // namespace

TEST(QtmRegions, NearestSiteRegions)
{
  for (const auto& c : cases::standardCases())
    for (int level : {0, 1, 3, 5, 7})
    {
      auto labeller = makeSphereLabeller(Backend::Cpu, c.sites(), {}, RunControl{});
      std::vector<int32_t> labels(qtmCellCount(level));
      labeller->labelQtm(level, 0, int64_t(labels.size()), labels.data(), nullptr, RunControl{});
      checkRegions(labels, level, int32_t(c.lon.size()), c.name);
    }
}

TEST(QtmRegions, OneLabelIsTheWholeSphereClosedAtThePoles)
{
  std::vector<int32_t> labels(qtmCellCount(4), 0);
  const auto regions = qtmRegions(4, labels.data(), 1, 0, RunControl{});
  ASSERT_EQ(regions.size(), 1u);
  ASSERT_EQ(regions[0].polygons.size(), 1u);
  const LatticeRing& shell = regions[0].polygons[0].shell;
  // the rectangle -180..180, -90..90 after collinear points are dropped
  EXPECT_EQ(shell.lonUnits.size(), 5u);
  EXPECT_TRUE(regions[0].polygons[0].holes.empty());
  EXPECT_NEAR(regions[0].areaSteradians, 4 * M_PI, 1e-12);
}

TEST(QtmRegions, RandomLabelsWithHolesAndPinches)
{
  // Random labels from very few values make regions with holes, islands and corner-touching cells.
  std::mt19937 rng(3);
  for (int level : {2, 4, 6})
    for (int32_t labelCount : {2, 3})
    {
      std::vector<int32_t> labels(qtmCellCount(level));
      std::uniform_int_distribution<int32_t> pick(0, labelCount - 1);
      for (auto& l : labels)
        l = pick(rng);
      checkRegions(labels, level, labelCount, "random labels " + std::to_string(labelCount));
    }
}
