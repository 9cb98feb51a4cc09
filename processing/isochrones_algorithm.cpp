#include "isochrones_algorithm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include <QCoreApplication>

#include <qgscoordinatetransform.h>
#include <qgsexception.h>
#include <qgsfeature.h>
#include <qgsfeaturesink.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingoutputs.h>
#include <qgsprocessingparameters.h>
#include <qgsprocessingutils.h>
#include <qgsrasterlayer.h>

#include "adapters/band_geometry.h"
#include "adapters/geotiff_writer.h"
#include "adapters/grid_points.h"
#include "adapters/layer_styles.h"
#include "adapters/number_text.h"
#include "adapters/tiled_rasters.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/detail/travel_math.h"
#include "dem/isochrone_chain.h"
#include "dem/travel_time.h"
#include "flowdirection_algorithm.h"
#include "mpi_launch.h"
#include "parameter_checks.h"

namespace gpugeo {

namespace {

// What a tiled run holds per cell of a tile in flight: its most demanding stage's.
constexpr int64_t tiledBytesPerCell()
{
  namespace tiled = dem::tiled;
  return std::max({tiled::kFillBytesPerTileCell, tiled::kFlatsBytesPerTileCell, tiled::kDirectionsBytesPerTileCell,
                   tiled::kAccumulationBytesPerTileCell, tiled::kTravelBytesPerTileCell,
                   tiled::kBandsBytesPerTileCell});
}

// The fields of a band, in ISOCHRONES and TIME_AREA.
QgsFields bandFields()
{
  QgsFields fields;
  fields.append(QgsField(QStringLiteral("band"), QVariant::Int));
  fields.append(QgsField(QStringLiteral("t_min"), QVariant::Double));
  fields.append(QgsField(QStringLiteral("t_max"), QVariant::Double));
  fields.append(QgsField(QStringLiteral("cells"), QVariant::LongLong));
  fields.append(QgsField(QStringLiteral("area_km2"), QVariant::Double));
  return fields;
}

// Whether an optional parameter was given a value.
bool parameterGiven(const QVariantMap& parameters, const QString& name)
{
  const QVariant value = parameters.value(name);
  return value.isValid() && !value.isNull() && !(value.type() == QVariant::String && value.toString().isEmpty());
}

// Whether a number's range includes 0.
enum Bound
{
  Positive,
  NotNegative,
};

QgsProcessingParameterNumber* numberParameter(const QString& name, const QString& description, double defaultValue,
                                              Bound bound, bool advanced = true,
                                              QgsProcessingParameterNumber::Type type =
                                                QgsProcessingParameterNumber::Double)
{
  auto* parameter = new QgsProcessingParameterNumber(name, description, type, defaultValue, false, 0.0);
  if (bound == Positive)
    setMinimumExcluded(*parameter);
  if (advanced)
    parameter->setFlags(parameter->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  return parameter;
}

}  // namespace

QString IsochronesAlgorithm::name() const
{
  return QStringLiteral("isochrones");
}

QString IsochronesAlgorithm::displayName() const
{
  return QObject::tr("Isochrones to an outlet");
}

QStringList IsochronesAlgorithm::tags() const
{
  return QObject::tr("dem,isochrones,travel time,time-area,clark,unit hydrograph,watershed,catchment,basin,outlet,"
                     "velocity,manning,d8,hydrology,gpu,cuda")
    .split(',');
}

QString IsochronesAlgorithm::group() const
{
  return QObject::tr("Hydrology");
}

QString IsochronesAlgorithm::groupId() const
{
  return QStringLiteral("hydrology");
}

QString IsochronesAlgorithm::iconFile() const
{
  return QStringLiteral("isochrones.svg");
}

QString IsochronesAlgorithm::shortDescription() const
{
  return QObject::tr("Travel time of every cell of a watershed to its outlet along D8 flow paths (constant, "
                     "slope-based or Manning speeds), the watershed, its isochrone bands and the time–area table.");
}

QString IsochronesAlgorithm::shortHelpString() const
{
  const dem::VelocityModel d;
  return QObject::tr(
           "<p>From a DEM: the time water needs to flow from every cell of a watershed to its outlet, the "
           "watershed and its <i>isochrones</i> (bands of equal travel time) as polygons, and the time&ndash;area "
           "table (the histogram of the Clark unit hydrograph).</p>"
           "<p>The DEM is filled, its D8 directions found with flats resolved and the flow accumulated, as "
           "<i>Fill depressions</i>, <i>Flow direction</i> and <i>Flow accumulation</i> do. A cell's travel time "
           "is the sum of the step times (flow length / speed) down its path to the outlet, the outlet's own step "
           "included (as SAGA counts it).</p>"
           "<p><b>Input DEM</b> and <b>Band number</b>: a north-up raster; nodata, NaN and infinite values are "
           "nodata. <b>Outlet point</b> (optional): the layer's first point, in any CRS, snapped to the cell of "
           "highest flow accumulation within <b>Snap distance</b> (metres; 0: the cell under it). Without it, the "
           "outlet is where the largest basin leaves the grid.</p>"
           "<p><b>Velocity model</b>, speeds in m/s, s the slope along the flow direction (m/m):</p><ul>"
           "<li><b>Constant speed</b>: v = <i>speed</i> (default %1 m/s).</li>"
           "<li><b>Slope-based</b> (the default; the NRCS velocity method): v = max(<i>minimum speed</i>, k "
           "&radic;s b / n), s at least <i>minimum slope</i>; k is the <i>channel</i> coefficient where the "
           "upstream area reaches the <i>channel threshold</i>, else the <i>overland</i> one; n = b = 1 by default "
           "(else our reading of the paper).</li>"
           "<li><b>Manning-based</b>, SAGA's <i>Isochrones Variable Speed</i> (Olaya 2004) with its defaults: runoff "
           "from the <i>rainfall intensity</i> and SCS <i>curve number</i>; overland v = (I D)<sup>0.4</sup> "
           "s<sup>0.3</sup> / n<sup>0.6</sup> below the <i>mixed flow threshold</i>; above, Manning's equation in a "
           "triangular channel of the <i>side slope</i> (depth by bisection, at most <i>maximum bisection "
           "steps</i>), n for mixed flow and, past the <i>channel threshold</i>, channel flow. The optional "
           "<i>Manning's n raster</i> (the DEM's grid) gives overland n per cell (no value above 0: the overland "
           "n).</li></ul>"
           "<p>Each model's settings are advanced parameters named after it.</p>"
           "<p><b>Defaults</b>: overland k = %2 m/s, NRCS shallow concentrated flow, unpaved (TR-55); channel k = "
           "%3 m/s, Manning's v at R = 0.5 m, n = 0.035 (Chow); channels from %4 km&sup2;; minimum slope %5 "
           "(SAGA's). Take k from NEH 630 ch. 15 where the land cover is known.</p>"
           "<p><b>Isochrone interval</b> (minutes): band k holds the cells with (k&minus;1) &times; interval &le; t "
           "&lt; k &times; interval. 0, the default, picks the first of 1, 2, 5, 10, 15, 20, 30 min, 1, 2, 3, 4, 6, "
           "8, 12 h, 1, 2, 3 days or weeks giving at most %6 bands.</p>")
           .arg(number(d.speed), number(d.kOverland), number(d.kChannel), number(d.channelArea / 1e6),
                number(d.minSlope))
           .arg(dem::kAutomaticBands) +
         QObject::tr(
           "<p><b>Outputs</b>: <b>Travel time</b> (Float64 raster, minutes; nodata &minus;1 outside the "
           "watershed). <b>Watershed</b>: one polygon with area_km2, cells and t_max (the longest time). "
           "<b>Isochrones</b>: one polygon per band, with band, t_min, t_max (minutes), cells and area_km2. "
           "<b>Time&ndash;area table</b>: one row per band (empty ones included) with the same fields and "
           "cumulative_share, the share of the area within t_max. Areas are sums of the cells' areas. Optional: the "
           "<b>Filled DEM</b>, the <b>Flow direction</b> (ESRI codes 1 = E &hellip; 128 = NE, nodata 255) and "
           "the <b>Flow accumulation</b> (cells, nodata &minus;1). Polygons follow the cells' edges "
           "(4-connected groups, holes included).</p>"
           "<p><b>Hydrograph</b> (optional), by the time&ndash;area method (Ross 1921): excess falling on band k "
           "in step j reaches the outlet in step j + k; the step is the interval. Excess (mm/h): the <i>excess "
           "field</i> of the <i>excess table</i>, a row per step in order (set the interval to its step), else "
           "the <i>constant excess</i> for its <i>duration</i>. Rows: t_min, t_max, excess_mm_h, discharge_m3s "
           "(the step's mean), unit_m3s (1 mm in one step). No storage attenuates the peak.</p>"
           "<p><b>Caveats</b>: a filled depression is a flat where water moves at the minimum slope (a lake or "
           "reservoir). Times depend on the DEM's resolution through the flow lengths. GPU and CPU times agree to about "
           "10<sup>&minus;12</sup> relative, tiled runs to 10<sup>&minus;15</sup> per tile crossed (sums in other "
           "orders).</p>") +
         cellSizeHelp() +
         QObject::tr(
           "<p><b>References</b>: USDA NRCS (1986), Urban hydrology for small watersheds, TR-55, appendix F;"
           " USDA NRCS (2010), National Engineering Handbook part 630, chapter 15 (the velocity "
           "method). V. T. Chow (1959), Open-channel hydraulics, McGraw-Hill. V. Olaya (2004), "
           "Hidrolog&iacute;a computacional y modelos digitales del terreno. Zhao X., Miao Q., Fu Z., Su C., Li X. (2010), CUDA-based confluence analysis, Application "
           "Research of Computers, doi:10.3969/j.issn.1001-3695.2010.07.011. C. O. Clark (1945), Storage and the "
           "unit hydrograph, Transactions of the ASCE 110, 1419&ndash;1446. A. D. Ross (1921), The calculation of "
           "flood discharges by the use of a time contour plan, Transactions of the Institution of Engineers, "
           "Australia.</p>") +
         rangesHelp(*this) + deviceHelp() + tilingHelp();
}

IsochronesAlgorithm* IsochronesAlgorithm::createInstance() const
{
  return new IsochronesAlgorithm();
}

void IsochronesAlgorithm::initAlgorithm(const QVariantMap&)
{
  const dem::VelocityModel d;
  // What every run needs.
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("INPUT"), QObject::tr("Input DEM")));
  // Optional so that qgis_process takes the default (a mandatory band must always be given there).
  addParameter(new QgsProcessingParameterBand(QStringLiteral("BAND"), QObject::tr("Band number"), 1,
                                              QStringLiteral("INPUT"), true));
  addParameter(new QgsProcessingParameterFeatureSource(QStringLiteral("OUTLET"),
                                                       QObject::tr("Outlet point (automatic when empty)"),
                                                       QList<int>() << QgsProcessing::TypeVectorPoint, QVariant(), true));
  addParameter(numberParameter(QStringLiteral("SNAP_DISTANCE"), QObject::tr("Snap distance (metres)"), 100.0,
                               NotNegative, false));
  addParameter(new QgsProcessingParameterEnum(
    QStringLiteral("VELOCITY_MODEL"), QObject::tr("Velocity model"),
    QStringList{QObject::tr("Constant speed"), QObject::tr("Slope-based (velocity method)"),
                QObject::tr("Manning-based overland / mixed / channel flow (SAGA)")},
    false, Slope));
  addParameter(numberParameter(QStringLiteral("INTERVAL"), QObject::tr("Isochrone interval (minutes; 0: automatic)"),
                               0.0, NotNegative, false));
  // Each model's settings, advanced, in the models' order.
  addParameter(numberParameter(QStringLiteral("SPEED"), QObject::tr("Constant model: speed (m/s)"), d.speed, Positive));
  addParameter(numberParameter(QStringLiteral("K_OVERLAND"), QObject::tr("Slope model: overland coefficient k (m/s)"),
                               d.kOverland, Positive));
  addParameter(numberParameter(QStringLiteral("K_CHANNEL"), QObject::tr("Slope model: channel coefficient k (m/s)"),
                               d.kChannel, Positive));
  addParameter(numberParameter(QStringLiteral("CHANNEL_THRESHOLD"),
                               QObject::tr("Slope model: channel threshold (km² upstream)"), d.channelArea / 1e6,
                               NotNegative));
  addParameter(numberParameter(QStringLiteral("N_FACTOR"), QObject::tr("Slope model: factor n of t = n·l / (k·v(s)·b)"),
                               d.n, Positive));
  addParameter(numberParameter(QStringLiteral("B_FACTOR"), QObject::tr("Slope model: factor b of t = n·l / (k·v(s)·b)"),
                               d.b, Positive));
  addParameter(numberParameter(QStringLiteral("MIN_SLOPE"), QObject::tr("Slope model: minimum slope (m/m)"),
                               d.minSlope, Positive));
  addParameter(numberParameter(QStringLiteral("MIN_SPEED"), QObject::tr("Slope and Manning models: minimum speed (m/s)"),
                               d.minSpeed, Positive));
  auto manning = std::make_unique<QgsProcessingParameterRasterLayer>(
    QStringLiteral("MANNING"), QObject::tr("Manning model: Manning's n raster (overland)"), QVariant(), true);
  manning->setFlags(manning->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  addParameter(manning.release());
  addParameter(numberParameter(QStringLiteral("RAINFALL"), QObject::tr("Manning model: rainfall intensity (mm/h)"),
                               d.rainfall, Positive));
  auto curveNumber =
    numberParameter(QStringLiteral("CURVE_NUMBER"), QObject::tr("Manning model: SCS curve number"), d.curveNumber,
                    Positive);
  curveNumber->setMaximum(100.0);
  addParameter(curveNumber);
  addParameter(numberParameter(QStringLiteral("MANNING_OVERLAND"), QObject::tr("Manning model: n, overland flow"),
                               d.overlandN, Positive));
  addParameter(numberParameter(QStringLiteral("MIXED_THRESHOLD"), QObject::tr("Manning model: mixed flow threshold (ha)"),
                               d.mixedArea / 1e4, NotNegative));
  addParameter(numberParameter(QStringLiteral("CHANNEL_THRESHOLD_MANNING"),
                               QObject::tr("Manning model: channel threshold (ha)"), d.channelAreaManning / 1e4,
                               NotNegative));
  addParameter(numberParameter(QStringLiteral("MANNING_MIXED"), QObject::tr("Manning model: n, mixed flow"), d.mixedN,
                               Positive));
  addParameter(numberParameter(QStringLiteral("MANNING_CHANNEL"), QObject::tr("Manning model: n, channel flow"),
                               d.channelN, Positive));
  addParameter(numberParameter(QStringLiteral("SIDE_SLOPE"), QObject::tr("Manning model: channel side slope (m/m)"),
                               d.sideSlope, Positive));
  auto iterations = numberParameter(QStringLiteral("MAX_ITERATIONS"), QObject::tr("Manning model: maximum bisection steps"),
                                    d.maxIterations, NotNegative, true, QgsProcessingParameterNumber::Integer);
  iterations->setMinimum(1);
  iterations->setMaximum(1e6);
  addParameter(iterations);
  addHydrographParameters();
  addDeviceParameter();
  addTilingParameters();
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("TRAVEL_TIME"),
                                                           QObject::tr("Travel time (minutes)")));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("WATERSHED"), QObject::tr("Watershed"),
                                                     QgsProcessing::TypeVectorPolygon, QVariant(), true, true));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("ISOCHRONES"), QObject::tr("Isochrones"),
                                                     QgsProcessing::TypeVectorPolygon, QVariant(), true, true));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("TIME_AREA"), QObject::tr("Time–area table"),
                                                     QgsProcessing::TypeVector, QVariant(), true, true));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("HYDROGRAPH"), QObject::tr("Hydrograph"),
                                                     QgsProcessing::TypeVector, QVariant(), true, false));
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("FILLED"), QObject::tr("Filled DEM"),
                                                           QVariant(), true, false));
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("FLOWDIR"),
                                                           QObject::tr("Flow direction (ESRI codes)"), QVariant(), true,
                                                           false));
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("ACCUMULATION"),
                                                           QObject::tr("Flow accumulation (cells)"), QVariant(), true,
                                                           false));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("WATERSHED_AREA_KM2"), QObject::tr("Watershed area (km²)")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("MAX_TIME_MIN"), QObject::tr("Longest travel time (minutes)")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("INTERVAL_MIN"), QObject::tr("Isochrone interval (minutes)")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("OUTLET_X"), QObject::tr("Outlet cell centre x (DEM CRS)")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("OUTLET_Y"), QObject::tr("Outlet cell centre y (DEM CRS)")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("PEAK_DISCHARGE_M3S"),
                                          QObject::tr("Hydrograph: peak discharge (m³/s)")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("PEAK_TIME_MIN"),
                                          QObject::tr("Hydrograph: end of the peak's time step (minutes)")));
}

