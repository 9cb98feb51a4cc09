// gpugeo:flowaccumulation — from a D8 flow direction raster, every cell's upstream cell count (itself
// included) and upstream area in m² or km².
#pragma once

#include <QString>

#include "adapters/dem_reader.h"
#include "adapters/tiled_rasters.h"
#include "gpugeo_algorithm.h"

namespace gpugeo {

struct MpiJob;

class FlowAccumulationAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  FlowAccumulationAlgorithm* createInstance() const override;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  // On the main thread: the INPUT layer's file and CRS.
  bool prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                     QgsProcessingFeedback* feedback) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;
  QVariantMap postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback* feedback) override;

private:
  // What both runs take from the parameters.
  struct Request
  {
    int band = 1, encoding = 0;
    bool squareKilometres = false;
    QString cellsPath, areaPath;  // areaPath empty: OUTPUT_AREA not asked for
  };
  QVariantMap executeInMemory(const BackendChoice& device, const Request& request, QgsProcessingFeedback* feedback,
                              StageTimes& times);
  // The tiled run (adapters/tiled_rasters.h): the directions checked, then accumulated tile by tile.
  // MPI_PROCESSES: the run by gpugeo_dem under mpiexec (mpi_launch.h).
  QVariantMap executeUnderMpi(const MpiJob& job, const Request& request, const DemRaster& raster,
                              const TilingPlan& plan, const QVariantMap& parameters, QgsProcessingContext& context,
                              QgsProcessingFeedback* feedback);
  QVariantMap executeTiled(const Request& request, const DemRaster& raster, const TilingPlan& plan,
                           QgsProcessingFeedback* feedback, StageTimes& times);

  DemSource mSource;
  // What postProcessAlgorithm() needs to style the rasters once QGIS loads them: a ramp from the
  // smallest value to the 99th percentile, so that the channels stand out.
  QString mCellsPath;
  double mCellsTop = 1.0;
  QString mAreaPath;
  double mAreaBottom = 0.0;
  double mAreaTop = 1.0;
};

}  // namespace gpugeo
