#include "voronoiraster_algorithm.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include <qgscoordinatetransform.h>
#include <qgsexception.h>
#include <qgsfeature.h>
#include <qgsfeaturesink.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingoutputs.h>
#include <qgsprocessingparameters.h>
#include <qgsprocessingutils.h>

#include "adapters/band_pipeline.h"
#include "adapters/feature_reader.h"
#include "adapters/geotiff_writer.h"
#include "adapters/layer_styles.h"
#include "adapters/number_text.h"
#include "adapters/point_reader.h"
#include "adapters/raster_polygonizer.h"
#include "core/errors.h"
#include "core/parallel.h"
#include "parameter_checks.h"
#include "voronoi/feature_allocation.h"
#include "voronoi/voronoi_raster.h"

namespace gpugeo {

namespace {

constexpr int32_t kNoData = std::numeric_limits<int32_t>::min();
// Pixels per band of rows: the buffers stay near 200 MB whatever the raster's size.
constexpr int64_t kBandPixels = int64_t(1) << 24;

// Whole pixels covering `length` (a length within 1e-9 pixel of a whole number is that number).
int64_t pixelsFor(double length, double pixelSize)
{
  const double exact = length / pixelSize;
  const double whole = std::round(exact);
  return std::max<int64_t>(1, std::abs(exact - whole) < 1e-9 * std::max(1.0, whole) ? int64_t(whole)
                                                                                      : int64_t(std::ceil(exact)));
}

}  // namespace

QString VoronoiRasterAlgorithm::name() const
{
  return QStringLiteral("voronoiraster");
}

QString VoronoiRasterAlgorithm::displayName() const
{
  return QObject::tr("Voronoi raster (allocation)");
}

QStringList VoronoiRasterAlgorithm::tags() const
{
  return QObject::tr("voronoi,thiessen,allocation,nearest,proximity,distance,euclidean,raster,lines,polygons,roads,rivers,gpu,cuda")
    .split(',');
}

QString VoronoiRasterAlgorithm::group() const
{
  return QObject::tr("Proximity and Voronoi");
}

QString VoronoiRasterAlgorithm::groupId() const
{
  return QStringLiteral("proximity");
}

QString VoronoiRasterAlgorithm::iconFile() const
{
  return QStringLiteral("voronoiraster.svg");
}

QString VoronoiRasterAlgorithm::shortDescription() const
{
  return QObject::tr("Labels every pixel of a raster with its nearest point, line or polygon (Voronoi allocation), "
                     "with the distance and the regions as polygons.");
}

QString VoronoiRasterAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>Labels every pixel of a new raster with the nearest feature of the input layer: the raster form of "
           "the Voronoi or Thiessen diagram of points, or the allocation to the nearest road, river or parcel "
           "(Euclidean allocation and distance), on the GPU or on all processor cores.</p>"
           "<p><b>Input layer</b>: points or multipoints (each part is a site), or lines or polygons (each feature "
           "is a site, all its parts together). The distance to a line or polygon is the exact distance from the "
           "pixel centre to its segments, not to rasterized pixels as in <i>Proximity</i>. Curved geometries are "
           "segmentized to within a tenth of a pixel (the log says how many). Features without geometry or with "
           "empty geometry are skipped and counted in the log.</p>"
           "<p><b>Label field</b> (optional): a numeric field whose value labels each site's pixels; values must be "
           "whole numbers within the Int32 range. A NULL value leaves that site's pixels as nodata. Without a "
           "field, the label is the site's 1-based position among the sites read (parts of a multipoint count one "
           "each; features without geometry none).</p>"
           "<p><b>Inside polygons</b>: a pixel whose centre lies inside a polygon (holes excluded) is at distance 0 "
           "and belongs to that polygon (to the lowest-numbered one where polygons overlap); or, with <i>Distance to "
           "the boundary</i>, every pixel gets the distance to the nearest polygon boundary, inside or out.</p>"
           "<p><b>Extent</b> (optional): the raster's extent; by default the extent of the features. <b>Pixel "
           "size</b> (optional): in layer units; by default the extent's longer side / 1000. The raster covers the "
           "extent from its top-left corner, rounded up to whole pixels. At most 2<sup>31</sup> pixels.</p>"
           "<p><b>Outputs</b>: the allocation raster (Int32 GeoTIFF, tiled and compressed, nodata "
           "-2147483648); optionally the distance from each pixel centre to its site (Float32, layer units) and "
           "the Voronoi regions traced from the raster as polygons (one multipolygon per site that has pixels, "
           "with the site's attributes and <i>site_id</i>, the 1-based site index; when a multipoint gave several "
           "sites, a GeoPackage output numbers its features anew, as <i>Multipart to singleparts</i> does).</p>"
           "<p><b>Exactness</b>: each pixel centre goes to the site at the smallest Euclidean distance from the "
           "site's real coordinates (never snapped to the grid), computed in float64 in the raster's pixel frame; "
           "equal distances go to the lowest site index, so duplicate points and shared borders are fine. GPU and "
           "CPU give identical labels and identical distances. For points, against exact arithmetic a label can "
           "differ only where the two nearest sites' distances differ by less than 4&times;10<sup>-16</sup> "
           "&times; (2 (|u|+|v|+1) + d) pixels, u, v being the sites' offsets from the raster's top-left corner and "
           "d their distance, in pixels: below 10<sup>-9</sup> pixel for sites within a million pixels of the "
           "raster; for lines and polygons, where two distances differ by less than about 10<sup>-15</sup> of the "
           "coordinates' size in pixels.</p>"
           "<p><b>Method</b>: one GPU thread a pixel, as in the source paper's raster Voronoi, each pixel scanning "
           "only the sites that can be nearest to its tile of the raster (points: on the CPU found in a Hilbert "
           "R-tree of the sites, Kamel &amp; Faloutsos 1994, on the GPU in a grid of buckets around the tile; lines "
           "and polygons: on both, the segments in a grid of buckets, each block of 8 &times; 8 pixels narrowing "
           "its list for each 2 &times; 2 cell), points in float32 with a certified error bound and in float64 "
           "near a tie (Shewchuk 1997), segments in float64. The plugin's documentation describes the "
           "implementation.</p>") +
         rangesHelp(*this) + deviceHelp() + outputFormatHelp();
}

