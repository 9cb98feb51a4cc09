// The "GPU Geoprocessing" processing provider (id gpugeo): registers one algorithm per family.
#pragma once

#include <qgsprocessingprovider.h>

namespace gpugeo {

class Provider : public QgsProcessingProvider
{
public:
  QString id() const override;
  QString name() const override;
  QString longName() const override;
  QIcon icon() const override;
  QString svgIconPath() const override;
  QStringList supportedOutputRasterLayerExtensions() const override;
  QString defaultRasterFileExtension() const override;

protected:
  void loadAlgorithms() override;
};

// The folder of the installed plugin's icons (next to lib/, where this library lives).
QString iconFolder();

}  // namespace gpugeo
