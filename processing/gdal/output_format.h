// How a run writes its rasters (GeoTiffWriter, geotiff_output.h): the user's GDAL creation options
// and Cloud Optimized GeoTIFFs or not.
#pragma once

#include <string>
#include <vector>

namespace gpugeo::gdal {

// The user's GDAL creation options ("KEY=VALUE"), each over the writer's own value of that key, and
// whether every finished file is rewritten as a Cloud Optimized GeoTIFF (the options are then the
// COG driver's, for the copy).
struct OutputFormat
{
  std::vector<std::string> creationOptions;
  bool cog = false;
};

// The format of `creationOptions` ("KEY=VALUE" items separated by '|' or white space, as QGIS writes
// raster options) and `cog`, the options checked against the driver they go to (GTiff, or COG where
// `cog`). Throws InvalidInput for an item without a key and '=', a key the driver does not know or a
// value it does not take (GDAL's words), Error where that driver is missing from this GDAL.
OutputFormat outputFormat(const std::string& creationOptions, bool cog);

}  // namespace gpugeo::gdal
