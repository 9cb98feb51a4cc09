#include "point_reader.h"

#include <cmath>

#include <qgsabstractgeometry.h>
#include <qgsfeature.h>
#include <qgsfeaturerequest.h>
#include <qgsprocessingutils.h>
#include <qgsgeometry.h>
#include <qgsgeometrycollection.h>
#include <qgspoint.h>
#include <qgsprocessingcontext.h>
#include <qgsexception.h>
#include <qgsprocessingfeedback.h>

namespace gpugeo {

PointSet readPoints(QgsProcessingFeatureSource& source, const PointReadOptions& options, QgsProcessingFeedback* feedback)
{
  PointSet points;
  QgsFeatureRequest request;
  if (!options.keepAllAttributes)
    request.setSubsetOfAttributes(options.attributes);
  const bool keepAttributes = options.keepAllAttributes || !options.attributes.isEmpty();

  const long long total = source.featureCount();
  const double step = total > 0 ? 100.0 / double(total) : 0.0;
  const long long reserve = total > 0 ? total : 0;
  points.x.reserve(reserve);
  points.y.reserve(reserve);
  points.featureOf.reserve(reserve);
  points.featureIds.reserve(reserve);

  QgsFeatureIterator iterator = source.getFeatures(request, QgsProcessingFeatureSource::FlagSkipGeometryValidityChecks);
  QgsFeature feature;
  long long read = 0;
  double xMin = INFINITY, yMin = INFINITY, xMax = -INFINITY, yMax = -INFINITY;
  while (iterator.nextFeature(feature))
  {
    if (feedback && (read & 1023) == 0)
    {
      if (feedback->isCanceled())
      {
        points.canceled = true;
        break;
      }
      feedback->setProgress(step * double(read));
    }
    ++read;
    if (!feature.hasGeometry())
    {
      ++points.skippedNull;
      continue;
    }
    const QgsAbstractGeometry* geometry = feature.geometry().constGet();
    const int64_t featureIndex = static_cast<int64_t>(points.featureIds.size());
    int64_t sitesOfFeature = 0;
    auto addPoint = [&](const QgsPoint& p) {
      if (std::isnan(p.x()) || std::isnan(p.y()))
        return;
      if (!std::isfinite(p.x()) || !std::isfinite(p.y()))
        throw QgsProcessingException(QObject::tr("Feature %1 has an infinite coordinate; fix the geometry or "
                                                 "filter the feature out.")
                                       .arg(feature.id()));
      points.x.push_back(p.x());
      points.y.push_back(p.y());
      points.featureOf.push_back(featureIndex);
      xMin = std::min(xMin, p.x());
      yMin = std::min(yMin, p.y());
      xMax = std::max(xMax, p.x());
      yMax = std::max(yMax, p.y());
      ++sitesOfFeature;
    };
    if (const auto* collection = qgsgeometry_cast<const QgsGeometryCollection*>(geometry))
    {
      for (int part = 0; part < collection->numGeometries(); ++part)
        if (const auto* point = qgsgeometry_cast<const QgsPoint*>(collection->geometryN(part)))
          addPoint(*point);
    }
    else if (const auto* point = qgsgeometry_cast<const QgsPoint*>(geometry))
    {
      addPoint(*point);
    }
    if (sitesOfFeature == 0)
    {
      ++points.skippedEmpty;
      continue;
    }
    points.featureIds.push_back(feature.id());
    if (keepAttributes)
      points.attributes.push_back(feature.attributes());
  }
  if (!points.x.empty())
    points.extent = QgsRectangle(xMin, yMin, xMax, yMax, false);
  return points;
}

}  // namespace gpugeo
