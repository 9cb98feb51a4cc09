#include "voronoipolygons_algorithm.h"

#include <cmath>
#include <memory>
#include <vector>

#include <qgsexception.h>
#include <qgsfeature.h>
#include <qgsfeaturesink.h>
#include <qgslinestring.h>
#include <qgspolygon.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>

#include "adapters/point_reader.h"
#include "core/errors.h"
#include "parameter_checks.h"
#include "voronoi/voronoi_polygons.h"

namespace gpugeo {

namespace {

// The rectangle the polygons are clipped to: the layer's extent (with every point in it) grown by
// BUFFER percent of its width and of its height on each side, as qgis:voronoipolygons does.
voronoi::ClipRectangle clipRectangle(QgsRectangle extent, const PointSet& points, double bufferPercent)
{
  if (extent.isNull() || !extent.isFinite())
    extent = points.extent;
  else
    extent.combineExtentWith(points.extent);
  const double dx = extent.width() * bufferPercent / 100.0, dy = extent.height() * bufferPercent / 100.0;
  voronoi::ClipRectangle r{extent.xMinimum() - dx, extent.yMinimum() - dy, extent.xMaximum() + dx,
                           extent.yMaximum() + dy};
  if (!(r.xMax > r.xMin) || !(r.yMax > r.yMin))
    throw QgsProcessingException(
      QObject::tr("The points lie on one vertical or horizontal line (their extent has no area), so there is no "
                  "rectangle to clip their Voronoi polygons to."));
  return r;
}

// Polygon `cell` of the result, its ring closed.
QgsPolygon* cellPolygon(const voronoi::VoronoiPolygons& v, int64_t cell)
{
  const int64_t a = v.ringStart[std::size_t(cell)], b = v.ringStart[std::size_t(cell) + 1];
  QVector<double> x(int(b - a + 1)), y(int(b - a + 1));
  for (int64_t k = a; k < b; ++k)
  {
    x[int(k - a)] = v.x[std::size_t(k)];
    y[int(k - a)] = v.y[std::size_t(k)];
  }
  x.back() = x.front();
  y.back() = y.front();
  auto* polygon = new QgsPolygon();
  polygon->setExteriorRing(new QgsLineString(x, y));
  return polygon;
}

}  // namespace

QString VoronoiPolygonsAlgorithm::name() const
{
  return QStringLiteral("voronoipolygons");
}

QString VoronoiPolygonsAlgorithm::displayName() const
{
  return QObject::tr("Exact Voronoi polygons");
}

QStringList VoronoiPolygonsAlgorithm::tags() const
{
  return QObject::tr("voronoi,thiessen,polygons,tessellation,diagram,delaunay,nearest,allocation,service area").split(',');
}

QString VoronoiPolygonsAlgorithm::group() const
{
  return QObject::tr("Proximity and Voronoi");
}

QString VoronoiPolygonsAlgorithm::groupId() const
{
  return QStringLiteral("proximity");
}

QString VoronoiPolygonsAlgorithm::iconFile() const
{
  return QStringLiteral("voronoipolygons.svg");
}

QString VoronoiPolygonsAlgorithm::shortDescription() const
{
  return QObject::tr("Exact Voronoi (Thiessen) polygons of a point layer, clipped to its buffered extent: the "
                     "parameters and output of QGIS's Voronoi polygons, for millions of points.");
}

QString VoronoiPolygonsAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>Computes the Voronoi polygon of each input point: the part of the layer's extent that is at least as "
           "near to that point as to any other (Euclidean distance in the layer's CRS). The polygons cover the "
           "extent; neighbours share their edges up to the last bits of the coordinates. It takes the parameters of QGIS's <i>Voronoi polygons</i> "
           "(qgis:voronoipolygons, and the tolerance and attribute switch of later QGIS versions) and gives the "
           "same polygons, so a model can switch to it.</p>"
           "<p><b>Input layer</b>: points; multipoints give one site a part, with the feature's attributes; features "
           "without geometry or with an empty geometry are skipped and counted.</p>"
           "<p><b>Buffer region</b> (% of extent, default 0): the polygons are clipped to the layer's extent grown by "
           "this percentage of its width on the left and on the right, and of its height at the bottom and the top. "
           "Points that all lie on one vertical or horizontal line are refused (their extent has no area).</p>"
           "<p><b>Tolerance</b> (layer units, default 0): a point within this distance of an earlier point (in "
           "reading order) is merged into it. With 0 only points at exactly the same place are merged.</p>"
           "<p><b>Copy attributes from input features</b> (default yes): the polygons get the attributes of their "
           "point; otherwise a single field <i>id</i>, the point's 0-based position in reading order.</p>"
           "<p><b>Output</b>: one polygon per distinct point, in reading order, in the layer's CRS. Merged and "
           "repeated points get none (the first keeps the polygon; the log gives their count).</p>"
           "<p><b>Method</b>: the Voronoi diagram is the dual of the Delaunay triangulation (Aurenhammer 1991, "
           "<i>Voronoi diagrams: a survey of a fundamental geometric data structure</i>, ACM Computing Surveys "
           "23(3)). The triangulation is CGAL's (Yvinec, <i>2D Triangulations</i>, CGAL User and Reference Manual), "
           "with exact predicates, so it is the exact one of the given coordinates however close or co-circular "
           "the points are. Each point's polygon is the extent cut by the perpendicular bisectors of its Delaunay "
           "neighbours, on all cores, computed relative to the point itself so that projected coordinates of "
           "millions of metres and polygons millimetres wide keep their precision; each vertex is then rounded "
           "once to the layer's coordinates.</p>"
           "<p><b>Limits</b>: at most 50 million points (a million take about 0.5 GB of memory). The triangulation "
           "runs on one core and cannot be canceled midway.</p>") +
         rangesHelp(*this);
}