QString IsochronesAlgorithm::numericProblem(const QVariantMap& parameters, QgsProcessingContext& context) const
{
  // Each number's own range is checked with every algorithm's (parameter_checks.h); what is left is
  // between two of them.
  if (parameterAsEnum(parameters, QStringLiteral("VELOCITY_MODEL"), context) != Manning)
    return QString();
  const double mixed = parameterAsDouble(parameters, QStringLiteral("MIXED_THRESHOLD"), context);
  const double channel = parameterAsDouble(parameters, QStringLiteral("CHANNEL_THRESHOLD_MANNING"), context);
  if (channel >= mixed)
    return QString();
  return QObject::tr("CHANNEL_THRESHOLD_MANNING (the Manning model's channel threshold) must be at least "
                     "MIXED_THRESHOLD (%1 ha); got %2.")
    .arg(number(mixed), number(channel));
}

bool IsochronesAlgorithm::checkParameterValues(const QVariantMap& parameters, QgsProcessingContext& context,
                                               QString* message) const
{
  if (!Algorithm::checkParameterValues(parameters, context, message))
    return false;
  const QString problem = numericProblem(parameters, context);
  if (!problem.isEmpty())
  {
    if (message)
      *message = problem;
    return false;
  }
  return true;
}

bool IsochronesAlgorithm::prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                                        QgsProcessingFeedback*)
{
  const QString problem = numericProblem(parameters, context);
  if (!problem.isEmpty())
    throw QgsProcessingException(problem);
  mSource = demSourceOf(parameterAsRasterLayer(parameters, QStringLiteral("INPUT"), context), QStringLiteral("INPUT"),
                        parameters.value(QStringLiteral("INPUT")));
  mSource.outputFormat = outputFormat(parameters, context);
  mHasManning = parameterGiven(parameters, QStringLiteral("MANNING"));
  if (mHasManning)
    mManningSource = demSourceOf(parameterAsRasterLayer(parameters, QStringLiteral("MANNING"), context),
                                 QStringLiteral("MANNING"), parameters.value(QStringLiteral("MANNING")));
  return true;
}

