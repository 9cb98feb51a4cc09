// Reads a point layer into plain arrays for the native core: multipoints exploded into one site per
// part, null and empty geometries skipped and counted.
#pragma once

#include <cstdint>
#include <vector>

#include <qgsattributes.h>
#include <qgsfeatureid.h>
#include <qgsrectangle.h>
#include <QString>

class QgsProcessingFeatureSource;
class QgsProcessingFeedback;

namespace gpugeo {

struct PointReadOptions
{
  // Attribute indexes to keep per feature (empty: none). Kept attributes have the layer's full
  // attribute length, with only these filled.
  QgsAttributeList attributes;
  bool keepAllAttributes = false;
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

// Reports progress from 0 to 100 on `feedback`; stops (canceled = true) when it is canceled.
// Throws QgsProcessingException when a coordinate is infinite.
PointSet readPoints(QgsProcessingFeatureSource& source, const PointReadOptions& options, QgsProcessingFeedback* feedback);

// After readPoints: throws Canceled if it was canceled; warns about the skipped features; throws
// QgsProcessingException when no site is left or there are more than maxSites; logs the count.
void checkSites(const PointSet& points, int64_t maxSites, QgsProcessingFeedback* feedback);

// The raster label of each site: the whole-number value of field `fieldIndex` (NULL: labelNoData,
// with a warning giving the count), or the 1-based site index when fieldIndex < 0. A fractional or
// out-of-range value is a QgsProcessingException naming the feature.
std::vector<int32_t> siteLabels(const PointSet& points, int fieldIndex, const QString& fieldName, int32_t labelNoData,
                                QgsProcessingFeedback* feedback);

}  // namespace gpugeo