VoronoiRasterAlgorithm* VoronoiRasterAlgorithm::createInstance() const
{
  return new VoronoiRasterAlgorithm();
}

void VoronoiRasterAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterFeatureSource(QStringLiteral("INPUT"), QObject::tr("Input layer"),
                                                       QList<int>() << QgsProcessing::TypeVectorAnyGeometry));
  addParameter(new QgsProcessingParameterField(QStringLiteral("FIELD"), QObject::tr("Label field"), QVariant(),
                                               QStringLiteral("INPUT"), QgsProcessingParameterField::Numeric, false,
                                               true));
  addParameter(new QgsProcessingParameterExtent(QStringLiteral("EXTENT"), QObject::tr("Extent"), QVariant(), true));
  auto pixelSize = std::make_unique<QgsProcessingParameterDistance>(QStringLiteral("PIXEL_SIZE"), QObject::tr("Pixel size"),
                                                                    QVariant(), QStringLiteral("INPUT"), true, 0.0);
  setMinimumExcluded(*pixelSize);
  addParameter(pixelSize.release());
  addParameter(new QgsProcessingParameterEnum(
    QStringLiteral("POLYGON_DISTANCE"), QObject::tr("Inside polygons"),
    QStringList() << QObject::tr("Distance 0 (the pixels belong to the polygon)")
                  << QObject::tr("Distance to the boundary (inside and out)"),
    false, 0, true));  // optional: models saved before it existed stay valid
  addDeviceParameter();
  addOutputFormatParameters();
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT"), QObject::tr("Voronoi allocation")));
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("OUTPUT_DISTANCE"),
                                                           QObject::tr("Distance to the nearest site"), QVariant(),
                                                           true, false));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT_POLYGONS"), QObject::tr("Voronoi regions"),
                                                     QgsProcessing::TypeVectorPolygon, QVariant(), true, false));
}

namespace {

// The sites: points (each point or multipoint part a site) or line or polygon features (each
// feature a site), with their labels.
struct SiteInput
{
  bool features = false;
  PointSet points;
  FeatureSet lines;  // lines or polygons
  std::vector<int32_t> labelOfSite;  // the label each site's pixels get (kNoData for NULL)

