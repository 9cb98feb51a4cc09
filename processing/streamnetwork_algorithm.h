// gpugeo:streamnetwork — the channels of a DEM's D8 directions where the upstream area (or cell count)
// reaches a threshold, as a raster of segment ids, an optional raster of Strahler orders and one line
// per segment with its orders, downstream segment, length, drop, slope and upstream area (native
// dem/streams.h, in memory or tile by tile).
#pragma once

#include <memory>

#include <QString>

#include <qgsfields.h>

#include "adapters/dem_reader.h"
#include "adapters/tiled_rasters.h"
#include "dem/streams.h"
#include "gpugeo_algorithm.h"

class QgsFeatureSink;

namespace gpugeo {

class StreamNetworkAlgorithm : public Algorithm
{
public:
  enum ThresholdUnits
  {
    SquareKilometres = 0,
    SquareMetres = 1,
    Cells = 2
  };

  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  StreamNetworkAlgorithm* createInstance() const override;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  // On the main thread: the INPUT and DIRECTIONS layers' files and CRS.
  bool prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                     QgsProcessingFeedback* feedback) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;
  QVariantMap postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback* feedback) override;

private:
  struct Request
  {
    int band = 1, encoding = 0;
    dem::StreamThreshold threshold;
    QString segmentsPath, orderPath;  // orderPath empty: not asked for
    bool wantLines = false;
  };
  struct Inputs
  {
    DemRaster dem, directions;
  };
  // What both runs give the outputs, the log and the styles.
  struct Outcome
  {
    int64_t streamCells = 0, segments = 0, outlets = 0, pointLines = 0;
    int maxStrahler = 0;
    QString linesId;
  };
  // The OUTPUT_LINES sink: one feature per segment, its line through its cells' centres.
  class LineWriter;

  Request readRequest(const QVariantMap& parameters, QgsProcessingContext& context) const;
  Inputs openInputs(const Request& request, QgsProcessingFeedback* feedback) const;
  Outcome executeInMemory(const BackendChoice& device, const Request& request, const Inputs& in,
                          const QVariantMap& parameters, QgsProcessingContext& context,
                          QgsProcessingFeedback* feedback, StageTimes& times, FinishedRasters& finished) const;
  Outcome executeTiled(const Request& request, const Inputs& in, const TilingPlan& plan, const QVariantMap& parameters,
                       QgsProcessingContext& context, QgsProcessingFeedback* feedback, StageTimes& times,
                       FinishedRasters& finished) const;
  static void summarize(const dem::StreamNetwork& network, Outcome& outcome);
  static void logOutcome(const Request& request, const Outcome& outcome, QgsProcessingFeedback* feedback);

  DemSource mSource, mDirectionsSource;
  QString mSegmentsPath, mOrderPath, mLinesId;
  int64_t mSegments = 0;
  int mMaxStrahler = 0;
};

}  // namespace gpugeo
