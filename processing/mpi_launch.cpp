#include "mpi_launch.h"

#include <dlfcn.h>
#include <unistd.h>

#include <QDir>
#include <QFileInfo>
#include <QObject>
#include <QProcess>
#include <QProcessEnvironment>
#include <QStandardPaths>

#include <qgsexception.h>
#include <qgsprocessingcontext.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>

#include "core/errors.h"
#include "gdal/gdal_raster.h"
#include "gdal/geotiff_output.h"

namespace gpugeo {

namespace {

// Whether `mpiexec` is Open MPI's (whose options we pass), asked once.
bool isOpenMpi(const QString& mpiexec)
{
  static const bool openMpi = [&] {
    QProcess p;
    p.start(mpiexec, {QStringLiteral("--version")});
    if (!p.waitForFinished(10000))
      return false;
    const QString version = QString::fromLocal8Bit(p.readAllStandardOutput() + p.readAllStandardError());
    return version.contains(QStringLiteral("OpenRTE")) || version.contains(QStringLiteral("Open MPI")) ||
           version.contains(QStringLiteral("open-mpi.org"));
  }();
  return openMpi;
}

// One tagged line of the program into the feedback; an @error line's text into `error`.
void relay(const QString& line, QgsProcessingFeedback* feedback, QString& error, QStringList& untagged)
{
  const auto rest = [&](int n) { return line.mid(n).trimmed(); };
  if (line.startsWith(QLatin1String("@progress ")))
    feedback->setProgress(rest(10).toDouble());
  else if (line.startsWith(QLatin1String("@text ")))
    feedback->setProgressText(rest(6));
  else if (line.startsWith(QLatin1String("@info ")))
    feedback->pushInfo(rest(6));
  else if (line.startsWith(QLatin1String("@warning ")))
    feedback->pushWarning(rest(9));
  else if (line.startsWith(QLatin1String("@error ")))
    error = rest(7);
  else if (!line.trimmed().isEmpty())
  {
    feedback->pushConsoleInfo(line);
    untagged << line;
  }
}

}  // namespace

QString mpiexecPath()
{
  return QStandardPaths::findExecutable(QStringLiteral("mpiexec"));
}

QString demProgramPath()
{
  const QString forced = qEnvironmentVariable("GPUGEO_DEM_PROGRAM");
  if (!forced.isEmpty())
    return forced;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&demProgramPath), &info) && info.dli_fname)
  {
    const QString installed =
      QFileInfo(QString::fromLocal8Bit(info.dli_fname)).absoluteDir().absoluteFilePath(QStringLiteral("../bin/gpugeo_dem"));
    if (QFileInfo(installed).isExecutable())
      return QDir::cleanPath(installed);
  }
  const QString built = QStringLiteral(GPUGEO_BUILD_DEM_PROGRAM);
  return QFileInfo(built).isExecutable() ? built : QString();
}

