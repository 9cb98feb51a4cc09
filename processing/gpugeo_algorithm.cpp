#include "gpugeo_algorithm.h"

#include <QFile>
#include <QFileInfo>
#include <QIcon>
#include <QStringList>

#include <qgsapplication.h>
#include <qgsexception.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>
#include <qgsprocessingutils.h>
#include <qgswkbtypes.h>

#include "core/errors.h"
#include "core/parallel.h"
#include "provider.h"

namespace gpugeo {

QIcon Algorithm::icon() const
{
  return QIcon(svgIconPath());
}

QString Algorithm::svgIconPath() const
{
  return iconFolder() + QLatin1Char('/') + iconFile();
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
  try
  {
    callNative([&] { outputs = execute(parameters, context, feedback); });
  }
  catch (...)
  {
    deleteSinkFiles();  // execute()'s sinks are closed by now: they were its locals
    reportThreadFailures();
    throw;
  }
  mSinkFiles.clear();
  reportThreadFailures();
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
  if (!QgsProcessingAlgorithm::checkParameterValues(parameters, context, message))
    return false;
  for (const QgsProcessingParameterDefinition* definition : parameterDefinitions())
  {
    const auto* source = dynamic_cast<const QgsProcessingParameterFeatureSource*>(definition);
    if (source && source->dataTypes() == QList<int>{QgsProcessing::TypeVectorPoint} &&
        !checkPointSource(parameters, definition->name(), context, message))
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