  const SiteFeatures& sites() const { return features ? static_cast<const SiteFeatures&>(lines) : points; }
  int64_t siteCount() const { return sites().siteCount(); }
  QgsRectangle extent() const { return features ? lines.extent : points.extent; }
};

// Reads the sites and their labels (FIELD, or the 1-based site index): points, or line or polygon
// features by the layer's geometry type.
SiteInput readSites(QgsProcessingFeatureSource& source, int fieldIndex, const QString& fieldName, bool keepAttributes,
                    QgsProcessingFeedback* steps, QgsProcessingFeedback* feedback, StageTimes& times)
{
  SiteInput input;
  PointReadOptions readOptions;
  readOptions.keepAllAttributes = keepAttributes;
  if (fieldIndex >= 0)
    readOptions.attributes << fieldIndex;
  const QgsWkbTypes::GeometryType kind = QgsWkbTypes::geometryType(source.wkbType());
  if (kind != QgsWkbTypes::PointGeometry && kind != QgsWkbTypes::LineGeometry && kind != QgsWkbTypes::PolygonGeometry)
    throw QgsProcessingException(QObject::tr("The input layer has no geometry of a known type (%1); it needs "
                                             "points, lines or polygons.")
                                   .arg(QgsWkbTypes::displayString(source.wkbType())));
  input.features = kind != QgsWkbTypes::PointGeometry;
  {
    ScopedStage stage(times, "read");
    if (input.features)
      input.lines = readFeatures(source, kind == QgsWkbTypes::PolygonGeometry, readOptions, steps);
    else
      input.points = readPoints(source, readOptions, steps);
  }
  if (input.features)
    checkFeatures(input.lines, voronoi::kMaxSites, feedback);
  else
    checkSites(input.points, voronoi::kMaxSites, feedback);
  input.labelOfSite = siteLabels(input.sites(), fieldIndex, fieldName, kNoData, feedback);
  return input;
}

// Lines and polygons: their paths, curves segmentized to a tenth of a pixel (said in the log).
void flattenFeatures(SiteInput& input, const voronoi::Grid& grid, QgsProcessingFeedback* feedback)
{
  if (!input.features)
    return;
  const double tolerance = grid.pixelSize / 10.0;
  flatten(input.lines, tolerance);
  if (input.lines.curved > 0)
    feedback->pushInfo(QObject::tr("%1 features with curves were segmentized to within %2 layer units of the curve "
                                   "(a tenth of a pixel).")
                         .arg(input.lines.curved)
                         .arg(tolerance));
}

// Coordinates and sizes in the log: up to 15 significant digits (an origin to the millimetre).
constexpr int kLogDigits = 15;

// Whether an optional parameter was given a value (a number, a string, a data-defined property).
bool parameterGiven(const QVariantMap& parameters, const QString& name)
{
  const QVariant value = parameters.value(name);
  return value.isValid() && !value.isNull() && !(value.type() == QVariant::String && value.toString().isEmpty());
}

// What the labeller did, in the log.
void logLabelStats(const voronoi::LabelStats& stats, bool features, int64_t siteCount, QgsProcessingFeedback* feedback)
{
  if (features)
  {
    feedback->pushInfo(QObject::tr("%1 features with segments; %2 blocks of 8 x 8 pixels (%3 far from every segment), "
                                   "%4 candidate segments in their lists; %5 pixels inside polygons.")
                         .arg(stats.uniqueSites)
                         .arg(stats.tiles)
                         .arg(stats.splitTiles)
                         .arg(stats.candidates)
                         .arg(stats.refinedPixels));
    return;
  }
  feedback->pushInfo(QObject::tr("%1 distinct sites (%2 exact duplicates share their lowest-index twin's pixels); "
                                 "%3 tiles (%4 split) with %5 candidates in all; %6 pixels re-checked in float64 "
                                 "at near ties; %7 tiles searched per pixel.")
                       .arg(stats.uniqueSites)
                       .arg(siteCount - stats.uniqueSites)
                       .arg(stats.tiles)
                       .arg(stats.splitTiles)
                       .arg(stats.candidates)
                       .arg(stats.refinedPixels)
                       .arg(stats.denseTiles));
}

}  // namespace

