#include "snappourpoints_algorithm.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include <qgsexception.h>
#include <qgsfeaturesink.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>
#include <qgsprocessingutils.h>

#include "adapters/grid_points.h"
#include "adapters/number_text.h"
#include "core/errors.h"
#include "dem/tiled/tiled_dem.h"
#include "gdal/raster_sources.h"
#include "parameter_checks.h"

namespace gpugeo {

namespace {

// The windows the search reads around a point, cells a side.
constexpr int64_t kWindowSide = 512;

}  // namespace

QString SnapPourPointsAlgorithm::name() const
{
  return QStringLiteral("snappourpoints");
}

QString SnapPourPointsAlgorithm::displayName() const
{
  return QObject::tr("Snap pour points");
}

QStringList SnapPourPointsAlgorithm::tags() const
{
  return QObject::tr("dem,pour point,outlet,gauge,snap,flow accumulation,stream,watershed,hydrology").split(',');
}

QString SnapPourPointsAlgorithm::group() const
{
  return QObject::tr("Hydrology");
}

QString SnapPourPointsAlgorithm::groupId() const
{
  return QStringLiteral("hydrology");
}

QString SnapPourPointsAlgorithm::iconFile() const
{
  return QStringLiteral("snappourpoints.svg");
}

QString SnapPourPointsAlgorithm::shortDescription() const
{
  return QObject::tr("Moves each pour point (a gauge, a culvert) onto the cell of largest flow accumulation within "
                     "a distance, so that it lies on the stream the DEM's flow paths follow.");
}

QString SnapPourPointsAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>Gauges and culverts digitized from a map or a GPS rarely fall on the cell where the DEM's flow "
           "paths gather: this moves each onto the cell of largest flow accumulation within a distance, as "
           "<i>Watersheds of outlets</i> does with its outlets (the same cells when given the upstream area).</p>"
           "<p><b>Pour points</b>: a point layer in any CRS (transformed to the raster's). <b>Flow "
           "accumulation</b> and <b>Band number</b>: upstream cells or area, as <i>Flow accumulation</i> writes "
           "them, of any type (nodata and NaN are skipped). <b>Snap distance</b> (metres; 0: the cell under the "
           "point): the cells whose centres lie within it of the point's cell centre, measured with the cell "
           "sizes of the point's row; the largest value wins, ties to the first in row order.</p>"
           "<p><b>Output</b>: one point per pour point at its cell's centre, in the raster's CRS, with its "
           "attributes and snap_m (how far it moved), upstream (the accumulation there), column and row. The "
           "number moved is an output.</p>"
           "<p><b>Caveats</b>: only a window around each point is read, so rasters of any size take no memory "
           "to speak of and no GPU: the work is small. A point off the raster, or on nodata with no valid cell "
           "within the distance, is refused, naming it.</p>"
           "<p><b>References</b>: the snapping of ArcGIS's and WhiteboxTools' <i>Snap Pour Points</i>; S. K. "
           "Jenson, J. O. Domingue (1988), Photogrammetric Engineering and Remote Sensing 54(11), "
           "1593&ndash;1600 (flow accumulation).</p>") +
         cellSizeHelp() + rangesHelp(*this);
}

SnapPourPointsAlgorithm* SnapPourPointsAlgorithm::createInstance() const
{
  return new SnapPourPointsAlgorithm();
}

void SnapPourPointsAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterFeatureSource(QStringLiteral("INPUT"), QObject::tr("Pour points"),
                                                       QList<int>() << QgsProcessing::TypeVectorPoint));
  addParameter(new QgsProcessingParameterRasterLayer(QStringLiteral("ACCUMULATION"), QObject::tr("Flow accumulation")));
  addParameter(new QgsProcessingParameterBand(QStringLiteral("BAND"), QObject::tr("Band number"), 1,
                                              QStringLiteral("ACCUMULATION"), true));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("SNAP_DISTANCE"), QObject::tr("Snap distance (metres)"),
                                                QgsProcessingParameterNumber::Double, 100.0, false, 0.0));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT"), QObject::tr("Snapped pour points"),
                                                     QgsProcessing::TypeVectorPoint));
  addOutput(new QgsProcessingOutputNumber(QStringLiteral("MOVED"), QObject::tr("Pour points moved")));
}

