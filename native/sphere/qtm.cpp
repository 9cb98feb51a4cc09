#include "sphere/qtm.h"

#include <algorithm>
#include <cmath>

#include "core/errors.h"

namespace gpugeo::sphere {

std::string qtmAddress(uint64_t id, int level)
{
  std::string text(std::size_t(level) + 1, '0');
  text[0] = char('0' + int(id >> (2 * level)));
  for (int l = 0; l < level; ++l)
    text[std::size_t(level - l)] = char('0' + int((id >> (2 * l)) & 3u));
  return text;
}

uint64_t qtmIdFromAddress(const std::string& address)
{
  if (address.empty() || address.size() > std::size_t(kMaxQtmLevel) + 1 || address[0] < '0' || address[0] > '7')
    throw InvalidInput("'" + address + "' is not a QTM address (an octant digit 0-7, then up to " +
                       std::to_string(kMaxQtmLevel) + " digits 0-3)");
  uint64_t id = uint64_t(address[0] - '0');
  for (std::size_t i = 1; i < address.size(); ++i)
  {
    if (address[i] < '0' || address[i] > '3')
      throw InvalidInput("'" + address + "' is not a QTM address (child digits are 0-3)");
    id = id * 4 + uint64_t(address[i] - '0');
  }
  return id;
}

void qtmCellPolygon(uint64_t id, int level, std::vector<double>& lon, std::vector<double>& lat)
{
  const QtmCorners c = qtmCellCorners(qtmLatticeFromId(id, level), level);
  const double unit = 90.0 / double(int64_t(1) << level);
  const auto lonOf = [&](int k) { return -180.0 + unit * c.lonUnits[k]; };
  const auto latOf = [&](int k) { return unit * c.latUnits[k]; };
  lon.clear();
  lat.clear();
  const int32_t n = int32_t(1) << level;
  const bool poleCell = c.latUnits[0] == n || c.latUnits[0] == -n;
  if (poleCell)
  {
    // west, east on the base parallel, then the pole line above east and west.
    lon = {lonOf(1), lonOf(2), lonOf(2), lonOf(1)};
    lat = {latOf(1), latOf(2), latOf(0), latOf(0)};
  }
  else
  {
    lon = {lonOf(0), lonOf(1), lonOf(2)};
    lat = {latOf(0), latOf(1), latOf(2)};
  }
  if (lonLatPolygonArea(lon.data(), lat.data(), lon.size()) < 0)
  {
    std::reverse(lon.begin(), lon.end());
    std::reverse(lat.begin(), lat.end());
  }
  lon.push_back(lon.front());
  lat.push_back(lat.front());
}

double lonLatPolygonArea(const double* lon, const double* lat, std::size_t count)
{
  constexpr double toRad = M_PI / 180.0;
  double sum = 0.0;
  for (std::size_t i = 0; i < count; ++i)
  {
    const std::size_t j = (i + 1) % count;
    const double dLon = (lon[j] - lon[i]) * toRad;
    if (dLon == 0.0)
      continue;
    const double halfDLat = 0.5 * (lat[j] - lat[i]) * toRad;
    const double mid = 0.5 * (lat[j] + lat[i]) * toRad;
    const double sinc = halfDLat == 0.0 ? 1.0 : std::sin(halfDLat) / halfDLat;
    sum += dLon * std::sin(mid) * sinc;
  }
  return -sum;
}

double qtmCellArea(uint64_t id, int level)
{
  std::vector<double> lon, lat;
  qtmCellPolygon(id, level, lon, lat);
  return lonLatPolygonArea(lon.data(), lat.data(), lon.size() - 1);
}

void qtmNeighbours(uint64_t id, int level, uint64_t out[3])
{
  const QtmLattice c = qtmLatticeFromId(id, level);
  const int32_t n = int32_t(1) << level;
  const int hemisphere = c.octant & 4;
  const int westOctant = hemisphere | ((c.octant + 3) & 3);
  const int eastOctant = hemisphere | ((c.octant + 1) & 3);
  QtmLattice across = c;
  QtmLattice west = c;
  QtmLattice east = c;
  if ((c.pos & 1) == 0)
  {
    if (c.row + 1 < n)
    {
      across.row = c.row + 1;
      across.pos = c.pos + 1;
    }
    else
      across.octant = c.octant ^ 4;
    if (c.pos > 0)
      west.pos = c.pos - 1;
    else
    {
      west.octant = westOctant;
      west.pos = 2 * c.row;
    }
    if (c.pos < 2 * c.row)
      east.pos = c.pos + 1;
    else
    {
      east.octant = eastOctant;
      east.pos = 0;
    }
  }
  else
  {
    across.row = c.row - 1;
    across.pos = c.pos - 1;
    west.pos = c.pos - 1;
    east.pos = c.pos + 1;
  }
  out[0] = qtmIdFromLattice(across, level);
  out[1] = qtmIdFromLattice(west, level);
  out[2] = qtmIdFromLattice(east, level);
}

}  // namespace gpugeo::sphere
