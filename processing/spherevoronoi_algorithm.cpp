#include "spherevoronoi_algorithm.h"

#include <cmath>
#include <memory>
#include <vector>

#include <qgsexception.h>
#include <qgsfeature.h>
#include <qgsfeaturesink.h>
#include <qgslinestring.h>
#include <qgsmultipolygon.h>
#include <qgspolygon.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>
#include <qgsprocessingutils.h>

#include "adapters/point_reader.h"
#include "core/errors.h"
#include "parameter_checks.h"
#include "sphere/earth.h"
#include "sphere/spherical_voronoi.h"

namespace gpugeo {

namespace {

QgsLineString* ringGeometry(const sphere::LonLatRing& ring)
{
  return new QgsLineString(QVector<double>(ring.lon.begin(), ring.lon.end()),
                           QVector<double>(ring.lat.begin(), ring.lat.end()));
}

}  // namespace

QString SphereVoronoiAlgorithm::name() const
{
  return QStringLiteral("spherevoronoi");
}

QString SphereVoronoiAlgorithm::displayName() const
{
  return QObject::tr("Spherical Voronoi polygons");
}

QStringList SphereVoronoiAlgorithm::tags() const
{
  return QObject::tr("voronoi,thiessen,sphere,spherical,global,great circle,delaunay,convex hull,nearest,"
                     "allocation,service area,antimeridian,pole")
    .split(',');
}

QString SphereVoronoiAlgorithm::group() const
{
  return QObject::tr("Proximity and Voronoi");
}

QString SphereVoronoiAlgorithm::groupId() const
{
  return QStringLiteral("proximity");
}

QString SphereVoronoiAlgorithm::iconFile() const
{
  return QStringLiteral("spherevoronoi.svg");
}

QString SphereVoronoiAlgorithm::shortDescription() const
{
  return QObject::tr("Exact Voronoi polygons of points on the sphere (great-circle distance), with their areas: right "
                     "across the antimeridian and at the poles.");
}

QString SphereVoronoiAlgorithm::shortHelpString() const
{
  return QObject::tr(
    "<p>Computes the exact Voronoi polygons of the input points on the sphere: each point's region holds every place "
    "whose great-circle distance to it is no larger than to any other point. Nothing is projected, so the regions "
    "are right across the antimeridian and at the poles, and they cover the whole globe without gaps or overlaps. "
    "This is the exact counterpart of <i>Spherical Voronoi on a QTM grid</i>, which labels grid cells.</p>"
    "<p><b>Input point layer</b>: points in any CRS (transformed to EPSG:4326); multipoints give one site a part; "
    "features without geometry or with an empty geometry are skipped and counted. Points with a NaN coordinate or "
    "a latitude outside &plusmn;90&deg; are refused with their count. Points at the same place (the same unit "
    "vector) are one site: the first keeps the region, the others get none, and the log gives their count.</p>"
    "<p><b>Densification step</b> (degrees, 0.001 to 10, default 1): the Voronoi edges are great-circle arcs; in "
    "EPSG:4326 each is drawn as points at most this far apart along the arc and at most this much longitude apart "
    "(finer near the ends of short edges, so small regions keep their shape and every ring stays simple). Between "
    "the points the lon/lat polygon departs from the arc by up to about s&sup2;/4 radian for a step of s "
    "radian, most at high latitudes (0.45 km on the Earth for 1&deg;, 5 m for 0.1&deg;). The areas do not depend on the step: they are those of the true spherical "
    "polygons.</p>"
    "<p><b>Output</b>: one (multi)polygon per distinct site, in EPSG:4326, with the site's attributes, "
    "<i>site_id</i> (the 1-based index of the point in reading order, multipoint parts counted one by one) and "
    "<i>area_km2</i>, the area of the spherical region. A region that the antimeridian crosses is cut there into "
    "two parts (points exactly at &plusmn;180&deg;); a region holding a pole is one polygon closed along that "
    "pole's line of latitude &plusmn;90&deg;. Neighbouring regions share their edge points exactly. One distinct "
    "site gives the whole globe; sites on one great circle give lunes between the circle's two poles.</p>"
    "<p><b>Sphere and areas</b>: radius 6,371,008.8 m (the IUGG mean Earth radius). The areas are computed on the "
    "sphere from the Voronoi vertices (Van Oosterom &amp; Strackee's triangle formula, or Gauss-Bonnet for regions "
    "reaching towards their antipode) and sum to the sphere's area, 4&pi;R&sup2;, within 10<sup>-9</sup> relative "
    "(in practice a few 10<sup>-15</sup>).</p>"
    "<p><b>Method</b>: the spherical Delaunay triangulation of points on a sphere is the convex hull of their unit "
    "vectors, and the Voronoi diagram is its dual (Brown 1979, <i>Voronoi diagrams from convex hulls</i>, "
    "Information Processing Letters 9(5); Caroli et al. 2010, <i>Robust and efficient Delaunay triangulations of "
    "points on or close to a sphere</i>, SEA 2010). On the CPU the hull comes from CGAL's Delaunay triangulation "
    "on the sphere (the method of that paper, exact predicates), checked and repaired where points closer than "
    "about 0.7 m were left out. On the GPU each point's Voronoi cell is cut out by its nearest points in parallel "
    "(Ray et al. 2018, <i>Meshless Voronoi on the GPU</i>, ACM Transactions on Graphics 37(6), on the sphere); "
    "the triangulation from the cells is taken only when every check passes (closed, consistent, and every edge "
    "clearly Delaunay by the same exact-difference tests), which makes it the one the hull would give: so both "
    "backends give the same polygons and areas, bit for bit. Otherwise (ties such as points on a regular grid, "
    "dense clusters, very few points) the log says why and the CPU's hull is used.</p>"
    "<p><b>Limits</b>: ties are decided exactly down to a relative tolerance of 10<sup>-12</sup>; points less "
    "than about 10<sup>-9</sup> radian (6 mm) apart within that distance of a pole can give a region too thin to "
    "draw as a valid polygon (its area is still right). The regions and polygons are made on all cores; a million "
    "points take about 6 s and 1.5 GB of memory on 2 cores without a GPU, under a second with one on a 16-core "
    "machine; the CPU hull's call cannot be canceled. At most 10 million points are accepted. A tiny "
    "densification step gives a very large output.</p>") +
         rangesHelp(*this) + deviceHelp();
}

// Where the Delaunay mesh came from, for the log.
void SphereVoronoiAlgorithm::logMeshSource(Backend backend, const sphere::SphericalVoronoiReport& report,
                                           QgsProcessingFeedback* feedback)
{
  if (report.gpuMesh)
    feedback->pushInfo(QObject::tr("The Delaunay triangulation came from the Voronoi cells cut on the GPU."));
  else if (backend == Backend::Gpu && !report.gpuMeshRefused.empty())
    feedback->pushInfo(QObject::tr("The GPU's Voronoi cells were not taken (%1); the triangulation came from CGAL's "
                                   "hull on the CPU (the same result).")
                         .arg(QString::fromStdString(report.gpuMeshRefused)));
  else
    feedback->pushInfo(QObject::tr("The Delaunay triangulation came from CGAL's hull on the CPU."));
}

SphereVoronoiAlgorithm* SphereVoronoiAlgorithm::createInstance() const
{
  return new SphereVoronoiAlgorithm();
}

void SphereVoronoiAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterFeatureSource(QStringLiteral("INPUT"), QObject::tr("Input point layer"),
                                                       QList<int>() << QgsProcessing::TypeVectorPoint));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("DENSIFY"),
                                                QObject::tr("Densification step along the edges (degrees)"),
                                                QgsProcessingParameterNumber::Double, 1.0, false, 0.001, 10.0));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT"), QObject::tr("Spherical Voronoi polygons"),
                                                     QgsProcessing::TypeVectorPolygon));
  addDeviceParameter();
}

