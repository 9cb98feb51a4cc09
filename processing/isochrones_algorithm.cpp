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

#include "adapters/geotiff_writer.h"
#include "adapters/layer_styles.h"
#include "adapters/band_geometry.h"
#include "core/errors.h"
#include "dem/dem.h"
#include "dem/detail/travel_math.h"
#include "dem/isochrone_chain.h"
#include "dem/travel_time.h"
#include "flowdirection_algorithm.h"

namespace gpugeo {

namespace {

constexpr double kTimeNoData = -1.0;
constexpr int32_t kCellsNoData = -1;

QString number(double value)
{
  return QString::number(value, 'g', 10);
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

QgsProcessingParameterNumber* numberParameter(const QString& name, const QString& description, double defaultValue,
                                              bool advanced, double minimum = 0.0,
                                              double maximum = std::numeric_limits<double>::max(),
                                              QgsProcessingParameterNumber::Type type =
                                                QgsProcessingParameterNumber::Double)
{
  auto* parameter = new QgsProcessingParameterNumber(name, description, type, defaultValue, false, minimum, maximum);
  if (advanced)
    parameter->setFlags(parameter->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  return parameter;
}

// Two geotransforms describe the same grid (to a millionth of a cell).
bool sameGeoTransform(const double* a, const double* b)
{
  const double tolerance = 1e-6 * std::min(std::fabs(a[1]), std::fabs(a[5]));
  for (int i = 0; i < 6; ++i)
    if (!(std::fabs(a[i] - b[i]) <= tolerance))
      return false;
  return true;
}

QString geoTransformText(const double* gt)
{
  return QStringLiteral("%1, %2, %3, %4, %5, %6")
    .arg(number(gt[0]), number(gt[1]), number(gt[2]), number(gt[3]), number(gt[4]), number(gt[5]));
}

}  // namespace

QString IsochronesAlgorithm::name() const
{
  return QStringLiteral("isochrones");
}

QString IsochronesAlgorithm::displayName() const
{
  return QObject::tr("Isochrones (travel time to an outlet)");
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
           "histogram of the Clark unit hydrograph.</p>"
           "<p><b>Pipeline</b>: the DEM's depressions are filled (as gpugeo:filldepressions), its D8 flow "
           "directions computed with flats resolved (as gpugeo:flowdirection), and the flow accumulated (as "
           "gpugeo:flowaccumulation), on the GPU or all processor cores; the outlet is found; the travel times "
           "are summed down the flow paths (on the GPU by pointer jumping, in another order than the CPU: the "
           "two agree to about 1e-12 relative, not bit for bit).</p>"
           "<p><b>Input DEM</b> (INPUT) and <b>Band number</b> (BAND): a raster file GDAL reads, north-up; the "
           "band's nodata value, NaN and infinite values are nodata. <b>Manning's n raster</b> (MANNING, "
           "optional, Manning model only): band 1 holds each cell's Manning roughness coefficient for overland "
           "flow; it must have the DEM's grid (same number of rows and columns, same geotransform), else it is "
           "refused: resample it onto the DEM's grid first. Cells where it is nodata, not a number or not above "
           "0 use MANNING_OVERLAND.</p>"
           "<p><b>Outlet</b> (OUTLET, optional point layer): its first point (features without geometry are "
           "skipped), transformed to the DEM's CRS. It must lie on the DEM. It is snapped to the cell of highest "
           "flow accumulation (ties to the first in row order) whose centre lies within <b>Snap distance</b> "
           "(SNAP_DISTANCE, metres, default 100; 0: the cell under the point) of the centre of the cell under the "
           "point, so that a point put next to a stream lands on it. A point on nodata with no valid cell within "
           "the snap distance is refused. Without an outlet layer the outlet is automatic: the cell where the "
           "largest basin drains out of the grid (the highest accumulation among the cells that drain out of the "
           "grid or into nodata).</p>"
           "<p><b>Travel time</b>: a cell's <i>step time</i> is its D8 flow length L (its width, height or "
           "diagonal) divided by its speed v; its travel time is the sum of the step times along its flow path "
           "from the cell to the outlet, <b>the outlet's own step included</b>, as SAGA's <i>Isochrones Variable "
           "Speed</i> counts it (so the outlet's time is its own step, not 0). The watershed is the set of cells "
           "whose flow path passes through the outlet. Times are in minutes, summed in float64.</p>"
           "<p><b>Velocity model</b> (VELOCITY_MODEL), speeds in m/s:</p><ul>"
           "<li><b>0: Constant speed</b>: v = SPEED (default %1 m/s); travel time is flow length / SPEED.</li>"
           "<li><b>1: Slope-based</b> (the velocity method; default): v = max(MIN_SPEED, k &middot; &radic;s "
           "&middot; b / n), with s the slope along the D8 direction (drop to the receiving cell of the filled "
           "DEM / L, at least MIN_SLOPE; the outlet, with no receiver on the grid, gets MIN_SLOPE), k = "
           "K_CHANNEL where the accumulated area reaches CHANNEL_THRESHOLD, else K_OVERLAND, n = N_FACTOR and b = "
           "B_FACTOR. With n = b = 1 this is the velocity method of the SCS/NRCS (t = L / (k &radic;s), k a "
           "land-cover coefficient). It is also <i>our reading</i> of the per-cell time t = n&middot;l / "
           "(k&middot;v(s)&middot;b) of Zhao et al. (2010), with l the flow length, v(s) = &radic;s and n, k, b "
           "factors: the paper does not define its symbols, so this reading is ours.</li>"
           "<li><b>2: Manning-based</b> overland / mixed / channel flow in the manner of SAGA's <i>Isochrones "
           "Variable Speed</i> (Olaya 2004): the runoff intensity I from the rainfall intensity P = RAINFALL "
           "(mm/h) and the SCS curve number CN = CURVE_NUMBER: S = 25400/CN &minus; 254 (mm), I = (P &minus; "
           "0.2S)<sup>2</sup> / (P + 0.8S) when P &ge; 0.2S, else 0.1 mm/h; s = the slope's tangent by "
           "Zevenbergen &amp; Thorne (at least 0.001); A = the accumulated area (m², the cell included). Below "
           "MIXED_THRESHOLD: overland flow, v = max(MIN_SPEED, (I&middot;D)<sup>0.4</sup> "
           "s<sup>0.3</sup> / n<sup>0.6</sup>), D = &radic;(2A/&pi;), n from MANNING or MANNING_OVERLAND. From "
           "MIXED_THRESHOLD on: the flow Q = I&middot;A runs in a triangular channel of side slope SIDE_SLOPE "
           "(z; area h<sup>2</sup>/z, perimeter 2(h/z + &radic;(h<sup>2</sup> + (h/z)<sup>2</sup>)) as SAGA "
           "has it) with Manning's n = MANNING_MIXED, or MANNING_CHANNEL from CHANNEL_THRESHOLD_MANNING on; the "
           "depth h is found by bisection on [0, 60 m] from 2 m until Manning's flow is within 0.1 m³/s of Q (at "
           "most MAX_ITERATIONS steps, a cap SAGA lacks), and v = max(MIN_SPEED, Q / area). Unlike SAGA, this "
           "runs on our filled DEM with our D8 directions and accumulation, and the thresholds and n values are "
           "parameters.</li></ul>")
           .arg(number(d.speed)) +
         QObject::tr(
           "<p><b>Parameters of the models</b> (most are advanced): SPEED (m/s, default %1); K_OVERLAND (m/s, "
           "%2) and K_CHANNEL (m/s, %3); CHANNEL_THRESHOLD (km² of accumulated area, %4); N_FACTOR (%5) and "
           "B_FACTOR (%6); MIN_SLOPE (m/m, %7); MIN_SPEED (m/s, %8, the slope and Manning models); RAINFALL "
           "(mm/h, %9); CURVE_NUMBER (0 to 100, %10); MANNING_OVERLAND (%11); MIXED_THRESHOLD (ha, %12); "
           "CHANNEL_THRESHOLD_MANNING (ha, %13); MANNING_MIXED (%14); MANNING_CHANNEL (%15); SIDE_SLOPE (m/m, "
           "%16); MAX_ITERATIONS (%17). The defaults of the Manning model are SAGA's. Speeds, coefficients and "
           "factors must be greater than 0.</p>"
           "<p><b>Isochrone interval</b> (INTERVAL, minutes, greater than 0): band k (1, 2, &hellip;) holds the "
           "cells with (k&minus;1)&middot;INTERVAL &le; t &lt; k&middot;INTERVAL. At most %18 bands.</p>")
           .arg(number(d.speed), number(d.kOverland), number(d.kChannel), number(d.channelArea / 1e6), number(d.n),
                number(d.b), number(d.minSlope), number(d.minSpeed), number(d.rainfall))
           .arg(number(d.curveNumber), number(d.overlandN), number(d.mixedArea / 1e4),
                number(d.channelAreaManning / 1e4), number(d.mixedN), number(d.channelN), number(d.sideSlope))
           .arg(d.maxIterations)
           .arg(kMaxBands) +
         QObject::tr(
           "<p><b>Outputs</b>: <b>Travel time</b> (TRAVEL_TIME): Float64 GeoTIFF in minutes, nodata &minus;1 "
           "outside the watershed. <b>Watershed</b> (WATERSHED): one (multi)polygon with its area_km2, cells and "
           "t_max (the longest travel time, minutes). <b>Isochrones</b> (ISOCHRONES): one (multi)polygon per band "
           "that has cells, with band, t_min, t_max (minutes), cells and area_km2; the bands tile the "
           "watershed. <b>Time&ndash;area table</b> (TIME_AREA, no geometry): one row per band from 1 to the last, "
           "empty bands included, with band, t_min, t_max, cells, area_km2 and cumulative_share (the share of "
           "the watershed's area within t_max of the outlet, ending at 1): the time&ndash;area histogram of the "
           "Clark unit hydrograph. Areas are sums of the cells' areas (from the cell sizes below), not of the "
           "polygons' planar areas. Optional: the <b>Filled DEM</b> (FILLED, Float32), the <b>Flow "
           "direction</b> (FLOWDIR, ESRI codes: 1 = E, 2 = SE, 4 = S, 8 = SW, 16 = W, 32 = NW, 64 = N, 128 = NE, "
           "nodata 255) and the <b>Flow accumulation</b> (ACCUMULATION, Int32 cells, nodata &minus;1). The "
           "polygons follow the cells' edges exactly: one polygon per 4-connected group of cells of a band (cells "
           "that meet only at a corner are separate polygons, as GDAL's polygonizer makes them), holes included, "
           "valid by GEOS; they are traced on the DEVICE as well (the GPU's polygons are the CPU's).</p>"
           "<p>The log gives the outlet (the point's cell, the snapped cell, the distance), the watershed's cells "
           "and area, the range of travel times and the time of each stage.</p>") +
         cellSizeHelp() +
         QObject::tr(
           "<p><b>References</b>: V. Olaya (2004), Hidrología computacional y modelos digitales del terreno "
           "(SAGA's <i>Isochrones Variable Speed</i>, ta_hydrology 30, by V. Olaya, with V. Wichmann). Zhao X., "
           "Miao Q., Fu Z., Su C., Li X. (2010), CUDA-based confluence analysis (travel time per cell t = "
           "n&middot;l / (k&middot;v(s)&middot;b)), Application Research of Computers, "
           "doi:10.3969/j.issn.1001-3695.2010.07.011. USDA NRCS (2010), National Engineering Handbook part 630, "
           "chapter 15 (the velocity method and travel time). C. O. Clark (1945), Storage and the unit "
           "hydrograph, Transactions of the ASCE 110, 1419&ndash;1446 (the time&ndash;area histogram). L. W. "
           "Zevenbergen, C. R. Thorne (1987), Quantitative analysis of land surface topography, Earth Surface "
           "Processes and Landforms 12, 47&ndash;56.</p>") +
         deviceHelp();
}

IsochronesAlgorithm* IsochronesAlgorithm::createInstance() const
{
  return new IsochronesAlgorithm();
}

void IsochronesAlgorithm::initAlgorithm(const QVariantMap&)
{
  const dem::VelocityModel d;
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("INPUT"), QObject::tr("Input DEM")));
  // Optional so that qgis_process takes the default (a mandatory band must always be given there).
  addParameter(new QgsProcessingParameterBand(QStringLiteral("BAND"), QObject::tr("Band number"), 1,
                                              QStringLiteral("INPUT"), true));
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("MANNING"),
                                                     QObject::tr("Manning's n raster (Manning model)"), QVariant(),
                                                     true));
  addParameter(new QgsProcessingParameterFeatureSource(QStringLiteral("OUTLET"),
                                                       QObject::tr("Outlet point (automatic when empty)"),
                                                       QList<int>() << QgsProcessing::TypeVectorPoint, QVariant(), true));
  addParameter(numberParameter(QStringLiteral("SNAP_DISTANCE"), QObject::tr("Snap distance (metres)"), 100.0, false));
  addParameter(new QgsProcessingParameterEnum(
    QStringLiteral("VELOCITY_MODEL"), QObject::tr("Velocity model"),
    QStringList{QObject::tr("Constant speed"), QObject::tr("Slope-based (velocity method)"),
                QObject::tr("Manning-based overland / mixed / channel flow (SAGA)")},
    false, Slope));
  addParameter(numberParameter(QStringLiteral("INTERVAL"), QObject::tr("Isochrone interval (minutes)"), 60.0, false));
  addParameter(numberParameter(QStringLiteral("SPEED"), QObject::tr("Constant speed (m/s)"), d.speed, false));
  addParameter(numberParameter(QStringLiteral("K_OVERLAND"), QObject::tr("Velocity coefficient k, overland (m/s)"),
                               d.kOverland, true));
  addParameter(numberParameter(QStringLiteral("K_CHANNEL"), QObject::tr("Velocity coefficient k, channel (m/s)"),
                               d.kChannel, true));
  addParameter(numberParameter(QStringLiteral("CHANNEL_THRESHOLD"),
                               QObject::tr("Channel threshold, slope model (km² of accumulated area)"),
                               d.channelArea / 1e6, true));
  addParameter(numberParameter(QStringLiteral("N_FACTOR"), QObject::tr("Factor n of t = n·l / (k·v(s)·b)"), d.n, true));
  addParameter(numberParameter(QStringLiteral("B_FACTOR"), QObject::tr("Factor b of t = n·l / (k·v(s)·b)"), d.b, true));
  addParameter(numberParameter(QStringLiteral("MIN_SLOPE"), QObject::tr("Minimum slope, slope model (m/m)"),
                               d.minSlope, true));
  addParameter(numberParameter(QStringLiteral("MIN_SPEED"), QObject::tr("Minimum speed (m/s)"), d.minSpeed, true));
  addParameter(numberParameter(QStringLiteral("RAINFALL"), QObject::tr("Rainfall intensity (mm/h)"), d.rainfall, true));
  addParameter(numberParameter(QStringLiteral("CURVE_NUMBER"), QObject::tr("SCS curve number"), d.curveNumber, true,
                               0.0, 100.0));
  addParameter(numberParameter(QStringLiteral("MANNING_OVERLAND"), QObject::tr("Manning's n, overland flow"),
                               d.overlandN, true));
  addParameter(numberParameter(QStringLiteral("MIXED_THRESHOLD"), QObject::tr("Mixed flow threshold (ha)"),
                               d.mixedArea / 1e4, true));
  addParameter(numberParameter(QStringLiteral("CHANNEL_THRESHOLD_MANNING"),
                               QObject::tr("Channel threshold, Manning model (ha)"), d.channelAreaManning / 1e4, true));
  addParameter(numberParameter(QStringLiteral("MANNING_MIXED"), QObject::tr("Manning's n, mixed flow"), d.mixedN, true));
  addParameter(numberParameter(QStringLiteral("MANNING_CHANNEL"), QObject::tr("Manning's n, channel flow"), d.channelN,
                               true));
  addParameter(numberParameter(QStringLiteral("SIDE_SLOPE"), QObject::tr("Channel side slope (m/m)"), d.sideSlope, true));
  addParameter(numberParameter(QStringLiteral("MAX_ITERATIONS"), QObject::tr("Maximum bisection steps"),
                               d.maxIterations, true, 1, 1e6, QgsProcessingParameterNumber::Integer));
  addDeviceParameter();
  addParameter(new QgsProcessingParameterRasterDestination(QStringLiteral("TRAVEL_TIME"),
                                                           QObject::tr("Travel time (minutes)")));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("WATERSHED"), QObject::tr("Watershed"),
                                                     QgsProcessing::TypeVectorPolygon, QVariant(), true, true));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("ISOCHRONES"), QObject::tr("Isochrones"),
                                                     QgsProcessing::TypeVectorPolygon, QVariant(), true, true));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("TIME_AREA"), QObject::tr("Time–area table"),
                                                     QgsProcessing::TypeVector, QVariant(), true, true));
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
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("OUTLET_X"), QObject::tr("Outlet cell centre x (DEM CRS)")));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("OUTLET_Y"), QObject::tr("Outlet cell centre y (DEM CRS)")));
}