voronoi::Grid VoronoiRasterAlgorithm::rasterGrid(const QVariantMap& parameters, QgsProcessingContext& context,
                                                 const QgsCoordinateReferenceSystem& crs,
                                                 const QgsRectangle& pointsExtent, QgsProcessingFeedback* feedback)
{
  // EXTENT in its own CRS, transformed here so that a failed transformation is an error rather
  // than an extent silently left in the wrong CRS.
  QgsRectangle extent = parameterAsExtent(parameters, QStringLiteral("EXTENT"), context);
  if (extent.isNull())
  {
    extent = pointsExtent;
  }
  else
  {
    const QgsCoordinateReferenceSystem extentCrs = parameterAsExtentCrs(parameters, QStringLiteral("EXTENT"), context);
    if (extentCrs.isValid() && crs.isValid() && extentCrs != crs)
    {
      try
      {
        QgsCoordinateTransform transform(extentCrs, crs, context.transformContext());
        transform.setBallparkTransformsAreAppropriate(true);
        extent = transform.transformBoundingBox(extent);
      }
      catch (const QgsCsException& e)
      {
        throw QgsProcessingException(QObject::tr("Could not transform the EXTENT from %1 to the layer's %2: %3")
                                       .arg(extentCrs.authid(), crs.authid(), e.what()));
      }
    }
  }
  const QString extentText = QStringLiteral("%1, %2 : %3, %4")
                               .arg(number(extent.xMinimum(), kLogDigits), number(extent.yMinimum(), kLogDigits),
                                    number(extent.xMaximum(), kLogDigits), number(extent.yMaximum(), kLogDigits));
  if (!std::isfinite(extent.width()) || !std::isfinite(extent.height()))
    throw QgsProcessingException(QObject::tr("The extent (%1) is too wide for a raster: its width or height is not a "
                                             "finite number. Check the layer's coordinates and CRS, or give an "
                                             "EXTENT.")
                                   .arg(extentText));
  if (!(extent.width() > 0.0) || !(extent.height() > 0.0))
    throw QgsProcessingException(QObject::tr("The extent (%1) has no area: all features lie on one line or on "
                                             "one spot. Give an EXTENT.")
                                   .arg(extentText));
  double pixelSize = std::max(extent.width(), extent.height()) / 1000.0;
  if (parameterGiven(parameters, QStringLiteral("PIXEL_SIZE")))
    pixelSize = parameterAsDouble(parameters, QStringLiteral("PIXEL_SIZE"), context);  // > 0: parameter_checks.h
  // Sizes in floating point first: the pixel counts may not even fit an integer.
  const double columns = std::ceil(extent.width() / pixelSize);
  const double rows = std::ceil(extent.height() / pixelSize);
  const auto tooLarge = [&] {
    return QgsProcessingException(QObject::tr("The raster would have %1 x %2 pixels, more than the limits of 2^31 "
                                              "pixels (2,147,483,648) and 2^24 pixels a side; use a larger pixel "
                                              "size or a smaller extent.")
                                    .arg(number(columns, kLogDigits), number(rows, kLogDigits)));
  };
  if (columns > double(voronoi::kMaxSide) || rows > double(voronoi::kMaxSide) ||
      columns * rows > 1.01 * double(voronoi::kMaxPixels))
    throw tooLarge();
  const voronoi::Grid grid{extent.xMinimum(), extent.yMaximum(), pixelSize, pixelsFor(extent.width(), pixelSize),
                           pixelsFor(extent.height(), pixelSize)};
  if (grid.pixelCount() > voronoi::kMaxPixels)
    throw tooLarge();
  feedback->pushInfo(QObject::tr("Raster: %1 x %2 pixels of %3, top-left corner (%4, %5).")
                       .arg(grid.width)
                       .arg(grid.height)
                       .arg(number(pixelSize, kLogDigits), number(grid.originX, kLogDigits),
                            number(grid.originY, kLogDigits)));
  return grid;
}