IsochronesAlgorithm::Request IsochronesAlgorithm::readRequest(const QVariantMap& parameters,
                                                             QgsProcessingContext& context) const
{
  Request r;
  r.band = parameterAsInt(parameters, QStringLiteral("BAND"), context);
  r.interval = parameterAsDouble(parameters, QStringLiteral("INTERVAL"), context);
  r.snapDistance = parameterAsDouble(parameters, QStringLiteral("SNAP_DISTANCE"), context);
  const int modelChoice = parameterAsEnum(parameters, QStringLiteral("VELOCITY_MODEL"), context);
  const auto value = [&](const char* name) { return parameterAsDouble(parameters, QString::fromLatin1(name), context); };
  dem::VelocityModel& model = r.model;
  model.kind = modelChoice == Constant ? dem::VelocityModel::Kind::Constant
             : modelChoice == Manning  ? dem::VelocityModel::Kind::Manning
                                       : dem::VelocityModel::Kind::Slope;
  model.speed = value("SPEED");
  model.kOverland = value("K_OVERLAND");
  model.kChannel = value("K_CHANNEL");
  model.channelArea = value("CHANNEL_THRESHOLD") * 1e6;
  model.n = value("N_FACTOR");
  model.b = value("B_FACTOR");
  model.minSlope = value("MIN_SLOPE");
  model.minSpeed = value("MIN_SPEED");
  model.rainfall = value("RAINFALL");
  model.curveNumber = value("CURVE_NUMBER");
  model.overlandN = value("MANNING_OVERLAND");
  model.mixedArea = value("MIXED_THRESHOLD") * 1e4;
  model.channelAreaManning = value("CHANNEL_THRESHOLD_MANNING") * 1e4;
  model.mixedN = value("MANNING_MIXED");
  model.channelN = value("MANNING_CHANNEL");
  model.sideSlope = value("SIDE_SLOPE");
  model.maxIterations = parameterAsInt(parameters, QStringLiteral("MAX_ITERATIONS"), context);

  r.timePath = parameterAsOutputLayer(parameters, QStringLiteral("TRAVEL_TIME"), context);
  r.wantWatershed = outputRequested(parameters, QStringLiteral("WATERSHED"));
  r.wantIsochrones = outputRequested(parameters, QStringLiteral("ISOCHRONES"));
  r.wantTable = outputRequested(parameters, QStringLiteral("TIME_AREA"));
  const auto optionalRaster = [&](const char* name) {
    return outputRequested(parameters, QString::fromLatin1(name))
             ? parameterAsOutputLayer(parameters, QString::fromLatin1(name), context)
             : QString();
  };
  r.filledPath = optionalRaster("FILLED");
  r.directionPath = optionalRaster("FLOWDIR");
  r.accumulationPath = optionalRaster("ACCUMULATION");
  return r;
}

