// gpugeo:hand — height above the nearest drainage: from a DEM, its D8 flow directions and a stream
// raster, each cell's height above the stream cell its flow path reaches first, and the distance
// along the path to it (native dem/hand.h, in memory or tile by tile).
#pragma once

#include <QString>

#include "adapters/dem_reader.h"
#include "adapters/tiled_rasters.h"
#include "dem/hand.h"
#include "gpugeo_algorithm.h"

namespace gpugeo {

class HandAlgorithm : public Algorithm
{
public:
  // The outputs' nodata value (heights can be negative where the DEM was not filled).
  static constexpr float kNoData = -9999.0f;

  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  HandAlgorithm* createInstance() const override;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  // On the main thread: the INPUT, DIRECTIONS and STREAMS layers' files and CRS.
  bool prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                     QgsProcessingFeedback* feedback) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;
  QVariantMap postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback* feedback) override;

private:
  struct Request
  {
    int band = 1, encoding = 0;
    QString heightPath, distancePath;  // distancePath empty: not asked for
  };
  // The three rasters, on the DEM's grid.
  struct Inputs
  {
    DemRaster dem, directions, streams;
  };
  // What both runs give the log and the styles.
  struct Outcome
  {
    int64_t streamCells = 0, drained = 0, undrained = 0;
    double heightTop = 1, distanceTop = 1;  // about the 99th percentiles, for the styles
  };

  Request readRequest(const QVariantMap& parameters, QgsProcessingContext& context) const;
  Inputs openInputs(const Request& request, QgsProcessingFeedback* feedback) const;
  Outcome executeInMemory(const BackendChoice& device, const Request& request, const Inputs& in,
                          QgsProcessingFeedback* feedback, StageTimes& times, FinishedRasters& finished) const;
  Outcome executeTiled(const Request& request, const Inputs& in, const TilingPlan& plan,
                       QgsProcessingFeedback* feedback, StageTimes& times, FinishedRasters& finished) const;
  static void logOutcome(const Outcome& outcome, QgsProcessingFeedback* feedback);

  DemSource mSource, mDirectionsSource, mStreamsSource;
  QString mHeightPath, mDistancePath;
  double mHeightTop = 1, mDistanceTop = 1;
};

}  // namespace gpugeo
