// gpugeo:isochrones through the QGIS API: synthetic GeoTIFF DEMs written here with GDAL (a tilted
// valley whose travel times are worked out by hand with the constant model; random terrain with pits,
// flats and nodata holes), the travel times against a brute-force walk down each cell's D8 path (read
// back from the FLOWDIR output), the bands against the travel times, the polygons against the cells,
// the time–area table, the automatic and the snapped outlet, the Manning model with a MANNING raster
// against the native core, and bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include <QDir>
#include <QFile>

#include <cpl_string.h>
#include <gdal.h>
#include <ogr_srs_api.h>

#include <qgscoordinatetransform.h>
#include <qgsfeature.h>
#include <qgsgeometry.h>
#include <qgsprocessingutils.h>
#include <qgsrasterlayer.h>
#include <qgsvectordataprovider.h>
#include <qgsvectorlayer.h>

#include "adapters/dem_reader.h"
#include "core/backend.h"
#include "dem/dem.h"
#include "dem/travel_time.h"
#include "dem_test_support.h"
#include "processing_test_support.h"

namespace {

using gpugeo::test::RunResult;
namespace dem = gpugeo::dem;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr int kEsri[8] = {1, 2, 4, 8, 16, 32, 64, 128};
const QString kIsochrones = QStringLiteral("gpugeo:isochrones");

using gpugeo::test::TestDem;

// A valley along column 10 tilted south: z = 0.5 |x - 10| + 0.2 (29 - y), 21 x 30 cells. Every cell
// drains diagonally towards the valley (drop 0.7 over 12.5 m beats 0.5 over 10 m and 0.2 over 7.5 m),
// then south down it; on the bottom row sideways; the valley's bottom cell (10, 29) leaves the grid
// to the south-east (its first neighbour off the grid in the order E, SE, S ...).
TestDem valley()
{
  TestDem d;
  d.width = 21;
  d.height = 30;
  d.z.resize(size_t(d.width * d.height));
  for (int y = 0; y < d.height; ++y)
    for (int x = 0; x < d.width; ++x)
      d.at(x, y) = float(0.5 * std::abs(x - 10) + 0.2 * (29 - y));
  return d;
}

// The path length (m) from cell (x, y) of the valley out of the grid through (10, 29): diagonal steps
// (12.5 m) towards the valley while above the bottom row, sideways steps (10 m) along the bottom row,
// steps south (7.5 m) down the valley, and the outlet's own diagonal step (12.5 m).
double valleyPathLength(int x, int y)
{
  const int dx = std::abs(x - 10), rows = 29 - y;
  const int diagonal = std::min(dx, rows);
  return diagonal * 12.5 + (dx - diagonal) * 10.0 + (rows - diagonal) * 7.5 + 12.5;
}

// Smooth hills quantised to 0.5 m (flats and ties), noise (pits), nodata holes.
TestDem randomDem(int width, int height, uint32_t seed, int holes = 3)
{
  return gpugeo::test::randomHills(width, height, seed, holes);
}

// A single-band GeoTIFF of `type` in `crs`; NaN written as `noData` when given.
void writeTiff(const QString& path, const TestDem& d, const std::vector<float>& values, GDALDataType type = GDT_Float32,
               std::optional<double> noData = -9999.0, const char* crs = "EPSG:32633")
{
  GDALDatasetH dataset =
    GDALCreate(GDALGetDriverByName("GTiff"), path.toUtf8().constData(), d.width, d.height, 1, type, nullptr);
  ASSERT_TRUE(dataset);
  GDALSetGeoTransform(dataset, const_cast<double*>(d.geoTransform));
  OGRSpatialReferenceH srs = OSRNewSpatialReference(nullptr);
  OSRSetFromUserInput(srs, crs);
  char* wkt = nullptr;
  OSRExportToWkt(srs, &wkt);
  GDALSetProjection(dataset, wkt);
  CPLFree(wkt);
  OSRDestroySpatialReference(srs);
  GDALRasterBandH band = GDALGetRasterBand(dataset, 1);
  std::vector<double> out(values.size());
  for (size_t i = 0; i < values.size(); ++i)
    out[i] = std::isnan(values[i]) && noData ? *noData : double(values[i]);
  if (noData)
    GDALSetRasterNoDataValue(band, *noData);
  ASSERT_EQ(GDALRasterIO(band, GF_Write, 0, 0, d.width, d.height, out.data(), d.width, d.height, GDT_Float64, 0, 0),
            CE_None);
  GDALClose(dataset);
}

void writeTiff(const QString& path, const TestDem& d)
{
  writeTiff(path, d, d.z);
}

// Per cell: the index of the cell it drains to, -1 when it drains out of the grid or into nodata, -2
// on nodata; from ESRI codes.
std::vector<int64_t> receiversOf(const std::vector<uint8_t>& codes, int w, int h, std::vector<int>* direction = nullptr)
{
  std::vector<int64_t> receiver(codes.size(), -2);
  if (direction)
    direction->assign(codes.size(), -1);
  for (int64_t c = 0; c < int64_t(codes.size()); ++c)
  {
    if (codes[size_t(c)] == 255)
      continue;
    const int d = int(std::find(kEsri, kEsri + 8, int(codes[size_t(c)])) - kEsri);
    EXPECT_LT(d, 8) << "cell " << c << " has code " << int(codes[size_t(c)]);
    if (d >= 8)
      continue;
    if (direction)
      (*direction)[size_t(c)] = d;
    const int64_t nx = c % w + dem::kDx[d], ny = c / w + dem::kDy[d];
    receiver[size_t(c)] = -1;
    if (nx >= 0 && ny >= 0 && nx < w && ny < h && codes[size_t(ny * w + nx)] != 255)
      receiver[size_t(c)] = ny * w + nx;
  }
  return receiver;
}

// The D8 flow length of direction d on cells of width cw and height ch.
double flowLength(int d, double cw, double ch)
{
  return (d & 1) ? std::sqrt(cw * cw + ch * ch) : ((d & 2) ? ch : cw);
}

// Brute force: every cell's travel time (minutes) by walking its D8 path down to the outlet and summing
// the steps L / v of the cells on it, the outlet's included; NaN off the watershed.
std::vector<double> walkTimes(const std::vector<int64_t>& receiver, const std::vector<double>& stepMinutes, int64_t outlet)
{
  std::vector<double> t(receiver.size(), std::numeric_limits<double>::quiet_NaN());
  for (int64_t c = 0; c < int64_t(receiver.size()); ++c)
  {
    if (receiver[size_t(c)] == -2)
      continue;
    double sum = 0.0;
    int64_t at = c;
    size_t guard = 0;
    while (at >= 0 && at != outlet && guard++ <= receiver.size())
    {
      sum += stepMinutes[size_t(at)];
      at = receiver[size_t(at)];
    }
    if (at == outlet)
      t[size_t(c)] = sum + stepMinutes[size_t(outlet)];
  }
  return t;
}

class IsochronesAlgorithmTest : public gpugeo::test::AlgorithmTest
{
protected:
  // A memory point layer holding `points` in `crs`.
  static QgsVectorLayer* pointLayer(const std::vector<QgsPointXY>& points, const QString& crs = QStringLiteral("EPSG:32633"),
                                    const QString& type = QStringLiteral("Point"))
  {
    auto* layer = new QgsVectorLayer(QStringLiteral("%1?crs=%2").arg(type, crs), QStringLiteral("outlet"),
                                     QStringLiteral("memory"));
    for (const QgsPointXY& p : points)
    {
      QgsFeature feature;
      feature.setGeometry(type == QLatin1String("Point") ? QgsGeometry::fromPointXY(p)
                                                          : QgsGeometry::fromPolylineXY({p, QgsPointXY(p.x() + 1, p.y())}));
      layer->dataProvider()->addFeature(feature);
    }
    return layer;
  }

