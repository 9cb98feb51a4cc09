// gpugeo:pointneighbours — for every point, its neighbours within a radius (or its k nearest): the
// count, the nearest other point and the mean distance; optionally every pair.
#pragma once

#include "gpugeo_algorithm.h"

namespace gpugeo {

class PointNeighboursAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  PointNeighboursAlgorithm* createInstance() const override;

  // The default cap on OUTPUT_PAIRS (MAX_PAIRS).
  static constexpr int kDefaultMaxPairs = 100'000'000;
  // Each point's 8 nearest: a default that runs on any layer (a radius depends on the layer's units).
  static constexpr int kDefaultK = 8;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;
};

}  // namespace gpugeo
