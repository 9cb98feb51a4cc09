#include "point_reader.h"

#include <cmath>
#include <limits>

#include <qgsabstractgeometry.h>
#include <qgscoordinatereferencesystem.h>
#include <qgscoordinatetransform.h>
#include <qgsfeature.h>
#include <qgsfeaturerequest.h>
#include <qgsprocessingutils.h>
#include <qgsgeometry.h>
#include <qgsgeometrycollection.h>
#include <qgspoint.h>
#include <qgsprocessingcontext.h>
#include <qgsexception.h>
#include <qgsprocessingfeedback.h>

#include "core/errors.h"

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
    const int64_t halfNanBefore = points.halfNan;
    auto addPoint = [&](const QgsPoint& p) {
      if (std::isnan(p.x()) && std::isnan(p.y()))
        return;
      if (std::isnan(p.x()) || std::isnan(p.y()))
      {
        ++points.halfNan;
        return;
      }
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
      if (!options.explodeMultipoints && collection->numGeometries() > 1)
      {
        ++points.skippedMultipart;
        continue;
      }
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
      if (points.halfNan == halfNanBefore)
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

void checkSites(const PointSet& points, int64_t maxSites, QgsProcessingFeedback* feedback, bool allowNone)
{
  if (points.canceled)
    throw Canceled();
  if (points.skippedNull + points.skippedEmpty > 0)
    feedback->pushWarning(QObject::tr("Skipped %1 features without geometry and %2 with an empty geometry.")
                            .arg(points.skippedNull)
                            .arg(points.skippedEmpty));
  if (points.skippedMultipart > 0)
    feedback->pushWarning(QObject::tr("Skipped %1 multipoint features of more than one point.").arg(points.skippedMultipart));
  const int64_t siteCount = points.siteCount();
  if (points.halfNan > 0)
    throw QgsProcessingException(QObject::tr("%1 of %2 points have a NaN coordinate; fix or filter them out.")
                                   .arg(points.halfNan)
                                   .arg(points.halfNan + siteCount));
  if (siteCount == 0 && allowNone)
  {
    feedback->pushWarning(QObject::tr("The input layer has no point to use (%1 features, %2 without geometry, %3 with "
                                      "an empty geometry): the output holds them with empty fields.")
                            .arg(points.featureIds.size() + points.skippedNull + points.skippedEmpty + points.skippedMultipart)
                            .arg(points.skippedNull)
                            .arg(points.skippedEmpty));
    return;
  }
  if (siteCount == 0)
    throw QgsProcessingException(
      QObject::tr("The input layer has no point to use (%1 features without geometry, %2 with an empty geometry).")
        .arg(points.skippedNull)
        .arg(points.skippedEmpty));
  if (siteCount > maxSites)
    throw QgsProcessingException(
      QObject::tr("%1 points is more than the %2 this algorithm takes.").arg(siteCount).arg(maxSites));
  feedback->pushInfo(QObject::tr("%1 sites from %2 features.").arg(siteCount).arg(points.featureIds.size()));
}

std::vector<int32_t> siteLabels(const SiteFeatures& points, int fieldIndex, const QString& fieldName, int32_t labelNoData,
                                QgsProcessingFeedback* feedback)
{
  const int64_t siteCount = points.siteCount();
  std::vector<int32_t> labels(static_cast<std::size_t>(siteCount));
  int64_t nullLabels = 0;
  for (int64_t s = 0; s < siteCount; ++s)
  {
    if (fieldIndex < 0)
    {
      labels[std::size_t(s)] = static_cast<int32_t>(s + 1);
      continue;
    }
    const QVariant value = points.attributes[points.featureOf[s]].at(fieldIndex);
    if (value.isNull())
    {
      labels[std::size_t(s)] = labelNoData;
      ++nullLabels;
      continue;
    }
    bool ok = false;
    const double number = value.toDouble(&ok);
    if (!ok || number != std::floor(number) || number <= double(labelNoData) || number > double(INT32_MAX))
      throw QgsProcessingException(QObject::tr("Feature %1: the label %2 in field %3 is not a whole number between "
                                               "%4 and 2147483647.")
                                     .arg(points.featureIds[points.featureOf[s]])
                                     .arg(value.toString(), fieldName)
                                     .arg(qint64(labelNoData) + 1));
    labels[std::size_t(s)] = static_cast<int32_t>(number);
  }
  if (nullLabels > 0)
    feedback->pushWarning(QObject::tr("%1 sites have a NULL label; their pixels are nodata.").arg(nullLabels));
  return labels;
}

namespace {

void warnOfWrappedLongitudes(const PointSet& points, QgsProcessingFeedback* feedback)
{
  int64_t wrapped = 0;
  for (const double lon : points.x)
    wrapped += std::fabs(lon) > 180.0 && std::fabs(lon) <= 720.0;
  if (wrapped > 0)
    feedback->pushWarning(QObject::tr("%1 points have a longitude outside -180..180 degrees; they are taken modulo "
                                      "360.")
                            .arg(wrapped));
}

}  // namespace

void transformToLonLat(PointSet& points, const QgsCoordinateReferenceSystem& from,
                       const QgsCoordinateTransformContext& transformContext, QgsProcessingFeedback* feedback)
{
  const QgsCoordinateReferenceSystem wgs84(QStringLiteral("EPSG:4326"));
  if (!from.isValid())
    feedback->pushWarning(QObject::tr("The layer has no CRS: its coordinates are taken as longitude and latitude in "
                                      "degrees (EPSG:4326). Set the layer's CRS if they are not."));
  if (!from.isValid() || from == wgs84)
  {
    warnOfWrappedLongitudes(points, feedback);
    return;
  }
  QgsCoordinateTransform transform(from, wgs84, transformContext);
  const int64_t siteCount = points.siteCount();
  int64_t failed = 0;
  for (int64_t s = 0; s < siteCount; ++s)
  {
    try
    {
      const QgsPointXY p = transform.transform(QgsPointXY(points.x[std::size_t(s)], points.y[std::size_t(s)]));
      points.x[std::size_t(s)] = p.x();
      points.y[std::size_t(s)] = p.y();
    }
    catch (const QgsCsException&)
    {
      points.x[std::size_t(s)] = points.y[std::size_t(s)] = std::numeric_limits<double>::quiet_NaN();
      ++failed;
    }
  }
  if (failed > 0)
    throw QgsProcessingException(QObject::tr("%1 of %2 points could not be transformed from %3 to EPSG:4326.")
                                   .arg(failed)
                                   .arg(siteCount)
                                   .arg(from.authid()));
}

QgsAttributes siteAttributes(const SiteFeatures& sites, int64_t s)
{
  return sites.attributes[std::size_t(sites.featureOf[std::size_t(s)])];
}

QgsFeatureSink::SinkFlags siteSinkFlags(const SiteFeatures& sites)
{
  for (std::size_t s = 1; s < sites.featureOf.size(); ++s)
    if (sites.featureOf[s] == sites.featureOf[s - 1])
      return QgsFeatureSink::RegeneratePrimaryKey;
  return QgsFeatureSink::SinkFlags();
}

}  // namespace gpugeo
