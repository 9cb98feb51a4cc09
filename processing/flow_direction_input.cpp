#include "flow_direction_input.h"

#include <limits>

#include <qgsexception.h>
#include <qgsprocessingfeedback.h>

#include "dem/dem.h"
#include "flowdirection_algorithm.h"
#include "gdal/dem_conventions.h"

namespace gpugeo {

namespace {

// Refuses values that are not directions in the encoding, naming the first and the other encoding
// where they all fit it.
void refuseInvalidCodes(int64_t invalid, double firstInvalid, int64_t firstInvalidCell, int64_t width,
                        bool otherEncodingFits, int encoding)
{
  if (invalid == 0)
    return;
  throw QgsProcessingException(
    QObject::tr("%1 cells hold values that are not flow directions in the %2 encoding (the first, %3, at column %4, "
                "row %5).%6")
      .arg(invalid)
      .arg(encodingName(encoding))
      .arg(firstInvalid, 0, 'g', 10)
      .arg(firstInvalidCell % width)
      .arg(firstInvalidCell / width)
      .arg(otherEncodingFits ? QObject::tr(" They all fit the other encoding: set ENCODING=%1.")
                                 .arg(encoding == FlowDirectionAlgorithm::Esri ? 1 : 0)
                             : QString()));
}

}  // namespace

std::vector<float> directionsAsElevations(const std::vector<uint8_t>& directions)
{
  std::vector<float> z(directions.size());
  for (std::size_t i = 0; i < z.size(); ++i)
    z[i] = directions[i] == dem::kNoData ? std::numeric_limits<float>::quiet_NaN() : 0.f;
  return z;
}

// The directions raster decoded in `encoding`; the other encoding's table tells whether codes this
// one lacks all fit it (refuseInvalidCodes's hint).
CodeTileSource directionSource(const DemRaster& raster, int encoding)
{
  return CodeTileSource(raster, gdal::decodingTable(encoding),
                        gdal::decodingTable(encoding == FlowDirectionAlgorithm::Esri ? FlowDirectionAlgorithm::Clockwise
                                                                               : FlowDirectionAlgorithm::Esri));
}


QString encodingName(int encoding)
{
  return encoding == FlowDirectionAlgorithm::Esri ? QObject::tr("ESRI") : QObject::tr("0 to 7");
}

QString loopHint(int encoding)
{
  return QObject::tr("Were the directions made by a D8 tool from a DEM, and does ENCODING (%1) match them?")
    .arg(encodingName(encoding));
}

// Logs the directions read (their raster, cell sizes and warnings); refuses values that are not
// directions in the encoding and a raster without a valid cell.
void reportDirections(const DemRaster& raster, const CodeTileSource::Counts& counts, int encoding,
                      QgsProcessingFeedback* feedback)
{
  feedback->pushInfo(describeDem(raster, counts.valid).replace(QStringLiteral("DEM:"), QObject::tr("Flow directions:")));
  reportCellSizes(raster, feedback);
  refuseInvalidCodes(counts.invalid, counts.firstInvalid, counts.firstInvalidCell, raster.width,
                     counts.otherTableFits, encoding);
  if (counts.valid == 0)
    throw QgsProcessingException(QObject::tr("The flow direction raster has no valid cell: all %1 cells of band %2 "
                                             "are nodata.")
                                   .arg(raster.width * raster.height)
                                   .arg(raster.band));
}

}  // namespace gpugeo