  // Runs gpugeo:isochrones on the DEM file `input` (DEVICE=CPU unless given), with `outlet` (owned by
  // the run's context) as OUTLET when given.
  RunResult run(const QString& input, QVariantMap parameters, QgsVectorLayer* outlet = nullptr)
  {
    QgsProcessingContext context;
    auto layer = std::make_unique<QgsRasterLayer>(input, QStringLiteral("dem"), QStringLiteral("gdal"));
    EXPECT_TRUE(layer->isValid()) << input.toStdString();
    if (!parameters.contains(QStringLiteral("DEVICE")))
      parameters.insert(QStringLiteral("DEVICE"), 1);
    if (outlet)
    {
      context.temporaryLayerStore()->addMapLayer(outlet);
      parameters.insert(QStringLiteral("OUTLET"), outlet->id());
    }
    return runAlgorithm(kIsochrones, layer.get(), parameters, context);
  }

  // Every output, as files in the test's folder named with `prefix`.
  QVariantMap allOutputs(const QString& prefix) const
  {
    return {{QStringLiteral("TRAVEL_TIME"), path(prefix + "_time.tif")},
            {QStringLiteral("WATERSHED"), path(prefix + "_watershed.gpkg")},
            {QStringLiteral("ISOCHRONES"), path(prefix + "_isochrones.gpkg")},
            {QStringLiteral("TIME_AREA"), path(prefix + "_table.gpkg")},
            {QStringLiteral("FILLED"), path(prefix + "_filled.tif")},
            {QStringLiteral("FLOWDIR"), path(prefix + "_dir.tif")},
            {QStringLiteral("ACCUMULATION"), path(prefix + "_acc.tif")}};
  }

  template <typename T>
  std::vector<T> read(const QString& file, GDALDataType type, double* noData = nullptr)
  {
    int width = 0, height = 0;
    double t[6];
    return readRaster<T>(file, type, width, height, t, noData);
  }

