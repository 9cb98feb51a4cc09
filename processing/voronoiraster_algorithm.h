// gpugeo:voronoiraster — plane Voronoi raster (allocation): every pixel labelled with its nearest
// site, with optional distance raster and region polygons.
#pragma once

#include <QVector>

#include "gpugeo_algorithm.h"

namespace gpugeo {

class VoronoiRasterAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  VoronoiRasterAlgorithm* createInstance() const override;
  bool checkParameterValues(const QVariantMap& parameters, QgsProcessingContext& context,
                            QString* message = nullptr) const override;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  QVariantMap processAlgorithm(const QVariantMap& parameters, QgsProcessingContext& context,
                               QgsProcessingFeedback* feedback) override;
  QVariantMap postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback* feedback) override;

private:
  // What postProcessAlgorithm() needs to style the rasters once QGIS loads them.
  QString mAllocationPath;
  QVector<int> mLabels;
  QString mDistancePath;
  double mMaxDistance = 0.0;
};

}  // namespace gpugeo
