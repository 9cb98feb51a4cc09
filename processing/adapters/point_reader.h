// Reads a point layer into plain arrays for the native core: multipoints exploded into one site per
// part, null and empty geometries skipped and counted, coordinates optionally transformed.
#pragma once

#include <cstdint>
#include <vector>

#include <qgsattributes.h>
#include <qgscoordinatereferencesystem.h>
#include <qgsfeatureid.h>
#include <qgsrectangle.h>

class QgsProcessingFeatureSource;
class QgsProcessingContext;
class QgsProcessingFeedback;

namespace gpugeo {

struct PointReadOptions
{
  // Attribute indexes to keep per feature (empty: none). Kept attributes have the layer's full
  // attribute length, with only these filled.
  QgsAttributeList attributes;
  bool keepAllAttributes = false;
  // When valid, the points are transformed to this CRS.
  QgsCoordinateReferenceSystem destinationCrs;
  // Progress range taken by the read.
  double progressStart = 0.0;
  double progressEnd = 10.0;
};

struct PointSet
{
  std::vector<double> x, y;                   // one entry per site (a point or a multipoint part)
  std::vector<int64_t> featureOf;             // index into featureIds / attributes, per site
  std::vector<QgsFeatureId> featureIds;       // per feature that gave at least one site
  std::vector<QgsAttributes> attributes;      // per such feature, when attributes were asked for
  int64_t skippedNull = 0;                    // features without geometry
  int64_t skippedEmpty = 0;                   // empty geometries or points with NaN coordinates
  QgsRectangle extent;                        // of the sites
  bool canceled = false;

  int64_t siteCount() const { return static_cast<int64_t>(x.size()); }
};

// Throws QgsProcessingException when a coordinate is infinite or a transformation fails.
PointSet readPoints(QgsProcessingFeatureSource& source, const PointReadOptions& options, QgsProcessingContext& context,
                    QgsProcessingFeedback* feedback);

}  // namespace gpugeo