  // Checks the vector outputs against the travel times (`times`, NaN off the watershed) on cells of
  // area `cellArea`: the bands' cells and areas, the polygons (valid, of the bands' areas, tiling the
  // watershed), the time–area table.
  void checkBandsAndTable(const QString& prefix, const std::vector<double>& times, double interval, double cellArea)
  {
    std::map<int, int64_t> cellsOfBand;
    int64_t watershedCells = 0;
    double maxTime = 0.0;
    for (const double t : times)
      if (!std::isnan(t))
      {
        ++cellsOfBand[int(std::floor(t / interval)) + 1];
        ++watershedCells;
        maxTime = std::max(maxTime, t);
      }
    const int bands = int(std::floor(maxTime / interval)) + 1;
    const double watershedArea = double(watershedCells) * cellArea;

    QgsVectorLayer watershed(path(prefix + "_watershed.gpkg"), QStringLiteral("w"), QStringLiteral("ogr"));
    ASSERT_TRUE(watershed.isValid());
    ASSERT_EQ(watershed.featureCount(), 1);
    const QgsFeature shed = gpugeo::test::featuresOf(&watershed).front();
    EXPECT_TRUE(shed.geometry().isGeosValid());
    EXPECT_NEAR(shed.attribute(QStringLiteral("area_km2")).toDouble(), watershedArea * 1e-6, 1e-9 * watershedArea * 1e-6);
    EXPECT_EQ(shed.attribute(QStringLiteral("cells")).toLongLong(), watershedCells);
    EXPECT_EQ(shed.attribute(QStringLiteral("t_max")).toDouble(), maxTime);
    EXPECT_NEAR(shed.geometry().area(), watershedArea, 1e-6 * watershedArea);

    QgsVectorLayer isochrones(path(prefix + "_isochrones.gpkg"), QStringLiteral("i"), QStringLiteral("ogr"));
    ASSERT_TRUE(isochrones.isValid());
    EXPECT_EQ(isochrones.featureCount(), int64_t(cellsOfBand.size()));
    double sum = 0.0;
    QVector<QgsGeometry> pieces;
    for (const QgsFeature& f : gpugeo::test::featuresOf(&isochrones))
    {
      const int band = f.attribute(QStringLiteral("band")).toInt();
      ASSERT_TRUE(cellsOfBand.count(band)) << band;
      EXPECT_EQ(f.attribute(QStringLiteral("t_min")).toDouble(), (band - 1) * interval);
      EXPECT_EQ(f.attribute(QStringLiteral("t_max")).toDouble(), band * interval);
      EXPECT_EQ(f.attribute(QStringLiteral("cells")).toLongLong(), cellsOfBand[band]) << band;
      const double area = f.attribute(QStringLiteral("area_km2")).toDouble();
      EXPECT_NEAR(area, double(cellsOfBand[band]) * cellArea * 1e-6, 1e-12 * area) << band;
      EXPECT_TRUE(f.geometry().isGeosValid()) << "band " << band;
      EXPECT_NEAR(f.geometry().area(), double(cellsOfBand[band]) * cellArea, 1e-6 * cellArea) << band;
      sum += area;
      pieces << f.geometry();
    }
    EXPECT_NEAR(sum, watershedArea * 1e-6, 1e-9 * watershedArea * 1e-6);
    // The bands tile the watershed.
    const QgsGeometry united = QgsGeometry::unaryUnion(pieces);
    EXPECT_LT(united.symDifference(shed.geometry()).area(), 1e-6 * cellArea);

    QgsVectorLayer table(path(prefix + "_table.gpkg"), QStringLiteral("t"), QStringLiteral("ogr"));
    ASSERT_TRUE(table.isValid());
    EXPECT_EQ(table.wkbType(), QgsWkbTypes::NoGeometry);
    const std::vector<QgsFeature> rows = gpugeo::test::featuresOf(&table);
    ASSERT_EQ(int(rows.size()), bands);
    double cumulative = 0.0, previousShare = 0.0, tableSum = 0.0;
    for (int k = 0; k < bands; ++k)
    {
      const QgsFeature& row = rows[size_t(k)];
      EXPECT_EQ(row.attribute(QStringLiteral("band")).toInt(), k + 1);
      EXPECT_EQ(row.attribute(QStringLiteral("t_min")).toDouble(), k * interval);
      EXPECT_EQ(row.attribute(QStringLiteral("t_max")).toDouble(), (k + 1) * interval);
      const int64_t cells = cellsOfBand.count(k + 1) ? cellsOfBand[k + 1] : 0;
      EXPECT_EQ(row.attribute(QStringLiteral("cells")).toLongLong(), cells);
      const double area = row.attribute(QStringLiteral("area_km2")).toDouble();
      EXPECT_NEAR(area, double(cells) * cellArea * 1e-6, 1e-12 * std::max(area, 1e-12));
      tableSum += area;
      cumulative += double(cells);
      const double share = row.attribute(QStringLiteral("cumulative_share")).toDouble();
      EXPECT_NEAR(share, cumulative / double(watershedCells), 1e-12);
      EXPECT_GE(share, previousShare);
      previousShare = share;
    }
    EXPECT_EQ(previousShare, 1.0);
    EXPECT_NEAR(tableSum, watershedArea * 1e-6, 1e-9 * watershedArea * 1e-6);
  }
};

}  // namespace

// The valley with the constant model: every cell's time is its path length / v, worked out by hand;
// the same as the brute-force walk down the FLOWDIR output; the whole grid is one watershed, found
// automatically; the bands, polygons and table agree with the times.
TEST_F(IsochronesAlgorithmTest, ValleyConstantSpeedByHand)
{
  const TestDem d = valley();
  writeTiff(path("valley.tif"), d);
  QVariantMap parameters = allOutputs(QStringLiteral("v"));
  parameters.insert(QStringLiteral("VELOCITY_MODEL"), 0);
  parameters.insert(QStringLiteral("SPEED"), 0.5);
  parameters.insert(QStringLiteral("INTERVAL"), 1.0);
  const RunResult result = run(path("valley.tif"), parameters);
  ASSERT_TRUE(result.ok) << result.error.toStdString() << result.log.join('\n').toStdString();

  double noData = 0;
  const auto times = read<double>(path("v_time.tif"), GDT_Float64, &noData);
  EXPECT_EQ(noData, -1.0);
  const auto codes = read<uint8_t>(path("v_dir.tif"), GDT_Byte);
  std::vector<int> direction;
  const auto receiver = receiversOf(codes, d.width, d.height, &direction);
  std::vector<double> step(times.size());
  for (size_t c = 0; c < step.size(); ++c)
    step[c] = flowLength(direction[c], 10.0, 7.5) / 0.5 / 60.0;
  const int64_t outlet = 29 * d.width + 10;
  EXPECT_EQ(direction[size_t(outlet)], 1);  // south-east, out of the grid
  const auto walked = walkTimes(receiver, step, outlet);
  for (int y = 0; y < d.height; ++y)
    for (int x = 0; x < d.width; ++x)
    {
      const size_t c = size_t(y * d.width + x);
      const double byHand = valleyPathLength(x, y) / 0.5 / 60.0;
      ASSERT_NEAR(times[c], byHand, 1e-9 * byHand) << x << ", " << y;
      ASSERT_NEAR(times[c], walked[c], 1e-9 * byHand) << x << ", " << y;
    }
  EXPECT_EQ(times[size_t(outlet)], 12.5 / 0.5 / 60.0);  // the outlet's own step
  EXPECT_TRUE(result.logContains(QStringLiteral("Outlet (automatic)"))) << result.log.join('\n').toStdString();
  EXPECT_TRUE(result.logContains(QStringLiteral("column 10, row 29")));
  EXPECT_TRUE(result.logContains(QStringLiteral("Watershed: 630 cells, 0.04725 km²")));
  EXPECT_TRUE(result.logContains(QStringLiteral("Stage times: read")));
  EXPECT_TRUE(result.logContains(QStringLiteral("travel time")));
  EXPECT_TRUE(result.logContains(QStringLiteral("Backend: CPU")));
  EXPECT_EQ(result.outputs.value(QStringLiteral("WATERSHED_AREA_KM2")).toDouble(), 630 * 75.0 * 1e-6);
  EXPECT_EQ(result.outputs.value(QStringLiteral("OUTLET_X")).toDouble(), d.centre(10, 29).x());
  EXPECT_EQ(result.outputs.value(QStringLiteral("OUTLET_Y")).toDouble(), d.centre(10, 29).y());

  // The filled DEM is the DEM (nothing to fill); the accumulation at the outlet is every cell.
  const auto filled = read<float>(path("v_filled.tif"), GDT_Float32);
  EXPECT_EQ(filled, d.z);
  const auto accumulation = read<int32_t>(path("v_acc.tif"), GDT_Int32);
  EXPECT_EQ(accumulation[size_t(outlet)], 630);
  checkBandsAndTable(QStringLiteral("v"), times, 1.0, d.cellArea());
}