bool SnapPourPointsAlgorithm::prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                                            QgsProcessingFeedback*)
{
  mSource = demSourceOf(parameterAsRasterLayer(parameters, QStringLiteral("ACCUMULATION"), context),
                        QStringLiteral("ACCUMULATION"), parameters.value(QStringLiteral("ACCUMULATION")));
  return true;
}

QVariantMap SnapPourPointsAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                             QgsProcessingFeedback* feedback)
{
  // --- Read: the raster's grid (no cell yet) and the points on it.
  const DemRaster raster = openDemRaster(mSource, parameterAsInt(parameters, QStringLiteral("BAND"), context));
  reportCellSizes(raster, feedback);
  const double radius = parameterAsDouble(parameters, QStringLiteral("SNAP_DISTANCE"), context);
  std::unique_ptr<QgsProcessingFeatureSource> source(parameterAsSource(parameters, QStringLiteral("INPUT"), context));
  if (!source)
    throw QgsProcessingException(invalidSourceError(parameters, QStringLiteral("INPUT")));
  requirePointSource(*source, QStringLiteral("INPUT"));
  const std::vector<GridPoint> points = readGridPoints(*source, QStringLiteral("INPUT"),
                                                       QObject::tr("the accumulation raster"), raster,
                                                       context.transformContext(), feedback);

  // --- Snap: a window around each point.
  const gdal::GdalValueSource values(raster);
  const dem::tiled::RowSizes rows{raster.cellWidth, raster.cellHeight};
  std::vector<int64_t> cells(points.size());
  QStringList offData;
  for (std::size_t i = 0; i < points.size(); ++i)
  {
    if (feedback->isCanceled())
      throw Canceled();
    cells[i] = dem::tiled::snapToHighestTiled(values, rows, points[i].column, points[i].row, radius, kWindowSide);
    if (cells[i] < 0)
      offData << featureName(QStringLiteral("INPUT"), points[i].id);
    feedback->setProgress(100.0 * double(i + 1) / double(points.size()));
  }
  if (!offData.isEmpty())
    throw QgsProcessingException(QObject::tr("%1 pour point(s) lie on nodata with no valid cell within SNAP_DISTANCE "
                                             "(%2 m): %3.")
                                   .arg(offData.size())
                                   .arg(number(radius), offData.mid(0, 10).join(QStringLiteral("; "))));

  // --- Write: the cells' centres with the points' attributes.
  QgsFields ours;
  ours.append(QgsField(QStringLiteral("snap_m"), QVariant::Double));
  ours.append(QgsField(QStringLiteral("upstream"), QVariant::Double));
  ours.append(QgsField(QStringLiteral("column"), QVariant::LongLong));
  ours.append(QgsField(QStringLiteral("row"), QVariant::LongLong));
  const QgsFields fields = QgsProcessingUtils::combineFields(source->fields(), ours);
  QString id;
  std::unique_ptr<QgsFeatureSink> sink =
    createSink(parameters, QStringLiteral("OUTPUT"), context, id, fields, QgsWkbTypes::Point, raster.crs);
  const double* gt = raster.geoTransform;
  int64_t moved = 0;
  double farthest = 0;
  for (std::size_t i = 0; i < points.size(); ++i)
  {
    const GridPoint& p = points[i];
    const int64_t c = cells[i] % raster.width, r = cells[i] / raster.width;
    const double metres = snapMetres(raster, p.column, p.row, cells[i]);
    moved += metres > 0;
    farthest = std::max(farthest, metres);
    double value = 0;
    values.read(dem::tiled::Window{c, r, 1, 1}, &value);
    QgsFeature feature(fields);
    feature.setGeometry(QgsGeometry::fromPointXY(
      QgsPointXY(gt[0] + (double(c) + 0.5) * gt[1], gt[3] + (double(r) + 0.5) * gt[5])));
    QgsAttributes attributes = p.attributes;
    attributes << metres << value << QVariant::fromValue<qlonglong>(c) << QVariant::fromValue<qlonglong>(r);
    feature.setAttributes(attributes);
    if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
      throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("OUTPUT")));
  }
  feedback->pushInfo(QObject::tr("%1 pour points: %2 moved, the farthest by %3 m.")
                       .arg(points.size())
                       .arg(moved)
                       .arg(number(farthest)));
  return {{QStringLiteral("OUTPUT"), id}, {QStringLiteral("MOVED"), qlonglong(moved)}};
}

}  // namespace gpugeo
