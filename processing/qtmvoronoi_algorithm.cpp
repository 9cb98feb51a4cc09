#include "qtmvoronoi_algorithm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <set>
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

#include "adapters/geotiff_writer.h"
#include "adapters/layer_styles.h"
#include "adapters/point_reader.h"
#include "core/errors.h"
#include "parameter_checks.h"
#include "sphere/qtm.h"
#include "sphere/qtm_regions.h"
#include "sphere/sphere_nearest.h"

namespace gpugeo {

namespace {

constexpr int32_t kNoData = std::numeric_limits<int32_t>::min();
constexpr int64_t kChunk = int64_t(1) << 24;

QgsLineString* ringGeometry(const sphere::LatticeRing& ring, int level)
{
  QVector<double> x, y;
  for (std::size_t i = 0; i < ring.lonUnits.size(); ++i)
  {
    x << sphere::qtmLonDegrees(ring.lonUnits[i], level);
    y << sphere::qtmLatDegrees(ring.latUnits[i], level);
  }
  return new QgsLineString(x, y);
}

}  // namespace

QString QtmVoronoiAlgorithm::name() const
{
  return QStringLiteral("qtmvoronoi");
}

QString QtmVoronoiAlgorithm::displayName() const
{
  return QObject::tr("Spherical Voronoi, QTM grid");
}

QStringList QtmVoronoiAlgorithm::tags() const
{
  return QObject::tr("voronoi,thiessen,sphere,spherical,global,qtm,dggs,discrete global grid,great circle,nearest,"
                     "allocation,service area,gpu,cuda")
    .split(',');
}

QString QtmVoronoiAlgorithm::group() const
{
  return QObject::tr("Proximity and Voronoi");
}

QString QtmVoronoiAlgorithm::groupId() const
{
  return QStringLiteral("proximity");
}

QString QtmVoronoiAlgorithm::iconFile() const
{
  return QStringLiteral("qtmvoronoi.svg");
}

QString QtmVoronoiAlgorithm::shortDescription() const
{
  return QObject::tr("Labels every cell of a global QTM grid with its nearest point by great-circle distance: "
                     "Voronoi regions on the sphere, without planar distortion.");
}

QString QtmVoronoiAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>Labels every cell of a global Quaternary Triangular Mesh (QTM) with the nearest input point by "
           "great-circle distance, on the GPU or on all processor cores, and writes the regions (the union of each "
           "point's cells), the cells themselves and a global raster. Right across the antimeridian and at the "
           "poles: nothing is projected.</p>"
           "<p><b>The grid</b>: the octahedral QTM subdivided in longitude/latitude (Goodchild &amp; Yang 1992, "
           "<i>A hierarchical spatial data structure for global geographic information systems</i>, CVGIP 54(1); "
           "after Dutton's QTM). The eight octahedron faces (octants 0-3 north of the equator, 4-7 south, each "
           "west to east from -180&deg;) are cut into four again and again by joining their edges' midpoints taken "
           "in longitude and latitude, so every cell edge is straight in EPSG:4326 and the cell polygons are exact "
           "there. Level L has 8&times;4<sup>L</sup> cells (level 9: 2,097,152; level 13: 536,870,912). A cell's "
           "address is its octant digit followed by one digit a level: 0 the centre child, 1 the child at the "
           "parent's apex, 2 the west and 3 the east corner child. A cell is labelled by its centre: the "
           "normalised sum of its corners' unit vectors.</p>"
           "<p><b>Input point layer</b>: points in any CRS (transformed to EPSG:4326); multipoints give one site a "
           "part; features without geometry are skipped and counted. Points with NaN coordinates or a latitude "
           "outside &plusmn;90&deg; are refused with their count. <b>Label field</b> (optional, numeric, whole "
           "numbers): the value the raster gets for each site; by default the 1-based site index.</p>"
           "<p><b>Level</b>: 0 to 13. <b>Raster pixel size</b>: in degrees; the raster covers the globe with "
           "square pixels, the size rounded so that a whole number of pixels spans 360&deg;.</p>"
           "<p><b>Outputs</b> (each optional): <i>Regions</i>, one (multi)polygon per site with its cells, traced "
           "from the boundary edges between cells of different sites: valid, split at &plusmn;180&deg; and closed "
           "along the pole line, with the site's attributes, <i>site_id</i> (1-based), <i>qtm_cells</i> and "
           "<i>area_km2</i> (exact area of its cells on the sphere). <i>Cells</i>, refused above level 10 "
           "(8,388,608 cells): each cell with <i>address</i>, <i>cell_id</i>, <i>site_id</i> and <i>dist_km</i>. "
           "<i>Raster</i>: Int32 GeoTIFF in EPSG:4326 whose pixels carry the label of the site nearest to the "
           "pixel centre (the same nearest-site search on the pixel centres).</p>"
           "<p><b>Distances</b> are great-circle distances on a sphere of radius 6,371,008.8 m (the IUGG mean Earth "
           "radius). Sites are compared by the squared chord between float64 unit vectors, which orders them as "
           "the great-circle distance does; equal values go to the lowest site index. GPU and CPU give identical "
           "labels. Against exact arithmetic a label can differ only where the two nearest sites' distances differ "
           "by less than 10<sup>-15</sup> radian (about 6 nm on the Earth).</p>"
           "<p><b>Method</b>: every cell against its nearest sites on the GPU, after Wang et al. (2015): by brute "
           "force for up to 192 sites, above that through a tree of the sites' unit vectors, so that the work grows "
           "with the cells rather than cells times sites. The plugin's documentation describes the "
           "implementation.</p>") +
         rangesHelp(*this) + deviceHelp() + outputFormatHelp();
}