// Random terrain (pits, flats, nodata holes), the slope model with a channel threshold: the times
// equal the walk with the formula's speeds from the FILLED, FLOWDIR and ACCUMULATION outputs; they grow
// upstream along every path; the automatic outlet is where the largest basin leaves the grid.
TEST_F(IsochronesAlgorithmTest, RandomTerrainSlopeModelMatchesTheWalk)
{
  const TestDem d = randomDem(90, 70, 11);
  writeTiff(path("dem.tif"), d);
  const double kOverland = 0.4, kChannel = 2.0, n = 1.3, b = 0.8, minSlope = 0.002, minSpeed = 0.07;
  const double channelKm2 = 0.01;  // 133.3 cells of 75 m²
  QVariantMap parameters = allOutputs(QStringLiteral("r"));
  parameters.insert(QStringLiteral("VELOCITY_MODEL"), 1);
  parameters.insert(QStringLiteral("K_OVERLAND"), kOverland);
  parameters.insert(QStringLiteral("K_CHANNEL"), kChannel);
  parameters.insert(QStringLiteral("N_FACTOR"), n);
  parameters.insert(QStringLiteral("B_FACTOR"), b);
  parameters.insert(QStringLiteral("MIN_SLOPE"), minSlope);
  parameters.insert(QStringLiteral("MIN_SPEED"), minSpeed);
  parameters.insert(QStringLiteral("CHANNEL_THRESHOLD"), channelKm2);
  parameters.insert(QStringLiteral("INTERVAL"), 5.0);
  const RunResult result = run(path("dem.tif"), parameters);
  ASSERT_TRUE(result.ok) << result.error.toStdString() << result.log.join('\n').toStdString();

  const int w = d.width, h = d.height;
  const auto times = read<double>(path("r_time.tif"), GDT_Float64);
  const auto codes = read<uint8_t>(path("r_dir.tif"), GDT_Byte);
  const auto accumulation = read<int32_t>(path("r_acc.tif"), GDT_Int32);
  const auto filled = read<float>(path("r_filled.tif"), GDT_Float32);
  std::vector<int> direction;
  const auto receiver = receiversOf(codes, w, h, &direction);

  // The largest basin's outlet: the highest accumulation among the cells draining out (ties: first).
  int64_t outlet = -1;
  for (int64_t c = 0; c < int64_t(codes.size()); ++c)
    if (receiver[size_t(c)] == -1 && (outlet < 0 || accumulation[size_t(c)] > accumulation[size_t(outlet)]))
      outlet = c;
  ASSERT_GE(outlet, 0);
  EXPECT_TRUE(result.logContains(QStringLiteral("Outlet (automatic): where the largest basin drains out of the grid, "
                                                "column %1, row %2")
                                   .arg(outlet % w)
                                   .arg(outlet / w)))
    << result.log.join('\n').toStdString();
  EXPECT_EQ(result.outputs.value(QStringLiteral("OUTLET_X")).toDouble(), d.centre(int(outlet % w), int(outlet / w)).x());

  std::vector<double> step(times.size(), 0.0);
  int64_t channelCells = 0;
  for (int64_t c = 0; c < int64_t(step.size()); ++c)
  {
    if (receiver[size_t(c)] == -2)
      continue;
    ASSERT_GE(direction[size_t(c)], 0) << "a filled DEM with resolved flats has no pit";
    const double length = flowLength(direction[size_t(c)], 10.0, 7.5);
    const int64_t r = receiver[size_t(c)];
    const double drop = r >= 0 ? double(filled[size_t(c)]) - double(filled[size_t(r)]) : 0.0;
    const double s = std::max(minSlope, drop / length);
    const bool channel = double(accumulation[size_t(c)]) * 75.0 >= channelKm2 * 1e6;
    channelCells += channel;
    const double v = std::max(minSpeed, (channel ? kChannel : kOverland) * std::sqrt(s) * b / n);
    step[size_t(c)] = length / v / 60.0;
  }
  EXPECT_GT(channelCells, 20);
  const auto walked = walkTimes(receiver, step, outlet);
  int64_t inside = 0;
  for (size_t c = 0; c < times.size(); ++c)
  {
    if (std::isnan(walked[c]))
    {
      ASSERT_EQ(times[c], -1.0) << c;
      continue;
    }
    ++inside;
    ASSERT_NEAR(times[c], walked[c], 1e-9 * walked[c]) << c;
    // Upstream is later: every cell's time exceeds its receiver's.
    if (int64_t(c) != outlet)
      ASSERT_GT(times[c], times[size_t(receiver[c])]) << c;
  }
  EXPECT_EQ(inside, accumulation[size_t(outlet)]);
  EXPECT_EQ(times[size_t(outlet)], step[size_t(outlet)]);
  std::vector<double> withNaN = times;
  for (double& t : withNaN)
    if (t == -1.0)
      t = std::numeric_limits<double>::quiet_NaN();
  checkBandsAndTable(QStringLiteral("r"), withNaN, 5.0, d.cellArea());
}