void IsochronesAlgorithm::readOutlet(const QVariantMap& parameters, QgsProcessingContext& context,
                                     const DemRaster& raster, Request& request, QgsProcessingFeedback* feedback) const
{
  if (!parameterGiven(parameters, QStringLiteral("OUTLET")))
    return;
  // The first point of OUTLET.
  std::unique_ptr<QgsProcessingFeatureSource> source(parameterAsSource(parameters, QStringLiteral("OUTLET"), context));
  if (!source)
    throw QgsProcessingException(invalidSourceError(parameters, QStringLiteral("OUTLET")));
  requirePointSource(*source, QStringLiteral("OUTLET"));
  const QgsCoordinateReferenceSystem outletCrs = source->sourceCrs();
  QgsFeatureIterator features = source->getFeatures(QgsFeatureRequest().setNoAttributes());
  QgsFeature feature;
  int64_t skipped = 0, points = 0;
  std::optional<QgsPointXY> outletPoint;
  while (features.nextFeature(feature))
  {
    const QgsGeometry geometry = feature.geometry();
    if (geometry.isNull() || geometry.isEmpty())
    {
      ++skipped;
      continue;
    }
    ++points;
    if (!outletPoint)
    {
      const QgsPoint first = geometry.constGet()->vertexAt(QgsVertexId(0, 0, 0));
      outletPoint = QgsPointXY(first.x(), first.y());
    }
  }
  if (!outletPoint)
    throw QgsProcessingException(QObject::tr("The OUTLET layer has no point (%1 features without a geometry, or "
                                             "with an empty one or a NaN coordinate). Give a layer with the outlet "
                                             "point, or leave OUTLET empty for the outlet of the largest basin.")
                                   .arg(skipped));
  if (points > 1)
    feedback->pushInfo(QObject::tr("OUTLET holds %1 points; the first is the outlet.").arg(points));
  if (skipped > 0)
    feedback->pushInfo(QObject::tr("%1 OUTLET features without a point (no geometry, an empty one or a NaN "
                                   "coordinate) were skipped.")
                         .arg(skipped));

  // In the DEM's CRS, and its cell: a point off the DEM is refused before any pixel is read.
  const double* gt = raster.geoTransform;
  QgsPointXY inDem = *outletPoint;
  if (outletCrs.isValid() && raster.crs.isValid() && outletCrs != raster.crs)
  {
    try
    {
      QgsCoordinateTransform transform(outletCrs, raster.crs, context.transformContext());
      inDem = transform.transform(*outletPoint);
    }
    catch (const QgsCsException& e)
    {
      throw QgsProcessingException(QObject::tr("Could not transform the outlet point from %1 to the DEM's %2: %3")
                                     .arg(outletCrs.authid(), raster.crs.authid(), e.what()));
    }
  }
  else if (outletCrs.isValid() != raster.crs.isValid())
    feedback->pushWarning(QObject::tr("The OUTLET layer or the DEM has no CRS: the point's coordinates are taken "
                                      "as the DEM's."));
  // A geographic DEM may run past +-180 (179 to 181, say): a longitude is taken modulo 360 onto it.
  if (raster.crs.isGeographic())
  {
    const double west = gt[0], east = gt[0] + double(raster.width) * gt[1];
    const double turns = std::round(((west + east) / 2.0 - inDem.x()) / 360.0);
    const double wrapped = inDem.x() + 360.0 * turns;
    if (turns != 0.0 && wrapped >= west && wrapped < east)
    {
      feedback->pushInfo(QObject::tr("The outlet's longitude %1 is taken as %2, on the DEM's longitudes.")
                           .arg(number(inDem.x()), number(wrapped)));
      inDem.setX(wrapped);
    }
  }
  const double column = (inDem.x() - gt[0]) / gt[1];
  const double row = (inDem.y() - gt[3]) / gt[5];
  if (!(column >= 0 && column < double(raster.width) && row >= 0 && row < double(raster.height)))
    throw QgsProcessingException(
      QObject::tr("The outlet point (%1, %2 in the DEM's CRS) lies outside the DEM, whose extent is x %3 to %4, "
                  "y %5 to %6.")
        .arg(number(inDem.x()), number(inDem.y()), number(gt[0]), number(gt[0] + double(raster.width) * gt[1]),
             number(gt[3] + double(raster.height) * gt[5]), number(gt[3])));
  request.outletPoint = inDem;
  request.outletCell = std::make_pair(int64_t(std::floor(column)), int64_t(std::floor(row)));
}

