// Default styles for the rasters the algorithms write, applied when QGIS loads them into a project:
// label rasters get one random colour per label, continuous rasters a Viridis ramp.
#pragma once

#include <QVector>

#include <qgsprocessingcontext.h>

namespace gpugeo {

// One class per label value (up to kMaxClasses, beyond which the legend would be unusable; then a
// colour ramp over the value range).
class LabelRasterStyle : public QgsProcessingLayerPostProcessorInterface
{
public:
  static constexpr int kMaxClasses = 1024;
  explicit LabelRasterStyle(QVector<int> labels);
  void postProcessLayer(QgsMapLayer* layer, QgsProcessingContext& context, QgsProcessingFeedback* feedback) override;

private:
  QVector<int> mLabels;
};

// A Viridis ramp from `minimum` to `maximum`.
class ContinuousRasterStyle : public QgsProcessingLayerPostProcessorInterface
{
public:
  ContinuousRasterStyle(double minimum, double maximum);
  void postProcessLayer(QgsMapLayer* layer, QgsProcessingContext& context, QgsProcessingFeedback* feedback) override;

private:
  double mMinimum;
  double mMaximum;
};

}  // namespace gpugeo