// The outlet point (given in EPSG:4326, transformed to the DEM's UTM) snapped to the highest
// accumulation within SNAP_DISTANCE: beside the valley it lands on the valley; with 0 it stays put.
// A geographic DEM across the antimeridian (longitudes 179.5 to 180.55): an outlet given as -179.8
// is the DEM's 180.2, column 14 (it was "outside the DEM").
TEST_F(IsochronesAlgorithmTest, AnOutletsLongitudeIsWrappedOntoTheDem)
{
  TestDem d = valley();
  const double transform[6] = {179.5, 0.05, 0.0, 10.0, 0.0, -0.05};
  std::copy(transform, transform + 6, d.geoTransform);
  writeTiff(path("dateline.tif"), d, d.z, GDT_Float32, -9999.0, "EPSG:4326");
  QVariantMap parameters = allOutputs(QStringLiteral("w"));
  parameters.insert(QStringLiteral("SNAP_DISTANCE"), 0.0);
  const QgsPointXY outlet(-179.8 + 0.01, 10.0 - 20.5 * 0.05);
  const RunResult result = run(path("dateline.tif"), parameters, pointLayer({outlet}, QStringLiteral("EPSG:4326")));
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  EXPECT_TRUE(result.logContains(QStringLiteral("The outlet's longitude -179.79 is taken as 180.21")))
    << result.log.join('\n').toStdString();
  EXPECT_TRUE(result.logContains(QStringLiteral("falls in column 14, row 20"))) << result.log.join('\n').toStdString();
}

TEST_F(IsochronesAlgorithmTest, OutletIsTransformedAndSnapped)
{
  const TestDem d = valley();
  writeTiff(path("valley.tif"), d);
  const QgsCoordinateTransform toWgs84(QgsCoordinateReferenceSystem(QStringLiteral("EPSG:32633")),
                                       QgsCoordinateReferenceSystem(QStringLiteral("EPSG:4326")), QgsProject::instance());
  // A bit off the centre of cell (13, 20).
  const QgsPointXY point = toWgs84.transform(QgsPointXY(d.centre(13, 20).x() + 2.0, d.centre(13, 20).y() - 1.0));
  for (const double snap : {40.0, 0.0})
  {
    const QString prefix = snap > 0 ? QStringLiteral("s") : QStringLiteral("u");
    QVariantMap parameters = allOutputs(prefix);
    parameters.insert(QStringLiteral("VELOCITY_MODEL"), 0);
    parameters.insert(QStringLiteral("SPEED"), 2.0);
    parameters.insert(QStringLiteral("INTERVAL"), 0.25);
    parameters.insert(QStringLiteral("SNAP_DISTANCE"), snap);
    const RunResult result = run(path("valley.tif"), parameters, pointLayer({point}, QStringLiteral("EPSG:4326")));
    ASSERT_TRUE(result.ok) << result.error.toStdString() << result.log.join('\n').toStdString();
    // Within 40 m of (13, 20) the valley's cells (10, 17) to (10, 23) lie; (10, 23) drains them all.
    const int ox = snap > 0 ? 10 : 13, oy = snap > 0 ? 23 : 20;
    EXPECT_TRUE(result.logContains(QStringLiteral("falls in column 13, row 20"))) << result.log.join('\n').toStdString();
    EXPECT_TRUE(result.logContains(QStringLiteral("column %1, row %2").arg(ox).arg(oy)))
      << result.log.join('\n').toStdString();
    const auto times = read<double>(path(prefix + "_time.tif"), GDT_Float64);
    const auto codes = read<uint8_t>(path(prefix + "_dir.tif"), GDT_Byte);
    const auto receiver = receiversOf(codes, d.width, d.height);
    const int64_t outlet = oy * d.width + ox;
    // Through the outlet: the full path's length less what lies below the outlet.
    const double below = valleyPathLength(ox, oy) - (ox == 10 ? 7.5 : 12.5);
    std::vector<double> expected(times.size(), std::numeric_limits<double>::quiet_NaN());
    int64_t inside = 0;
    for (int64_t c = 0; c < int64_t(times.size()); ++c)
    {
      int64_t at = c;
      while (at >= 0 && at != outlet)
        at = receiver[size_t(at)];
      if (at != outlet)
      {
        ASSERT_EQ(times[size_t(c)], -1.0) << c;
        continue;
      }
      ++inside;
      const double t = (valleyPathLength(int(c % d.width), int(c / d.width)) - below) / 2.0 / 60.0;
      ASSERT_NEAR(times[size_t(c)], t, 1e-9 * t) << c;
      expected[size_t(c)] = times[size_t(c)];
    }
    // Snapped: the cells reaching the valley at row 23 or above (y + |x - 10| <= 23); else the diagonal
    // chain (13, 20), (14, 19) ... (20, 13).
    EXPECT_EQ(inside, snap > 0 ? 14 * 21 + (19 + 17 + 15 + 13 + 11 + 9 + 7 + 5 + 3 + 1) : 8);
    EXPECT_NEAR(result.outputs.value(QStringLiteral("OUTLET_X")).toDouble(), d.centre(ox, oy).x(), 1e-9);
    checkBandsAndTable(prefix, expected, 0.25, d.cellArea());
  }
}