QVariantMap SphereVoronoiAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                            QgsProcessingFeedback* feedback)
{
  StageTimes times;
  std::unique_ptr<QgsProcessingFeatureSource> source(parameterAsSource(parameters, QStringLiteral("INPUT"), context));
  if (!source)
    throw QgsProcessingException(invalidSourceError(parameters, QStringLiteral("INPUT")));
  requirePointSource(*source, QStringLiteral("INPUT"));
  sphere::SphericalVoronoiOptions options;
  options.densifyStepDeg = parameterAsDouble(parameters, QStringLiteral("DENSIFY"), context);
  if (!(options.densifyStepDeg >= 0.001 && options.densifyStepDeg <= 10.0))
    throw QgsProcessingException(
      QObject::tr("The densification step must be between 0.001 and 10 degrees (got %1).").arg(options.densifyStepDeg));

  QgsProcessingMultiStepFeedback steps(3, feedback);
  feedback->setProgressText(QObject::tr("Reading points"));
  PointReadOptions readOptions;
  readOptions.keepAllAttributes = true;
  PointSet points;
  {
    ScopedStage stage(times, "read");
    points = readPoints(*source, readOptions, &steps);
  }
  checkSites(points, kMaxSites, feedback);
  {
    ScopedStage stage(times, "read");
    transformToLonLat(points, source->sourceCrs(), context.transformContext(), feedback);
  }
  const int64_t siteCount = points.siteCount();

  steps.setCurrentStep(1);
  feedback->setProgressText(QObject::tr("Computing the spherical Delaunay triangulation and its Voronoi regions"));
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  options.threads = cpuThreads();
  std::vector<sphere::SphericalRegion> regions;
  sphere::SphericalVoronoiReport report;
  runWithCpuFallback(device, feedback, [&](Backend backend) {
    options.backend = backend;
    regions = sphere::sphericalVoronoi(points.x.data(), points.y.data(), siteCount, options, runControl(&steps),
                                       &report);
    times.merge(report.times);
  });
  logMeshSource(options.backend, report, feedback);

  steps.setCurrentStep(2);
  feedback->setProgressText(QObject::tr("Writing the polygons"));
  ScopedStage writeStage(times, "write");
  const QgsFields sourceFields = source->fields();
  QgsFields extra;
  extra.append(QgsField(QStringLiteral("site_id"), QVariant::LongLong));
  extra.append(QgsField(QStringLiteral("area_km2"), QVariant::Double));
  const QgsFields fields = QgsProcessingUtils::combineFields(sourceFields, extra);
  QString id;
  std::unique_ptr<QgsFeatureSink> sink = createSink(parameters, QStringLiteral("OUTPUT"), context, id, fields,
                                                       QgsWkbTypes::MultiPolygon,
                                                       QgsCoordinateReferenceSystem(QStringLiteral("EPSG:4326")),
                                                       siteSinkFlags(points));
  const double km2 = sphere::kEarthRadiusKm * sphere::kEarthRadiusKm;
  int64_t duplicates = 0, written = 0, unDrawable = 0;
  double total = 0;
  for (int64_t s = 0; s < siteCount; ++s)
  {
    if ((s & 1023) == 0)
    {
      if (feedback->isCanceled())
        throw Canceled();
      steps.setProgress(100.0 * double(s) / double(siteCount));
    }
    const sphere::SphericalRegion& region = regions[std::size_t(s)];
    if (region.duplicateOf >= 0)
    {
      ++duplicates;
      continue;
    }
    auto multi = std::make_unique<QgsMultiPolygon>();
    for (const sphere::LonLatPolygon& part : region.parts)
    {
      auto polygon = std::make_unique<QgsPolygon>();
      polygon->setExteriorRing(ringGeometry(part.outer));
      for (const sphere::LonLatRing& hole : part.holes)
        polygon->addInteriorRing(ringGeometry(hole));
      multi->addGeometry(polygon.release());
    }
    if (region.parts.empty())
      ++unDrawable;
    QgsFeature feature(fields);
    feature.setGeometry(QgsGeometry(std::move(multi)));
    QgsAttributes attributes = siteAttributes(points, s);
    attributes << QVariant::fromValue<qlonglong>(s + 1) << region.areaSteradians * km2;
    feature.setAttributes(attributes);
    if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
      throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("OUTPUT")));
    total += region.areaSteradians;
    ++written;
  }
  feedback->pushInfo(QObject::tr("%1 regions; their areas sum to %2 of the sphere's.")
                       .arg(written)
                       .arg(total / (4.0 * M_PI), 0, 'f', 15));
  if (duplicates > 0)
    feedback->pushWarning(QObject::tr("%1 points lie exactly on an earlier point and get no region of their own.")
                            .arg(duplicates));
  if (unDrawable > 0)
    feedback->pushWarning(QObject::tr("%1 regions are too thin to draw in longitude/latitude and have no geometry "
                                      "(their area is given).")
                            .arg(unDrawable));
  writeStage.stop();
  logStageTimes(times, feedback);
  QVariantMap outputs;
  outputs.insert(QStringLiteral("OUTPUT"), id);
  return outputs;
}

}  // namespace gpugeo
