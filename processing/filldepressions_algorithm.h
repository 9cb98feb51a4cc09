// gpugeo:filldepressions — the depression-filled DEM: every cell raised to the lowest level at which
// water standing on it could leave the grid (Priority-Flood's result, bit for bit).
#pragma once

#include <QString>

#include "adapters/dem_reader.h"
#include "adapters/tiled_rasters.h"
#include "gpugeo_algorithm.h"

namespace gpugeo {

class FillDepressionsAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  FillDepressionsAlgorithm* createInstance() const override;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  // On the main thread: the INPUT layer's file and CRS.
  bool prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                     QgsProcessingFeedback* feedback) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;

private:
  // The in-memory run: the whole DEM read, filled (and its flats raised), written.
  QVariantMap executeInMemory(const BackendChoice& device, const QVariantMap& parameters, QgsProcessingContext& context,
                              QgsProcessingFeedback* feedback, StageTimes& times);
  // The tiled run (adapters/tiled_rasters.h): the DEM counted, then filled tile by tile in two passes;
  // with FLATS, the filled DEM, its flat mask and its raised flats through the scratch folder.
  QVariantMap executeTiled(const DemRaster& raster, const TilingPlan& plan, int flats, const QString& outputPath,
                           QgsProcessingFeedback* feedback, StageTimes& times);

  DemSource mSource;
};

}  // namespace gpugeo