// The Manning model with a MANNING raster (n = 0.3 on most cells, nodata and 0 on some, which fall
// back to MANNING_OVERLAND) equals the native core's travel times on the FILLED output; a rougher
// surface is slower; a raster on another grid is refused.
TEST_F(IsochronesAlgorithmTest, ManningModelWithARaster)
{
  const TestDem d = randomDem(80, 60, 12, 2);
  writeTiff(path("dem.tif"), d);
  std::vector<float> roughness(d.z.size(), 0.3f);
  for (size_t i = 0; i < roughness.size(); i += 7)
    roughness[i] = kNaN;
  for (size_t i = 3; i < roughness.size(); i += 11)
    roughness[i] = 0.0f;
  writeTiff(path("manning.tif"), d, roughness);

  QVariantMap base;
  base.insert(QStringLiteral("VELOCITY_MODEL"), 2);
  base.insert(QStringLiteral("RAINFALL"), 100.0);
  base.insert(QStringLiteral("CURVE_NUMBER"), 90.0);
  base.insert(QStringLiteral("MIN_SPEED"), 0.001);
  base.insert(QStringLiteral("MIXED_THRESHOLD"), 1.0);             // 133 cells
  base.insert(QStringLiteral("CHANNEL_THRESHOLD_MANNING"), 10.0);  // 1333 cells
  base.insert(QStringLiteral("INTERVAL"), 10.0);
  QVariantMap withRaster = base;
  withRaster.insert(QStringLiteral("TRAVEL_TIME"), path("m_time.tif"));
  withRaster.insert(QStringLiteral("FILLED"), path("m_filled.tif"));
  auto* layer = new QgsRasterLayer(path("manning.tif"), QStringLiteral("n"), QStringLiteral("gdal"));
  QgsProcessingContext context;
  context.temporaryLayerStore()->addMapLayer(layer);
  auto dem = std::make_unique<QgsRasterLayer>(path("dem.tif"), QStringLiteral("dem"), QStringLiteral("gdal"));
  withRaster.insert(QStringLiteral("MANNING"), layer->id());
  withRaster.insert(QStringLiteral("DEVICE"), 1);
  const RunResult result = runAlgorithm(kIsochrones, dem.get(), withRaster, context);
  ASSERT_TRUE(result.ok) << result.error.toStdString() << result.log.join('\n').toStdString();
  EXPECT_TRUE(result.logContains(QStringLiteral("valid DEM cells without a valid n"))) << result.log.join('\n').toStdString();
  QVariantMap without = base;
  without.insert(QStringLiteral("TRAVEL_TIME"), path("p_time.tif"));
  const RunResult plain = run(path("dem.tif"), without);
  ASSERT_TRUE(plain.ok) << plain.error.toStdString();

  // The native core on the filled DEM, with the raster as the algorithm reads it (nodata as NaN).
  std::vector<float> filled = read<float>(path("m_filled.tif"), GDT_Float32);
  for (float& v : filled)
    if (v == -9999.0f)
      v = kNaN;
  QgsRasterLayer filledLayer(path("m_filled.tif"), QStringLiteral("f"), QStringLiteral("gdal"));
  const gpugeo::DemRaster raster = gpugeo::openDemRaster(gpugeo::DemSource{path("m_filled.tif"), filledLayer.crs()}, 1);
  const dem::Grid grid = raster.grid(filled.data());
  const gpugeo::RunControl control;
  const auto directions = dem::flowDirections(gpugeo::Backend::Cpu, grid, true, 1, control);
  const auto accumulation = dem::flowAccumulation(gpugeo::Backend::Cpu, grid, directions, 1, control);
  const int64_t outlet = dem::largestBasinOutlet(grid, directions, accumulation);
  dem::VelocityModel model;
  model.kind = dem::VelocityModel::Kind::Manning;
  model.rainfall = 100.0;
  model.curveNumber = 90.0;
  model.minSpeed = 0.001;
  model.mixedArea = 1e4;
  model.channelAreaManning = 10e4;
  model.manning = roughness.data();
  const dem::TravelTimes expected = dem::travelTime(grid, directions, accumulation, outlet, model, 1, control);
  model.manning = nullptr;
  const dem::TravelTimes expectedPlain = dem::travelTime(grid, directions, accumulation, outlet, model, 1, control);

  const auto times = read<double>(path("m_time.tif"), GDT_Float64);
  const auto plainTimes = read<double>(path("p_time.tif"), GDT_Float64);
  int64_t slower = 0;
  for (size_t c = 0; c < times.size(); ++c)
  {
    if (std::isnan(expected.minutes[c]))
    {
      ASSERT_EQ(times[c], -1.0) << c;
      ASSERT_EQ(plainTimes[c], -1.0) << c;
      continue;
    }
    ASSERT_NEAR(times[c], expected.minutes[c], 1e-9 * expected.minutes[c]) << c;
    ASSERT_NEAR(plainTimes[c], expectedPlain.minutes[c], 1e-9 * expectedPlain.minutes[c]) << c;
    ASSERT_GE(times[c], plainTimes[c] * (1 - 1e-12)) << c;  // n = 0.3 or the default 0.15: never faster
    slower += times[c] > plainTimes[c] * (1 + 1e-9);
  }
  EXPECT_GT(slower, 100);
}

