#include "pointneighbours_algorithm.h"

#include <cmath>
#include <memory>
#include <vector>

#include <qgsexception.h>
#include <qgsfeature.h>
#include <qgsfeaturesink.h>
#include <qgslinestring.h>
#include <qgspoint.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>
#include <qgsprocessingutils.h>

#include "adapters/point_reader.h"
#include "core/errors.h"
#include "neighbours/neighbours.h"
#include "parameter_checks.h"
#include "sphere/earth.h"
#include "sphere/sphere_nearest.h"

namespace gpugeo {

QString PointNeighboursAlgorithm::name() const
{
  return QStringLiteral("pointneighbours");
}

QString PointNeighboursAlgorithm::displayName() const
{
  return QObject::tr("Point neighbours");
}

QStringList PointNeighboursAlgorithm::tags() const
{
  return QObject::tr("neighbours,neighbors,nearest,knn,k nearest,radius,distance,density,count,pairs,distance matrix,"
                     "join,gpu,cuda")
    .split(',');
}

QString PointNeighboursAlgorithm::group() const
{
  return QObject::tr("Vector analysis");
}

QString PointNeighboursAlgorithm::groupId() const
{
  return QStringLiteral("vectoranalysis");
}

QString PointNeighboursAlgorithm::iconFile() const
{
  return QStringLiteral("pointneighbours.svg");
}

QString PointNeighboursAlgorithm::shortDescription() const
{
  return QObject::tr("Counts each point's neighbours within a radius (or finds its k nearest), with the nearest "
                     "point and the mean distance, and lists the pairs: on the GPU or all processor cores.");
}

QString PointNeighboursAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>For every point of the layer, finds the other points within a radius, or its k nearest, on the GPU "
           "or on all processor cores.</p>"
           "<p><b>Input point layer</b>: multipoints give one point a part; features without geometry are skipped "
           "and counted. <b>Radius</b>: in the layer's units; points at exactly the radius are neighbours. For a "
           "layer in a geographic CRS the radius is in metres, and distances are straight-line (3D chord) "
           "distances between the points placed on a sphere of radius 6,371,008.8 m; they are shorter than "
           "great-circle distances by s&sup3;/(24R&sup2;): 1 mm at 10 km, 1 m at 100 km. <b>Number of nearest "
           "neighbours</b> (K): 0 for every point within the radius; otherwise the K nearest within it, or the K "
           "nearest at any distance when the radius is 0. A radius of 0 with K = 0 is refused.</p>"
           "<p><b>Output</b>: one point a site (the input's attributes) with NB_COUNT (neighbours, itself "
           "excluded; duplicates of a point are its neighbours at distance 0), NN_FID and NN_DIST (the nearest "
           "other point at any distance and its distance, NULL for a single point), MEAN_DIST (mean distance to "
           "the neighbours, NULL without any). Equal distances are ordered by the points' order in the layer. The "
           "output keeps the input's feature ids, except that a GeoPackage output numbers its features anew when "
           "multipoints gave several points, as <i>Multipart to singleparts</i> does.</p>"
           "<p><b>Pairs</b> (optional): every pair of neighbours once, FID_A &lt;= FID_B (PART_A and PART_B tell "
           "multipoint parts apart), with DISTANCE; with K, a pair is listed when either point is among the "
           "other's K nearest. A table without geometry, or lines between the two points when <b>Write pairs "
           "as lines</b> is checked. The pairs are counted before anything is written; more than <b>Maximum "
           "number of pairs</b> is an error.</p>"
           "<p><b>Method</b>: the points, relative to the centre of their extent, go into an adaptive quadtree of "
           "small leaves (at most 64 points), each leaf tested against the leaves near it, after the source "
           "patent's forest of small quadtrees in GPU on-chip memory. Both backends give the same numbers; the "
           "plugin's documentation describes the implementation.</p>") +
         rangesHelp(*this) + deviceHelp();
}

PointNeighboursAlgorithm* PointNeighboursAlgorithm::createInstance() const
{
  return new PointNeighboursAlgorithm();
}

void PointNeighboursAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterFeatureSource(QStringLiteral("INPUT"), QObject::tr("Input point layer"),
                                                       QList<int>() << QgsProcessing::TypeVectorPoint));
  // A number, not a QgsProcessingParameterDistance: the dialog would show a geographic layer's radius
  // in degrees, where it is metres.
  addParameter(new QgsProcessingParameterNumber(
    QStringLiteral("RADIUS"), QObject::tr("Radius (metres for a geographic layer, else layer units; 0: none)"),
    QgsProcessingParameterNumber::Double, 0.0, false, 0.0));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("K"),
                                                QObject::tr("Number of nearest neighbours (0: all within the radius)"),
                                                QgsProcessingParameterNumber::Integer, kDefaultK, false, 0,
                                                neighbours::kMaxK));
  addDeviceParameter();
  auto lines = std::make_unique<QgsProcessingParameterBoolean>(QStringLiteral("PAIRS_AS_LINES"),
                                                               QObject::tr("Write pairs as lines"), false);
  lines->setFlags(lines->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  addParameter(lines.release());
  auto cap = std::make_unique<QgsProcessingParameterNumber>(QStringLiteral("MAX_PAIRS"),
                                                            QObject::tr("Maximum number of pairs"),
                                                            QgsProcessingParameterNumber::Integer, kDefaultMaxPairs,
                                                            false, 0);
  cap->setFlags(cap->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  addParameter(cap.release());
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT"), QObject::tr("Neighbours"),
                                                     QgsProcessing::TypeVectorPoint));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT_PAIRS"), QObject::tr("Pairs"),
                                                     QgsProcessing::TypeVector, QVariant(), true, false));
}

