#include "dbscan_algorithm.h"

#include <cmath>
#include <memory>
#include <vector>

#include <QHash>

#include <qgsexception.h>
#include <qgsfeature.h>
#include <qgsfeaturerequest.h>
#include <qgsfeaturesink.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingoutputs.h>
#include <qgsprocessingparameters.h>
#include <qgsprocessingutils.h>

#include "adapters/point_reader.h"
#include "core/errors.h"
#include "neighbours/neighbours.h"
#include "parameter_checks.h"

namespace gpugeo {

QString DbscanAlgorithm::name() const
{
  return QStringLiteral("dbscan");
}

QString DbscanAlgorithm::displayName() const
{
  return QObject::tr("DBSCAN clustering (GPU)");
}

QStringList DbscanAlgorithm::tags() const
{
  return QObject::tr("clustering,clusters,density,based,points,distance,dbscan,gpu,cuda").split(',');
}

QString DbscanAlgorithm::group() const
{
  return QObject::tr("Vector analysis");
}

QString DbscanAlgorithm::groupId() const
{
  return QStringLiteral("vectoranalysis");
}

QString DbscanAlgorithm::iconFile() const
{
  return QStringLiteral("dbscan.svg");
}

QString DbscanAlgorithm::shortDescription() const
{
  return QObject::tr("Clusters point features with DBSCAN on the GPU or all processor cores: a drop-in for QGIS's "
                     "own DBSCAN clustering.");
}

QString DbscanAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>Clusters point features with DBSCAN (density-based spatial clustering of applications with noise; "
           "Ester, Kriegel, Sander &amp; Xu 1996), on the GPU or on all processor cores. It takes the same "
           "parameters and writes the same fields as QGIS's <i>DBSCAN clustering</i> (native:dbscanclustering), so "
           "a model can switch between the two.</p>"
           "<p><b>Minimum cluster size</b> (MIN_SIZE): a point is a core point when at least this many points, "
           "itself included, lie within the maximum distance of it. <b>Maximum distance between clustered points</b> "
           "(EPS), in the layer's units (for a geographic CRS, degrees, as in QGIS's algorithm): points at exactly "
           "this distance count. Distances are planar, computed in double precision relative to the centre of the "
           "points' extent, so large projected coordinates keep their precision.</p>"
           "<p><b>Clusters</b>: core points within EPS of each other are in one cluster, exactly as DBSCAN defines. "
           "A border point (not core, but within EPS of a core point) joins the cluster of its lowest-index core "
           "neighbour (index: the order in which the layer gives its features), unless <b>Treat border points as "
           "noise (DBSCAN*)</b> is checked. Clusters are numbered from 1 in order of their first core point in the "
           "layer, as QGIS numbers them; noise gets NULL. So every core point and every noise point gets the same "
           "cluster id as with QGIS's algorithm, and with DBSCAN* the whole output is the same. <b>What may "
           "differ</b>: a border point within EPS of core points of two or more clusters (a contested border "
           "point), and so those clusters' sizes. QGIS's algorithm gives it to whichever cluster reaches it first, "
           "in an order set by its internal hash tables rather than by the layer; this algorithm's rule gives the "
           "same answer on every run and backend.</p>"
           "<p><b>Output</b>: every input feature, in order, with its attributes and the cluster id field "
           "(FIELD_NAME, default CLUSTER_ID) and cluster size field (SIZE_FIELD_NAME, default CLUSTER_SIZE; border "
           "points counted unless DBSCAN*). Features without geometry get NULL; so do multipoints of more than one "
           "point (a single-part multipoint is its point; QGIS's algorithm leaves every multipoint out). "
           "NUM_CLUSTERS is the number of clusters. A layer without any point gives its features with empty "
           "cluster fields and NUM_CLUSTERS 0, with a warning, as QGIS's algorithm does.</p>"
           "<p><b>Method</b>: DBSCAN (Ester, Kriegel, Sander &amp; Xu 1996) over the points' adaptive quadtree of small "
           "leaves, the core points joined by a union-find; both backends give the same clusters.</p>") +
         rangesHelp(*this) + deviceHelp();
}

DbscanAlgorithm* DbscanAlgorithm::createInstance() const
{
  return new DbscanAlgorithm();
}

void DbscanAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterFeatureSource(QStringLiteral("INPUT"), QObject::tr("Input layer"),
                                                       QList<int>() << QgsProcessing::TypeVectorPoint));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("MIN_SIZE"), QObject::tr("Minimum cluster size"),
                                                QgsProcessingParameterNumber::Integer, 5, false, 1));
  addParameter(new QgsProcessingParameterDistance(QStringLiteral("EPS"),
                                                  QObject::tr("Maximum distance between clustered points"), 1,
                                                  QStringLiteral("INPUT"), false, 0));
  auto borderAsNoise = std::make_unique<QgsProcessingParameterBoolean>(
    QStringLiteral("DBSCAN*"), QObject::tr("Treat border points as noise (DBSCAN*)"), false, true);
  borderAsNoise->setFlags(borderAsNoise->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  addParameter(borderAsNoise.release());
  auto fieldName = std::make_unique<QgsProcessingParameterString>(QStringLiteral("FIELD_NAME"),
                                                                  QObject::tr("Cluster field name"),
                                                                  QStringLiteral("CLUSTER_ID"));
  fieldName->setFlags(fieldName->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  addParameter(fieldName.release());
  auto sizeName = std::make_unique<QgsProcessingParameterString>(QStringLiteral("SIZE_FIELD_NAME"),
                                                                 QObject::tr("Cluster size field name"),
                                                                 QStringLiteral("CLUSTER_SIZE"));
  sizeName->setFlags(sizeName->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  addParameter(sizeName.release());
  addDeviceParameter();
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT"), QObject::tr("Clusters"),
                                                     QgsProcessing::TypeVectorPoint));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("NUM_CLUSTERS"), QObject::tr("Number of clusters")));
}