std::optional<DemRaster> IsochronesAlgorithm::openManning(const Request& request, const DemRaster& raster,
                                                          QgsProcessingFeedback* feedback) const
{
  if (mHasManning && request.model.kind != dem::VelocityModel::Kind::Manning)
    feedback->pushWarning(QObject::tr("MANNING is used by the Manning model only (VELOCITY_MODEL=2); it is "
                                      "ignored."));
  if (!mHasManning || request.model.kind != dem::VelocityModel::Kind::Manning)
    return std::nullopt;
  const DemRaster n = openDemRaster(mManningSource, 1);
  requireDemGrid(n, raster, QStringLiteral("MANNING"), feedback);
  return n;
}

QString IsochronesAlgorithm::outletOffDataError(const Request& request)
{
  const auto [column, row] = *request.outletCell;
  return request.snapDistance > 0
           ? QObject::tr("The outlet point (%1, %2) lies on nodata (column %3, row %4) and no valid DEM cell lies "
                         "within SNAP_DISTANCE = %5 m of it: move the point onto the DEM's data or raise "
                         "SNAP_DISTANCE.")
               .arg(number(request.outletPoint->x()), number(request.outletPoint->y()))
               .arg(column)
               .arg(row)
               .arg(number(request.snapDistance))
           : QObject::tr("The outlet point (%1, %2) lies on a nodata cell of the DEM (column %3, row %4): move it "
                         "onto the DEM's data or give a SNAP_DISTANCE.")
               .arg(number(request.outletPoint->x()), number(request.outletPoint->y()))
               .arg(column)
               .arg(row);
}

QString IsochronesAlgorithm::overflowError()
{
  return QObject::tr("The travel times overflow (some cell would take more minutes than can be counted): SPEED, "
                     "MIN_SPEED or a coefficient of the velocity model (K_OVERLAND, K_CHANNEL, RAINFALL, the Manning "
                     "values) is too small. Give values that a flow could have.");
}

float IsochronesAlgorithm::filledNoData(const DemRaster& raster, int64_t roundedToNoData)
{
  if (raster.noData && std::isfinite(static_cast<float>(*raster.noData)) && roundedToNoData == 0)
    return static_cast<float>(*raster.noData);
  return std::numeric_limits<float>::quiet_NaN();
}

void IsochronesAlgorithm::countBands(const double* minutes, const DemRaster& raster, Outcome& outcome)
{
  // Per row, then each band's count times the row's cell area, summed top down (as the tiled path
  // sums them: the same bits).
  std::vector<int64_t> inRow(size_t(outcome.bands), 0);
  outcome.bandCells.assign(size_t(outcome.bands), 0);
  outcome.bandArea.assign(size_t(outcome.bands), 0.0);
  for (int64_t y = 0; y < raster.height; ++y)
  {
    std::fill(inRow.begin(), inRow.end(), 0);
    const double* t = minutes + y * raster.width;
    for (int64_t x = 0; x < raster.width; ++x)
      if (!std::isnan(t[x]))
        ++inRow[size_t(dem::detail::bandOfTime(t[x], outcome.interval))];
    const double cellArea = raster.cellWidth[size_t(y)] * raster.cellHeight[size_t(y)];
    for (size_t k = 0; k < inRow.size(); ++k)
      if (inRow[k] > 0)
      {
        outcome.bandCells[k] += inRow[k];
        outcome.bandArea[k] += double(inRow[k]) * cellArea;
      }
  }
}

QVariantMap IsochronesAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                         QgsProcessingFeedback* feedback)
{
  StageTimes times;
  Request request = readRequest(parameters, context);
  DemRaster raster;
  {
    ScopedStage stage(times, "read");
    raster = openDemRaster(mSource, request.band);
  }
  readOutlet(parameters, context, raster, request, feedback);
  readExcess(parameters, context, request);
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  const TilingPlan plan = planTiling(parameterAsInt(parameters, QStringLiteral("MEMORY_BUDGET"), context),
                                     parameterAsBool(parameters, QStringLiteral("TILED"), context), raster,
                                     kInMemoryBytesPerCell, tiledBytesPerCell(), cpuThreads(), device.backend,
                                     dem::kGpuChainBytesPerCell + (mHasManning ? 4 : 0));
  logTilingPlan(plan, feedback);
  if (const std::optional<MpiJob> job = mpiJobOf(parameters, context, feedback))
  {
    const Outcome outcome = executeUnderMpi(*job, request, plan, parameters, context, feedback);
    QVariantMap outputs = writeResults(request, raster, outcome, parameters, context, feedback, times);
    logStageTimes(times, feedback);
    return outputs;
  }
  FinishedRasters finished;
  Outcome outcome;
  try
  {
    if (plan.tiled)
      runTiled(device, plan, feedback, [&](const TilingPlan& on) {
        outcome = executeTiled(request, raster, on, parameters, context, feedback, times, finished);
      });
    else
      outcome = executeInMemory(device, request, raster, feedback, times, finished);
  }
  catch (const dem::TravelTimesOverflow&)
  {
    throw QgsProcessingException(overflowError());
  }
  QVariantMap outputs = writeResults(request, raster, outcome, parameters, context, feedback, times);
  logStageTimes(times, feedback);
  finished.keep();
  return outputs;
}

