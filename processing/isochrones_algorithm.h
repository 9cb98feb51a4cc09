// gpugeo:isochrones — from a DEM (and optionally a Manning's n raster): the travel time of every cell
// of a watershed to its outlet along D8 flow paths, the watershed and its isochrone bands as polygons,
// and the time–area table of the Clark unit hydrograph. Fill, flow directions and accumulation run on
// the GPU or all processor cores; the travel times on the CPU.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <QString>

#include <qgsfeaturesink.h>
#include <qgsfields.h>
#include <qgspointxy.h>

#include "adapters/band_geometry.h"

#include "adapters/dem_reader.h"
#include "core/polygon_rings.h"
#include "core/stage_times.h"
#include "dem/travel_time.h"
#include "gpugeo_algorithm.h"

namespace gpugeo {

struct MpiJob;

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
  // The nodata values of TRAVEL_TIME and ACCUMULATION.
  static constexpr double kTimeNoData = -1.0;
  static constexpr int32_t kCellsNoData = -1;

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
  // The parameters, read once.
  struct Request
  {
    int band = 1;
    double interval = 0, snapDistance = 0;
    dem::VelocityModel model;  // without the Manning raster (each path reads its own)
    QString timePath, filledPath, directionPath, accumulationPath;
    bool wantWatershed = false, wantIsochrones = false, wantTable = false;
    std::optional<QgsPointXY> outletPoint;  // in the DEM's CRS
    std::optional<std::pair<int64_t, int64_t>> outletCell;  // column, row
    // HYDROGRAPH: the rainfall excess, a table's series (mm/h per interval) or, when it is empty, a
    // constant intensity (mm/h) for a duration (minutes).
    bool wantHydrograph = false;
    std::vector<double> excessSeries;
    double excessIntensity = 0, excessDuration = 0;
  };
  // What either path found: for the log, the features and the table.
  struct Outcome
  {
    int64_t outlet = -1, outletCells = 0, raisedCells = 0, validCells = 0;
    double interval = 0;
    int32_t bands = 0;
    std::vector<int64_t> bandCells;
    std::vector<double> bandArea;  // m²
    int64_t watershedCells = 0;
    double watershedArea = 0;  // m²
    double minTime = 0, maxTime = 0, minSpeed = 0, maxSpeed = 0;
    BandPolygons bandPolygons, watershed;
    QString isochronesId;  // ISOCHRONES, when written band by band as they were traced (bandPolygons empty)
  };
  // ISOCHRONES: one feature per band (none for a band without cells).
  class BandWriter
  {
  public:
    BandWriter(const IsochronesAlgorithm& algorithm, const QVariantMap& parameters, QgsProcessingContext& context,
               const DemRaster& raster);
    ~BandWriter();
    // Band `band` (of `interval` minutes, `cells` cells, `area` m²) from band `index` of `polygons`.
    void write(int band, double interval, int64_t cells, double area, const BandPolygons& polygons, size_t index);
    // The same from one band's polygons, freed once they are a geometry (before the sink copies it).
    void writeAndFree(int band, double interval, int64_t cells, double area, BandPolygons& polygons);
    const QString& id() const { return mId; }

  private:
    void addBand(int band, double interval, int64_t cells, double area, std::unique_ptr<QgsMultiPolygon> multi);

    const QVariantMap& mParameters;
    QgsFields mFields;
    AxisMap mToMap;
    QString mId;
    std::unique_ptr<QgsFeatureSink> mSink;
  };

  // What the in-memory CPU chain holds per cell (the DEM, the filled copy, the flats' arrays, the
  // directions, the accumulation, the times, the labels).
  static constexpr int64_t kInMemoryBytesPerCell = 64;

  // An empty string when the numeric parameters are fine, else what is wrong.
  QString numericProblem(const QVariantMap& parameters, QgsProcessingContext& context) const;
  Request readRequest(const QVariantMap& parameters, QgsProcessingContext& context) const;
  // The first point of OUTLET in the DEM's CRS (none when OUTLET is empty), and its cell.
  void readOutlet(const QVariantMap& parameters, QgsProcessingContext& context, const DemRaster& raster,
                  Request& request, QgsProcessingFeedback* feedback) const;
  // The hydrograph's parameters (isochrones_hydrograph.cpp).
  void addHydrographParameters();
  // The rainfall excess (EXCESS_TABLE's series or the constant), checked before the run.
  void readExcess(const QVariantMap& parameters, QgsProcessingContext& context, Request& request) const;
  // HYDROGRAPH and its numbers, from the bands' areas: the time–area method.
  void writeHydrograph(const Request& request, const Outcome& outcome, const QVariantMap& parameters,
                       QgsProcessingContext& context, QgsProcessingFeedback* feedback, QVariantMap& outputs) const;
  // The MANNING raster, checked against the DEM's grid (none when not used).
  std::optional<DemRaster> openManning(const Request& request, const DemRaster& raster,
                                       QgsProcessingFeedback* feedback) const;
  // The error for an outlet point on nodata with no valid cell within the snap distance.
  static QString outletOffDataError(const Request& request);
  static QString overflowError();
  // The bands' cells and areas of the times (a raster's worth), into the outcome.
  static void countBands(const double* minutes, const DemRaster& raster, Outcome& outcome);
  // The filled DEM's nodata value: the input's where float32 holds it and no elevation collides with it.
  static float filledNoData(const DemRaster& raster, int64_t roundedToNoData);
  Outcome executeInMemory(const BackendChoice& device, const Request& request, const DemRaster& raster,
                          QgsProcessingFeedback* feedback, StageTimes& times, FinishedRasters& finished);
  // MPI_PROCESSES: the chain run by gpugeo_dem under mpiexec (mpi_launch.h), its outcome read back.
  Outcome executeUnderMpi(const MpiJob& job, const Request& request, const TilingPlan& plan,
                          const QVariantMap& parameters, QgsProcessingContext& context,
                          QgsProcessingFeedback* feedback);
  // Writes ISOCHRONES as each band is traced (never holding all bands' polygons).
  Outcome executeTiled(const Request& request, const DemRaster& raster, const TilingPlan& plan,
                       const QVariantMap& parameters, QgsProcessingContext& context, QgsProcessingFeedback* feedback,
                       StageTimes& times, FinishedRasters& finished);
  // The log of the outlet, the watershed and the bands; the features and the table; the outputs.
  QVariantMap writeResults(const Request& request, const DemRaster& raster, const Outcome& outcome,
                           const QVariantMap& parameters, QgsProcessingContext& context,
                           QgsProcessingFeedback* feedback, StageTimes& times);

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
