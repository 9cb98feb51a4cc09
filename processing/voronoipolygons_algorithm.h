// gpugeo:voronoipolygons — exact Voronoi polygons of a point layer clipped to its buffered extent: a
// drop-in for qgis:voronoipolygons (the same parameters and output, plus later QGIS's tolerance and
// attribute switch) that scales to millions of points.
#pragma once

#include "gpugeo_algorithm.h"

namespace gpugeo {

class VoronoiPolygonsAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  VoronoiPolygonsAlgorithm* createInstance() const override;

  // The most points accepted: a million take about 0.5 GB.
  static constexpr int64_t kMaxSites = 50'000'000;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;
};

}  // namespace gpugeo
