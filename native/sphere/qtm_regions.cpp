#include "sphere/qtm_regions.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "core/errors.h"
#include "core/parallel.h"
#include "sphere/qtm.h"

namespace gpugeo::sphere {

namespace {

struct Vertex
{
  int32_t lon, lat;
  bool operator==(const Vertex& o) const { return lon == o.lon && lat == o.lat; }
  bool operator<(const Vertex& o) const { return lon < o.lon || (lon == o.lon && lat < o.lat); }
};

struct Edge
{
  int32_t label;
  Vertex from, to;
  bool operator<(const Edge& o) const
  {
    if (label != o.label)
      return label < o.label;
    if (!(from == o.from))
      return from < o.from;
    return to < o.to;
  }
};

int64_t cross(const Vertex& o, const Vertex& a, const Vertex& b)
{
  return int64_t(a.lon - o.lon) * (b.lat - o.lat) - int64_t(a.lat - o.lat) * (b.lon - o.lon);
}

// Twice the signed shoelace area of a closed ring, in lattice units.
int64_t ringArea2(const std::vector<Vertex>& ring)
{
  int64_t sum = 0;
  for (std::size_t i = 0; i + 1 < ring.size(); ++i)
    sum += int64_t(ring[i].lon) * ring[i + 1].lat - int64_t(ring[i + 1].lon) * ring[i].lat;
  return sum;
}

// Whether the point (px/2, py/2) lies inside the closed ring (crossing number); the point is never on it.
bool contains(const std::vector<Vertex>& ring, int64_t px2, int64_t py2)
{
  bool inside = false;
  for (std::size_t i = 0; i + 1 < ring.size(); ++i)
  {
    const int64_t ax = 2 * int64_t(ring[i].lon), ay = 2 * int64_t(ring[i].lat);
    const int64_t bx = 2 * int64_t(ring[i + 1].lon), by = 2 * int64_t(ring[i + 1].lat);
    if ((ay > py2) != (by > py2))
    {
      // x of the crossing compared with px2, without division
      const __int128 lhs = (__int128)(px2 - ax) * (by - ay);
      const __int128 rhs = (__int128)(bx - ax) * (py2 - ay);
      if ((by > ay) ? lhs < rhs : lhs > rhs)
        inside = !inside;
    }
  }
  return inside;
}

std::vector<Vertex> dropCollinear(const std::vector<Vertex>& ring)
{
  // ring is closed; work on the open cycle
  std::vector<Vertex> open(ring.begin(), ring.end() - 1);
  std::vector<Vertex> out;
  const std::size_t n = open.size();
  for (std::size_t i = 0; i < n; ++i)
  {
    const Vertex& prev = open[(i + n - 1) % n];
    const Vertex& next = open[(i + 1) % n];
    if (cross(prev, open[i], next) != 0)
      out.push_back(open[i]);
  }
  out.push_back(out.front());
  return out;
}

LatticeRing toRing(const std::vector<Vertex>& ring)
{
  LatticeRing r;
  for (const Vertex& v : ring)
  {
    r.lonUnits.push_back(v.lon);
    r.latUnits.push_back(v.lat);
  }
  return r;
}

}  // namespace

std::vector<QtmRegion> qtmRegions(int level, const int32_t* labels, int32_t labelCount, int threads,
                                  const RunControl& control)
{
  if (level < 0 || level > kMaxQtmLevel)
    throw InvalidInput("QTM level " + std::to_string(level) + " is outside 0.." + std::to_string(kMaxQtmLevel));
  const int64_t cells = int64_t(qtmCellCount(level));
  const int32_t n = int32_t(1) << level;
  threads = threads > 0 ? threads : defaultThreadCount();

  // 1. Boundary edges, each with its cell on the left; cell counts per label.
  std::vector<Edge> edges;
  std::vector<int64_t> cellCount(std::size_t(labelCount), 0);
  std::mutex merge;
  parallelFor(
    cells, 1 << 14, threads,
    [&](int64_t begin, int64_t end) {
      std::vector<Edge> local;
      std::vector<int64_t> localCount(std::size_t(labelCount), 0);
      for (int64_t id = begin; id < end; ++id)
      {
        const int32_t label = labels[id];
        if (label < 0 || label >= labelCount)
          throw InvalidInput("label " + std::to_string(label) + " of cell " + std::to_string(id) + " is out of range");
        ++localCount[std::size_t(label)];
        const QtmLattice c = qtmLatticeFromId(uint64_t(id), level);
        const QtmCorners k = qtmCellCorners(c, level);
        uint64_t nb[3];
        qtmNeighbours(uint64_t(id), level, nb);
        const Vertex apex{k.lonUnits[0], k.latUnits[0]}, west{k.lonUnits[1], k.latUnits[1]},
          east{k.lonUnits[2], k.latUnits[2]};
        const bool pole = c.row == 0;
        // The ring of the cell in lon/lat, as (edge, neighbour or -1 for the rectangle's edge).
        Vertex ring[4];
        int64_t across[4];
        int count;
        const bool westMeridian180 = c.pos == 0 && (c.octant & 3) == 0;
        const bool eastMeridian180 = c.pos == 2 * c.row && (c.octant & 3) == 3;
        if (pole)
        {
          const Vertex eastPole{east.lon, apex.lat}, westPole{west.lon, apex.lat};
          ring[0] = west; ring[1] = east; ring[2] = eastPole; ring[3] = westPole;
          across[0] = int64_t(nb[0]);
          across[1] = eastMeridian180 ? -1 : int64_t(nb[2]);
          across[2] = -1;
          across[3] = westMeridian180 ? -1 : int64_t(nb[1]);
          count = 4;
        }
        else
        {
          // apex, west, east with the edges (apex-west: west side), (west-east: across), (east-apex: east side)
          ring[0] = apex; ring[1] = west; ring[2] = east;
          across[0] = westMeridian180 ? -1 : int64_t(nb[1]);
          across[1] = int64_t(nb[0]);
          across[2] = eastMeridian180 ? -1 : int64_t(nb[2]);
          count = 3;
        }
        int64_t orientation = 0;
        for (int i = 0; i < count; ++i)
          orientation += int64_t(ring[i].lon) * ring[(i + 1) % count].lat - int64_t(ring[(i + 1) % count].lon) * ring[i].lat;
        for (int i = 0; i < count; ++i)
        {
          if (across[i] >= 0 && labels[across[i]] == label)
            continue;
          const Vertex& a = ring[i];
          const Vertex& b = ring[(i + 1) % count];
          local.push_back(orientation > 0 ? Edge{label, a, b} : Edge{label, b, a});
        }
      }
      std::lock_guard<std::mutex> lock(merge);
      edges.insert(edges.end(), local.begin(), local.end());
      for (std::size_t l = 0; l < localCount.size(); ++l)
        cellCount[l] += localCount[l];
    },
    &control);
  (void)n;
  std::sort(edges.begin(), edges.end());
  if (control.isCanceled())
    throw Canceled();

  // 2. Rings per label.
  std::vector<QtmRegion> regions;
  std::vector<char> used(edges.size(), 0);
  std::size_t labelBegin = 0;
  while (labelBegin < edges.size())
  {
    const int32_t label = edges[labelBegin].label;
    std::size_t labelEnd = labelBegin;
    while (labelEnd < edges.size() && edges[labelEnd].label == label)
      ++labelEnd;
    std::vector<std::vector<Vertex>> shells, holes;
    // next edge of each: at its end, the first boundary edge clockwise from the way back, which keeps
    // the same corner of the region on the left
    std::vector<std::size_t> next(labelEnd - labelBegin);
    for (std::size_t e = labelBegin; e < labelEnd; ++e)
    {
      const Vertex at = edges[e].to;
      const Edge key{label, at, {INT32_MIN, INT32_MIN}};
      const std::size_t first =
        std::size_t(std::lower_bound(edges.begin() + labelBegin, edges.begin() + labelEnd, key) - edges.begin());
      const double backAngle = std::atan2(double(edges[e].from.lat - at.lat), double(edges[e].from.lon - at.lon));
      std::size_t chosen = SIZE_MAX;
      double bestTurn = 10.0;
      for (std::size_t o = first; o < labelEnd && edges[o].from == at; ++o)
      {
        const double outAngle = std::atan2(double(edges[o].to.lat - at.lat), double(edges[o].to.lon - at.lon));
        double turn = backAngle - outAngle;  // clockwise from the way back, in (0, 2 pi]
        while (turn <= 0.0)
          turn += 2.0 * M_PI;
        if (turn < bestTurn)
        {
          bestTurn = turn;
          chosen = o;
        }
      }
      if (chosen == SIZE_MAX)
        throw Error("QTM region tracing: an open boundary at label " + std::to_string(label));
      next[e - labelBegin] = chosen;
    }
    // Follow the cycles; a cycle through one vertex twice (a region touching itself) is split there,
    // so every ring is simple.
    const auto addRing = [&](std::vector<Vertex> ring) {
      if (ringArea2(ring) > 0)
        shells.push_back(dropCollinear(ring));
      else
        holes.push_back(dropCollinear(ring));
    };
    for (std::size_t start = labelBegin; start < labelEnd; ++start)
    {
      if (used[start])
        continue;
      std::vector<Vertex> path;
      std::map<Vertex, std::size_t> position;
      std::size_t e = start;
      while (!used[e])
      {
        used[e] = 1;
        const Vertex v = edges[e].from;
        auto found = position.find(v);
        if (found != position.end())
        {
          std::vector<Vertex> ring(path.begin() + std::ptrdiff_t(found->second), path.end());
          ring.push_back(v);
          for (std::size_t k = found->second + 1; k < path.size(); ++k)
            position.erase(path[k]);
          path.resize(found->second + 1);
          addRing(std::move(ring));
        }
        else
        {
          position[v] = path.size();
          path.push_back(v);
        }
        e = next[e - labelBegin];
      }
      if (e != start || path.empty())
        throw Error("QTM region tracing: a boundary cycle did not close at label " + std::to_string(label));
      path.push_back(path.front());
      if (path.size() > 3)
        addRing(std::move(path));
    }

    QtmRegion region;
    region.label = label;
    region.cells = cellCount[std::size_t(label)];
    std::vector<int64_t> shellArea;
    for (const auto& s : shells)
    {
      region.polygons.push_back({toRing(s), {}});
      shellArea.push_back(ringArea2(s));
    }
    for (const auto& h : holes)
    {
      // the midpoint of the hole's first edge: on no ring of this label but the hole itself
      const int64_t px2 = int64_t(h[0].lon) + h[1].lon, py2 = int64_t(h[0].lat) + h[1].lat;
      std::size_t owner = SIZE_MAX;
      for (std::size_t s = 0; s < shells.size(); ++s)
        if ((owner == SIZE_MAX || shellArea[s] < shellArea[owner]) && contains(shells[s], px2, py2))
          owner = s;
      if (owner == SIZE_MAX)
        throw Error("QTM region tracing: a hole outside every shell at label " + std::to_string(label));
      region.polygons[owner].holes.push_back(toRing(h));
    }
    double area = 0.0;
    const auto ringArea = [&](const LatticeRing& r) {
      std::vector<double> lon, lat;
      for (std::size_t i = 0; i + 1 < r.lonUnits.size(); ++i)
      {
        lon.push_back(qtmLonDegrees(r.lonUnits[i], level));
        lat.push_back(qtmLatDegrees(r.latUnits[i], level));
      }
      return lonLatPolygonArea(lon.data(), lat.data(), lon.size());
    };
    for (const LatticePolygon& p : region.polygons)
    {
      area += ringArea(p.shell);
      for (const LatticeRing& h : p.holes)
        area += ringArea(h);
    }
    region.areaSteradians = area;
    regions.push_back(std::move(region));
    labelBegin = labelEnd;
    if (control.isCanceled())
      throw Canceled();
  }
  return regions;
}

}  // namespace gpugeo::sphere
