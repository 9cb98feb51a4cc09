// The DEM tools' raster adapter: one band of a raster file read with GDAL into float32 with NaN for
// nodata, each row's cell width and height in metres, and the outputs written with the input's
// size, geotransform and CRS.
//
// Cell sizes. A projected CRS (or a raster without CRS, taken as metres): the geotransform's pixel
// width and height times the CRS unit in metres, the same for every row. A geographic CRS: at the
// latitude phi of each row's centre, on the CRS's ellipsoid (semi-major axis a, eccentricity e,
// e^2 = 1 - b^2/a^2): width = N(phi) cos(phi) dlon and height = M(phi) dlat, with the radii of
// curvature N = a / sqrt(1 - e^2 sin^2 phi) (prime vertical) and M = a (1 - e^2) / (1 - e^2
// sin^2 phi)^(3/2) (meridian), dlon and dlat the pixel's size in radians.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <QString>
#include <QStringList>

#include <gdal.h>

#include <qgscoordinatereferencesystem.h>

#include "core/stage_times.h"
#include "dem/dem.h"

class QgsFeedback;
class QgsProcessingFeedback;
class QgsRasterLayer;

namespace gpugeo {

class FinishedRasters;

// What the algorithms take from the INPUT layer on the main thread: the GDAL dataset to open and
// the layer's CRS.
struct DemSource
{
  QString gdalName;
  QgsCoordinateReferenceSystem crs;
  bool cogOutputs = false;  // the tool's COG parameter: its rasters written as Cloud Optimized GeoTIFFs
};

// Throws QgsProcessingException when the layer is missing or not a raster GDAL reads (a file).
// `parameterValue` names the layer in the message.
DemSource demSourceOf(const QgsRasterLayer* layer, const QString& parameterName, const QVariant& parameterValue);

struct DemRaster
{
  QString gdalName;
  int band = 1;
  int64_t width = 0;
  int64_t height = 0;
  double geoTransform[6] = {0, 1, 0, 0, 0, -1};
  QgsCoordinateReferenceSystem crs;
  GDALDataType dataType = GDT_Unknown;
  std::optional<double> noData;  // the band's nodata value, if it has one
  double scale = 1.0;            // the band's scale and offset, applied to the values read
  double offset = 0.0;
  std::vector<double> cellWidth;  // per row, metres
  std::vector<double> cellHeight;
  QString cellSizeNote;  // how the cell sizes were found, for the log
  QStringList warnings;  // for the log (e.g. no CRS)
  bool cogOutputs = false;  // the source's: the rasters written for this DEM (finishDemRaster) as COG

  // The grid the native core takes, over `z` (width x height values).
  dem::Grid grid(const float* z) const { return {z, width, height, cellWidth.data(), cellHeight.data()}; }
};

// Opens band `band` (1-based) of the source and works out the cell sizes; reads no pixel. Throws
// QgsProcessingException: the file does not open, no such band, no georeference, a rotated or
// sheared geotransform, a raster not stored north-up, more than dem::kMaxCells cells, latitudes
// beyond the poles.
DemRaster openDemRaster(const DemSource& source, int band);

// Reads the band in bands of rows as float64, the scale and offset applied, NaN where the band holds
// its nodata value (compared in the band's own type) or NaN; calls consume(row0, rows, values) in
// order, with progress 0 to 100 on `feedback`. Throws Canceled when the feedback is canceled and
// QgsProcessingException on a read error.
void readDemRows(const DemRaster& raster, const std::function<void(int64_t, int64_t, const double*)>& consume,
                 QgsFeedback* feedback);

struct Elevations
{
  std::vector<float> z;    // NaN for nodata
  int64_t valid = 0;       // cells with a value
  int64_t notFinite = 0;   // infinite values (or beyond the float32 range), made nodata
  double minimum = 0.0;    // of the valid cells
  double maximum = 0.0;
  int64_t roundedToNoData = 0;  // valid cells whose float32 value equals float32(nodata)
};

// The band as float32 elevations (readDemRows; infinite values and values beyond the float32 range
// become nodata and are counted).
Elevations readElevations(const DemRaster& raster, QgsFeedback* feedback);

// Logs the DEM (describeDem, the cell sizes, the warnings, values made nodata) and throws
// QgsProcessingException when no cell holds a value.
void reportElevations(const DemRaster& raster, const Elevations& elevations, QgsProcessingFeedback* feedback);

// The "read" stage every DEM algorithm starts with: the progress text, openDemRaster,
// readElevations (reporting to `progress`), timed as "read" in `times`, then reportElevations.
struct LoadedDem
{
  DemRaster raster;
  Elevations elevations;
};
LoadedDem loadDem(const DemSource& source, int band, gpugeo::StageTimes& times, QgsFeedback* progress,
                  QgsProcessingFeedback* feedback);

// Writes one raster of the DEM's size, geotransform and CRS (a tiled GeoTIFF through
// GeoTiffWriter), in bands of rows: fill(row0, rows, buffer) puts rows x width values of `type`
// into buffer. Progress 0 to 100 on `feedback`; throws Canceled when it is canceled (the file is
// deleted). The finished file is added to `finished`, which deletes it unless the run succeeds.
void writeDemRaster(const QString& path, const DemRaster& raster, GDALDataType type, std::optional<double> noData,
                    const std::function<void(int64_t, int64_t, void*)>& fill, FinishedRasters& finished,
                    QgsFeedback* feedback);

class GeoTiffWriter;
// Finishes a raster written for this DEM (writeDemRaster's, or a tiled run's writer): GeoTiffWriter
// writes square pixels, so a DEM's non-square geotransform is set afterwards, then the file is made
// a Cloud Optimized GeoTIFF where the DEM's outputs are (cogOutputs); the file is added to `finished`.
void finishDemRaster(std::unique_ptr<GeoTiffWriter> writer, const DemRaster& raster, FinishedRasters& finished);

// One line for the log: the raster's size, cell sizes, nodata and how many cells hold a value.
QString describeDem(const DemRaster& raster, int64_t validCells);

// The help paragraph on cell sizes (projected and geographic CRS), shared by the three tools.
QString cellSizeHelp();

}  // namespace gpugeo