QVariantMap VoronoiRasterAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                            QgsProcessingFeedback* feedback)
{
  StageTimes times;
  std::unique_ptr<QgsProcessingFeatureSource> source(parameterAsSource(parameters, QStringLiteral("INPUT"), context));
  if (!source)
    throw QgsProcessingException(invalidSourceError(parameters, QStringLiteral("INPUT")));
  const QString fieldName = parameterAsString(parameters, QStringLiteral("FIELD"), context);
  const int fieldIndex = fieldName.isEmpty() ? -1 : source->fields().lookupField(fieldName);
  if (!fieldName.isEmpty() && fieldIndex < 0)
    throw QgsProcessingException(QObject::tr("The layer has no field named %1.").arg(fieldName));
  const bool wantDistance = outputRequested(parameters, QStringLiteral("OUTPUT_DISTANCE"));
  const bool wantPolygons = outputRequested(parameters, QStringLiteral("OUTPUT_POLYGONS"));
  const QgsCoordinateReferenceSystem crs = source->sourceCrs();

  QgsProcessingMultiStepFeedback steps(wantPolygons ? 3 : 2, feedback);
  feedback->setProgressText(QObject::tr("Reading the features"));
  SiteInput input = readSites(*source, fieldIndex, fieldName, wantPolygons, &steps, feedback, times);
  const int64_t siteCount = input.siteCount();
  const voronoi::Grid grid = rasterGrid(parameters, context, crs, input.extent(), feedback);
  flattenFeatures(input, grid, feedback);

  // --- Backend and labeller. Under Auto a GPU failure (out of memory, a CUDA error) moves the
  // work to the CPU with a warning; with DEVICE=GPU it is an error.
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  const RunControl control = runControl(&steps);
  const auto interior = parameterAsEnum(parameters, QStringLiteral("POLYGON_DISTANCE"), context) == 1
                          ? voronoi::PolygonInterior::Boundary
                          : voronoi::PolygonInterior::Zero;
  auto makeLabeller = [&](Backend backend) {
    if (input.features)
    {
      voronoi::FeatureLabellerOptions options;
      options.threads = cpuThreads();
      options.interior = interior;
      return voronoi::makeFeatureLabeller(backend, grid, input.lines.sites(), options, control);
    }
    const voronoi::Sites sites{input.points.x.data(), input.points.y.data(), siteCount};
    return voronoi::makeLabeller(backend, grid, sites, voronoi::LabellerOptions{cpuThreads(), 0}, control);
  };
  QStringList warnings;
  std::unique_ptr<voronoi::Labeller> labeller;
  auto fallBackToCpu = [&](const std::exception& failure) {
    if (device.requested != Backend::Auto || !labeller || labeller->backend() != Backend::Gpu)
      throw;
    warnings << QObject::tr("The GPU failed (%1); continuing on the CPU.").arg(failure.what());
    times.merge(labeller->times());
    for (const std::string& warning : labeller->warnings())
      warnings << QString::fromStdString(warning);
    labeller = makeLabeller(Backend::Cpu);
  };
  if (device.backend == Backend::Gpu)
  {
    try
    {
      labeller = makeLabeller(Backend::Gpu);
    }
    catch (const DeviceOutOfMemory&)
    {
      if (device.requested != Backend::Auto)
        throw;
      warnings << QObject::tr("The GPU ran out of memory; running on the CPU.");
    }
    catch (const DeviceError& e)
    {
      if (device.requested != Backend::Auto)
        throw;
      warnings << QObject::tr("The GPU failed (%1); running on the CPU.").arg(e.what());
    }
  }
  if (!labeller)
    labeller = makeLabeller(Backend::Cpu);

  // --- Label, band by band, and write --------------------------------------------------------
  steps.setCurrentStep(1);
  feedback->setProgressText(QObject::tr("Labelling pixels and writing the rasters"));
  const GridGeometry geometry{grid.originX, grid.originY, grid.pixelSize, grid.width, grid.height};
  FinishedRasters finished;
  const QString outputPath = parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT"), context);
  const gdal::OutputFormat format = outputFormat(parameters, context);
  auto allocation = std::make_unique<GeoTiffWriter>(outputPath, geometry, GDT_Int32, double(kNoData), crs, format);
  std::unique_ptr<GeoTiffWriter> distance;
  if (wantDistance)
    distance = std::make_unique<GeoTiffWriter>(parameterAsOutputLayer(parameters, QStringLiteral("OUTPUT_DISTANCE"),
                                                                       context),
                                               geometry, GDT_Float32, std::nullopt, crs, format);
  // The regions are traced from a raster of site indexes: the allocation raster itself when its
  // labels are the site indexes, else a temporary one.
  std::unique_ptr<GeoTiffWriter> siteIndex;
  if (wantPolygons && fieldIndex >= 0)
    siteIndex = std::make_unique<GeoTiffWriter>(QgsProcessingUtils::generateTempFilename(QStringLiteral("sites.tif")),
                                                geometry, GDT_Int32, std::nullopt, crs);

  int64_t bandRows = std::max<int64_t>(1, kBandPixels / grid.width);
  if (bandRows >= GeoTiffWriter::kBlockSize)
    bandRows = bandRows / GeoTiffWriter::kBlockSize * GeoTiffWriter::kBlockSize;
  bandRows = std::min(bandRows, grid.height);
  struct Band
  {
    std::vector<int32_t> site, label;
    std::vector<float> distance;
    float maxDistance = 0.f;
  };
  Band bands[2];
  for (Band& band : bands)
  {
    band.site.resize(static_cast<size_t>(bandRows * grid.width));
    band.label.resize(band.site.size());
    band.distance.resize(wantDistance ? band.site.size() : 0);
  }
  std::vector<char> siteUsed(static_cast<size_t>(siteCount), 0);
  float maxDistance = 0.f;
  StageTimes writeTimes;

  // Worker thread: label a band and map site indexes to labels.
  auto produce = [&](Band& band, int64_t row0, int64_t rows) {
    while (true)
    {
      try
      {
        labeller->labelRows(row0, rows, band.site.data(), wantDistance ? band.distance.data() : nullptr, control);
        break;
      }
      catch (const DeviceOutOfMemory& e)
      {
        fallBackToCpu(e);
      }
      catch (const DeviceError& e)
      {
        fallBackToCpu(e);
      }
    }
    const size_t n = static_cast<size_t>(rows * grid.width);
    for (size_t i = 0; i < n; ++i)
    {
      band.label[i] = input.labelOfSite[static_cast<size_t>(band.site[i])];
      siteUsed[static_cast<size_t>(band.site[i])] = 1;
    }
    band.maxDistance = wantDistance ? *std::max_element(band.distance.begin(), band.distance.begin() + n) : 0.f;
  };
  // Calling thread: write it; the distance raster (plain) goes out on its own thread while the
  // labels are compressed.
  auto consume = [&](Band& band, int64_t row0, int64_t rows) {
    ScopedStage stage(writeTimes, "write");
    std::future<void> distanceWritten;
    if (distance)
      distanceWritten = startAsync([&] { distance->writeRows(row0, rows, band.distance.data()); });
    try
    {
      allocation->writeRows(row0, rows, band.label.data());
      if (siteIndex)
        siteIndex->writeRows(row0, rows, band.site.data());
    }
    catch (...)
    {
      if (distanceWritten.valid())
        distanceWritten.wait();
      throw;
    }
    if (distanceWritten.valid())
      distanceWritten.get();
    maxDistance = std::max(maxDistance, band.maxDistance);
    steps.setProgress(100.0 * double(row0 + rows) / double(grid.height));
  };
  const bool complete =
    runBandPipeline<Band>(grid.height, bandRows, bands, produce, consume, [&] { return !feedback->isCanceled(); });
  for (const QString& warning : warnings)
    feedback->pushWarning(warning);
  if (!complete || feedback->isCanceled())
    throw Canceled();
  times.merge(labeller->times());
  for (const std::string& warning : labeller->warnings())
    feedback->pushWarning(QString::fromStdString(warning));
  {
    ScopedStage stage(writeTimes, "write");
    finished.add(QString::fromStdString(allocation->finish()));
    if (distance)
      finished.add(QString::fromStdString(distance->finish()));
    if (siteIndex)
      finished.addTemporary(QString::fromStdString(siteIndex->finish()));
  }
  times.merge(writeTimes);

  logLabelStats(labeller->stats(), input.features, siteCount, feedback);
  const int64_t sitesWithPixels = std::count(siteUsed.begin(), siteUsed.end(), 1);
  if (sitesWithPixels < siteCount)
    feedback->pushInfo(QObject::tr("%1 sites have no pixel (outside the extent, duplicates, or too close to "
                                   "another site for this pixel size).")
                         .arg(siteCount - sitesWithPixels));

  QVariantMap outputs;
  outputs.insert(QStringLiteral("OUTPUT"), outputPath);
  if (distance)
    outputs.insert(QStringLiteral("OUTPUT_DISTANCE"), QString::fromStdString(distance->path()));
  if (wantPolygons)
  {
    steps.setCurrentStep(2);
    feedback->setProgressText(QObject::tr("Tracing the regions"));
    ScopedStage stage(times, "polygons");
    outputs.insert(QStringLiteral("OUTPUT_POLYGONS"),
                   writeRegions(parameters, context, *source, input.sites(), siteIndex ? QString::fromStdString(siteIndex->path()) : outputPath,
                                siteIndex ? 0 : 1, &steps));
  }
  logStageTimes(times, feedback);
  finished.keep();

  mAllocationPath = outputPath;
  std::set<int32_t> distinct;
  for (int64_t s = 0; s < siteCount; ++s)
    if (siteUsed[static_cast<size_t>(s)] && input.labelOfSite[static_cast<size_t>(s)] != kNoData)
      distinct.insert(input.labelOfSite[static_cast<size_t>(s)]);
  mLabels = QVector<int>(distinct.begin(), distinct.end());
  mDistancePath = distance ? QString::fromStdString(distance->path()) : QString();
  mMaxDistance = maxDistance;
  return outputs;
}