QVariantMap PointNeighboursAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                              QgsProcessingFeedback* feedback)
{
  StageTimes times;
  std::unique_ptr<QgsProcessingFeatureSource> source(parameterAsSource(parameters, QStringLiteral("INPUT"), context));
  if (!source)
    throw QgsProcessingException(invalidSourceError(parameters, QStringLiteral("INPUT")));
  requirePointSource(*source, QStringLiteral("INPUT"));
  neighbours::Query query;
  query.radius = parameterAsDouble(parameters, QStringLiteral("RADIUS"), context);
  query.k = parameterAsInt(parameters, QStringLiteral("K"), context);
  if (!(query.radius >= 0.0) || !std::isfinite(query.radius))
    throw QgsProcessingException(QObject::tr("The radius must be zero or more (got %1).").arg(query.radius));
  if (query.k < 0 || query.k > neighbours::kMaxK)
    throw QgsProcessingException(QObject::tr("K must be between 0 and %1 (got %2).").arg(neighbours::kMaxK).arg(query.k));
  if (query.k == 0 && query.radius <= 0.0)
    throw QgsProcessingException(QObject::tr("Give a radius greater than zero, or a number of nearest neighbours K."));
  const bool wantPairs = outputRequested(parameters, QStringLiteral("OUTPUT_PAIRS"));
  const bool pairsAsLines = parameterAsBool(parameters, QStringLiteral("PAIRS_AS_LINES"), context);
  const int64_t maxPairs = parameterAsInt(parameters, QStringLiteral("MAX_PAIRS"), context);
  const bool geographic = source->sourceCrs().isGeographic();

  QgsProcessingMultiStepFeedback steps(3 + int(wantPairs), feedback);
  feedback->setProgressText(QObject::tr("Reading points"));
  PointReadOptions readOptions;
  readOptions.keepAllAttributes = true;
  PointSet points;
  {
    ScopedStage stage(times, "read");
    points = readPoints(*source, readOptions, &steps);
  }
  checkSites(points, neighbours::kMaxPoints, feedback);
  const int64_t n = points.siteCount();

  // A geographic layer: the points on the sphere, in metres.
  std::vector<double> ex, ey, ez;
  neighbours::Points input{points.x.data(), points.y.data(), nullptr, n};
  if (geographic)
  {
    ex.resize(std::size_t(n));
    ey.resize(std::size_t(n));
    ez.resize(std::size_t(n));
    sphere::requireValidSites(sphere::SiteSet{points.x.data(), points.y.data(), n});
    for (int64_t s = 0; s < n; ++s)
    {
      const auto u = sphere::unitVector(points.x[std::size_t(s)], points.y[std::size_t(s)]);
      ex[std::size_t(s)] = sphere::kEarthRadiusM * u[0];
      ey[std::size_t(s)] = sphere::kEarthRadiusM * u[1];
      ez[std::size_t(s)] = sphere::kEarthRadiusM * u[2];
    }
    input = {ex.data(), ey.data(), ez.data(), n};
    feedback->pushInfo(QObject::tr("Geographic CRS: the radius and the distances are in metres (straight-line distance "
                                   "between the points on a sphere of radius 6,371,008.8 m)."));
  }

  steps.setCurrentStep(1);
  feedback->setProgressText(QObject::tr("Finding the neighbours"));
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  const RunControl control = runControl(&steps);
  std::unique_ptr<neighbours::NeighbourIndex> index;
  neighbours::Summary summary;
  neighbours::Pairs pairs;
  const auto run = [&](Backend backend) {
    index = neighbours::makeNeighbourIndex(backend, input, cpuThreads(), control);
    summary = index->summarize(query, control);
    if (wantPairs)
    {
      const int64_t count = index->countPairs(query, control);
      feedback->pushInfo(QObject::tr("%1 pairs.").arg(count));
      if (count > maxPairs)
        throw QgsProcessingException(QObject::tr("The query gives %1 pairs, more than the maximum of %2; use a smaller "
                                                 "radius or K, or raise MAX_PAIRS.")
                                       .arg(count)
                                       .arg(maxPairs));
      pairs = index->pairs(query, count, control);
    }
    times.merge(index->times());
  };
  runWithCpuFallback(device, feedback, run);

  // The part of each site within its feature.
  std::vector<int32_t> part(std::size_t(n), 0);
  for (int64_t s = 1; s < n; ++s)
    if (points.featureOf[std::size_t(s)] == points.featureOf[std::size_t(s - 1)])
      part[std::size_t(s)] = part[std::size_t(s - 1)] + 1;
  const auto fidOf = [&](int64_t s) { return points.featureIds[std::size_t(points.featureOf[std::size_t(s)])]; };

  steps.setCurrentStep(2);
  feedback->setProgressText(QObject::tr("Writing the points"));
  QVariantMap outputs;
  {
    ScopedStage stage(times, "write");
    const QgsFields sourceFields = source->fields();
    QgsFields extra;
    extra.append(QgsField(QStringLiteral("NB_COUNT"), QVariant::Int));
    extra.append(QgsField(QStringLiteral("NN_FID"), QVariant::LongLong));
    extra.append(QgsField(QStringLiteral("NN_DIST"), QVariant::Double));
    extra.append(QgsField(QStringLiteral("MEAN_DIST"), QVariant::Double));
    const QgsFields fields = QgsProcessingUtils::combineFields(sourceFields, extra);
    QString id;
    std::unique_ptr<QgsFeatureSink> sink = createSink(parameters, QStringLiteral("OUTPUT"), context, id, fields,
                                                      QgsWkbTypes::Point, source->sourceCrs(), siteSinkFlags(points));
    for (int64_t s = 0; s < n; ++s)
    {
      if ((s & 1023) == 0)
      {
        if (feedback->isCanceled())
          throw Canceled();
        steps.setProgress(100.0 * double(s) / double(n));
      }
      QgsFeature feature(fields);
      feature.setGeometry(QgsGeometry(new QgsPoint(points.x[std::size_t(s)], points.y[std::size_t(s)])));
      QgsAttributes attributes = siteAttributes(points, s);
      const std::size_t u = std::size_t(s);
      attributes << summary.count[u];
      if (summary.nearest[u] >= 0)
        attributes << QVariant::fromValue<qlonglong>(fidOf(summary.nearest[u])) << summary.nearestDistance[u];
      else
        attributes << QVariant() << QVariant();
      attributes << (std::isnan(summary.meanDistance[u]) ? QVariant() : QVariant(summary.meanDistance[u]));
      feature.setAttributes(attributes);
      if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
        throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("OUTPUT")));
    }
    outputs.insert(QStringLiteral("OUTPUT"), id);
  }

  if (wantPairs)
  {
    steps.setCurrentStep(3);
    feedback->setProgressText(QObject::tr("Writing the pairs"));
    ScopedStage stage(times, "write");
    QgsFields fields;
    fields.append(QgsField(QStringLiteral("FID_A"), QVariant::LongLong));
    fields.append(QgsField(QStringLiteral("PART_A"), QVariant::Int));
    fields.append(QgsField(QStringLiteral("FID_B"), QVariant::LongLong));
    fields.append(QgsField(QStringLiteral("PART_B"), QVariant::Int));
    fields.append(QgsField(QStringLiteral("DISTANCE"), QVariant::Double));
    QString id;
    std::unique_ptr<QgsFeatureSink> sink =
      createSink(parameters, QStringLiteral("OUTPUT_PAIRS"), context, id, fields,
                 pairsAsLines ? QgsWkbTypes::LineString : QgsWkbTypes::NoGeometry, source->sourceCrs());
    const int64_t count = int64_t(pairs.a.size());
    for (int64_t k = 0; k < count; ++k)
    {
      if ((k & 4095) == 0)
      {
        if (feedback->isCanceled())
          throw Canceled();
        steps.setProgress(100.0 * double(k) / double(count));
      }
      int64_t a = pairs.a[std::size_t(k)], b = pairs.b[std::size_t(k)];
      if (fidOf(a) > fidOf(b) || (fidOf(a) == fidOf(b) && part[std::size_t(a)] > part[std::size_t(b)]))
        std::swap(a, b);
      QgsFeature feature(fields);
      if (pairsAsLines)
        feature.setGeometry(QgsGeometry(new QgsLineString(
          QVector<QgsPointXY>{QgsPointXY(points.x[std::size_t(a)], points.y[std::size_t(a)]),
                              QgsPointXY(points.x[std::size_t(b)], points.y[std::size_t(b)])})));
      feature.setAttributes(QgsAttributes() << QVariant::fromValue<qlonglong>(fidOf(a)) << part[std::size_t(a)]
                                            << QVariant::fromValue<qlonglong>(fidOf(b)) << part[std::size_t(b)]
                                            << pairs.distance[std::size_t(k)]);
      if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
        throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("OUTPUT_PAIRS")));
    }
    outputs.insert(QStringLiteral("OUTPUT_PAIRS"), id);
  }
  logStageTimes(times, feedback);
  return outputs;
}

}  // namespace gpugeo
