// gpugeo:snappourpoints — pour points (gauges, culverts) moved onto the cell of largest flow
// accumulation within a distance, as points at the cells' centres with the snapped values.
#pragma once

#include <QString>

#include "adapters/dem_reader.h"
#include "gpugeo_algorithm.h"

namespace gpugeo {

class SnapPourPointsAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  SnapPourPointsAlgorithm* createInstance() const override;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  // On the main thread: the ACCUMULATION layer's file and CRS.
  bool prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                     QgsProcessingFeedback* feedback) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;

private:
  DemSource mSource;
};

}  // namespace gpugeo
