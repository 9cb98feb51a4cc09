// Reads a line or polygon layer into the native core's paths (voronoi::FeatureSites): each feature
// with a geometry is one site; its parts (and, for polygons, each part's rings) are paths. Null
// and empty geometries are skipped and counted; curves are segmentized.
#pragma once

#include <cstdint>
#include <vector>

#include <qgsgeometry.h>
#include <qgsrectangle.h>

#include "point_reader.h"
#include "voronoi/feature_allocation.h"

class QgsProcessingFeatureSource;
class QgsProcessingFeedback;

namespace gpugeo {

struct FeatureSet : SiteFeatures
{
  bool polygons = false;
  std::vector<QgsGeometry> geometries;  // per site, until flatten()
  // The paths, after flatten(): as voronoi::FeatureSites wants them (pathPart numbers polygon parts).
  std::vector<double> x, y;
  std::vector<int64_t> pathStart{0};
  std::vector<int32_t> pathFeature, pathPart;
  int64_t skippedNull = 0, skippedEmpty = 0;
  int64_t curved = 0;  // features with curved segments (segmentized by flatten())
  QgsRectangle extent;  // of the sites
  bool canceled = false;

  voronoi::FeatureSites sites() const;
};

// Reads the features (attributes as readPoints); progress 0 to 100 on `feedback`, canceled = true
// when it is canceled. Throws QgsProcessingException on an infinite or NaN coordinate.
FeatureSet readFeatures(QgsProcessingFeatureSource& source, bool polygons, const PointReadOptions& options,
                        QgsProcessingFeedback* feedback);

// The paths of every site's geometry, curves segmentized so that they stay within `tolerance` (layer
// units) of the curve; the geometries are released.
void flatten(FeatureSet& features, double tolerance);

// After readFeatures: throws Canceled if it was canceled; warns about the skipped features; throws
// QgsProcessingException when no feature is left (naming what was skipped) or there are more than
// maxSites; logs the count.
void checkFeatures(const FeatureSet& features, int64_t maxSites, QgsProcessingFeedback* feedback);

}  // namespace gpugeo