QtmVoronoiAlgorithm* QtmVoronoiAlgorithm::createInstance() const
{
  return new QtmVoronoiAlgorithm();
}

void QtmVoronoiAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterFeatureSource(QStringLiteral("INPUT"), QObject::tr("Input point layer"),
                                                       QList<int>() << QgsProcessing::TypeVectorPoint));
  addParameter(new QgsProcessingParameterField(QStringLiteral("FIELD"), QObject::tr("Label field"), QVariant(),
                                               QStringLiteral("INPUT"), QgsProcessingParameterField::Numeric, false,
                                               true));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("LEVEL"), QObject::tr("QTM level"),
                                                QgsProcessingParameterNumber::Integer, 7, false, 0,
                                                sphere::kMaxQtmLevel));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("PIXEL_SIZE"), QObject::tr("Raster pixel size (degrees)"),
                                                QgsProcessingParameterNumber::Double, 0.1, false, 1e-6, 90.0));
  addDeviceParameter();
  addOutputFormatParameters();
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT_REGIONS"), QObject::tr("Regions"),
                                                     QgsProcessing::TypeVectorPolygon, QVariant(), true, true));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT_CELLS"), QObject::tr("QTM cells"),
                                                     QgsProcessing::TypeVectorPolygon, QVariant(), true, false));
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT_RASTER"), QObject::tr("Raster"),
                                                           QVariant(), true, false));
}