QString VoronoiRasterAlgorithm::writeRegions(const QVariantMap& parameters, QgsProcessingContext& context,
                                             QgsProcessingFeatureSource& source, const SiteFeatures& sites,
                                             const QString& tracedPath, int32_t valueOfFirstSite,
                                             QgsProcessingFeedback* feedback) const
{
  const int64_t siteCount = sites.siteCount();
  std::vector<QVector<QgsGeometry>> parts(static_cast<size_t>(siteCount));
  const bool traced = polygonizeRegions(
    tracedPath,
    [&](int32_t value, QgsGeometry&& polygon) {
      const int64_t s = int64_t(value) - valueOfFirstSite;
      if (s >= 0 && s < siteCount)
        parts[static_cast<size_t>(s)].append(std::move(polygon));
    },
    feedback);
  if (!traced)
    throw Canceled();

  QgsFields extra;
  extra.append(QgsField(QStringLiteral("site_id"), QVariant::LongLong));
  const QgsFields fields = QgsProcessingUtils::combineFields(source.fields(), extra);
  QString polygonsId;
  std::unique_ptr<QgsFeatureSink> sink = createSink(parameters, QStringLiteral("OUTPUT_POLYGONS"), context,
                                                       polygonsId, fields, QgsWkbTypes::MultiPolygon,
                                                       source.sourceCrs(), siteSinkFlags(sites));
  for (int64_t s = 0; s < siteCount; ++s)
  {
    if ((s & 1023) == 0 && feedback->isCanceled())
      throw Canceled();
    QVector<QgsGeometry>& pieces = parts[static_cast<size_t>(s)];
    if (pieces.isEmpty())
      continue;
    QgsGeometry region = pieces.size() == 1 ? pieces.front() : QgsGeometry::collectGeometry(pieces);
    region.convertToMultiType();
    pieces.clear();
    QgsFeature feature(fields);
    feature.setGeometry(region);
    QgsAttributes attributes = siteAttributes(sites, s);
    attributes.append(QVariant::fromValue<qlonglong>(s + 1));
    feature.setAttributes(attributes);
    if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
      throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("OUTPUT_POLYGONS")));
  }
  return polygonsId;
}

QVariantMap VoronoiRasterAlgorithm::postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback*)
{
  if (context.willLoadLayerOnCompletion(mAllocationPath))
    context.layerToLoadOnCompletionDetails(mAllocationPath).setPostProcessor(new LabelRasterStyle(mLabels));
  if (!mDistancePath.isEmpty() && context.willLoadLayerOnCompletion(mDistancePath))
    context.layerToLoadOnCompletionDetails(mDistancePath).setPostProcessor(new ContinuousRasterStyle(0.0, mMaxDistance));
  return QVariantMap();
}

}  // namespace gpugeo
