// gpugeo:qtmvoronoi — spherical Voronoi on a QTM grid: every cell labelled with its nearest site by
// great-circle distance; region polygons, cell polygons and a global lon/lat raster.
#pragma once

#include <QVector>

#include "gpugeo_algorithm.h"

namespace gpugeo {

class QtmVoronoiAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  QtmVoronoiAlgorithm* createInstance() const override;

  // OUTPUT_CELLS is refused above this level (8,388,608 cells).
  static constexpr int kMaxCellsLevel = 10;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;
  QVariantMap postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback* feedback) override;

private:
  QString mRasterPath;
  QVector<int> mRasterLabels;
};

}  // namespace gpugeo
