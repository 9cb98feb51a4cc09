// gpugeo:isochrones with MPI_PROCESSES: the chain run by gpugeo_dem under mpiexec (mpi_launch.h),
// the outlet, the bands and their polygons read back from its results file.
#include <QFile>
#include <QScopeGuard>

#include <qgsprocessingutils.h>

#include "cli/isochrone_results.h"
#include "isochrones_algorithm.h"
#include "mpi_launch.h"

namespace gpugeo {

IsochronesAlgorithm::Outcome IsochronesAlgorithm::executeUnderMpi(const MpiJob& job, const Request& request,
                                                                  const TilingPlan& plan,
                                                                  const QVariantMap& parameters,
                                                                  QgsProcessingContext& context,
                                                                  QgsProcessingFeedback* feedback)
{
  const auto number = [](double v) { return QString::number(v, 'g', 17); };
  const dem::VelocityModel& m = request.model;
  static const QStringList models{QStringLiteral("constant"), QStringLiteral("slope"), QStringLiteral("manning")};
  const int model = m.kind == dem::VelocityModel::Kind::Constant ? 0 : m.kind == dem::VelocityModel::Kind::Manning ? 2 : 1;
  QStringList arguments = programArguments(parameters, context, mSource, request.band, plan);
  arguments << QStringLiteral("--dem") << mSource.gdalName << QStringLiteral("--velocity-model") << models[model]
            << QStringLiteral("--interval") << number(request.interval) << QStringLiteral("--snap-distance")
            << number(request.snapDistance);
  if (request.outletPoint)
    arguments << QStringLiteral("--outlet")
              << number(request.outletPoint->x()) + QLatin1Char(',') + number(request.outletPoint->y());
  const std::pair<const char*, double> values[] = {
    {"--speed", m.speed},         {"--k-overland", m.kOverland},
    {"--k-channel", m.kChannel},  {"--channel-threshold", m.channelArea / 1e6},
    {"--n-factor", m.n},          {"--b-factor", m.b},
    {"--min-slope", m.minSlope},  {"--min-speed", m.minSpeed},
    {"--rainfall", m.rainfall},   {"--curve-number", m.curveNumber},
    {"--manning-overland", m.overlandN}, {"--mixed-threshold", m.mixedArea / 1e4},
    {"--channel-threshold-manning", m.channelAreaManning / 1e4}, {"--manning-mixed", m.mixedN},
    {"--manning-channel", m.channelN},   {"--side-slope", m.sideSlope}};
  for (const auto& [option, value] : values)
    arguments << QString::fromLatin1(option) << number(value);
  arguments << QStringLiteral("--max-iterations") << QString::number(m.maxIterations);
  if (mHasManning && m.kind == dem::VelocityModel::Kind::Manning)
    arguments << QStringLiteral("--manning") << mManningSource.gdalName;
  arguments << QStringLiteral("--travel-time") << request.timePath;
  const std::pair<const char*, const QString*> rasters[] = {
    {"--filled", &request.filledPath}, {"--flowdir", &request.directionPath},
    {"--accumulation", &request.accumulationPath}};
  for (const auto& [option, path] : rasters)
    if (!path->isEmpty())
      arguments << QString::fromLatin1(option) << *path;
  // The outlet, the bands and their polygons come back in a results file; this algorithm writes the
  // vector outputs from them as its in-process runs do.
  const QString results = QgsProcessingUtils::generateTempFilename(QStringLiteral("isochrones_results.bin"));
  arguments << QStringLiteral("--results") << results;
  const auto removeResults = qScopeGuard([&] { QFile::remove(results); });
  runDemProgram(job, QStringLiteral("isochrones"), arguments,
                {request.timePath, request.filledPath, request.directionPath, request.accumulationPath}, feedback);
  cli::IsochroneResults r = cli::readIsochroneResults(results.toStdString());
  Outcome outcome;
  outcome.outlet = r.outlet;
  outcome.outletCells = r.outletCells;
  outcome.raisedCells = r.raisedCells;
  outcome.validCells = r.validCells;
  outcome.interval = r.interval;
  outcome.bands = r.bands;
  outcome.bandCells = std::move(r.bandCells);
  outcome.bandArea = std::move(r.bandArea);
  outcome.watershedCells = r.watershedCells;
  outcome.watershedArea = r.watershedArea;
  outcome.minTime = r.minTime;
  outcome.maxTime = r.maxTime;
  outcome.minSpeed = r.minSpeed;
  outcome.maxSpeed = r.maxSpeed;
  outcome.bandPolygons = std::move(r.bandPolygons);
  outcome.watershed = std::move(r.watershed);
  return outcome;
}

}  // namespace gpugeo