QString IsochronesAlgorithm::numericProblem(const QVariantMap& parameters, QgsProcessingContext& context) const
{
  const auto value = [&](const char* name) { return parameterAsDouble(parameters, QString::fromLatin1(name), context); };
  const auto text = [&](const char* name) {
    const QgsProcessingParameterDefinition* definition = parameterDefinition(QString::fromLatin1(name));
    return QStringLiteral("%1 (%2)").arg(QString::fromLatin1(name), definition ? definition->description() : QString());
  };
  const auto positive = [&](const char* name) -> QString {
    const double v = value(name);
    if (v > 0 && std::isfinite(v))
      return QString();
    return QObject::tr("%1 must be greater than 0; got %2.").arg(text(name), number(v));
  };
  const auto notNegative = [&](const char* name) -> QString {
    const double v = value(name);
    if (v >= 0 && std::isfinite(v))
      return QString();
    return QObject::tr("%1 must be 0 or more; got %2.").arg(text(name), number(v));
  };
  QStringList problems;
  problems << positive("INTERVAL") << notNegative("SNAP_DISTANCE");
  switch (parameterAsEnum(parameters, QStringLiteral("VELOCITY_MODEL"), context))
  {
    case Constant:
      problems << positive("SPEED");
      break;
    case Slope:
      for (const char* name : {"K_OVERLAND", "K_CHANNEL", "N_FACTOR", "B_FACTOR", "MIN_SLOPE", "MIN_SPEED"})
        problems << positive(name);
      problems << notNegative("CHANNEL_THRESHOLD");
      break;
    case Manning:
    {
      for (const char* name : {"MIN_SPEED", "RAINFALL", "MANNING_OVERLAND", "MANNING_MIXED", "MANNING_CHANNEL",
                               "SIDE_SLOPE"})
        problems << positive(name);
      const double cn = value("CURVE_NUMBER");
      if (!(cn > 0 && cn <= 100))
        problems << QObject::tr("%1 must be above 0 and at most 100; got %2.").arg(text("CURVE_NUMBER"), number(cn));
      problems << notNegative("MIXED_THRESHOLD");
      const double mixed = value("MIXED_THRESHOLD"), channel = value("CHANNEL_THRESHOLD_MANNING");
      if (!(channel >= mixed) || !std::isfinite(channel))
        problems << QObject::tr("%1 must be at least MIXED_THRESHOLD (%2 ha); got %3.")
                      .arg(text("CHANNEL_THRESHOLD_MANNING"), number(mixed), number(channel));
      if (parameterAsInt(parameters, QStringLiteral("MAX_ITERATIONS"), context) < 1)
        problems << QObject::tr("%1 must be at least 1.").arg(text("MAX_ITERATIONS"));
      break;
    }
    default:
      problems << QObject::tr("VELOCITY_MODEL must be 0 (constant), 1 (slope) or 2 (Manning).");
  }
  problems.removeAll(QString());
  return problems.join(QLatin1Char(' '));
}