QVariantMap QtmVoronoiAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                         QgsProcessingFeedback* feedback)
{
  StageTimes times;
  std::unique_ptr<QgsProcessingFeatureSource> source(parameterAsSource(parameters, QStringLiteral("INPUT"), context));
  if (!source)
    throw QgsProcessingException(invalidSourceError(parameters, QStringLiteral("INPUT")));
  requirePointSource(*source, QStringLiteral("INPUT"));
  const QString fieldName = parameterAsString(parameters, QStringLiteral("FIELD"), context);
  const int fieldIndex = fieldName.isEmpty() ? -1 : source->fields().lookupField(fieldName);
  if (!fieldName.isEmpty() && fieldIndex < 0)
    throw QgsProcessingException(QObject::tr("The layer has no field named %1.").arg(fieldName));
  const int level = parameterAsInt(parameters, QStringLiteral("LEVEL"), context);
  if (level < 0 || level > sphere::kMaxQtmLevel)
    throw QgsProcessingException(QObject::tr("LEVEL must be between 0 and %1 (got %2).").arg(sphere::kMaxQtmLevel).arg(level));
  const bool wantRegions = outputRequested(parameters, QStringLiteral("OUTPUT_REGIONS"));
  const bool wantCells = outputRequested(parameters, QStringLiteral("OUTPUT_CELLS"));
  const bool wantRaster = outputRequested(parameters, QStringLiteral("OUTPUT_RASTER"));
  if (!wantRegions && !wantCells && !wantRaster)
    throw QgsProcessingException(QObject::tr("Choose at least one output: regions, cells or raster."));
  if (wantCells && level > kMaxCellsLevel)
    throw QgsProcessingException(QObject::tr("The cells output is limited to level %1 (%2 cells); level %3 would "
                                             "write %4 polygons. Use a lower level or the regions or raster outputs.")
                                   .arg(kMaxCellsLevel)
                                   .arg(sphere::qtmCellCount(kMaxCellsLevel))
                                   .arg(level)
                                   .arg(sphere::qtmCellCount(level)));
  sphere::LonLatGrid grid;
  if (wantRaster)
  {
    const double pixel = parameterAsDouble(parameters, QStringLiteral("PIXEL_SIZE"), context);
    if (!(pixel > 0.0) || !std::isfinite(pixel))
      throw QgsProcessingException(QObject::tr("The pixel size must be greater than zero (got %1).").arg(pixel));
    const double columns = 2.0 * std::max(1.0, std::round(180.0 / pixel));
    if (columns * columns / 2.0 > double(int64_t(1) << 31) || columns > double(int64_t(1) << 24))
      throw QgsProcessingException(QObject::tr("A global raster of %1 degree pixels would have %2 x %3 pixels, more "
                                               "than 2^31; use a larger pixel size.")
                                     .arg(pixel)
                                     .arg(columns, 0, 'f', 0)
                                     .arg(columns / 2.0, 0, 'f', 0));
    grid.width = int64_t(columns);
    grid.height = grid.width / 2;
    grid.pixelWidth = grid.pixelHeight = 360.0 / double(grid.width);
    feedback->pushInfo(QObject::tr("Raster: %1 x %2 pixels of %3 degrees.").arg(grid.width).arg(grid.height).arg(grid.pixelWidth));
  }

  // --- Sites, in EPSG:4326
  QgsProcessingMultiStepFeedback steps(2 + int(wantRegions) + int(wantCells) + int(wantRaster), feedback);
  feedback->setProgressText(QObject::tr("Reading points"));
  PointReadOptions readOptions;
  readOptions.keepAllAttributes = true;
  PointSet points;
  {
    ScopedStage stage(times, "read");
    points = readPoints(*source, readOptions, &steps);
  }
  checkSites(points, sphere::kMaxSites, feedback);
  const int64_t siteCount = points.siteCount();
  {
    ScopedStage stage(times, "read");
    transformToLonLat(points, source->sourceCrs(), context.transformContext(), feedback);
  }
  const QgsCoordinateReferenceSystem wgs84(QStringLiteral("EPSG:4326"));
  const sphere::SiteSet sites{points.x.data(), points.y.data(), siteCount};
  const std::vector<int32_t> labelOfSite = siteLabels(points, fieldIndex, fieldName, kNoData, feedback);
  feedback->pushInfo(QObject::tr("QTM level %1 (%2 cells).")
                       .arg(level)
                       .arg(sphere::qtmCellCount(level)));

  // --- Labeller (Auto falls back to the CPU on a GPU failure)
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  sphere::SphereOptions options;
  options.threads = cpuThreads();
  const RunControl control = runControl(&steps);
  std::unique_ptr<sphere::SphereLabeller> labeller;
  const auto makeCpu = [&] { labeller = sphere::makeSphereLabeller(Backend::Cpu, sites, options, control); };
  // Under Auto a GPU failure moves the work to the CPU with a warning; with DEVICE=GPU it is an error.
  const auto withFallback = [&](const std::function<void()>& work) {
    try
    {
      work();
    }
    catch (const Error& e)
    {
      const bool deviceFailure = dynamic_cast<const DeviceError*>(&e) || dynamic_cast<const DeviceOutOfMemory*>(&e);
      if (!deviceFailure || device.requested != Backend::Auto || labeller->backend() != Backend::Gpu)
        throw;
      feedback->pushWarning(QObject::tr("The GPU failed (%1); continuing on the CPU.").arg(e.what()));
      times.merge(labeller->times());
      makeCpu();
      work();
    }
  };
  if (device.backend == Backend::Gpu)
  {
    try
    {
      labeller = sphere::makeSphereLabeller(Backend::Gpu, sites, options, control);
    }
    catch (const DeviceOutOfMemory&)
    {
      if (device.requested != Backend::Auto)
        throw;
      feedback->pushWarning(QObject::tr("The GPU ran out of memory; running on the CPU."));
      makeCpu();
    }
  }
  else
    makeCpu();
  feedback->pushInfo(QObject::tr("Nearest-site method: %1.").arg(sphere::methodName(labeller->method())));

  QVariantMap outputs;
  FinishedRasters finished;

  // --- QTM labels (regions and cells)
  std::vector<int32_t> cellSite;
  std::vector<double> cellKm;
  if (wantRegions || wantCells)
  {
    steps.setCurrentStep(1);
    feedback->setProgressText(QObject::tr("Labelling the QTM cells"));
    const int64_t cells = int64_t(sphere::qtmCellCount(level));
    cellSite.resize(std::size_t(cells));
    withFallback([&] {
      for (int64_t first = 0; first < cells; first += kChunk)
      {
        const int64_t count = std::min(kChunk, cells - first);
        labeller->labelQtm(level, uint64_t(first), count, cellSite.data() + first, nullptr, control);
        steps.setProgress(100.0 * double(first + count) / double(cells));
        if (feedback->isCanceled())
          throw Canceled();
      }
    });
    // The cells' distances in float64 (the labellers' own are float32: steps of 0.24 m at 4,000 km).
    if (wantCells)
    {
      cellKm.resize(std::size_t(cells));
      sphere::qtmCellDistancesKm(sites, level, 0, cells, cellSite.data(), cellKm.data(), cpuThreads(), control);
    }
  }
  const QgsFields sourceFields = source->fields();

  if (wantRegions)
  {
    steps.setCurrentStep(2);
    feedback->setProgressText(QObject::tr("Tracing the regions"));
    std::vector<sphere::QtmRegion> regions;
    {
      ScopedStage stage(times, "polygons");
      regions = sphere::qtmRegions(level, cellSite.data(), int32_t(siteCount), cpuThreads(), control);
    }
    ScopedStage stage(times, "write");
    QgsFields extra;
    extra.append(QgsField(QStringLiteral("site_id"), QVariant::LongLong));
    extra.append(QgsField(QStringLiteral("qtm_cells"), QVariant::LongLong));
    extra.append(QgsField(QStringLiteral("area_km2"), QVariant::Double));
    const QgsFields fields = QgsProcessingUtils::combineFields(sourceFields, extra);
    QString id;
    std::unique_ptr<QgsFeatureSink> sink = createSink(parameters, QStringLiteral("OUTPUT_REGIONS"), context, id,
                                                         fields, QgsWkbTypes::MultiPolygon, wgs84,
                                                         siteSinkFlags(points));
    const double km2 = sphere::kEarthRadiusKm * sphere::kEarthRadiusKm;
    for (std::size_t r = 0; r < regions.size(); ++r)
    {
      if ((r & 255) == 0)
      {
        if (feedback->isCanceled())
          throw Canceled();
        steps.setProgress(100.0 * double(r) / double(regions.size()));
      }
      const sphere::QtmRegion& region = regions[r];
      auto multi = std::make_unique<QgsMultiPolygon>();
      for (const sphere::LatticePolygon& p : region.polygons)
      {
        auto polygon = std::make_unique<QgsPolygon>();
        polygon->setExteriorRing(ringGeometry(p.shell, level));
        for (const sphere::LatticeRing& h : p.holes)
          polygon->addInteriorRing(ringGeometry(h, level));
        multi->addGeometry(polygon.release());
      }
      QgsFeature feature(fields);
      feature.setGeometry(QgsGeometry(std::move(multi)));
      QgsAttributes attributes = siteAttributes(points, region.label);
      attributes << QVariant::fromValue<qlonglong>(region.label + 1) << QVariant::fromValue<qlonglong>(region.cells)
                 << region.areaSteradians * km2;
      feature.setAttributes(attributes);
      if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
        throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("OUTPUT_REGIONS")));
    }
    feedback->pushInfo(QObject::tr("%1 regions (sites without a cell of their own: %2).")
                         .arg(regions.size())
                         .arg(siteCount - int64_t(regions.size())));
    outputs.insert(QStringLiteral("OUTPUT_REGIONS"), id);
  }

  if (wantCells)
  {
    steps.setCurrentStep(2 + int(wantRegions));
    feedback->setProgressText(QObject::tr("Writing the cells"));
    ScopedStage stage(times, "write");
    QgsFields fields;
    fields.append(QgsField(QStringLiteral("address"), QVariant::String));
    fields.append(QgsField(QStringLiteral("cell_id"), QVariant::LongLong));
    fields.append(QgsField(QStringLiteral("site_id"), QVariant::LongLong));
    fields.append(QgsField(QStringLiteral("dist_km"), QVariant::Double));
    QString id;
    std::unique_ptr<QgsFeatureSink> sink = createSink(parameters, QStringLiteral("OUTPUT_CELLS"), context, id,
                                                         fields, QgsWkbTypes::Polygon, wgs84);
    std::vector<double> lon, lat;
    const int64_t cells = int64_t(cellSite.size());
    for (int64_t c = 0; c < cells; ++c)
    {
      if ((c & 4095) == 0)
      {
        if (feedback->isCanceled())
          throw Canceled();
        steps.setProgress(100.0 * double(c) / double(cells));
      }
      sphere::qtmCellPolygon(uint64_t(c), level, lon, lat);
      QgsFeature feature(fields);
      feature.setGeometry(QgsGeometry(std::make_unique<QgsPolygon>(new QgsLineString(
        QVector<double>(lon.begin(), lon.end()), QVector<double>(lat.begin(), lat.end())))));
      feature.setAttributes(QgsAttributes() << QString::fromStdString(sphere::qtmAddress(uint64_t(c), level))
                                            << QVariant::fromValue<qlonglong>(c)
                                            << QVariant::fromValue<qlonglong>(cellSite[std::size_t(c)] + 1)
                                            << cellKm[std::size_t(c)]);
      if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
        throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("OUTPUT_CELLS")));
    }
    outputs.insert(QStringLiteral("OUTPUT_CELLS"), id);
  }
  cellSite = std::vector<int32_t>();
  cellKm = std::vector<double>();

  if (wantRaster)
  {
    steps.setCurrentStep(2 + int(wantRegions) + int(wantCells));
    feedback->setProgressText(QObject::tr("Labelling the raster"));
    const QString path = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT_RASTER"), context);
    const GridGeometry geometry{grid.west, grid.north, grid.pixelWidth, grid.width, grid.height};
    GeoTiffWriter writer(path, geometry, GDT_Int32, double(kNoData), wgs84, outputFormat(parameters, context));
    const int64_t bandRows = std::max<int64_t>(GeoTiffWriter::kBlockSize,
                                               kChunk / grid.width / GeoTiffWriter::kBlockSize * GeoTiffWriter::kBlockSize);
    std::vector<int32_t> band(std::size_t(std::min(bandRows, grid.height) * grid.width));
    std::vector<char> used(std::size_t(siteCount), 0);
    for (int64_t row0 = 0; row0 < grid.height; row0 += bandRows)
    {
      const int64_t rows = std::min(bandRows, grid.height - row0);
      withFallback([&] { labeller->labelGridRows(grid, row0, rows, band.data(), nullptr, control); });
      for (int64_t i = 0; i < rows * grid.width; ++i)
      {
        used[std::size_t(band[std::size_t(i)])] = 1;
        band[std::size_t(i)] = labelOfSite[std::size_t(band[std::size_t(i)])];
      }
      ScopedStage stage(times, "write");
      writer.writeRows(row0, rows, band.data());
      steps.setProgress(100.0 * double(row0 + rows) / double(grid.height));
      if (feedback->isCanceled())
        throw Canceled();
    }
    {
      ScopedStage stage(times, "write");
      finished.add(QString::fromStdString(writer.finish()));
    }
    std::set<int32_t> distinct;
    for (int64_t s = 0; s < siteCount; ++s)
      if (used[std::size_t(s)] && labelOfSite[std::size_t(s)] != kNoData)
        distinct.insert(labelOfSite[std::size_t(s)]);
    mRasterLabels = QVector<int>(distinct.begin(), distinct.end());
    mRasterPath = path;
    outputs.insert(QStringLiteral("OUTPUT_RASTER"), path);
  }

  times.merge(labeller->times());
  const sphere::SphereStats& stats = labeller->stats();
  if (stats.blocks > 0)
    feedback->pushInfo(QObject::tr("%1 distinct sites; %2 blocks of 64 points with %3 candidates on average; %4 "
                                   "blocks searched per point.")
                         .arg(stats.uniqueSites)
                         .arg(stats.blocks)
                         .arg(double(stats.candidates) / double(stats.blocks), 0, 'f', 1)
                         .arg(stats.overflowBlocks));
  logStageTimes(times, feedback);
  finished.keep();
  return outputs;
}

QVariantMap QtmVoronoiAlgorithm::postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback*)
{
  if (!mRasterPath.isEmpty() && context.willLoadLayerOnCompletion(mRasterPath))
    context.layerToLoadOnCompletionDetails(mRasterPath).setPostProcessor(new LabelRasterStyle(mRasterLabels));
  return QVariantMap();
}

}  // namespace gpugeo
