#include "adapters/grid_points.h"

#include <cmath>
#include <optional>

#include <qgscoordinatetransform.h>
#include <qgsexception.h>
#include <qgsfeatureiterator.h>
#include <qgsfeaturesource.h>
#include <qgsprocessingfeedback.h>

#include "adapters/number_text.h"
#include "core/errors.h"

namespace gpugeo {

QString featureName(const QString& parameter, QgsFeatureId id)
{
  return QObject::tr("%1 feature %2").arg(parameter).arg(id);
}

std::vector<GridPoint> readGridPoints(QgsFeatureSource& source, const QString& parameter, const QString& rasterName,
                                      const DemRaster& raster, const QgsCoordinateTransformContext& transforms,
                                      QgsProcessingFeedback* feedback)
{
  const QgsCoordinateReferenceSystem crs = source.sourceCrs();
  std::optional<QgsCoordinateTransform> transform;
  if (crs.isValid() && raster.crs.isValid() && crs != raster.crs)
    transform = QgsCoordinateTransform(crs, raster.crs, transforms);
  else if (crs.isValid() != raster.crs.isValid())
    feedback->pushWarning(QObject::tr("The %1 layer or %2 has no CRS: the points' coordinates are taken as the "
                                      "raster's.")
                            .arg(parameter, rasterName));
  const double* gt = raster.geoTransform;
  const double west = gt[0], east = gt[0] + double(raster.width) * gt[1];
  std::vector<GridPoint> points;
  QStringList outside;
  int64_t skipped = 0;
  QgsFeatureIterator features = source.getFeatures();
  QgsFeature feature;
  while (features.nextFeature(feature))
  {
    if (feedback->isCanceled())
      throw Canceled();
    const QgsGeometry geometry = feature.geometry();
    if (geometry.isNull() || geometry.isEmpty())
    {
      ++skipped;
      continue;
    }
    const QgsPoint first = geometry.constGet()->vertexAt(QgsVertexId(0, 0, 0));
    if (!std::isfinite(first.x()) || !std::isfinite(first.y()))
    {
      ++skipped;
      continue;
    }
    QgsPointXY p(first.x(), first.y());
    if (transform)
    {
      try
      {
        p = transform->transform(p);
      }
      catch (const QgsCsException& e)
      {
        throw QgsProcessingException(QObject::tr("Could not transform %1 from %2 to the raster's %3: %4")
                                       .arg(featureName(parameter, feature.id()), crs.authid(), raster.crs.authid(),
                                            e.what()));
      }
    }
    // A geographic raster may run past +-180: a longitude is taken modulo 360 onto it.
    if (raster.crs.isGeographic())
    {
      const double turns = std::round(((west + east) / 2.0 - p.x()) / 360.0);
      const double wrapped = p.x() + 360.0 * turns;
      if (turns != 0.0 && wrapped >= std::min(west, east) && wrapped < std::max(west, east))
        p.setX(wrapped);
    }
    const double column = (p.x() - gt[0]) / gt[1], row = (p.y() - gt[3]) / gt[5];
    if (!(column >= 0 && column < double(raster.width) && row >= 0 && row < double(raster.height)))
    {
      outside << QObject::tr("%1 (%2, %3)").arg(featureName(parameter, feature.id()), number(p.x()), number(p.y()));
      continue;
    }
    GridPoint g;
    g.id = feature.id();
    g.attributes = feature.attributes();
    g.point = p;
    g.column = int64_t(std::floor(column));
    g.row = int64_t(std::floor(row));
    points.push_back(std::move(g));
  }
  if (!outside.isEmpty())
    throw QgsProcessingException(
      QObject::tr("%1 point(s) of %2 lie outside %3, whose extent is x %4 to %5, y %6 to %7 in its CRS: %8.")
        .arg(outside.size())
        .arg(parameter, rasterName)
        .arg(number(west), number(east), number(gt[3] + double(raster.height) * gt[5]), number(gt[3]),
             outside.mid(0, 10).join(QStringLiteral("; "))));
  if (points.empty())
    throw QgsProcessingException(QObject::tr("The %1 layer has no point (%2 features without a geometry, or with an "
                                             "empty one or a NaN coordinate).")
                                   .arg(parameter)
                                   .arg(skipped));
  if (skipped > 0)
    feedback->pushInfo(QObject::tr("%1 %2 features without a point (no geometry, an empty one or a NaN coordinate) "
                                   "were skipped.")
                         .arg(skipped)
                         .arg(parameter));
  return points;
}

double snapMetres(const DemRaster& raster, int64_t column, int64_t row, int64_t cell)
{
  const double dx = double(cell % raster.width - column) * raster.cellWidth[std::size_t(row)];
  const double dy = double(cell / raster.width - row) * raster.cellHeight[std::size_t(row)];
  return std::sqrt(dx * dx + dy * dy);
}

}  // namespace gpugeo