bool IsochronesAlgorithm::checkParameterValues(const QVariantMap& parameters, QgsProcessingContext& context,
                                               QString* message) const
{
  const QString problem = numericProblem(parameters, context);
  if (!problem.isEmpty())
  {
    if (message)
      *message = problem;
    return false;
  }
  return Algorithm::checkParameterValues(parameters, context, message);
}

bool IsochronesAlgorithm::prepareAlgorithm(const QVariantMap& parameters, QgsProcessingContext& context,
                                           QgsProcessingFeedback*)
{
  const QString problem = numericProblem(parameters, context);
  if (!problem.isEmpty())
    throw QgsProcessingException(problem);
  mSource = demSourceOf(parameterAsRasterLayer(parameters, QStringLiteral("INPUT"), context), QStringLiteral("INPUT"),
                        parameters.value(QStringLiteral("INPUT")));
  mHasManning = parameterGiven(parameters, QStringLiteral("MANNING"));
  if (mHasManning)
    mManningSource = demSourceOf(parameterAsRasterLayer(parameters, QStringLiteral("MANNING"), context),
                                 QStringLiteral("MANNING"), parameters.value(QStringLiteral("MANNING")));
  return true;
}

QVariantMap IsochronesAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                         QgsProcessingFeedback* feedback)
{
  StageTimes times;
  const int band = parameterAsInt(parameters, QStringLiteral("BAND"), context);
  const double interval = parameterAsDouble(parameters, QStringLiteral("INTERVAL"), context);
  const double snapDistance = parameterAsDouble(parameters, QStringLiteral("SNAP_DISTANCE"), context);
  const int modelChoice = parameterAsEnum(parameters, QStringLiteral("VELOCITY_MODEL"), context);
  const auto value = [&](const char* name) { return parameterAsDouble(parameters, QString::fromLatin1(name), context); };
  dem::VelocityModel model;
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

  const QString timePath = parameterAsOutputLayer(parameters, QStringLiteral("TRAVEL_TIME"), context);
  const bool wantWatershed = outputRequested(parameters, QStringLiteral("WATERSHED"));
  const bool wantIsochrones = outputRequested(parameters, QStringLiteral("ISOCHRONES"));
  const bool wantTable = outputRequested(parameters, QStringLiteral("TIME_AREA"));
  const auto optionalRaster = [&](const char* name) {
    return outputRequested(parameters, QString::fromLatin1(name))
             ? parameterAsOutputLayer(parameters, QString::fromLatin1(name), context)
             : QString();
  };
  const QString filledPath = optionalRaster("FILLED");
  const QString directionPath = optionalRaster("FLOWDIR");
  const QString accumulationPath = optionalRaster("ACCUMULATION");

  // --- The outlet point (the first point of OUTLET) ----------------------------------------------
  std::optional<QgsPointXY> outletPoint;
  QgsCoordinateReferenceSystem outletCrs;
  if (parameterGiven(parameters, QStringLiteral("OUTLET")))
  {
    std::unique_ptr<QgsProcessingFeatureSource> source(parameterAsSource(parameters, QStringLiteral("OUTLET"), context));
    if (!source)
      throw QgsProcessingException(invalidSourceError(parameters, QStringLiteral("OUTLET")));
    requirePointSource(*source, QStringLiteral("OUTLET"));
    outletCrs = source->sourceCrs();
    QgsFeatureIterator features = source->getFeatures(QgsFeatureRequest().setNoAttributes());
    QgsFeature feature;
    int64_t skipped = 0, points = 0;
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
        const QgsAbstractGeometry* g = geometry.constGet();
        const QgsPoint first = g->vertexAt(QgsVertexId(0, 0, 0));
        outletPoint = QgsPointXY(first.x(), first.y());
      }
    }
    if (!outletPoint)
      throw QgsProcessingException(QObject::tr("The OUTLET layer has no point (%1 features without geometry). Give a "
                                               "layer with the outlet point, or leave OUTLET empty for the outlet of "
                                               "the largest basin.")
                                     .arg(skipped));
    if (points > 1)
      feedback->pushInfo(QObject::tr("OUTLET holds %1 points; the first is the outlet.").arg(points));
    if (skipped > 0)
      feedback->pushInfo(QObject::tr("%1 OUTLET features without geometry were skipped.").arg(skipped));
  }

  // --- Read: the DEM's grid first, so that an outlet off the DEM or a MANNING raster on another grid
  // is refused before any pixel is read.
  QgsProcessingMultiStepFeedback steps(7, feedback);
  feedback->setProgressText(QObject::tr("Reading the DEM"));
  DemRaster raster;
  Elevations elevations;
  std::vector<float> manning;
  std::optional<std::pair<int64_t, int64_t>> outletCell;
  QgsPointXY outletInDem;
  {
    ScopedStage stage(times, "read");
    raster = openDemRaster(mSource, band);
    const double* gt = raster.geoTransform;
    if (outletPoint)
    {
      outletInDem = *outletPoint;
      if (outletCrs.isValid() && raster.crs.isValid() && outletCrs != raster.crs)
      {
        try
        {
          QgsCoordinateTransform transform(outletCrs, raster.crs, context.transformContext());
          outletInDem = transform.transform(*outletPoint);
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
      const double column = (outletInDem.x() - gt[0]) / gt[1];
      const double row = (outletInDem.y() - gt[3]) / gt[5];
      if (!(column >= 0 && column < double(raster.width) && row >= 0 && row < double(raster.height)))
        throw QgsProcessingException(
          QObject::tr("The outlet point (%1, %2 in the DEM's CRS) lies outside the DEM, whose extent is x %3 to %4, "
                      "y %5 to %6.")
            .arg(number(outletInDem.x()), number(outletInDem.y()), number(gt[0]),
                 number(gt[0] + double(raster.width) * gt[1]), number(gt[3] + double(raster.height) * gt[5]),
                 number(gt[3])));
      outletCell = std::make_pair(int64_t(std::floor(column)), int64_t(std::floor(row)));
    }
    if (mHasManning && model.kind != dem::VelocityModel::Kind::Manning)
      feedback->pushWarning(QObject::tr("MANNING is used by the Manning model only (VELOCITY_MODEL=2); it is "
                                        "ignored."));
    if (mHasManning && model.kind == dem::VelocityModel::Kind::Manning)
    {
      const DemRaster n = openDemRaster(mManningSource, 1);
      if (n.width != raster.width || n.height != raster.height || !sameGeoTransform(n.geoTransform, gt))
        throw QgsProcessingException(
          QObject::tr("The MANNING raster must have the DEM's grid: it has %1 x %2 cells and the geotransform (%3); "
                      "the DEM has %4 x %5 cells and (%6). Resample it onto the DEM's grid first (GDAL's Warp "
                      "(reproject) with the DEM's extent and cell size).")
            .arg(n.width)
            .arg(n.height)
            .arg(geoTransformText(n.geoTransform))
            .arg(raster.width)
            .arg(raster.height)
            .arg(geoTransformText(gt)));
      if (n.crs.isValid() && raster.crs.isValid() && n.crs != raster.crs)
        feedback->pushWarning(QObject::tr("The MANNING raster's CRS (%1) differs from the DEM's (%2); its cells are "
                                          "taken to be the DEM's.")
                                .arg(n.crs.userFriendlyIdentifier(), raster.crs.userFriendlyIdentifier()));
      manning.resize(size_t(raster.width * raster.height));
      readDemRows(
        n,
        [&](int64_t row0, int64_t rows, const double* values) {
          float* out = manning.data() + row0 * raster.width;
          for (int64_t i = 0; i < rows * raster.width; ++i)
            out[i] = static_cast<float>(values[i]);
        },
        nullptr);
    }
    elevations = readElevations(raster, &steps);
  }
  reportElevations(raster, elevations, feedback);
  const int64_t w = raster.width, h = raster.height;
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
  if (outletCell && !dem::validCellWithin(grid, outletCell->first, outletCell->second, snapDistance))
    throw QgsProcessingException(
      snapDistance > 0
        ? QObject::tr("The outlet point (%1, %2) lies on nodata (column %3, row %4) and no valid DEM cell lies "
                      "within SNAP_DISTANCE = %5 m of it: move the point onto the DEM's data or raise "
                      "SNAP_DISTANCE.")
            .arg(number(outletInDem.x()), number(outletInDem.y()))
            .arg(outletCell->first)
            .arg(outletCell->second)
            .arg(number(snapDistance))
        : QObject::tr("The outlet point (%1, %2) lies on a nodata cell of the DEM (column %3, row %4): move it "
                      "onto the DEM's data or give a SNAP_DISTANCE.")
            .arg(number(outletInDem.x()), number(outletInDem.y()))
            .arg(outletCell->first)
            .arg(outletCell->second));

  // --- The chain on the resolved backend: fill, flats and D8, accumulation, the outlet, travel times,
  // the bands' and the watershed's polygons (on the GPU without a round trip between the stages) -----
  const BackendChoice device = resolveDevice(parameters, context, feedback);
  const RunControl control = runControl(feedback);
  dem::ChainOptions options;
  options.automaticOutlet = !outletCell;
  if (outletCell)
  {
    options.outletColumn = outletCell->first;
    options.outletRow = outletCell->second;
    options.snapDistance = snapDistance;
  }
  options.model = model;
  options.interval = interval;
  options.maxBands = kMaxBands;
  options.keepFilled = !filledPath.isEmpty();
  options.keepDirections = !directionPath.isEmpty() || !accumulationPath.isEmpty();  // nodata of the counts
  options.keepAccumulation = !accumulationPath.isEmpty();
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
  feedback->pushInfo(QObject::tr("Filling raised %1 of %2 cells.").arg(chain.raisedCells).arg(elevations.valid));
  std::vector<float>().swap(elevations.z);
  dem::TravelTimes& travel = chain.travel;
  const int64_t outlet = chain.outlet;
  const auto centre = [&](int64_t c) {
    return QgsPointXY(raster.geoTransform[0] + (double(c % w) + 0.5) * raster.geoTransform[1],
                      raster.geoTransform[3] + (double(c / w) + 0.5) * raster.geoTransform[5]);
  };
  if (outletCell)
  {
    const auto [column, row] = *outletCell;
    const int64_t c = outlet % w, r = outlet / w;
    const double dx = double(c - column) * raster.cellWidth[size_t(row)];
    const double dy = double(r - row) * raster.cellHeight[size_t(row)];
    feedback->pushInfo(
      QObject::tr("Outlet: the point (%1, %2) falls in column %3, row %4; snapped within %5 m to the cell of "
                  "highest accumulation, column %6, row %7 (%8 m away; centre %9, %10), where %11 cells drain.")
        .arg(number(outletInDem.x()), number(outletInDem.y()))
        .arg(column)
        .arg(row)
        .arg(number(snapDistance))
        .arg(c)
        .arg(r)
        .arg(number(std::sqrt(dx * dx + dy * dy)))
        .arg(number(centre(outlet).x()), number(centre(outlet).y()))
        .arg(chain.outletCells));
  }
  else
    feedback->pushInfo(QObject::tr("Outlet (automatic): where the largest basin drains out of the grid, column %1, "
                                   "row %2 (centre %3, %4), where %5 cells drain.")
                         .arg(outlet % w)
                         .arg(outlet / w)
                         .arg(number(centre(outlet).x()), number(centre(outlet).y()))
                         .arg(chain.outletCells));

  // --- The bands' cells and areas ------------------------------------------------------------------
  double minTime = std::numeric_limits<double>::infinity(), maxTime = 0.0;
  for (const double t : travel.minutes)
    if (!std::isnan(t))
    {
      minTime = std::min(minTime, t);
      maxTime = std::max(maxTime, t);
    }
  const int bands = chain.bands;
  std::vector<int64_t> bandCells(static_cast<size_t>(bands), 0);
  std::vector<double> bandArea(static_cast<size_t>(bands), 0.0);  // m²
  for (int64_t y = 0; y < h; ++y)
  {
    const double cellArea = raster.cellWidth[size_t(y)] * raster.cellHeight[size_t(y)];
    for (int64_t i = y * w; i < (y + 1) * w; ++i)
    {
      const double t = travel.minutes[size_t(i)];
      if (std::isnan(t))
        continue;
      const size_t k = size_t(dem::detail::bandOfTime(t, interval));
      ++bandCells[k];
      bandArea[k] += cellArea;
    }
  }
  const double watershedKm2 = travel.watershedArea * 1e-6;
  feedback->pushInfo(QObject::tr("Watershed: %1 cells, %2 km². Travel times from %3 to %4 minutes: %5 bands of %6 "
                                 "minutes.")
                       .arg(travel.watershedCells)
                       .arg(number(watershedKm2), number(minTime), number(maxTime))
                       .arg(bands)
                       .arg(number(interval)));
  feedback->pushInfo(QObject::tr("Speeds from %1 to %2 m/s.").arg(number(chain.minSpeed), number(chain.maxSpeed)));
  const std::vector<float>& filled = chain.filled;
  const std::vector<uint8_t>& directions = chain.directions;
  const dem::Accumulation& accumulation = chain.accumulation;

  // --- Rasters -------------------------------------------------------------------------------------
  steps.setCurrentStep(6);
  feedback->setProgressText(QObject::tr("Writing the rasters"));
  FinishedRasters finished;
  QVariantMap outputs;
  {
    ScopedStage stage(times, "write");
    writeDemRaster(
      timePath, raster, GDT_Float64, kTimeNoData,
      [&](int64_t row0, int64_t rows, void* buffer) {
        double* out = static_cast<double*>(buffer);
        const double* in = travel.minutes.data() + row0 * w;
        for (int64_t i = 0; i < rows * w; ++i)
          out[i] = std::isnan(in[i]) ? kTimeNoData : in[i];
      },
      finished, &steps);
    outputs.insert(QStringLiteral("TRAVEL_TIME"), timePath);
    if (!filledPath.isEmpty())
    {
      // The input's nodata value where float32 holds it and no elevation collides with it, else NaN.
      float noData = std::numeric_limits<float>::quiet_NaN();
      if (raster.noData && std::isfinite(static_cast<float>(*raster.noData)) && elevations.roundedToNoData == 0)
        noData = static_cast<float>(*raster.noData);
      writeDemRaster(
        filledPath, raster, GDT_Float32, double(noData),
        [&](int64_t row0, int64_t rows, void* buffer) {
          float* out = static_cast<float*>(buffer);
          const float* in = filled.data() + row0 * w;
          for (int64_t i = 0; i < rows * w; ++i)
            out[i] = std::isnan(in[i]) ? noData : in[i];
        },
        finished, &steps);
      outputs.insert(QStringLiteral("FILLED"), filledPath);
    }
    if (!directionPath.isEmpty())
    {
      writeDemRaster(
        directionPath, raster, GDT_Byte, 255.0,
        [&](int64_t row0, int64_t rows, void* buffer) {
          uint8_t* out = static_cast<uint8_t*>(buffer);
          const uint8_t* in = directions.data() + row0 * w;
          for (int64_t i = 0; i < rows * w; ++i)
            out[i] = FlowDirectionAlgorithm::encode(in[i], FlowDirectionAlgorithm::Esri);
        },
        finished, &steps);
      outputs.insert(QStringLiteral("FLOWDIR"), directionPath);
    }
    if (!accumulationPath.isEmpty())
    {
      writeDemRaster(
        accumulationPath, raster, GDT_Int32, double(kCellsNoData),
        [&](int64_t row0, int64_t rows, void* buffer) {
          int32_t* out = static_cast<int32_t*>(buffer);
          for (int64_t i = 0; i < rows * w; ++i)
          {
            const size_t c = size_t(row0 * w + i);
            out[i] = directions[c] == dem::kNoData ? kCellsNoData : int32_t(accumulation.cells[c]);
          }
        },
        finished, &steps);
      outputs.insert(QStringLiteral("ACCUMULATION"), accumulationPath);
    }
  }
  // The rasters are written: the large buffers go.
  chain.filled = std::vector<float>();
  chain.directions = std::vector<uint8_t>();
  chain.accumulation = dem::Accumulation();
  travel.minutes = std::vector<double>();
  if (!manning.empty())
    std::vector<float>().swap(manning);
  const BandPolygons& watershedPolygons = chain.watershed;
  const BandPolygons& bandPolygons = chain.bandPolygons;
  // Cell corners to map coordinates (the DEM is north-up, so shells stay counter-clockwise).
  const AxisMap toMap{raster.geoTransform[0], raster.geoTransform[1], raster.geoTransform[3], -raster.geoTransform[5]};

  // --- Features and the table ----------------------------------------------------------------------
  if (wantWatershed)
  {
    QgsFields fields;
    fields.append(QgsField(QStringLiteral("area_km2"), QVariant::Double));
    fields.append(QgsField(QStringLiteral("cells"), QVariant::LongLong));
    fields.append(QgsField(QStringLiteral("t_max"), QVariant::Double));
    QString id;
    std::unique_ptr<QgsFeatureSink> sink = createSink(parameters, QStringLiteral("WATERSHED"), context, id, fields,
                                                      QgsWkbTypes::MultiPolygon, raster.crs);
    QgsFeature feature(fields);
    feature.setGeometry(QgsGeometry(bandMultiPolygon(watershedPolygons, 0, false, toMap).release()));
    feature.setAttributes(QgsAttributes() << watershedKm2 << QVariant::fromValue<qlonglong>(travel.watershedCells) << maxTime);
    if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
      throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("WATERSHED")));
    outputs.insert(QStringLiteral("WATERSHED"), id);
  }
  if (wantIsochrones)
  {
    QgsFields fields = bandFields();
    QString id;
    std::unique_ptr<QgsFeatureSink> sink = createSink(parameters, QStringLiteral("ISOCHRONES"), context, id, fields,
                                                      QgsWkbTypes::MultiPolygon, raster.crs);
    ScopedStage stage(times, "polygons");
    for (int k = 0; k < bands; ++k)
    {
      if (feedback->isCanceled())
        throw Canceled();
      std::unique_ptr<QgsMultiPolygon> multi = bandMultiPolygon(bandPolygons, size_t(k), false, toMap);
      if (!multi)
        continue;
      QgsFeature feature(fields);
      feature.setGeometry(QgsGeometry(multi.release()));
      feature.setAttributes(QgsAttributes() << k + 1 << double(k) * interval << double(k + 1) * interval
                                          << QVariant::fromValue<qlonglong>(bandCells[size_t(k)])
                                          << bandArea[size_t(k)] * 1e-6);
      if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
        throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("ISOCHRONES")));
    }
    outputs.insert(QStringLiteral("ISOCHRONES"), id);
  }
  if (wantTable)
  {
    QgsFields fields = bandFields();
    fields.append(QgsField(QStringLiteral("cumulative_share"), QVariant::Double));
    QString id;
    std::unique_ptr<QgsFeatureSink> sink = createSink(parameters, QStringLiteral("TIME_AREA"), context, id, fields,
                                                      QgsWkbTypes::NoGeometry, QgsCoordinateReferenceSystem());
    // The shares against the bands' own total, summed in the same order: the last is exactly 1.
    double total = 0.0;
    for (const double a : bandArea)
      total += a;
    double cumulative = 0.0;
    for (int k = 0; k < bands; ++k)
    {
      cumulative += bandArea[size_t(k)];
      QgsFeature feature(fields);
      feature.setAttributes(QgsAttributes() << k + 1 << double(k) * interval << double(k + 1) * interval
                                          << QVariant::fromValue<qlonglong>(bandCells[size_t(k)])
                                          << bandArea[size_t(k)] * 1e-6 << cumulative / total);
      if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
        throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("TIME_AREA")));
    }
    outputs.insert(QStringLiteral("TIME_AREA"), id);
  }
  outputs.insert(QStringLiteral("WATERSHED_AREA_KM2"), watershedKm2);
  outputs.insert(QStringLiteral("MAX_TIME_MIN"), maxTime);
  outputs.insert(QStringLiteral("OUTLET_X"), centre(outlet).x());
  outputs.insert(QStringLiteral("OUTLET_Y"), centre(outlet).y());
  logStageTimes(times, feedback);
  finished.keep();
  mTimePath = timePath;
  mMaxTime = std::max(maxTime, 1e-9);
  return outputs;
}

QVariantMap IsochronesAlgorithm::postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback*)
{
  if (context.willLoadLayerOnCompletion(mTimePath))
    context.layerToLoadOnCompletionDetails(mTimePath).setPostProcessor(new ContinuousRasterStyle(0.0, mMaxTime));
  return QVariantMap();
}

}  // namespace gpugeo
