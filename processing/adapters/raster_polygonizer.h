// Traces the regions of an integer GeoTIFF into polygons with GDAL's polygonizer (4-connected
// regions, exact pixel edges, holes included), grouped by region value. GDAL does this well and
// streams the raster row by row; writing our own tracer would add nothing.
#pragma once

#include <cstdint>
#include <functional>

#include <QString>

#include <qgsgeometry.h>

class QgsFeedback;

namespace gpugeo {

// Calls `regionFound(value, polygon)` for each connected region of band 1 of `rasterPath`, skipping
// nodata. Returns false when canceled; throws QgsProcessingException on a GDAL failure.
bool polygonizeRegions(const QString& rasterPath, const std::function<void(int32_t, QgsGeometry&&)>& regionFound,
                       QgsFeedback* feedback);

}  // namespace gpugeo
