// gpugeo:isochrones — from a DEM (and optionally a Manning's n raster): the travel time of every cell
// of a watershed to its outlet along D8 flow paths, the watershed and its isochrone bands as polygons,
// and the time–area table of the Clark unit hydrograph. Fill, flow directions and accumulation run on
// the GPU or all processor cores; the travel times on the CPU.
#pragma once

#include <QString>

#include "adapters/dem_reader.h"
#include "gpugeo_algorithm.h"

namespace gpugeo {

class IsochronesAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  IsochronesAlgorithm* createInstance() const override;
  // The numeric parameters' checks (INTERVAL, speeds, coefficients) with messages that say what is
  // wrong, then QGIS's own checks.
  bool checkParameterValues(const QVariantMap& parameters, QgsProcessingContext& context,
                            QString* message = nullptr) const override;

  // The VELOCITY_MODEL options, in order.
  enum Model
  {
    Constant = 0,
    Slope = 1,
    Manning = 2,
  };
  // At most this many isochrone bands (the watershed's longest time / INTERVAL).
  static constexpr int kMaxBands = 10000;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  // On the main thread: the INPUT and MANNING layers' files and CRS; the numeric checks.
  bool prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                     QgsProcessingFeedback* feedback) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;
  QVariantMap postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback* feedback) override;

private:
  // An empty string when the numeric parameters are fine, else what is wrong.
  QString numericProblem(const QVariantMap& parameters, QgsProcessingContext& context) const;

  DemSource mSource;
  bool mHasManning = false;
  DemSource mManningSource;
  // What postProcessAlgorithm() needs to style and order the outputs once QGIS loads them: their
  // paths or layer ids (empty when not written), the longest time, the bands.
  QString mTimePath, mFilledPath, mDirectionPath, mAccumulationPath, mWatershedId, mBandsId;
  double mMaxTime = 1.0;
  double mInterval = 1.0;
  int mBands = 0;
};

}  // namespace gpugeo
