// gpugeo:flowdirection — D8 flow directions of a DEM (steepest descent by true distances, per-row
// cell sizes), with flats drained after Barnes, Lehman & Mulla (2014).
#pragma once

#include <QString>
#include <QVector>

#include "adapters/dem_reader.h"
#include "adapters/tiled_rasters.h"
#include "gpugeo_algorithm.h"

namespace gpugeo {

class FlowDirectionAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  FlowDirectionAlgorithm* createInstance() const override;

  // The ENCODING options, in order.
  enum Encoding
  {
    Esri = 0,       // 1 = E, 2 = SE, 4 = S, 8 = SW, 16 = W, 32 = NW, 64 = N, 128 = NE; 0 = no direction
    Clockwise = 1,  // 0 = E, 1 = SE ... 7 = NE; 8 = no direction
  };
  // The value a direction (0..7, dem::kNoFlow, dem::kNoData) has in the encoding; nodata is 255 in both.
  static uint8_t encode(uint8_t direction, int encoding);
  // The ENCODING parameter (shared with gpugeo:flowaccumulation) and its help.
  static QgsProcessingParameterDefinition* encodingParameter(const QString& description);
  static QString encodingHelp();

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
  QVariantMap executeInMemory(const BackendChoice& device, const QVariantMap& parameters, QgsProcessingContext& context,
                              QgsProcessingFeedback* feedback, StageTimes& times);
  // The tiled run (adapters/tiled_rasters.h): the DEM counted, the flat mask tile by tile (into the
  // scratch folder) when flats are resolved, then D8 tile by tile.
  QVariantMap executeTiled(const DemRaster& raster, const TilingPlan& plan, bool resolveFlats, int encoding,
                           const QString& outputPath, QgsProcessingFeedback* feedback, StageTimes& times);
  // Logs what the directions hold and keeps the codes present for the style.
  void reportDirections(const int64_t perDirection[9], int64_t drainingOut, bool resolveFlats, int encoding,
                        QgsProcessingFeedback* feedback);

  DemSource mSource;
  // What postProcessAlgorithm() needs to style the raster once QGIS loads it.
  QString mOutputPath;
  QVector<int> mCodes;
};

}  // namespace gpugeo
