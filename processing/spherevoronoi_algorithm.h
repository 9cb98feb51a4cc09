// gpugeo:spherevoronoi — exact spherical Voronoi polygons of points on the Earth, through the convex
// hull of their unit vectors (the spherical Delaunay dual), as EPSG:4326 polygons with areas.
#pragma once

#include "gpugeo_algorithm.h"
#include "sphere/spherical_voronoi.h"

namespace gpugeo {

class SphereVoronoiAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  SphereVoronoiAlgorithm* createInstance() const override;

  // The most sites accepted: a million take about 1.5 GB and 6 s on 2 cores.
  static constexpr int64_t kMaxSites = 10'000'000;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;

private:
  static void logMeshSource(Backend backend, const sphere::SphericalVoronoiReport& report,
                            QgsProcessingFeedback* feedback);
};

}  // namespace gpugeo
