// The native core's polygons by band (core/polygon_rings.h) as QGIS geometries, for every
// algorithm that traces bands (mesh isobands, isochrones, watersheds).
#pragma once

#include <cstddef>
#include <memory>

#include <qgsmultipolygon.h>

#include "core/polygon_rings.h"

namespace gpugeo {

// Where the native coordinates go: x' = x0 + dx * x, y' = y0 + dy * y (the identity by default).
struct AxisMap
{
  double x0 = 0, dx = 1, y0 = 0, dy = 1;
};

// Band `band`'s polygons as one multipolygon (null when the band has none), with z when `withZ`.
std::unique_ptr<QgsMultiPolygon> bandMultiPolygon(const BandPolygons& polygons, std::size_t band, bool withZ,
                                                  const AxisMap& map = AxisMap());

}  // namespace gpugeo
