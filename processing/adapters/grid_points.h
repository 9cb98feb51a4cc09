// A point layer placed on a raster's grid (the outlets of gpugeo:watersheds, the pour points of
// gpugeo:snappourpoints): each feature's point in the raster's CRS (transformed from the layer's; a
// longitude taken modulo 360 onto a geographic raster) and its cell.
#pragma once

#include <cstdint>
#include <vector>

#include <QString>

#include <qgscoordinatetransformcontext.h>
#include <qgsfeature.h>
#include <qgspointxy.h>

#include "adapters/dem_reader.h"

class QgsFeatureSource;
class QgsProcessingFeedback;

namespace gpugeo {

struct GridPoint
{
  QgsFeatureId id = 0;
  QgsAttributes attributes;
  QgsPointXY point;  // in the raster's CRS
  int64_t column = 0, row = 0;
};

// Every feature's point (the first of a multipoint) of `source`, the layer of parameter `parameter`,
// on `raster` (`rasterName` in messages: "the flow direction raster"). Features without a point (no
// geometry, an empty one, a NaN coordinate) are skipped and counted in the log. Throws
// QgsProcessingException naming the points off the raster (the first ten), a point the transform
// fails on, and a layer without a point.
std::vector<GridPoint> readGridPoints(QgsFeatureSource& source, const QString& parameter, const QString& rasterName,
                                      const DemRaster& raster, const QgsCoordinateTransformContext& transforms,
                                      QgsProcessingFeedback* feedback);

// How far (metres) a point's cell (column, row) moved to `cell` (y * width + x) by a snapping: the
// columns and rows moved times the cell sizes of the point's row.
double snapMetres(const DemRaster& raster, int64_t column, int64_t row, int64_t cell);

// "OUTLETS feature 7", for messages.
QString featureName(const QString& parameter, QgsFeatureId id);

}  // namespace gpugeo