IsochronesAlgorithm::Outcome IsochronesAlgorithm::executeInMemory(const BackendChoice& device, const Request& request,
                                                                  const DemRaster& raster,
                                                                  QgsProcessingFeedback* feedback, StageTimes& times,
                                                                  FinishedRasters& finished)
{
  // --- Read: the DEM and the Manning raster, if any ------------------------------------------------
  QgsProcessingMultiStepFeedback steps(7, feedback);
  feedback->setProgressText(QObject::tr("Reading the DEM"));
  dem::VelocityModel model = request.model;
  Elevations elevations;
  std::vector<float> manning;
  {
    ScopedStage stage(times, "read");
    // Read as the tiled run reads it (DemTileSource): a value that is not finite in float32 is NaN,
    // which the model, like an infinite one, takes as no n (MANNING_OVERLAND's).
    if (const std::optional<DemRaster> n = openManning(request, raster, feedback))
      manning = readElevations(*n, nullptr).z;
    elevations = readElevations(raster, &steps);
  }
  reportElevations(raster, elevations, feedback);
  const int64_t w = raster.width;
  if (!manning.empty())
  {
    int64_t fallback = 0;
    for (size_t i = 0; i < manning.size(); ++i)
      fallback += !std::isnan(elevations.z[i]) && !(std::isfinite(manning[i]) && manning[i] > 0);
    model.manning = manning.data();
    feedback->pushInfo(QObject::tr("Manning's n from %1; %2 valid DEM cells without a valid n (nodata, or not above 0) "
                                   "use MANNING_OVERLAND = %3.")
                         .arg(mManningSource.gdalName)
                         .arg(fallback)
                         .arg(number(model.overlandN)));
  }

  // --- The outlet cell, checked before the work ------------------------------------------------------
  const dem::Grid grid = raster.grid(elevations.z.data());
  if (request.outletCell &&
      !dem::validCellWithin(grid, request.outletCell->first, request.outletCell->second, request.snapDistance))
    throw QgsProcessingException(outletOffDataError(request));

  // --- The chain on the resolved backend: fill, flats and D8, accumulation, the outlet, travel times,
  // the bands' and the watershed's polygons (on the GPU without a round trip between the stages) -----
  const RunControl control = runControl(feedback);
  dem::ChainOptions options;
  options.automaticOutlet = !request.outletCell;
  if (request.outletCell)
  {
    options.outletColumn = request.outletCell->first;
    options.outletRow = request.outletCell->second;
    options.snapDistance = request.snapDistance;
  }
  options.model = model;
  options.interval = request.interval;
  options.maxBands = kMaxBands;
  options.keepFilled = !request.filledPath.isEmpty();
  options.keepDirections = !request.directionPath.isEmpty() || !request.accumulationPath.isEmpty();  // nodata of the counts
  options.keepAccumulation = !request.accumulationPath.isEmpty();
  options.onStage = [&](dem::ChainStage stage) {
    static const char* const texts[] = {
      QT_TRANSLATE_NOOP("IsochronesAlgorithm", "Filling depressions"),
      QT_TRANSLATE_NOOP("IsochronesAlgorithm", "Resolving flats and computing flow directions"),
      QT_TRANSLATE_NOOP("IsochronesAlgorithm", "Accumulating flow"),
      QT_TRANSLATE_NOOP("IsochronesAlgorithm", "Computing travel times"),
      QT_TRANSLATE_NOOP("IsochronesAlgorithm", "Tracing the watershed and the isochrones")};
    steps.setCurrentStep(1 + int(stage));
    feedback->setProgressText(QCoreApplication::translate("IsochronesAlgorithm", texts[int(stage)]));
  };
  dem::ChainResult chain;
  runWithCpuFallback(device, feedback, [&](Backend backend) {
    chain = dem::isochroneChain(backend, grid, options, cpuThreads(), control, &times);
  });
  std::vector<float>().swap(elevations.z);
  std::vector<float>().swap(manning);

  Outcome outcome;
  outcome.outlet = chain.outlet;
  outcome.outletCells = chain.outletCells;
  outcome.raisedCells = chain.raisedCells;
  outcome.validCells = elevations.valid;
  outcome.interval = chain.interval;
  outcome.bands = chain.bands;
  outcome.watershedCells = chain.travel.watershedCells;
  outcome.watershedArea = chain.travel.watershedArea;
  outcome.minSpeed = chain.minSpeed;
  outcome.maxSpeed = chain.maxSpeed;
  const std::vector<double>& minutes = chain.travel.minutes;
  outcome.minTime = std::numeric_limits<double>::infinity();
  outcome.maxTime = 0.0;
  for (const double t : minutes)
    if (!std::isnan(t))
    {
      outcome.minTime = std::min(outcome.minTime, t);
      outcome.maxTime = std::max(outcome.maxTime, t);
    }
  countBands(minutes.data(), raster, outcome);

  // --- Rasters -------------------------------------------------------------------------------------
  steps.setCurrentStep(6);
  feedback->setProgressText(QObject::tr("Writing the rasters"));
  {
    ScopedStage stage(times, "write");
    writeDemRaster(
      request.timePath, raster, GDT_Float64, kTimeNoData,
      [&](int64_t row0, int64_t rows, void* buffer) {
        double* out = static_cast<double*>(buffer);
        const double* in = minutes.data() + row0 * w;
        for (int64_t i = 0; i < rows * w; ++i)
          out[i] = std::isnan(in[i]) ? kTimeNoData : in[i];
      },
      finished, &steps);
    if (!request.filledPath.isEmpty())
    {
      const float noData = filledNoData(raster, elevations.roundedToNoData);
      writeDemRaster(
        request.filledPath, raster, GDT_Float32, double(noData),
        [&](int64_t row0, int64_t rows, void* buffer) {
          float* out = static_cast<float*>(buffer);
          const float* in = chain.filled.data() + row0 * w;
          for (int64_t i = 0; i < rows * w; ++i)
            out[i] = std::isnan(in[i]) ? noData : in[i];
        },
        finished, &steps);
    }
    if (!request.directionPath.isEmpty())
      writeDemRaster(
        request.directionPath, raster, GDT_Byte, 255.0,
        [&](int64_t row0, int64_t rows, void* buffer) {
          uint8_t* out = static_cast<uint8_t*>(buffer);
          const uint8_t* in = chain.directions.data() + row0 * w;
          for (int64_t i = 0; i < rows * w; ++i)
            out[i] = FlowDirectionAlgorithm::encode(in[i], FlowDirectionAlgorithm::Esri);
        },
        finished, &steps);
    if (!request.accumulationPath.isEmpty())
      writeDemRaster(
        request.accumulationPath, raster, GDT_Int32, double(kCellsNoData),
        [&](int64_t row0, int64_t rows, void* buffer) {
          int32_t* out = static_cast<int32_t*>(buffer);
          for (int64_t i = 0; i < rows * w; ++i)
          {
            const size_t c = size_t(row0 * w + i);
            out[i] = chain.directions[c] == dem::kNoData ? kCellsNoData : int32_t(chain.accumulation.cells[c]);
          }
        },
        finished, &steps);
  }
  outcome.bandPolygons = std::move(chain.bandPolygons);
  outcome.watershed = std::move(chain.watershed);
  return outcome;
}