TEST_F(IsochronesAlgorithmTest, BadInputIsRefusedWithAClearMessageAndNoOutput)
{
  TestDem d = randomDem(40, 30, 13, 0);
  for (int y = 5; y < 17; ++y)
    for (int x = 5; x < 17; ++x)
      d.at(x, y) = kNaN;
  writeTiff(path("dem.tif"), d);
  TestDem empty = d;
  std::fill(empty.z.begin(), empty.z.end(), kNaN);
  writeTiff(path("empty.tif"), empty);
  TestDem smaller = d;
  smaller.width = 39;
  smaller.z.resize(size_t(39 * 30), 0.1f);
  writeTiff(path("manning_small.tif"), smaller);
  TestDem shifted = d;
  shifted.geoTransform[0] += 5.0;
  writeTiff(path("manning_shifted.tif"), shifted, std::vector<float>(d.z.size(), 0.1f));

  struct Case
  {
    QString input;
    QVariantMap parameters;
    std::vector<QgsPointXY> outlet;
    QString expected;
    QString outletType = QStringLiteral("Point");
  };
  const QgsPointXY inHole = d.centre(10, 10);
  const std::vector<Case> cases = {
    {path("empty.tif"), {}, {}, "has no valid cell"},
    {path("dem.tif"), {{"INTERVAL", -5}}, {},
     "INTERVAL (Isochrone interval (minutes; 0: automatic)) must be a number, 0 or more; got -5."},
    {path("dem.tif"), {{"VELOCITY_MODEL", 0}, {"SPEED", 0}}, {},
     "SPEED (Constant model: speed (m/s)) must be a number greater than 0; got 0."},
    {path("dem.tif"), {{"K_OVERLAND", -1}}, {},
     "K_OVERLAND (Slope model: overland coefficient k (m/s)) must be a number greater than 0; got -1."},
    {path("dem.tif"), {{"MIN_SPEED", 0}}, {}, "MIN_SPEED (Slope and Manning models: minimum speed (m/s)) must be a number greater than 0"},
    {path("dem.tif"), {{"VELOCITY_MODEL", 2}, {"RAINFALL", 0}}, {},
     "RAINFALL (Manning model: rainfall intensity (mm/h)) must be a number greater than 0"},
    {path("dem.tif"), {{"VELOCITY_MODEL", 2}, {"CURVE_NUMBER", 0}}, {},
     "CURVE_NUMBER (Manning model: SCS curve number) must be a number greater than 0 and at most 100; got 0."},
    {path("dem.tif"), {{"VELOCITY_MODEL", 2}, {"MIXED_THRESHOLD", 50}, {"CHANNEL_THRESHOLD_MANNING", 20}}, {},
     "CHANNEL_THRESHOLD_MANNING (the Manning model's channel threshold) must be at least MIXED_THRESHOLD (50 ha); got 20."},
    {path("dem.tif"), {{"SNAP_DISTANCE", -1}}, {}, "SNAP_DISTANCE (Snap distance (metres)) must be a number, 0 or more"},
    {path("dem.tif"), {}, {QgsPointXY(400000, 4100000)}, "lies outside the DEM, whose extent is x 500000 to 500400"},
    {path("dem.tif"), {{"SNAP_DISTANCE", 0}}, {inHole}, "lies on a nodata cell of the DEM (column 10, row 10)"},
    {path("dem.tif"), {{"SNAP_DISTANCE", 30}}, {inHole}, "no valid DEM cell lies within SNAP_DISTANCE = 30 m"},
    {path("dem.tif"), {}, {}, "The OUTLET layer has no point"},
    {path("dem.tif"), {}, {QgsPointXY(500100, 4099900)}, "OUTLET must be a point layer", QStringLiteral("LineString")},
    {path("dem.tif"), {{"VELOCITY_MODEL", 2}, {"MANNING", path("manning_small.tif")}}, {},
     "The MANNING raster must have the DEM's grid: it has 39 x 30 cells"},
    {path("dem.tif"), {{"VELOCITY_MODEL", 2}, {"MANNING", path("manning_shifted.tif")}}, {},
     "Resample it onto the DEM's grid first"},
    {path("dem.tif"), {{"INTERVAL", 1e-7}}, {}, "more than the limit of 10000: choose a larger interval"},
  };
  for (size_t i = 0; i < cases.size(); ++i)
  {
    const Case& c = cases[i];
    QVariantMap parameters = allOutputs(QStringLiteral("bad"));
    for (auto it = c.parameters.begin(); it != c.parameters.end(); ++it)
      parameters.insert(it.key(), it.value());
    // The "no point" case: an empty point layer.
    const bool emptyOutlet = c.expected.contains(QStringLiteral("has no point"));
    QgsVectorLayer* outlet = !c.outlet.empty() || emptyOutlet ? pointLayer(c.outlet, QStringLiteral("EPSG:32633"), c.outletType)
                                                              : nullptr;
    const RunResult result = run(c.input, parameters, outlet);
    EXPECT_FALSE(result.ok) << c.expected.toStdString();
    EXPECT_TRUE(result.error.contains(c.expected)) << c.expected.toStdString() << "\n got: " << result.error.toStdString();
    for (const QVariant& output : allOutputs(QStringLiteral("bad")))
      EXPECT_FALSE(QFile::exists(output.toString())) << c.expected.toStdString() << ": " << output.toString().toStdString();
  }
}

// Canceled midway: no output is left behind.
TEST_F(IsochronesAlgorithmTest, CancelLeavesNoOutputBehind)
{
  const TestDem d = randomDem(300, 260, 14);
  writeTiff(path("dem.tif"), d);
  auto layer = std::make_unique<QgsRasterLayer>(path("dem.tif"), QStringLiteral("dem"), QStringLiteral("gdal"));
  QgsProcessingContext context;
  QVariantMap parameters = allOutputs(QStringLiteral("c"));
  parameters.insert(QStringLiteral("DEVICE"), 1);
  parameters.insert(QStringLiteral("INTERVAL"), 5.0);
  const RunResult result = runAlgorithm(kIsochrones, layer.get(), parameters, context, true);
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(result.error.contains(QStringLiteral("Canceled"))) << result.error.toStdString();
  for (const QVariant& output : allOutputs(QStringLiteral("c")))
    EXPECT_FALSE(QFile::exists(output.toString())) << output.toString().toStdString();
}

