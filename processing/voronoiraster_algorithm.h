// gpugeo:voronoiraster — plane Voronoi raster (allocation): every pixel labelled with its nearest
// site, with optional distance raster and region polygons.
#pragma once

#include <QVector>

#include "adapters/point_reader.h"
#include "gpugeo_algorithm.h"
#include "voronoi/voronoi_raster.h"

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

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;
  QVariantMap postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback* feedback) override;

private:
  // The raster's grid from EXTENT (transformed to `crs`) and PIXEL_SIZE, checked against the limits.
  voronoi::Grid rasterGrid(const QVariantMap& parameters, QgsProcessingContext& context,
                           const QgsCoordinateReferenceSystem& crs, const QgsRectangle& pointsExtent,
                           QgsProcessingFeedback* feedback);
  // Traces the regions of the raster at `tracedPath` (site s has value s + valueOfFirstSite) and
  // writes one multipolygon per site to OUTPUT_POLYGONS; returns its destination id.
  QString writeRegions(const QVariantMap& parameters, QgsProcessingContext& context,
                       QgsProcessingFeatureSource& source, const SiteFeatures& points, const QString& tracedPath,
                       int32_t valueOfFirstSite, QgsProcessingFeedback* feedback) const;

  // What postProcessAlgorithm() needs to style the rasters once QGIS loads them.
  QString mAllocationPath;
  QVector<int> mLabels;
  QString mDistancePath;
  double mMaxDistance = 0.0;
};

}  // namespace gpugeo
