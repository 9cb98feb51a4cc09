#include "gpugeo_algorithm.h"

#include <algorithm>

#include <QCoreApplication>
#include <QFile>
#include <QFileInfo>
#include <QIcon>
#include <QStringList>
#include <QUrl>

#include <qgsapplication.h>
#include <qgsexception.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>
#include <qgsprocessingutils.h>
#include <qgswkbtypes.h>

#include "adapters/tiled_rasters.h"
#include "core/errors.h"
#include "core/parallel.h"
#include "mpi_launch.h"
#include "parameter_checks.h"
#include "provider.h"

namespace gpugeo {

namespace {

// The feedback execute() gets: everything goes on to QGIS's feedback, and under qgis_process's text
// output a message that follows progress ticks starts on a line of its own. (qgis_process prints the
// ticks "0...10...20" without a line break, then each message as it comes, so a message would be
// glued to the ticks.) The ticks are followed as qgis_process counts them: 40 to a run, 2.5% each.
class LineFeedback : public QgsProcessingFeedback
{
public:
  explicit LineFeedback(QgsProcessingFeedback* target) : mTarget(target)
  {
    static const bool ticking = QgsApplication::platform() == QLatin1String("qgis_process") &&
                                !QCoreApplication::arguments().contains(QStringLiteral("--json"));
    mTicking = ticking;
    QObject::connect(target, &QgsFeedback::canceled, this, &QgsFeedback::cancel, Qt::DirectConnection);
    QObject::connect(this, &QgsFeedback::progressChanged, this, [this](double progress) {
      const int tick = std::min(40, std::max(0, int(progress * 0.4)));
      if (tick > mLastTick)
      {
        mLastTick = tick;
        mLineOpen = tick < 40;
      }
      mTarget->setProgress(progress);
    }, Qt::DirectConnection);
    if (target->isCanceled())
      cancel();
  }
  void setProgressText(const QString& text) override { mTarget->setProgressText(line(text)); }
  void reportError(const QString& error, bool fatalError) override { mTarget->reportError(line(error), fatalError); }
  void pushWarning(const QString& warning) override { mTarget->pushWarning(line(warning)); }
  void pushInfo(const QString& info) override { mTarget->pushInfo(line(info)); }
  void pushDebugInfo(const QString& info) override { mTarget->pushDebugInfo(line(info)); }
  void pushCommandInfo(const QString& info) override { mTarget->pushCommandInfo(line(info)); }
  void pushConsoleInfo(const QString& info) override { mTarget->pushConsoleInfo(line(info)); }

private:
  QString line(const QString& text)
  {
    if (!mTicking || !mLineOpen)
      return text;
    mLineOpen = false;
    return QLatin1Char('\n') + text;
  }

