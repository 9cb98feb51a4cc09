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
// The plugin's documentation, help/index.html in the installed plugin folder (in the build folder
// before installation); empty when it is not there.
QString helpFile();
// An algorithm's anchor in it: its id with '-' for ':' (plugin/make_help.py writes the same).
QString helpAnchor(const QString& algorithmId);

}  // namespace gpugeo
