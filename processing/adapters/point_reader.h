// Reads a point layer into plain arrays for the native core: multipoints exploded into one site per
// part, null and empty geometries skipped and counted.
#pragma once

#include <cstdint>
#include <vector>

#include <qgsattributes.h>
#include <qgsfeaturesink.h>
#include <qgsfeatureid.h>
#include <qgsrectangle.h>
#include <QString>

class QgsCoordinateReferenceSystem;
class QgsCoordinateTransformContext;
class QgsProcessingFeatureSource;
class QgsProcessingFeedback;

namespace gpugeo {

struct PointReadOptions
{
  // Attribute indexes to keep per feature (empty: none). Kept attributes have the layer's full
  // attribute length, with only these filled.
  QgsAttributeList attributes;
  bool keepAllAttributes = false;
  // false: a multipoint of more than one part gives no site (counted in skippedMultipart); one of a
  // single part is its point.
  bool explodeMultipoints = true;
};

// The features behind a set of sites: site s comes from feature featureOf[s].
struct SiteFeatures
{
  std::vector<int64_t> featureOf;             // index into featureIds / attributes, per site
  std::vector<QgsFeatureId> featureIds;       // per feature that gave at least one site
  std::vector<QgsAttributes> attributes;      // per such feature, when attributes were asked for

  int64_t siteCount() const { return static_cast<int64_t>(featureOf.size()); }
};

struct PointSet : SiteFeatures
{
  std::vector<double> x, y;                   // one entry per site (a point or a multipoint part)
  int64_t skippedNull = 0;                    // features without geometry
  int64_t skippedEmpty = 0;                   // empty geometries (an empty point has two NaN coordinates)
  int64_t halfNan = 0;                        // points with one NaN coordinate: refused by checkSites
  int64_t skippedMultipart = 0;               // multipoints of several parts, when not exploded
  QgsRectangle extent;                        // of the sites
  bool canceled = false;
};

// Reports progress from 0 to 100 on `feedback`; stops (canceled = true) when it is canceled.
// Throws QgsProcessingException when a coordinate is infinite.
PointSet readPoints(QgsProcessingFeatureSource& source, const PointReadOptions& options, QgsProcessingFeedback* feedback);

// After readPoints: throws Canceled if it was canceled; warns about the skipped features; throws
// QgsProcessingException when a point has one NaN coordinate (with their count), when no site is
// left (unless allowNone: then a warning) or there are more than maxSites; logs the count.
void checkSites(const PointSet& points, int64_t maxSites, QgsProcessingFeedback* feedback, bool allowNone = false);

// Transforms the sites from `from` to EPSG:4326 (lon, lat), in place; nothing when `from` is already
// EPSG:4326, or invalid (a layer without CRS), which is then taken as EPSG:4326 with a warning. Throws
// QgsProcessingException with the count of points that fail. Warns about longitudes outside
// -180..180 (taken modulo 360).
void transformToLonLat(PointSet& points, const QgsCoordinateReferenceSystem& from,
                       const QgsCoordinateTransformContext& transformContext, QgsProcessingFeedback* feedback);

// The attributes of site s's feature (every part of a multipoint has its feature's).
QgsAttributes siteAttributes(const SiteFeatures& sites, int64_t s);

// The flags of a sink that gets one feature a site with siteAttributes(). When a multipoint gave
// several sites they share its feature id, so a GeoPackage output numbers its features anew
// (QgsFeatureSink::RegeneratePrimaryKey, as QGIS's "Multipart to singleparts" does); otherwise the
// output keeps the input's fids.
QgsFeatureSink::SinkFlags siteSinkFlags(const SiteFeatures& sites);

// The raster label of each site: the whole-number value of field `fieldIndex` (NULL: labelNoData,
// with a warning giving the count), or the 1-based site index when fieldIndex < 0. A fractional or
// out-of-range value is a QgsProcessingException naming the feature.
std::vector<int32_t> siteLabels(const SiteFeatures& points, int fieldIndex, const QString& fieldName, int32_t labelNoData,
                                QgsProcessingFeedback* feedback);

}  // namespace gpugeo