QVariantMap DbscanAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                     QgsProcessingFeedback* feedback)
{
  StageTimes times;
  std::unique_ptr<QgsProcessingFeatureSource> source(parameterAsSource(parameters, QStringLiteral("INPUT"), context));
  if (!source)
    throw QgsProcessingException(invalidSourceError(parameters, QStringLiteral("INPUT")));
  requirePointSource(*source, QStringLiteral("INPUT"));
  neighbours::DbscanOptions options;
  options.minPoints = parameterAsInt(parameters, QStringLiteral("MIN_SIZE"), context);
  options.eps = parameterAsDouble(parameters, QStringLiteral("EPS"), context);
  options.borderPointsAreNoise = parameterAsBool(parameters, QStringLiteral("DBSCAN*"), context);
  if (options.minPoints < 1)
    throw QgsProcessingException(QObject::tr("The minimum cluster size must be at least 1 (got %1).").arg(options.minPoints));
  if (!(options.eps >= 0.0) || !std::isfinite(options.eps))
    throw QgsProcessingException(QObject::tr("The maximum distance must be zero or more (got %1).").arg(options.eps));
  const QString clusterName = parameterAsString(parameters, QStringLiteral("FIELD_NAME"), context);
  const QString sizeName = parameterAsString(parameters, QStringLiteral("SIZE_FIELD_NAME"), context);
  if (clusterName.isEmpty() || sizeName.isEmpty())
    throw QgsProcessingException(QObject::tr("The cluster field names must not be empty."));
  if (source->sourceCrs().isGeographic())
    feedback->pushWarning(QObject::tr("The layer has a geographic CRS: the maximum distance is in degrees, as in "
                                      "QGIS's DBSCAN clustering. Reproject the layer for a distance in metres."));

  QgsProcessingMultiStepFeedback steps(3, feedback);
  feedback->setProgressText(QObject::tr("Reading points"));
  PointReadOptions readOptions;
  readOptions.explodeMultipoints = false;
  PointSet points;
  {
    ScopedStage stage(times, "read");
    points = readPoints(*source, readOptions, &steps);
  }
  // As QGIS's DBSCAN: a layer without points gives its features with empty cluster fields, no error.
  checkSites(points, neighbours::kMaxPoints, feedback, true);

  steps.setCurrentStep(1);
  feedback->setProgressText(QObject::tr("Clustering"));
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  const RunControl control = runControl(&steps);
  const neighbours::Points input{points.x.data(), points.y.data(), nullptr, points.siteCount()};
  neighbours::Clusters clusters;
  const auto run = [&](Backend backend) {
    auto index = neighbours::makeNeighbourIndex(backend, input, cpuThreads(), control);
    clusters = index->dbscan(options, control);
    times.merge(index->times());
  };
  if (points.siteCount() > 0)
    runWithCpuFallback(device, feedback, run);
  feedback->pushInfo(QObject::tr("%1 clusters.").arg(clusters.size.size()));

  steps.setCurrentStep(2);
  feedback->setProgressText(QObject::tr("Writing the features"));
  ScopedStage writeStage(times, "write");
  QHash<QgsFeatureId, int64_t> siteOfFeature;
  siteOfFeature.reserve(int(points.featureIds.size()));
  for (int64_t s = 0; s < points.siteCount(); ++s)
    siteOfFeature.insert(points.featureIds[std::size_t(points.featureOf[std::size_t(s)])], s);
  QgsFields extra;
  extra.append(QgsField(clusterName, QVariant::Int));
  extra.append(QgsField(sizeName, QVariant::Int));
  const QgsFields fields = QgsProcessingUtils::combineFields(source->fields(), extra);
  QString id;
  std::unique_ptr<QgsFeatureSink> sink =
    createSink(parameters, QStringLiteral("OUTPUT"), context, id, fields, source->wkbType(), source->sourceCrs());
  QgsFeatureIterator it = source->getFeatures(QgsFeatureRequest(), QgsProcessingFeatureSource::FlagSkipGeometryValidityChecks);
  QgsFeature feature;
  const long long total = source->featureCount();
  long long done = 0;
  while (it.nextFeature(feature))
  {
    if ((done & 1023) == 0)
    {
      if (feedback->isCanceled())
        throw Canceled();
      if (total > 0)
        steps.setProgress(100.0 * double(done) / double(total));
    }
    ++done;
    QgsAttributes attributes = feature.attributes();
    const auto found = siteOfFeature.constFind(feature.id());
    const int64_t cluster = found == siteOfFeature.constEnd() ? 0 : clusters.cluster[std::size_t(found.value())];
    if (cluster > 0)
      attributes << QVariant(int(cluster)) << QVariant(int(clusters.size[std::size_t(cluster - 1)]));
    else
      attributes << QVariant() << QVariant();
    feature.setAttributes(attributes);
    if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
      throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("OUTPUT")));
  }
  writeStage.stop();
  logStageTimes(times, feedback);
  QVariantMap outputs;
  outputs.insert(QStringLiteral("OUTPUT"), id);
  outputs.insert(QStringLiteral("NUM_CLUSTERS"), static_cast<unsigned int>(clusters.size.size()));
  return outputs;
}

}  // namespace gpugeo
