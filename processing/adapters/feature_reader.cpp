#include "feature_reader.h"

#include <cmath>
#include <functional>
#include <memory>

#include <qgsabstractgeometry.h>
#include <qgscurve.h>
#include <qgscurvepolygon.h>
#include <qgsexception.h>
#include <qgsfeature.h>
#include <qgsfeaturerequest.h>
#include <qgsgeometrycollection.h>
#include <qgslinestring.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingutils.h>
#include <qgswkbtypes.h>

#include "core/errors.h"

namespace gpugeo {

voronoi::FeatureSites FeatureSet::sites() const
{
  voronoi::FeatureSites s;
  s.x = x.data();
  s.y = y.data();
  s.pathStart = pathStart.data();
  s.pathFeature = pathFeature.data();
  s.pathCount = static_cast<int64_t>(pathFeature.size());
  s.featureCount = siteCount();
  s.pathPart = polygons ? pathPart.data() : nullptr;
  return s;
}

namespace {

// Whether every vertex of the geometry is a finite point (an empty geometry has none).
void checkCoordinates(const QgsAbstractGeometry& geometry, QgsFeatureId id)
{
  for (auto v = geometry.vertices_begin(); v != geometry.vertices_end(); ++v)
  {
    const QgsPoint p = *v;
    if (!std::isfinite(p.x()) || !std::isfinite(p.y()))
      throw QgsProcessingException(QObject::tr("Feature %1 has a coordinate that is not a finite number; fix the "
                                               "geometry or filter the feature out.")
                                     .arg(id));
  }
}

}  // namespace

FeatureSet readFeatures(QgsProcessingFeatureSource& source, bool polygons, const PointReadOptions& options,
                        QgsProcessingFeedback* feedback)
{
  FeatureSet set;
  set.polygons = polygons;
  QgsFeatureRequest request;
  if (!options.keepAllAttributes)
    request.setSubsetOfAttributes(options.attributes);
  const bool keepAttributes = options.keepAllAttributes || !options.attributes.isEmpty();
  const long long total = source.featureCount();
  const double step = total > 0 ? 100.0 / double(total) : 0.0;
  QgsFeatureIterator iterator = source.getFeatures(request, QgsProcessingFeatureSource::FlagSkipGeometryValidityChecks);
  QgsFeature feature;
  long long read = 0;
  while (iterator.nextFeature(feature))
  {
    if (feedback && (read & 1023) == 0)
    {
      if (feedback->isCanceled())
      {
        set.canceled = true;
        break;
      }
      feedback->setProgress(step * double(read));
    }
    ++read;
    if (!feature.hasGeometry())
    {
      ++set.skippedNull;
      continue;
    }
    const QgsGeometry geometry = feature.geometry();
    if (geometry.isEmpty())
    {
      ++set.skippedEmpty;
      continue;
    }
    checkCoordinates(*geometry.constGet(), feature.id());
    const QgsRectangle box = geometry.boundingBox();
    if (set.geometries.empty())
      set.extent = box;
    else
      set.extent.combineExtentWith(box);
    set.featureOf.push_back(static_cast<int64_t>(set.featureIds.size()));
    set.featureIds.push_back(feature.id());
    if (keepAttributes)
      set.attributes.push_back(feature.attributes());
    if (geometry.constGet()->hasCurvedSegments())
      ++set.curved;
    set.geometries.push_back(geometry);
  }
  return set;
}

void flatten(FeatureSet& set, double tolerance)
{
  int32_t part = 0;
  auto addCurve = [&](const QgsCurve& curve, int32_t site) {
    std::unique_ptr<QgsLineString> line(curve.curveToLine(tolerance, QgsAbstractGeometry::MaximumDifference));
    if (!line || line->isEmpty())
      return;
    for (int i = 0; i < line->numPoints(); ++i)
    {
      set.x.push_back(line->xAt(i));
      set.y.push_back(line->yAt(i));
    }
    set.pathStart.push_back(static_cast<int64_t>(set.x.size()));
    set.pathFeature.push_back(site);
    set.pathPart.push_back(part);
  };
  std::function<void(const QgsAbstractGeometry&, int32_t)> addGeometry = [&](const QgsAbstractGeometry& g, int32_t site) {
    if (const auto* collection = qgsgeometry_cast<const QgsGeometryCollection*>(&g))
    {
      for (int i = 0; i < collection->numGeometries(); ++i)
        addGeometry(*collection->geometryN(i), site);
    }
    else if (const auto* polygon = qgsgeometry_cast<const QgsCurvePolygon*>(&g))
    {
      if (polygon->exteriorRing())
        addCurve(*polygon->exteriorRing(), site);
      for (int i = 0; i < polygon->numInteriorRings(); ++i)
        addCurve(*polygon->interiorRing(i), site);
      ++part;
    }
    else if (const auto* curve = qgsgeometry_cast<const QgsCurve*>(&g))
    {
      addCurve(*curve, site);
      ++part;
    }
  };
  for (size_t s = 0; s < set.geometries.size(); ++s)
    addGeometry(*set.geometries[s].constGet(), static_cast<int32_t>(s));
  set.geometries.clear();
  set.geometries.shrink_to_fit();
}

void checkFeatures(const FeatureSet& set, int64_t maxSites, QgsProcessingFeedback* feedback)
{
  if (set.canceled)
    throw Canceled();
  if (set.skippedNull + set.skippedEmpty > 0)
    feedback->pushWarning(QObject::tr("Skipped %1 features without geometry and %2 with an empty geometry.")
                            .arg(set.skippedNull)
                            .arg(set.skippedEmpty));
  if (set.siteCount() == 0)
    throw QgsProcessingException(
      QObject::tr("The input layer has no feature to use (%1 features without geometry, %2 with an empty geometry).")
        .arg(set.skippedNull)
        .arg(set.skippedEmpty));
  if (set.siteCount() > maxSites)
    throw QgsProcessingException(
      QObject::tr("%1 features is more than the %2 this algorithm takes.").arg(set.siteCount()).arg(maxSites));
  feedback->pushInfo(QObject::tr("%1 %2 features.").arg(set.siteCount()).arg(set.polygons ? QObject::tr("polygon")
                                                                                         : QObject::tr("line")));
}

}  // namespace gpugeo
