// gpugeo:subbasins — the catchment of every stream segment of a segment raster (gpugeo:streamnetwork's):
// each cell labelled with the segment of the first stream cell down its D8 path, as a raster and one
// polygon per segment keyed by its id (native dem/watersheds.h with each segment's exit as an outlet,
// tiled/tiled_dem.h's segmentExits; in memory or tile by tile).
#pragma once

#include <memory>

#include <QString>
#include <QVector>

#include <qgsfields.h>

#include "adapters/dem_reader.h"
#include "adapters/tiled_rasters.h"
#include "core/polygon_rings.h"
#include "dem/tiled/tiled_dem.h"
#include "dem/watersheds.h"
#include "gpugeo_algorithm.h"

class QgsFeatureSink;

namespace gpugeo {

class SubbasinsAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  SubbasinsAlgorithm* createInstance() const override;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  // On the main thread: the INPUT and STREAMS layers' files and CRS.
  bool prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                     QgsProcessingFeedback* feedback) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;
  QVariantMap postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback* feedback) override;

private:
  struct Request
  {
    int band = 1, encoding = 0;
    QString labelsPath;
    bool wantPolygons = false;
  };
  struct Inputs
  {
    DemRaster directions, streams;
  };
  // What both runs give the outputs and the log.
  struct Outcome
  {
    dem::tiled::SegmentExits exits;
    dem::Watersheds sheds;  // labels: k + 1 for exit k (in memory only)
    QString polygonsId;
  };
  // OUTPUT_POLYGONS: one feature per segment, its geometry from set k of the polygons.
  class PolygonWriter;

  Request readRequest(const QVariantMap& parameters, QgsProcessingContext& context) const;
  Inputs openInputs(const Request& request, QgsProcessingFeedback* feedback) const;
  Outcome executeInMemory(const BackendChoice& device, const Request& request, const Inputs& in,
                          const QVariantMap& parameters, QgsProcessingContext& context,
                          QgsProcessingFeedback* feedback, StageTimes& times, FinishedRasters& finished) const;
  Outcome executeTiled(const Request& request, const Inputs& in, const TilingPlan& plan, const QVariantMap& parameters,
                       QgsProcessingContext& context, QgsProcessingFeedback* feedback, StageTimes& times,
                       FinishedRasters& finished) const;
  static void logOutcome(const Outcome& outcome, QgsProcessingFeedback* feedback);

  DemSource mSource, mStreamsSource;
  QString mLabelsPath, mPolygonsId;  // the polygons drawn as outlines over the labels
  QVector<int> mLabels;
};

}  // namespace gpugeo