  QgsProcessingFeedback* mTarget;
  bool mTicking = false;
  int mLastTick = -1;
  bool mLineOpen = false;
};

}  // namespace

QIcon Algorithm::icon() const
{
  return QIcon(svgIconPath());
}

QString Algorithm::svgIconPath() const
{
  return iconFolder() + QLatin1Char('/') + iconFile();
}

QString Algorithm::helpUrl() const
{
  const QString file = helpFile();
  if (file.isEmpty())
    return QString();
  QUrl url = QUrl::fromLocalFile(file);
  url.setFragment(helpAnchor(id()));
  return url.toString(QUrl::FullyEncoded);
}

void Algorithm::addDeviceParameter()
{
  auto device = std::make_unique<QgsProcessingParameterEnum>(
    QStringLiteral("DEVICE"), QObject::tr("Device"),
    QStringList{QObject::tr("Auto (GPU when available)"), QObject::tr("CPU"), QObject::tr("GPU")}, false, 0);
  device->setFlags(device->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  addParameter(device.release());
}

QString Algorithm::deviceHelp()
{
  return QObject::tr(
    "<p><b>Device</b> (advanced): <i>Auto</i> runs on the NVIDIA GPU when a CUDA device and driver are "
    "present and on all processor cores otherwise; <i>CPU</i> and <i>GPU</i> force one backend (on the "
    "command line DEVICE=0, 1 or 2). Both backends give the same result. The log names the backend, "
    "the device and the time of each stage. If the GPU runs out of memory the work is split into "
    "bands of rows, and with <i>Auto</i> it falls back to the CPU with a warning.</p>");
}

void Algorithm::addTilingParameters(bool mpi)
{
  // Optional, so that models and scripts saved before they existed stay valid (their defaults apply).
  auto budget = std::make_unique<QgsProcessingParameterNumber>(
    QStringLiteral("MEMORY_BUDGET"), QObject::tr("Memory budget (MiB; 0: half the available memory)"),
    QgsProcessingParameterNumber::Integer, 0, true, 0, 1 << 30);
  budget->setFlags(budget->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  addParameter(budget.release());
  auto tiled = std::make_unique<QgsProcessingParameterBoolean>(
    QStringLiteral("TILED"), QObject::tr("Process tile by tile even when the DEM fits the budget"), false, true);
  tiled->setFlags(tiled->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  addParameter(tiled.release());
  addOutputFormatParameters();
  if (!mpi)
    return;
  addParameter(mpiProcessesParameter());
  addParameter(mpiHostfileParameter());
}

QStringList Algorithm::programArguments(const QVariantMap& parameters, QgsProcessingContext& context,
                                        const DemSource& source, int band, const TilingPlan& plan) const
{
  static const QStringList devices{QStringLiteral("auto"), QStringLiteral("cpu"), QStringLiteral("gpu")};
  QStringList arguments{QStringLiteral("--band"), QString::number(band), QStringLiteral("--device"),
                        devices.value(parameterAsEnum(parameters, QStringLiteral("DEVICE"), context))};
  if (source.crs.isValid())
    arguments << QStringLiteral("--crs") << source.crs.toWkt(QgsCoordinateReferenceSystem::WKT_PREFERRED_GDAL);
  const int budget = parameterAsInt(parameters, QStringLiteral("MEMORY_BUDGET"), context);
  if (budget > 0)
    arguments << QStringLiteral("--memory-budget") << QString::number(budget);
  if (parameterAsBool(parameters, QStringLiteral("COG"), context))
    arguments << QStringLiteral("--cog");
  const QString options = parameterAsString(parameters, QStringLiteral("CREATION_OPTIONS"), context).trimmed();
  if (!options.isEmpty())
    arguments << QStringLiteral("--creation-options") << options;
  if (plan.tiled)
    arguments << QStringLiteral("--tile") << QString::number(plan.options.tileWidth);
  if (parameters.value(QStringLiteral("MPI_HOSTFILE")).toString().isEmpty())
    arguments << QStringLiteral("--scratch") << QString::fromStdString(scratchParent());
  return arguments;
}

QString Algorithm::tilingHelp(bool mpi)
{
  return QObject::tr(
           "<p><b>Memory budget</b> (advanced, MiB; 0: half the memory available) and <b>Process tile by tile</b>: a "
           "DEM whose in-memory run would pass the budget runs tile by tile, rasters read and written window by "
           "window, so its size is limited by the disk; the result is the in-memory run's, cell for cell. Tiles: the "
           "largest squares (up to 4,096 cells) that fit, one a thread; on the GPU they take turns on the device. "
           "Scratch rasters go to QGIS's temporary folder, removed at the end.</p>") +
         outputFormatHelp() + (mpi ? mpiHelp() : QString());
}

void Algorithm::addOutputFormatParameters()
{
  auto cog = std::make_unique<QgsProcessingParameterBoolean>(
    QStringLiteral("COG"), QObject::tr("Write the rasters as Cloud Optimized GeoTIFFs"), false, true);
  cog->setFlags(cog->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  addParameter(cog.release());
  // QGIS's GDAL algorithms' OPTIONS parameter, with their editor of raster options in the dialog.
  auto options = std::make_unique<QgsProcessingParameterString>(
    QStringLiteral("CREATION_OPTIONS"), QObject::tr("Additional creation options"), QVariant(), false, true);
  options->setFlags(options->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  options->setMetadata({{QStringLiteral("widget_wrapper"),
                         QVariantMap{{QStringLiteral("class"),
                                      QStringLiteral("processing.algs.gdal.ui.RasterOptionsWidget.RasterOptionsWidgetWrapper")}}}});
  addParameter(options.release());
}

QString Algorithm::outputFormatHelp()
{
  return QObject::tr(
    "<p><b>COG</b> (advanced): Cloud Optimized GeoTIFF outputs. <b>Additional creation options</b> (advanced): "
    "GDAL's, KEY=VALUE separated by | (e.g. COMPRESS=ZSTD), over the defaults (integer rasters DEFLATE); the "
    "COG driver's with COG. Options GDAL does not take are refused.</p>");
}

gdal::OutputFormat Algorithm::outputFormat(const QVariantMap& parameters, QgsProcessingContext& context) const
{
  try
  {
    return gdal::outputFormat(
      parameterAsString(parameters, QStringLiteral("CREATION_OPTIONS"), context).toStdString(),
      parameterAsBool(parameters, QStringLiteral("COG"), context));
  }
  catch (const std::exception& e)
  {
    throw QgsProcessingException(QString::fromStdString(e.what()));
  }
}

int Algorithm::cpuThreads()
{
  const int configured = QgsApplication::maxThreads();
  return configured > 0 ? configured : defaultThreadCount();
}

BackendChoice Algorithm::resolveDevice(const QVariantMap& parameters, QgsProcessingContext& context,
                                       QgsProcessingFeedback* feedback) const
{
  const int option = parameterAsEnum(parameters, QStringLiteral("DEVICE"), context);
  const Backend requested = option == 1 ? Backend::Cpu : option == 2 ? Backend::Gpu : Backend::Auto;
  const BackendChoice choice = resolveBackend(requested, cpuThreads());
  if (!choice.note.empty())
    feedback->pushInfo(QObject::tr("Device: %1.").arg(QString::fromStdString(choice.note)));
  feedback->pushInfo(QObject::tr("Backend: %1 on %2")
                       .arg(choice.backend == Backend::Gpu ? QStringLiteral("GPU (CUDA)") : QStringLiteral("CPU"),
                            QString::fromStdString(choice.deviceName)));
  return choice;
}

RunControl Algorithm::runControl(QgsFeedback* feedback)
{
  RunControl control;
  if (feedback)
    control.canceled = [feedback] { return feedback->isCanceled(); };
  return control;
}

bool Algorithm::prepareAlgorithm(const QVariantMap& parameters, QgsProcessingContext& context,
                                 QgsProcessingFeedback* feedback)
{
  for (const QString& problem :
       {parameterValueProblem(*this, parameters, context), outputConflict(*this, parameters, context)})
    if (!problem.isEmpty())
      throw QgsProcessingException(problem);
  if (parameterDefinition(QStringLiteral("CREATION_OPTIONS")))
    outputFormat(parameters, context);  // throws for options GDAL does not take
  return prepareInputs(parameters, context, feedback);
}

bool Algorithm::prepareInputs(const QVariantMap&, QgsProcessingContext&, QgsProcessingFeedback*)
{
  return true;
}

QVariantMap Algorithm::processAlgorithm(const QVariantMap& parameters, QgsProcessingContext& context,
                                        QgsProcessingFeedback* feedback)
{
  QVariantMap outputs;
  mSinkFiles.clear();
  const int64_t threadFailuresBefore = threadStartFailures();
  const auto reportThreadFailures = [&] {
    const int64_t failed = threadStartFailures() - threadFailuresBefore;
    if (failed > 0 && feedback)
      feedback->pushWarning(QObject::tr("%1 worker threads could not be started (a limit on processes or threads, or "
                                        "memory pressure): the work ran on fewer threads.")
                              .arg(failed));
  };
  LineFeedback lines(feedback);
  try
  {
    callNative([&] { outputs = execute(parameters, context, &lines); });
  }
  catch (...)
  {
    deleteSinkFiles();  // execute()'s sinks are closed by now: they were its locals
    reportThreadFailures();
    throw;
  }
  mSinkFiles.clear();
  reportThreadFailures();
  lines.setProgress(100.0);
  return outputs;
}

std::unique_ptr<QgsFeatureSink> Algorithm::createSink(const QVariantMap& parameters, const QString& name,
                                                      QgsProcessingContext& context, QString& destination,
                                                      const QgsFields& fields, QgsWkbTypes::Type geometryType,
                                                      const QgsCoordinateReferenceSystem& crs,
                                                      QgsFeatureSink::SinkFlags flags) const
{
  std::unique_ptr<QgsFeatureSink> sink(
    parameterAsSink(parameters, name, context, destination, fields, geometryType, crs, flags));
  if (!sink)
    throw QgsProcessingException(invalidSinkError(parameters, name));
  // A file destination is the file's path; a layer added to an existing file has "|layername=".
  const QFileInfo file(destination);
  if (!destination.contains(QLatin1Char('|')) && file.isAbsolute() && file.exists())
    mSinkFiles << destination;
  return sink;
}

void Algorithm::deleteSinkFiles()
{
  for (const QString& path : mSinkFiles)
  {
    const QFileInfo file(path);
    QStringList doomed{path, path + QStringLiteral("-wal"), path + QStringLiteral("-shm"),
                       path + QStringLiteral("-journal")};
    if (file.suffix().compare(QStringLiteral("shp"), Qt::CaseInsensitive) == 0)
      for (const char* sidecar : {"shx", "dbf", "prj", "cpg", "qix", "sbn", "sbx", "qmd"})
        doomed << file.path() + QLatin1Char('/') + file.completeBaseName() + QLatin1Char('.') + QLatin1String(sidecar);
    for (const QString& f : doomed)
      QFile::remove(f);
  }
  mSinkFiles.clear();
}

void Algorithm::callNative(const std::function<void()>& work)
{
  try
  {
    work();
  }
  catch (const Canceled&)
  {
    throw QgsProcessingException(QObject::tr("Canceled; no output was written."));
  }
  catch (const DeviceOutOfMemory& e)
  {
    throw QgsProcessingException(QObject::tr("The GPU ran out of memory: %1. Run with DEVICE=CPU or free GPU memory.")
                                   .arg(QString::fromStdString(e.what())));
  }
  catch (const std::bad_alloc&)
  {
    throw QgsProcessingException(
      QObject::tr("Out of memory: this input and these outputs need more memory than the machine has (for a raster, "
                  "use a larger pixel size or a smaller extent; for a grid, a lower level)."));
  }
  catch (const Error& e)
  {
    throw QgsProcessingException(QString::fromStdString(e.what()));
  }
  catch (const std::exception& e)
  {
    throw QgsProcessingException(QObject::tr("Unexpected error: %1").arg(QString::fromStdString(e.what())));
  }
}

void Algorithm::logStageTimes(const StageTimes& times, QgsProcessingFeedback* feedback)
{
  QStringList parts;
  double total = 0.0;
  for (const auto& [stage, ms] : times.entries())
  {
    parts << QStringLiteral("%1 %2 ms").arg(QString::fromStdString(stage)).arg(ms, 0, 'f', 1);
    total += ms;
  }
  feedback->pushInfo(QObject::tr("Stage times: %1 (total %2 ms)").arg(parts.join(QStringLiteral(", "))).arg(total, 0, 'f', 1));
}

namespace {

QString notPointsMessage(const QString& name, QgsWkbTypes::Type type)
{
  return QObject::tr("%1 must be a point layer; this one holds %2 geometries. Lines and polygons are not supported "
                     "by this algorithm.")
    .arg(name, QgsWkbTypes::displayString(type));
}

}  // namespace

bool Algorithm::checkParameterValues(const QVariantMap& parameters, QgsProcessingContext& context,
                                     QString* message) const
{
  // Ours first: it names the parameter and its range where QGIS says "Incorrect parameter value",
  // and refuses the NaN and infinities that QGIS's range check lets through.
  const QString problem = parameterValueProblem(*this, parameters, context);
  if (!problem.isEmpty())
  {
    if (message)
      *message = problem;
    return false;
  }
  if (!QgsProcessingAlgorithm::checkParameterValues(parameters, context, message))
    return false;
  // DEVICE=GPU without a usable GPU: said here, once, rather than by the run's error (which
  // qgis_process prints three times, as for any algorithm's run-time error).
  if (parameterDefinition(QStringLiteral("DEVICE")) && parameterAsEnum(parameters, QStringLiteral("DEVICE"), context) == 2)
  {
    try
    {
      resolveBackend(Backend::Gpu, 1);
    }
    catch (const Error& e)
    {
      if (message)
        *message = QString::fromStdString(e.what());
      return false;
    }
  }
  for (const QgsProcessingParameterDefinition* definition : parameterDefinitions())
  {
    const auto* source = dynamic_cast<const QgsProcessingParameterFeatureSource*>(definition);
    if (source && source->dataTypes() == QList<int>{QgsProcessing::TypeVectorPoint} &&
        !checkPointSource(parameters, definition->name(), context, message))
      return false;
  }
  const QString conflict = outputConflict(*this, parameters, context);
  if (!conflict.isEmpty())
  {
    if (message)
      *message = conflict;
    return false;
  }
  return true;
}

void Algorithm::runWithCpuFallback(const BackendChoice& device, QgsProcessingFeedback* feedback,
                                   const std::function<void(Backend)>& work)
{
  try
  {
    work(device.backend);
  }
  catch (const Error& e)
  {
    const bool deviceFailure = dynamic_cast<const DeviceError*>(&e) || dynamic_cast<const DeviceOutOfMemory*>(&e);
    if (!deviceFailure || device.requested != Backend::Auto || device.backend != Backend::Gpu)
      throw;
    feedback->pushWarning(QObject::tr("The GPU failed (%1); continuing on the CPU.").arg(e.what()));
    work(Backend::Cpu);
  }
}

void Algorithm::runTiled(const BackendChoice& device, const TilingPlan& plan, QgsProcessingFeedback* feedback,
                         const std::function<void(const TilingPlan&)>& run)
{
  runWithCpuFallback(device, feedback, [&](Backend backend) {
    TilingPlan on = plan;
    on.options.backend = backend;
    run(on);
  });
}

bool Algorithm::checkPointSource(const QVariantMap& parameters, const QString& name, QgsProcessingContext& context,
                                 QString* message) const
{
  std::unique_ptr<QgsProcessingFeatureSource> source(parameterAsSource(parameters, name, context));
  if (source && QgsWkbTypes::geometryType(source->wkbType()) != QgsWkbTypes::PointGeometry)
  {
    if (message)
      *message = notPointsMessage(name, source->wkbType());
    return false;
  }
  return true;
}

void Algorithm::requirePointSource(const QgsProcessingFeatureSource& source, const QString& name) const
{
  if (QgsWkbTypes::geometryType(source.wkbType()) != QgsWkbTypes::PointGeometry)
    throw QgsProcessingException(notPointsMessage(name, source.wkbType()));
}

bool Algorithm::outputRequested(const QVariantMap& parameters, const QString& name)
{
  QVariant value = parameters.value(name);
  if (value.canConvert<QgsProcessingOutputLayerDefinition>())
    value = value.value<QgsProcessingOutputLayerDefinition>().sink.staticValue();
  return value.isValid() && !value.isNull() && !value.toString().isEmpty();
}

}  // namespace gpugeo