QgsProcessingParameterDefinition* mpiProcessesParameter()
{
  const QString found = mpiexecPath().isEmpty() ? QObject::tr("mpiexec not found: runs in-process")
                                                : QObject::tr("0: in-process");
  auto* parameter = new QgsProcessingParameterNumber(
    QStringLiteral("MPI_PROCESSES"), QObject::tr("MPI processes (%1)").arg(found),
    QgsProcessingParameterNumber::Integer, 0, true, 0, 100000);
  parameter->setFlags(parameter->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  return parameter;
}

QgsProcessingParameterDefinition* mpiHostfileParameter()
{
  auto* parameter = new QgsProcessingParameterFile(QStringLiteral("MPI_HOSTFILE"), QObject::tr("MPI host file"),
                                                   QgsProcessingParameterFile::File, QString(), QVariant(), true);
  parameter->setFlags(parameter->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
  return parameter;
}

QString mpiHelp()
{
  return QObject::tr(
    "<p><b>MPI processes</b>, <b>MPI host file</b> (advanced): 1 or more runs the tool as <i>gpugeo_dem</i> (the "
    "plugin's bin/) under <i>mpiexec</i>: rank 0 holds the graphs and writes the outputs, the others process tiles, "
    "each on its GPU or cores; the outputs are the same. The hosts must see the inputs, the outputs' folder and the "
    "plugin at the same paths. Without mpiexec: in-process.</p>");
}

std::optional<MpiJob> mpiJobOf(const QVariantMap& parameters, QgsProcessingContext& context,
                               QgsProcessingFeedback* feedback)
{
  Q_UNUSED(context)
  MpiJob job;
  job.processes = parameters.value(QStringLiteral("MPI_PROCESSES")).toInt();
  if (job.processes <= 0)
    return std::nullopt;
  if (mpiexecPath().isEmpty())
  {
    feedback->pushWarning(QObject::tr("MPI_PROCESSES = %1, but mpiexec is not on the PATH: the run stays in-process "
                                      "(Debian: apt install openmpi-bin).")
                            .arg(job.processes));
    return std::nullopt;
  }
  if (demProgramPath().isEmpty())
    throw QgsProcessingException(QObject::tr("MPI_PROCESSES is set but the plugin's bin/gpugeo_dem is missing "
                                             "(reinstall the plugin, or set GPUGEO_DEM_PROGRAM)."));
  job.hostfile = parameters.value(QStringLiteral("MPI_HOSTFILE")).toString();
  if (!job.hostfile.isEmpty() && !QFileInfo::exists(job.hostfile))
    throw QgsProcessingException(QObject::tr("The MPI host file %1 does not exist.").arg(job.hostfile));
  return job;
}

void runDemProgram(const MpiJob& job, const QString& tool, const QStringList& arguments, const QStringList& outputs,
                   QgsProcessingFeedback* feedback)
{
  const auto removeOutputs = [&] {
    for (const QString& path : outputs)
      if (!path.isEmpty())
        gdal::deleteGeoTiff(path.toStdString());
  };
  const QString mpiexec = mpiexecPath();
  QStringList command{QStringLiteral("-n"), QString::number(job.processes)};
  QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
  if (isOpenMpi(mpiexec))
  {
    if (job.hostfile.isEmpty())
      command << QStringLiteral("--oversubscribe");
    // Open MPI refuses root unless told; QGIS run as root (a container, CI) is told.
    if (geteuid() == 0)
    {
      environment.insert(QStringLiteral("OMPI_ALLOW_RUN_AS_ROOT"), QStringLiteral("1"));
      environment.insert(QStringLiteral("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"), QStringLiteral("1"));
    }
  }
  if (!job.hostfile.isEmpty())
    command << QStringLiteral("--hostfile") << job.hostfile;
  command << demProgramPath() << tool << arguments << QStringLiteral("--machine-readable");
  feedback->pushInfo(QObject::tr("Running %1 processes under MPI: %2 %3")
                       .arg(job.processes)
                       .arg(mpiexec, command.join(QLatin1Char(' '))));

  QProcess process;
  process.setProcessEnvironment(environment);
  process.setProcessChannelMode(QProcess::MergedChannels);
  process.start(mpiexec, command);
  if (!process.waitForStarted(30000))
    throw QgsProcessingException(QObject::tr("mpiexec could not start: %1").arg(process.errorString()));
  QString error, pending;
  QStringList untagged;
  bool canceled = false;
  const auto readLines = [&] {
    pending += QString::fromLocal8Bit(process.readAll());
    int end;
    while ((end = pending.indexOf(QLatin1Char('\n'))) >= 0)
    {
      relay(pending.left(end), feedback, error, untagged);
      pending.remove(0, end + 1);
    }
  };
  while (process.state() != QProcess::NotRunning)
  {
    process.waitForReadyRead(100);
    readLines();
    if (!canceled && feedback->isCanceled())
    {
      // mpiexec passes SIGTERM on to the ranks; rank 0 removes the outputs and the scratch folder.
      canceled = true;
      process.terminate();
      if (!process.waitForFinished(15000))
        process.kill();
    }
  }
  readLines();
  if (!pending.isEmpty())
    relay(pending, feedback, error, untagged);
  if (canceled)
  {
    removeOutputs();
    throw Canceled();
  }
  if (process.exitStatus() != QProcess::NormalExit || process.exitCode() != 0)
  {
    removeOutputs();
    if (error.isEmpty())
      error = untagged.mid(std::max(0, int(untagged.size()) - 6)).join(QLatin1Char('\n'));
    throw QgsProcessingException(QObject::tr("The MPI job failed (exit code %1): %2").arg(process.exitCode()).arg(error));
  }
}

double rasterMaximum(const QString& path)
{
  const gdal::Dataset dataset = gdal::openQuietly(path.toStdString(), GA_ReadOnly);
  if (!dataset)
    return 0.0;
  // Min and max only: no statistics kept in a sidecar file beside the output.
  double range[2] = {0.0, 0.0};
  GDALRasterBandH band = GDALGetRasterBand(dataset.get(), 1);
  if (!band || GDALComputeRasterMinMax(band, FALSE, range) != CE_None)
    return 0.0;
  return range[1];
}

}  // namespace gpugeo
