// gpugeo:dbscan — DBSCAN clustering of points on the GPU or all cores, a drop-in for QGIS's
// native:dbscanclustering (same parameters, outputs and fields).
#pragma once

#include "gpugeo_algorithm.h"

namespace gpugeo {

class DbscanAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  DbscanAlgorithm* createInstance() const override;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;
};

}  // namespace gpugeo
