// gpugeo:watersheds — from a D8 flow direction raster and a layer of outlet points (gauges,
// culverts), each outlet snapped to the largest upstream area within a distance, the watershed of
// every outlet: a raster of outlet numbers and one polygon per outlet with its attributes, its own
// area and its total area where outlets nest (native dem/watersheds.h, in memory or tile by tile).
#pragma once

#include <QString>
#include <QVector>

#include <qgsfeature.h>
#include <qgsfields.h>
#include <qgspointxy.h>

#include "adapters/dem_reader.h"
#include "adapters/grid_points.h"
#include "adapters/tiled_rasters.h"
#include "core/polygon_rings.h"
#include "dem/watersheds.h"
#include "gpugeo_algorithm.h"

namespace gpugeo {

class WatershedsAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  WatershedsAlgorithm* createInstance() const override;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  bool prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                     QgsProcessingFeedback* feedback) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;
  QVariantMap postProcessAlgorithm(QgsProcessingContext& context, QgsProcessingFeedback* feedback) override;

private:
  // An outlet point (its feature's attributes, the point in the raster's CRS and its cell), then the
  // cell it snapped to.
  struct Outlet : GridPoint
  {
    int64_t cell = -1;
  };
  struct Request
  {
    int band = 1, encoding = 0;
    double snapDistance = 0;
    QString labelsPath;
    bool wantPolygons = false;
  };
  // What both runs give the writing step.
  struct Outcome
  {
    dem::Watersheds sheds;
    BandPolygons polygons;  // set k: outlet k's own watershed (in memory; tiled runs write as they trace)
    QString polygonsId;     // OUTPUT_POLYGONS, when a tiled run wrote them as traced
  };

  Request readRequest(const QVariantMap& parameters, QgsProcessingContext& context) const;
  // Every point of OUTLETS in the raster's CRS with its cell; refuses points off the raster, naming
  // them, and a layer without a point.
  std::vector<Outlet> readOutlets(const QVariantMap& parameters, QgsProcessingContext& context,
                                  const DemRaster& raster, QgsFields& fields, QgsProcessingFeedback* feedback) const;
  Outcome executeInMemory(const BackendChoice& device, const Request& request, const DemRaster& raster,
                          std::vector<Outlet>& outlets, QgsProcessingFeedback* feedback, StageTimes& times,
                          FinishedRasters& finished);
  Outcome executeTiled(const Request& request, const DemRaster& raster, const TilingPlan& plan,
                       std::vector<Outlet>& outlets, const QVariantMap& parameters, QgsProcessingContext& context,
                       QgsProcessingFeedback* feedback, StageTimes& times, FinishedRasters& finished);
  // The log of the snapped outlets and the watersheds.
  static void logOutlets(const std::vector<Outlet>& outlets, const DemRaster& raster, const dem::Watersheds& sheds,
                         QgsProcessingFeedback* feedback);

  // OUTPUT_POLYGONS: one feature per outlet, its geometry from set k of the polygons.
  class PolygonWriter
  {
  public:
    PolygonWriter(const WatershedsAlgorithm& algorithm, const QVariantMap& parameters, QgsProcessingContext& context,
                  const DemRaster& raster, const QgsFields& outletFields, const std::vector<Outlet>& outlets,
                  const dem::Watersheds& sheds);
    ~PolygonWriter();
    void write(int32_t k, const BandPolygons& polygons, std::size_t index);
    const QString& id() const { return mId; }

  private:
    const QVariantMap& mParameters;
    const DemRaster& mRaster;
    const std::vector<Outlet>& mOutlets;
    const dem::Watersheds& mSheds;
    QgsFields mFields;
    QString mId;
    std::unique_ptr<QgsFeatureSink> mSink;
  };

  DemSource mSource;
  QgsFields mOutletFields;  // the OUTLETS layer's, for the polygons
  // For postProcessAlgorithm: the label raster's path and its labels (the styles' classes).
  QString mLabelsPath;
  QString mPolygonsId;  // OUTPUT_POLYGONS when written: drawn as outlines over the labels
  QVector<int> mLabels;
};

}  // namespace gpugeo
