#include "adapters/band_geometry.h"

#include <QVector>

#include <qgslinestring.h>
#include <qgspolygon.h>

namespace gpugeo {

namespace {

// Points [first, last) as one line string (QgsLineString's array constructor: no per-point objects).
QgsLineString* ring(const BandPolygons& b, int64_t first, int64_t last, bool withZ, const AxisMap& map)
{
  const auto mapped = [first, last](const std::vector<double>& v, double o, double d) {
    QVector<double> out(int(last - first));
    for (int64_t i = first; i < last; ++i)
      out[int(i - first)] = o + d * v[std::size_t(i)];
    return out;
  };
  return new QgsLineString(mapped(b.x, map.x0, map.dx), mapped(b.y, map.y0, map.dy),
                           withZ ? mapped(b.z, 0.0, 1.0) : QVector<double>());
}

}  // namespace

std::unique_ptr<QgsMultiPolygon> bandMultiPolygon(const BandPolygons& b, std::size_t band, bool withZ,
                                                  const AxisMap& map)
{
  if (band + 1 >= b.bandPolygon.size() || b.bandPolygon[band] == b.bandPolygon[band + 1])
    return nullptr;
  auto multi = std::make_unique<QgsMultiPolygon>();
  for (int64_t q = b.bandPolygon[band]; q < b.bandPolygon[band + 1]; ++q)
  {
    const std::size_t firstRing = std::size_t(b.polygonRing[std::size_t(q)]);
    const std::size_t endRing = std::size_t(b.polygonRing[std::size_t(q) + 1]);
    auto polygon = std::make_unique<QgsPolygon>();
    polygon->setExteriorRing(ring(b, b.ringPoint[firstRing], b.ringPoint[firstRing + 1], withZ, map));
    for (std::size_t r = firstRing + 1; r < endRing; ++r)
      polygon->addInteriorRing(ring(b, b.ringPoint[r], b.ringPoint[r + 1], withZ, map));
    multi->addGeometry(polygon.release());
  }
  return multi;
}

}  // namespace gpugeo