VoronoiPolygonsAlgorithm* VoronoiPolygonsAlgorithm::createInstance() const
{
  return new VoronoiPolygonsAlgorithm();
}

void VoronoiPolygonsAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterFeatureSource(QStringLiteral("INPUT"), QObject::tr("Input layer"),
                                                       QList<int>() << QgsProcessing::TypeVectorPoint));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("BUFFER"), QObject::tr("Buffer region (% of extent)"),
                                                QgsProcessingParameterNumber::Double, 0.0, false, 0.0));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("TOLERANCE"), QObject::tr("Tolerance"),
                                                QgsProcessingParameterNumber::Double, 0.0, true, 0.0));
  addParameter(new QgsProcessingParameterBoolean(QStringLiteral("COPY_ATTRIBUTES"),
                                                 QObject::tr("Copy attributes from input features"), true));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT"), QObject::tr("Voronoi polygons"),
                                                     QgsProcessing::TypeVectorPolygon));
}

QVariantMap VoronoiPolygonsAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                              QgsProcessingFeedback* feedback)
{
  StageTimes times;
  std::unique_ptr<QgsProcessingFeatureSource> source(parameterAsSource(parameters, QStringLiteral("INPUT"), context));
  if (!source)
    throw QgsProcessingException(invalidSourceError(parameters, QStringLiteral("INPUT")));
  requirePointSource(*source, QStringLiteral("INPUT"));
  const double buffer = parameterAsDouble(parameters, QStringLiteral("BUFFER"), context);
  const double tolerance = parameters.value(QStringLiteral("TOLERANCE")).isValid()
                             ? parameterAsDouble(parameters, QStringLiteral("TOLERANCE"), context)
                             : 0.0;
  const bool copyAttributes = parameterAsBoolean(parameters, QStringLiteral("COPY_ATTRIBUTES"), context);

  QgsProcessingMultiStepFeedback steps(3, feedback);
  feedback->setProgressText(QObject::tr("Reading points"));
  PointReadOptions readOptions;
  readOptions.keepAllAttributes = copyAttributes;
  PointSet points;
  {
    ScopedStage stage(times, "read");
    points = readPoints(*source, readOptions, &steps);
  }
  checkSites(points, kMaxSites, feedback);
  const voronoi::ClipRectangle rectangle = clipRectangle(source->sourceExtent(), points, buffer);
  const int64_t siteCount = points.siteCount();

  steps.setCurrentStep(1);
  feedback->setProgressText(QObject::tr("Computing the Delaunay triangulation and the Voronoi polygons"));
  voronoi::VoronoiPolygonsOptions options;
  options.threads = cpuThreads();
  options.tolerance = tolerance;
  const voronoi::VoronoiPolygons cells = voronoi::voronoiPolygons(
    voronoi::PlanePoints{points.x.data(), points.y.data(), siteCount}, rectangle, options, runControl(&steps));
  times.merge(cells.times);

  steps.setCurrentStep(2);
  feedback->setProgressText(QObject::tr("Writing the polygons"));
  ScopedStage writeStage(times, "write");
  QgsFields fields;
  if (copyAttributes)
    fields = source->fields();
  else
    fields.append(QgsField(QStringLiteral("id"), QVariant::LongLong));
  QString id;
  std::unique_ptr<QgsFeatureSink> sink =
    createSink(parameters, QStringLiteral("OUTPUT"), context, id, fields, QgsWkbTypes::Polygon, source->sourceCrs(),
               copyAttributes ? siteSinkFlags(points) : QgsFeatureSink::RegeneratePrimaryKey);
  int64_t written = 0;
  for (int64_t s = 0; s < siteCount; ++s)
  {
    if ((s & 4095) == 0)
    {
      if (feedback->isCanceled())
        throw Canceled();
      steps.setProgress(100.0 * double(s) / double(siteCount));
    }
    const int64_t cell = cells.cellOfPoint[std::size_t(s)];
    if (cell < 0)
      continue;
    QgsFeature feature(fields);
    feature.setGeometry(QgsGeometry(cellPolygon(cells, cell)));
    if (copyAttributes)
      feature.setAttributes(siteAttributes(points, s));
    else
      feature.setAttributes(QgsAttributes() << QVariant::fromValue<qlonglong>(s));
    if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
      throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("OUTPUT")));
    ++written;
  }
  writeStage.stop();
  feedback->pushInfo(QObject::tr("%1 Voronoi polygons.").arg(written));
  if (cells.duplicates > 0)
    feedback->pushWarning(QObject::tr("%1 points lie on an earlier point (or within the tolerance of one) and get no "
                                      "polygon of their own.")
                            .arg(cells.duplicates));
  if (written + cells.duplicates < siteCount)
    feedback->pushWarning(QObject::tr("%1 points get no polygon: theirs is narrower than the coordinates' precision.")
                            .arg(siteCount - written - cells.duplicates));
  logStageTimes(times, feedback);
  QVariantMap outputs;
  outputs.insert(QStringLiteral("OUTPUT"), id);
  return outputs;
}

}  // namespace gpugeo
