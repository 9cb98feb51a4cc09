// What every GPU Geoprocessing algorithm shares: the DEVICE parameter and the backend choice, the
// bridge from QgsFeedback to the native core's cancel and progress, the translation of native
// errors into QgsProcessingException, and the log of stage times.
#pragma once

#include <functional>
#include <memory>

#include <qgsfeaturesink.h>
#include <qgsprocessingalgorithm.h>

#include "core/backend.h"
#include "core/run_control.h"
#include "core/stage_times.h"
#include "gdal/output_format.h"

namespace gpugeo {

struct DemSource;

namespace gdal {
struct TilingPlan;
}
using gdal::TilingPlan;

class Algorithm : public QgsProcessingAlgorithm
{
public:
  QIcon icon() const override;
  QString svgIconPath() const override;
  // This algorithm's section of the documentation shipped with the plugin (help/index.html).
  QString helpUrl() const override;
  // QGIS's checks, then checkPointSource() for every feature-source parameter that asks for points.
  bool checkParameterValues(const QVariantMap& parameters, QgsProcessingContext& context,
                            QString* message = nullptr) const override;

protected:
  // The file name of the algorithm's icon in icons/.
  virtual QString iconFile() const = 0;

  // Checks what every algorithm refuses (parameter_checks.h: numbers, CRS, extents, outputs over
  // inputs or over each other), then prepareInputs(). On the main thread, before anything is read
  // or written; again here because a model or a script may skip checkParameterValues().
  bool prepareAlgorithm(const QVariantMap& parameters, QgsProcessingContext& context,
                        QgsProcessingFeedback* feedback) final;
  // What an algorithm fetches on the main thread (layers and their files) before execute().
  virtual bool prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                             QgsProcessingFeedback* feedback);

  // The algorithm's work. Any exception it throws reaches QGIS as a QgsProcessingException with a
  // message a user can act on (QGIS catches nothing else: another type would end the process).
  virtual QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                              QgsProcessingFeedback* feedback) = 0;
  QVariantMap processAlgorithm(const QVariantMap& parameters, QgsProcessingContext& context,
                               QgsProcessingFeedback* feedback) final;

  // The advanced enum parameter DEVICE: Auto, CPU, GPU (in that order: DEVICE=1 is the CPU).
  void addDeviceParameter();
  // The help paragraph about DEVICE.
  static QString deviceHelp();
  // The advanced COG and CREATION_OPTIONS parameters of every algorithm that writes rasters, their
  // help paragraph, and the format they ask for (gdal::outputFormat; prepareAlgorithm refuses options
  // GDAL does not take before anything is written).
  void addOutputFormatParameters();
  static QString outputFormatHelp();
  gdal::OutputFormat outputFormat(const QVariantMap& parameters, QgsProcessingContext& context) const;
  // The DEM tools' advanced MEMORY_BUDGET (MiB, 0: automatic) and TILED (tile by tile even when
  // the DEM fits) parameters, the output format's (above) and the MPI parameters (mpi_launch.h), and
  // their help paragraphs. Without `mpi`, the MPI parameters are left out (a tool gpugeo_dem does not
  // run yet).
  void addTilingParameters(bool mpi = true);
  static QString tilingHelp(bool mpi = true);
  // The arguments every tool of gpugeo_dem takes, from those parameters: the band, the layer's CRS,
  // DEVICE, MEMORY_BUDGET, COG, CREATION_OPTIONS, the plan's tiles where it is tiled (so that the job's tiles are those of
  // this process's tiled run, and so its outputs), and QGIS's temporary folder for the scratch where
  // the job stays on this machine (with a host file the program's default, the outputs' folder).
  QStringList programArguments(const QVariantMap& parameters, QgsProcessingContext& context,
                               const DemSource& source, int band, const TilingPlan& plan) const;

  // Runs work(backend) on the resolved backend; under DEVICE=Auto a GPU failure (not a missing GPU,
  // which Auto never chose) runs it again on the CPU with a warning.
  static void runWithCpuFallback(const BackendChoice& device, QgsProcessingFeedback* feedback,
                                 const std::function<void(Backend)>& work);
  // A tiled run (adapters/tiled_rasters.h) on the device: run(plan) with plan.options.backend the
  // device's, then, as runWithCpuFallback, again on the CPU where Auto's GPU failed.
  static void runTiled(const BackendChoice& device, const TilingPlan& plan, QgsProcessingFeedback* feedback,
                       const std::function<void(const TilingPlan&)>& run);

  // Resolves DEVICE and logs the backend and device; throws QgsProcessingException when the GPU
  // was asked for and cannot be used, with the reason.
  BackendChoice resolveDevice(const QVariantMap& parameters, QgsProcessingContext& context,
                              QgsProcessingFeedback* feedback) const;
  // Threads for the CPU backend: QGIS's "max threads" setting, else all cores.
  static int cpuThreads();

  // The native core's cancel flag: feedback->isCanceled().
  static RunControl runControl(QgsFeedback* feedback);

  static void logStageTimes(const StageTimes& times, QgsProcessingFeedback* feedback);
  // Whether an optional destination parameter was given a value (QGIS leaves it unset when skipped).
  static bool outputRequested(const QVariantMap& parameters, const QString& name);

  // parameterAsSink, throwing QgsProcessingException when the sink cannot be made. A file the sink
  // creates or overwrites whole (a path without a layer name) is deleted again, sidecars included,
  // unless the run succeeds: a failed or canceled run leaves no half-written layer behind.
  std::unique_ptr<QgsFeatureSink> createSink(const QVariantMap& parameters, const QString& name,
                                             QgsProcessingContext& context, QString& destination,
                                             const QgsFields& fields, QgsWkbTypes::Type geometryType,
                                             const QgsCoordinateReferenceSystem& crs,
                                             QgsFeatureSink::SinkFlags flags = QgsFeatureSink::SinkFlags()) const;

  // Refuses a source parameter that is not a point layer, with a message naming what it is. The
  // parameter's type filter holds in the GUI only; qgis_process and the API need this check.
  bool checkPointSource(const QVariantMap& parameters, const QString& name, QgsProcessingContext& context,
                        QString* message) const;
  void requirePointSource(const QgsProcessingFeatureSource& source, const QString& name) const;

private:
  // Runs `work`, turning every exception other than QgsProcessingException into one.
  static void callNative(const std::function<void()>& work);
  void deleteSinkFiles();

  mutable QStringList mSinkFiles;  // written by createSink, which the const helpers of execute() call
};

}  // namespace gpugeo