// Tile by tile (a budget of 1 MiB, far below the in-memory run's ~4 MiB, and TILED): the rasters bit
// for bit (travel times within 1e-12 relative), the watershed, the bands' polygons and the table
// identical to the in-memory run's; with the slope model and the automatic outlet, and with the
// Manning model, a MANNING raster and a snapped outlet point. The scratch folder is gone after.
TEST_F(IsochronesAlgorithmTest, TiledRunsGiveTheInMemoryOutputs)
{
  // The hills in a valley running north: large basins whose paths cross many tiles.
  TestDem d = randomDem(300, 260, 21, 6);
  for (int y = 0; y < d.height; ++y)
    for (int x = 0; x < d.width; ++x)
      d.z[size_t(y * d.width + x)] += 1.5f * float(std::abs(x - 150)) + 0.3f * float(y);
  writeTiff(path("dem.tif"), d);
  std::vector<float> roughness(d.z.size(), 0.1f);
  for (size_t i = 0; i < roughness.size(); i += 5)
    roughness[i] = i % 3 ? kNaN : 0.4f;
  writeTiff(path("manning.tif"), d, roughness);
  QVariantMap manning{{QStringLiteral("VELOCITY_MODEL"), 2}, {QStringLiteral("RAINFALL"), 60.0},
                      {QStringLiteral("MIXED_THRESHOLD"), 1.0}, {QStringLiteral("CHANNEL_THRESHOLD_MANNING"), 5.0},
                      {QStringLiteral("INTERVAL"), 3.0}};
  const QVariantMap slope{{QStringLiteral("CHANNEL_THRESHOLD"), 0.02}};
  for (const bool withManning : {false, true})
    for (const QVariantMap& tiling : {QVariantMap{{QStringLiteral("MEMORY_BUDGET"), 1}},
                                      QVariantMap{{QStringLiteral("TILED"), true}}})
    {
      SCOPED_TRACE(std::string(withManning ? "Manning" : "slope") +
                   (tiling.contains(QStringLiteral("TILED")) ? ", TILED" : ", MEMORY_BUDGET=1"));
      const auto runBoth = [&](const QString& prefix, const QVariantMap& extra) {
        QVariantMap parameters = allOutputs(prefix);
        for (auto it = (withManning ? manning : slope).begin(); it != (withManning ? manning : slope).end(); ++it)
          parameters.insert(it.key(), it.value());
        for (auto it = extra.begin(); it != extra.end(); ++it)
          parameters.insert(it.key(), it.value());
        QgsVectorLayer* outlet = withManning ? pointLayer({d.centre(151, 30)}) : nullptr;
        if (withManning)
          parameters.insert(QStringLiteral("SNAP_DISTANCE"), 60.0);
        if (!withManning)
          return run(path("dem.tif"), parameters, outlet);
        QgsProcessingContext context;
        auto* layer = new QgsRasterLayer(path("manning.tif"), QStringLiteral("n"), QStringLiteral("gdal"));
        context.temporaryLayerStore()->addMapLayer(layer);
        context.temporaryLayerStore()->addMapLayer(outlet);
        parameters.insert(QStringLiteral("MANNING"), layer->id());
        parameters.insert(QStringLiteral("OUTLET"), outlet->id());
        parameters.insert(QStringLiteral("DEVICE"), 1);
        auto dem = std::make_unique<QgsRasterLayer>(path("dem.tif"), QStringLiteral("dem"), QStringLiteral("gdal"));
        return runAlgorithm(kIsochrones, dem.get(), parameters, context);
      };
      const RunResult memory = runBoth(QStringLiteral("m"), {});
      ASSERT_TRUE(memory.ok) << memory.error.toStdString();
      EXPECT_TRUE(memory.logContains(QStringLiteral("In memory: the run needs about")));
      const RunResult tiled = runBoth(QStringLiteral("t"), tiling);
      ASSERT_TRUE(tiled.ok) << tiled.error.toStdString() << tiled.log.join('\n').toStdString();
      EXPECT_TRUE(tiled.logContains(QStringLiteral("Tile by tile: the in-memory run would need about")))
        << tiled.log.join('\n').toStdString();
      EXPECT_TRUE(tiled.logContains(QStringLiteral("Scratch space: "))) << tiled.log.join('\n').toStdString();
      // The same log lines: raised cells, the outlet, the watershed and bands, the speeds.
      for (const QString& line : memory.log)
        if (line.startsWith(QStringLiteral("Filling raised")) || line.startsWith(QStringLiteral("Outlet")) ||
            line.startsWith(QStringLiteral("Speeds from")))
          EXPECT_TRUE(tiled.logContains(line)) << line.toStdString();
      for (const QString& key : {QStringLiteral("OUTLET_X"), QStringLiteral("OUTLET_Y"), QStringLiteral("INTERVAL_MIN"),
                                 QStringLiteral("WATERSHED_AREA_KM2")})
        EXPECT_EQ(tiled.outputs.value(key).toDouble(), memory.outputs.value(key).toDouble()) << key.toStdString();
      EXPECT_NEAR(tiled.outputs.value(QStringLiteral("MAX_TIME_MIN")).toDouble(),
                  memory.outputs.value(QStringLiteral("MAX_TIME_MIN")).toDouble(),
                  1e-12 * memory.outputs.value(QStringLiteral("MAX_TIME_MIN")).toDouble());

      // Rasters.
      EXPECT_EQ(read<float>(path("t_filled.tif"), GDT_Float32), read<float>(path("m_filled.tif"), GDT_Float32));
      EXPECT_EQ(read<uint8_t>(path("t_dir.tif"), GDT_Byte), read<uint8_t>(path("m_dir.tif"), GDT_Byte));
      EXPECT_EQ(read<int32_t>(path("t_acc.tif"), GDT_Int32), read<int32_t>(path("m_acc.tif"), GDT_Int32));
      const auto a = read<double>(path("t_time.tif"), GDT_Float64), b = read<double>(path("m_time.tif"), GDT_Float64);
      ASSERT_EQ(a.size(), b.size());
      int64_t off = 0, inside = 0;
      for (size_t i = 0; i < a.size(); ++i)
      {
        inside += b[i] >= 0;
        off += (a[i] < 0) != (b[i] < 0) || std::fabs(a[i] - b[i]) > 1e-12 * std::fabs(b[i]);
      }
      EXPECT_EQ(off, 0);
      EXPECT_GT(inside, 5000) << memory.log.join(QLatin1Char(10)).toStdString();

      // Vectors: the same features, attributes and geometries.
      for (const QString& layer : {QStringLiteral("watershed"), QStringLiteral("isochrones"), QStringLiteral("table")})
      {
        QgsVectorLayer m(path("m_" + layer + ".gpkg"), QStringLiteral("m"), QStringLiteral("ogr"));
        QgsVectorLayer t(path("t_" + layer + ".gpkg"), QStringLiteral("t"), QStringLiteral("ogr"));
        const std::vector<QgsFeature> fm = gpugeo::test::featuresOf(&m), ft = gpugeo::test::featuresOf(&t);
        ASSERT_EQ(fm.size(), ft.size()) << layer.toStdString();
        EXPECT_GE(fm.size(), 1u);
        for (size_t k = 0; k < fm.size(); ++k)
        {
          const QgsAttributes am = fm[k].attributes(), at = ft[k].attributes();
          ASSERT_EQ(am.size(), at.size());
          for (int f = 1; f < am.size(); ++f)  // past the fid
            if (layer == QLatin1String("watershed") && f == 3)  // t_max: within 1e-12
              EXPECT_NEAR(at[f].toDouble(), am[f].toDouble(), 1e-12 * am[f].toDouble());
            else
              EXPECT_EQ(at[f], am[f]) << layer.toStdString() << " feature " << k << " field " << f;
          EXPECT_EQ(ft[k].geometry().asWkt(17), fm[k].geometry().asWkt(17)) << layer.toStdString() << " " << k;
        }
      }
      EXPECT_TRUE(QDir(QgsProcessingUtils::tempFolder())
                    .entryList({QStringLiteral("gpugeo-scratch-*")}, QDir::AllEntries)
                    .isEmpty());
    }
}