IsochronesAlgorithm::BandWriter::BandWriter(const IsochronesAlgorithm& algorithm, const QVariantMap& parameters,
                                            QgsProcessingContext& context, const DemRaster& raster)
  : mParameters(parameters),
    mFields(bandFields()),
    mToMap{raster.geoTransform[0], raster.geoTransform[1], raster.geoTransform[3], -raster.geoTransform[5]}
{
  mSink = algorithm.createSink(parameters, QStringLiteral("ISOCHRONES"), context, mId, mFields,
                               QgsWkbTypes::MultiPolygon, raster.crs);
}

IsochronesAlgorithm::BandWriter::~BandWriter() = default;

void IsochronesAlgorithm::BandWriter::write(int band, double interval, int64_t cells, double area,
                                            const BandPolygons& polygons, size_t index)
{
  // Cell corners to map coordinates (the DEM is north-up, so shells stay counter-clockwise).
  addBand(band, interval, cells, area, bandMultiPolygon(polygons, index, false, mToMap));
}

void IsochronesAlgorithm::BandWriter::writeAndFree(int band, double interval, int64_t cells, double area,
                                                   BandPolygons& polygons)
{
  std::unique_ptr<QgsMultiPolygon> multi = bandMultiPolygon(polygons, 0, false, mToMap);
  polygons = BandPolygons();  // their memory back before the sink copies the geometry
  returnFreedMemory();
  addBand(band, interval, cells, area, std::move(multi));
}

void IsochronesAlgorithm::BandWriter::addBand(int band, double interval, int64_t cells, double area,
                                              std::unique_ptr<QgsMultiPolygon> multi)
{
  if (!multi)
    return;
  QgsFeature feature(mFields);
  feature.setGeometry(QgsGeometry(multi.release()));
  feature.setAttributes(QgsAttributes() << band + 1 << double(band) * interval << double(band + 1) * interval
                                        << QVariant::fromValue<qlonglong>(cells) << area * 1e-6);
  if (!mSink->addFeature(feature, QgsFeatureSink::FastInsert))
    throw QgsProcessingException(writeFeatureError(mSink.get(), mParameters, QStringLiteral("ISOCHRONES")));
}

