#include "sphere/sphere_reference.h"

#include <cmath>

#include "sphere/qtm.h"

namespace gpugeo::sphere::reference {

namespace {
constexpr long double kPi = 3.14159265358979323846264338327950288L;
}

Point fromLonLat(long double lonDeg, long double latDeg)
{
  const long double lon = lonDeg * kPi / 180.0L;
  const long double lat = latDeg * kPi / 180.0L;
  return {cosl(lat) * cosl(lon), cosl(lat) * sinl(lon), sinl(lat)};
}

std::vector<Point> siteVectors(const SiteSet& sites)
{
  std::vector<Point> out;
  for (int64_t i = 0; i < sites.count; ++i)
    out.push_back(fromLonLat(sites.lon[i], sites.lat[i]));
  return out;
}

Point qtmCentre(uint64_t id, int level)
{
  const QtmCorners c = qtmCellCorners(qtmLatticeFromId(id, level), level);
  const long double unit = 90.0L / (long double)(int64_t(1) << level);
  Point sum{0, 0, 0};
  for (int k = 0; k < 3; ++k)
  {
    const Point v = fromLonLat(-180.0L + unit * c.lonUnits[k], unit * c.latUnits[k]);
    sum.x += v.x;
    sum.y += v.y;
    sum.z += v.z;
  }
  const long double len = sqrtl(sum.x * sum.x + sum.y * sum.y + sum.z * sum.z);
  return {sum.x / len, sum.y / len, sum.z / len};
}

Point gridPoint(const LonLatGrid& grid, int64_t row, int64_t col)
{
  return fromLonLat((long double)grid.west + ((long double)col + 0.5L) * grid.pixelWidth,
                    (long double)grid.north - ((long double)row + 0.5L) * grid.pixelHeight);
}

long double angle(const Point& a, const Point& b)
{
  const long double cx = a.y * b.z - a.z * b.y;
  const long double cy = a.z * b.x - a.x * b.z;
  const long double cz = a.x * b.y - a.y * b.x;
  return atan2l(sqrtl(cx * cx + cy * cy + cz * cz), a.x * b.x + a.y * b.y + a.z * b.z);
}

int32_t nearest(const std::vector<Point>& sites, const Point& p)
{
  int32_t best = 0;
  long double bestAngle = 10.0L;
  for (std::size_t i = 0; i < sites.size(); ++i)
  {
    const long double a = angle(p, sites[i]);
    if (a < bestAngle)
    {
      bestAngle = a;
      best = int32_t(i);
    }
  }
  return best;
}

}  // namespace gpugeo::sphere::reference
