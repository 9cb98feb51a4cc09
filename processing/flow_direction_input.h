// Reading a D8 flow direction raster for the tools that take one (gpugeo:flowaccumulation,
// gpugeo:watersheds): decoded in the ENCODING parameter's table, logged, its codes checked.
#pragma once

#include <cstdint>
#include <vector>

#include <QString>

#include "adapters/dem_reader.h"
#include "adapters/tiled_rasters.h"

class QgsProcessingFeedback;

namespace gpugeo {

// The directions raster decoded in `encoding` (FlowDirectionAlgorithm's Esri or Clockwise); the other
// encoding's table tells whether codes this one lacks all fit it (reportDirections's hint).
CodeTileSource directionSource(const DemRaster& raster, int encoding);

// Elevations for the native grid of tools that need only the directions' valid cells (the accumulation,
// the watersheds): NaN where the direction is nodata, else 0.
std::vector<float> directionsAsElevations(const std::vector<uint8_t>& directions);

// "ESRI" or "0 to 7".
QString encodingName(int encoding);

// The question to ask of directions that loop or hold bad codes.
QString loopHint(int encoding);

// Logs the directions read (their raster, cell sizes and warnings); refuses values that are not
// directions in the encoding (naming the first, and the other encoding where they all fit it) and a
// raster without a valid cell.
void reportDirections(const DemRaster& raster, const CodeTileSource::Counts& counts, int encoding,
                      QgsProcessingFeedback* feedback);

}  // namespace gpugeo