QVariantMap IsochronesAlgorithm::writeResults(const Request& request, const DemRaster& raster, const Outcome& outcome,
                                              const QVariantMap& parameters, QgsProcessingContext& context,
                                              QgsProcessingFeedback* feedback, StageTimes& times)
{
  const int64_t w = raster.width;
  feedback->pushInfo(QObject::tr("Filling raised %1 of %2 cells.").arg(outcome.raisedCells).arg(outcome.validCells));
  const int64_t outlet = outcome.outlet;
  const auto centre = [&](int64_t c) {
    return QgsPointXY(raster.geoTransform[0] + (double(c % w) + 0.5) * raster.geoTransform[1],
                      raster.geoTransform[3] + (double(c / w) + 0.5) * raster.geoTransform[5]);
  };
  if (request.outletCell)
  {
    const auto [column, row] = *request.outletCell;
    const int64_t c = outlet % w, r = outlet / w;
    feedback->pushInfo(
      QObject::tr("Outlet: the point (%1, %2) falls in column %3, row %4; snapped within %5 m to the cell of "
                  "highest accumulation, column %6, row %7 (%8 m away; centre %9, %10), where %11 cells drain.")
        .arg(number(request.outletPoint->x()), number(request.outletPoint->y()))
        .arg(column)
        .arg(row)
        .arg(number(request.snapDistance))
        .arg(c)
        .arg(r)
        .arg(number(snapMetres(raster, column, row, outlet)))
        .arg(number(centre(outlet).x()), number(centre(outlet).y()))
        .arg(outcome.outletCells));
  }
  else
    feedback->pushInfo(QObject::tr("Outlet (automatic): where the largest basin drains out of the grid, column %1, "
                                   "row %2 (centre %3, %4), where %5 cells drain.")
                         .arg(outlet % w)
                         .arg(outlet / w)
                         .arg(number(centre(outlet).x()), number(centre(outlet).y()))
                         .arg(outcome.outletCells));
  const double watershedKm2 = outcome.watershedArea * 1e-6;
  const int bands = outcome.bands;
  const double interval = outcome.interval;
  feedback->pushInfo(QObject::tr("Watershed: %1 cells, %2 km². Travel times from %3 to %4 minutes: %5 bands of %6 "
                                 "minutes%7.")
                       .arg(outcome.watershedCells)
                       .arg(number(watershedKm2), number(outcome.minTime), number(outcome.maxTime))
                       .arg(bands)
                       .arg(number(interval))
                       .arg(request.interval > 0 ? QString() : QObject::tr(" (the automatic interval)")));
  feedback->pushInfo(QObject::tr("Speeds from %1 to %2 m/s.").arg(number(outcome.minSpeed), number(outcome.maxSpeed)));

  QVariantMap outputs;
  outputs.insert(QStringLiteral("TRAVEL_TIME"), request.timePath);
  if (!request.filledPath.isEmpty())
    outputs.insert(QStringLiteral("FILLED"), request.filledPath);
  if (!request.directionPath.isEmpty())
    outputs.insert(QStringLiteral("FLOWDIR"), request.directionPath);
  if (!request.accumulationPath.isEmpty())
    outputs.insert(QStringLiteral("ACCUMULATION"), request.accumulationPath);
  // Cell corners to map coordinates (the DEM is north-up, so shells stay counter-clockwise).
  const AxisMap toMap{raster.geoTransform[0], raster.geoTransform[1], raster.geoTransform[3], -raster.geoTransform[5]};

  // --- Features and the table ----------------------------------------------------------------------
  if (request.wantWatershed)
  {
    QgsFields fields;
    fields.append(QgsField(QStringLiteral("area_km2"), QVariant::Double));
    fields.append(QgsField(QStringLiteral("cells"), QVariant::LongLong));
    fields.append(QgsField(QStringLiteral("t_max"), QVariant::Double));
    QString id;
    std::unique_ptr<QgsFeatureSink> sink = createSink(parameters, QStringLiteral("WATERSHED"), context, id, fields,
                                                      QgsWkbTypes::MultiPolygon, raster.crs);
    QgsFeature feature(fields);
    feature.setGeometry(QgsGeometry(bandMultiPolygon(outcome.watershed, 0, false, toMap).release()));
    feature.setAttributes(QgsAttributes() << watershedKm2 << QVariant::fromValue<qlonglong>(outcome.watershedCells)
                                          << outcome.maxTime);
    if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
      throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("WATERSHED")));
    outputs.insert(QStringLiteral("WATERSHED"), id);
  }
  if (request.wantIsochrones && !outcome.isochronesId.isEmpty())
    outputs.insert(QStringLiteral("ISOCHRONES"), outcome.isochronesId);  // written band by band as traced
  else if (request.wantIsochrones)
  {
    BandWriter writer(*this, parameters, context, raster);
    ScopedStage stage(times, "polygons");
    for (int k = 0; k < bands; ++k)
    {
      if (feedback->isCanceled())
        throw Canceled();
      writer.write(k, interval, outcome.bandCells[size_t(k)], outcome.bandArea[size_t(k)], outcome.bandPolygons,
                   size_t(k));
    }
    outputs.insert(QStringLiteral("ISOCHRONES"), writer.id());
  }
  if (request.wantTable)
  {
    QgsFields fields = bandFields();
    fields.append(QgsField(QStringLiteral("cumulative_share"), QVariant::Double));
    QString id;
    std::unique_ptr<QgsFeatureSink> sink = createSink(parameters, QStringLiteral("TIME_AREA"), context, id, fields,
                                                      QgsWkbTypes::NoGeometry, QgsCoordinateReferenceSystem());
    // The shares against the bands' own total, summed in the same order: the last is exactly 1.
    double total = 0.0;
    for (const double a : outcome.bandArea)
      total += a;
    double cumulative = 0.0;
    for (int k = 0; k < bands; ++k)
    {
      cumulative += outcome.bandArea[size_t(k)];
      QgsFeature feature(fields);
      feature.setAttributes(QgsAttributes() << k + 1 << double(k) * interval << double(k + 1) * interval
                                            << QVariant::fromValue<qlonglong>(outcome.bandCells[size_t(k)])
                                            << outcome.bandArea[size_t(k)] * 1e-6 << cumulative / total);
      if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
        throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("TIME_AREA")));
    }
    outputs.insert(QStringLiteral("TIME_AREA"), id);
  }
  writeHydrograph(request, outcome, parameters, context, feedback, outputs);
  outputs.insert(QStringLiteral("WATERSHED_AREA_KM2"), watershedKm2);
  outputs.insert(QStringLiteral("MAX_TIME_MIN"), outcome.maxTime);
  outputs.insert(QStringLiteral("INTERVAL_MIN"), interval);
  outputs.insert(QStringLiteral("OUTLET_X"), centre(outlet).x());
  outputs.insert(QStringLiteral("OUTLET_Y"), centre(outlet).y());
  mTimePath = request.timePath;
  mFilledPath = request.filledPath;
  mDirectionPath = request.directionPath;
  mAccumulationPath = request.accumulationPath;
  mWatershedId = outputs.value(QStringLiteral("WATERSHED")).toString();
  mBandsId = outputs.value(QStringLiteral("ISOCHRONES")).toString();
  mMaxTime = std::max(outcome.maxTime, 1e-9);
  mInterval = interval;
  mBands = bands;
  return outputs;
}

QVariantMap IsochronesAlgorithm::postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback*)
{
  // Bottom to top: the optional rasters, the travel times, the bands, the watershed's outline.
  const LoadOrder order = std::make_shared<QHash<QString, int>>();
  const auto place = [&](const QString& id, QgsProcessingLayerPostProcessorInterface* style) {
    if (!id.isEmpty() && context.willLoadLayerOnCompletion(id))
      context.layerToLoadOnCompletionDetails(id).setPostProcessor(style);
    else
      delete style;
  };
  place(mFilledPath, new LayerPlace(order, 0));
  place(mAccumulationPath, new LayerPlace(order, 1));
  place(mDirectionPath, new LayerPlace(order, 2));
  place(mTimePath, new ContinuousRasterStyle(0.0, mMaxTime, order, 3));
  place(mBandsId, new BandStyle(mBands, mInterval, order, 4));
  place(mWatershedId, new OutlineStyle(order, 5));
  return QVariantMap();
}

}  // namespace gpugeo
