// Default styles for the layers the algorithms write, applied when QGIS loads them into a project:
// label rasters get one random colour per label, continuous rasters a Viridis ramp, isochrone bands
// a colour each, a watershed its outline, stream lines a width by order. Styles of one run can also order its layers in the layer
// tree (QGIS 3.22 has no sort key for the layers a run loads).
#pragma once

#include <memory>

#include <QHash>
#include <QString>
#include <QVector>

#include <qgsprocessingcontext.h>

namespace gpugeo {

// The ranks of one run's layers (by layer id) in the layer tree: a higher rank lies above a lower one.
// Shared by the styles of the run; each layer takes its place among those already loaded.
using LoadOrder = std::shared_ptr<QHash<QString, int>>;
void placeByRank(QgsMapLayer* layer, int rank, const LoadOrder& order, QgsProcessingContext& context);

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

// QGIS's default style, the layer only placed by `rank` among its run's (when given an order).
// The styles below set their renderer first.
class LayerPlace : public QgsProcessingLayerPostProcessorInterface
{
public:
  LayerPlace(LoadOrder order, int rank);
  void postProcessLayer(QgsMapLayer* layer, QgsProcessingContext& context, QgsProcessingFeedback* feedback) final;

protected:
  virtual void style(QgsMapLayer*) {}

private:
  LoadOrder mOrder;
  int mRank;
};

// A colour ramp of QGIS's default style (Viridis unless named) from `minimum` to `maximum`.
class ContinuousRasterStyle : public LayerPlace
{
public:
  ContinuousRasterStyle(double minimum, double maximum, LoadOrder order = nullptr, int rank = 0,
                        const QString& ramp = QStringLiteral("Viridis"));

private:
  void style(QgsMapLayer* layer) override;
  double mMinimum;
  double mMaximum;
  QString mRamp;
};

// Polygons drawn as their outline only (a watershed over the bands it holds).
class OutlineStyle : public LayerPlace
{
public:
  using LayerPlace::LayerPlace;

private:
  void style(QgsMapLayer* layer) override;
};

// Stream lines: blue, wider with their `strahler` field (0.2 mm for order 1, 0.3 mm more an order).
class StreamLineStyle : public LayerPlace
{
public:
  using LayerPlace::LayerPlace;

private:
  void style(QgsMapLayer* layer) override;
};

// Isochrone bands, a Viridis colour each by their `band` field (1 .. bands), labelled with their time
// range in minutes; past kMaxClasses bands, ten classes of equal width.
class BandStyle : public LayerPlace
{
public:
  static constexpr int kMaxClasses = 64;
  BandStyle(int bands, double interval, LoadOrder order, int rank);

private:
  void style(QgsMapLayer* layer) override;
  int mBands;
  double mInterval;
};

}  // namespace gpugeo
