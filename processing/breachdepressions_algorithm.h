// gpugeo:breachdepressions — the breached DEM: each depression drained by the shortest, then cheapest,
// channel within a maximum length and depth, what no channel can drain filled, the flats raised
// (native dem/breach.h, in memory or tile by tile); optionally the change from the input.
#pragma once

#include <QString>

#include "adapters/dem_reader.h"
#include "adapters/tiled_rasters.h"
#include "dem/breach.h"
#include "gpugeo_algorithm.h"

namespace gpugeo {

class BreachDepressionsAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  BreachDepressionsAlgorithm* createInstance() const override;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  // On the main thread: the INPUT layer's file and CRS.
  bool prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                     QgsProcessingFeedback* feedback) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;
  QVariantMap postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback* feedback) override;

public:
  // What the run changed, gathered row by row against the input (the log and the outputs).
  struct Tally
  {
    int64_t lowered = 0, raised = 0;
    double deepestCut = 0.0, highestRaise = 0.0;  // m
    double volumeRemoved = 0.0, volumeAdded = 0.0;  // m³
    void addRow(const float* dem, const float* breached, int64_t count, double cellArea);
  };

private:
  struct Request
  {
    int band = 1;
    dem::BreachLimits limits;
    QString outputPath, changePath;  // changePath empty: not asked for
  };
  struct Outcome
  {
    dem::BreachCounts counts;
    int64_t valid = 0;  // the DEM's valid cells
  };
  Request readRequest(const QVariantMap& parameters, QgsProcessingContext& context) const;
  // The in-memory run: the DEM read, breached on the device, written.
  Outcome executeInMemory(const BackendChoice& device, const Request& request,
                          QgsProcessingFeedback* feedback, StageTimes& times, Tally& tally,
                          FinishedRasters& finished) const;
  // The tiled run (dem/tiled/tiled_dem.h's breachDepressionsTiled) through the scratch folder.
  Outcome executeTiled(const DemRaster& raster, const TilingPlan& plan, const Request& request,
                       QgsProcessingFeedback* feedback, StageTimes& times, Tally& tally,
                       FinishedRasters& finished) const;
  static void logOutcome(const dem::BreachCounts& counts, const Tally& tally, int64_t valid,
                         QgsProcessingFeedback* feedback);

  DemSource mSource;
  QString mChangePath;
  double mChangeRange = 0.0;
};

}  // namespace gpugeo
