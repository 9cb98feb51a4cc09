// The DEM tools' raster adapter: one band of a raster file read with GDAL into float32 with NaN for
// nodata, each row's cell width and height in metres, and the outputs written with the input's
// size, geotransform and CRS. The GDAL work is the QGIS-free layer's (gdal/): the cell sizes
// (gdal_raster.h's rules, from the layer's CRS), the values (BandValue), the GeoTIFF outputs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <QString>

#include <gdal.h>

#include <qgscoordinatereferencesystem.h>

#include "core/run_control.h"
#include "core/stage_times.h"
#include "dem/dem.h"
#include "gdal/gdal_raster.h"
#include "gdal/output_format.h"
#include "gdal/raster_sources.h"

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
  gdal::OutputFormat outputFormat;  // the tool's COG and CREATION_OPTIONS: how its rasters are written
};

// Throws QgsProcessingException when the layer is missing or not a raster GDAL reads (a file).
// `parameterValue` names the layer in the message.
DemSource demSourceOf(const QgsRasterLayer* layer, const QString& parameterName, const QVariant& parameterValue);

// A band opened by gdal::openGdalRaster with the layer's CRS; `path` is the source's gdalName.
struct DemRaster : gdal::GdalRaster
{
  QgsCoordinateReferenceSystem crs;
  gdal::OutputFormat outputFormat;  // the source's: how the rasters written for this DEM are written
};

// Opens band `band` (1-based) of the source and works out the cell sizes (gdal::openGdalRaster, with
// the layer's CRS); reads no pixel. Throws InvalidInput as openGdalRaster does.
DemRaster openDemRaster(const DemSource& source, int band);

// Refuses a raster (named by its parameter) that does not have the DEM's size and geotransform,
// saying how to resample it; warns when its CRS differs (its cells are taken to be the DEM's).
void requireDemGrid(const DemRaster& other, const DemRaster& dem, const QString& parameterName,
                    QgsProcessingFeedback* feedback);

struct Elevations : gdal::ElevationCounts
{
  std::vector<float> z;  // NaN for nodata
};

// The band as float32 elevations (gdal::GdalElevationSource's, read in bands of rows straight into
// z; infinite values and values beyond the float32 range become nodata and are counted), with
// progress 0 to 100 on `feedback`. Throws Canceled when the feedback is canceled and InvalidInput on
// a read error.
Elevations readElevations(const DemRaster& raster, QgsFeedback* feedback);

// Logs the DEM (describeDem, the cell sizes, the warnings, values made nodata) and throws
// QgsProcessingException when no cell holds a value.
void reportElevations(const DemRaster& raster, const gdal::ElevationCounts& elevations,
                      QgsProcessingFeedback* feedback);
// The nodata value of a float32 output of elevations (a filled or breached DEM): the input band's
// where float32 can hold it and no elevation rounds to it, else NaN (with a warning saying why).
float elevationOutputNoData(const DemRaster& raster, const gdal::ElevationCounts& elevations,
                            QgsProcessingFeedback* feedback);
// Logs the raster's cell sizes and warnings.
void reportCellSizes(const DemRaster& raster, QgsProcessingFeedback* feedback);

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
// A GeoTiffWriter for an output of the DEM's size, geotransform and CRS (writeDemRaster's file).
std::unique_ptr<GeoTiffWriter> demRasterWriter(const QString& path, const DemRaster& raster, GDALDataType type,
                                               std::optional<double> noData);
// Finishes a raster written for this DEM (writeDemRaster's, or a tiled run's writer; a Cloud
// Optimized GeoTIFF where the DEM's outputs are) and adds the file to `finished`.
void finishDemRaster(std::unique_ptr<GeoTiffWriter> writer, FinishedRasters& finished);

// The feedback's cancel, and its progress 0 to 100, for the GDAL layer's reads.
RunControl feedbackControl(QgsFeedback* feedback);
std::function<void(double)> feedbackProgress(QgsFeedback* feedback);

// One line for the log: the raster's size, cell sizes, nodata and how many cells hold a value.
QString describeDem(const DemRaster& raster, int64_t validCells);

// The help paragraph on cell sizes (projected and geographic CRS), shared by the three tools.
QString cellSizeHelp();

}  // namespace gpugeo
