// gpugeo:filldepressions, gpugeo:flowdirection and gpugeo:flowaccumulation through the QGIS API: small
// GeoTIFFs written here with GDAL (pits, flats, ties, nodata holes, non-square pixels, several bands, a
// geographic CRS), every cell of the outputs compared with the native serial references
// (Priority-Flood, D8 by brute force with Barnes' flat mask, accumulation by walking downstream), bit
// for bit; the three chained; bad input and cancel.
#include "dem_algorithms_fixture.h"

using namespace gpugeo::test::dem_algorithms;


// Float32 with a nodata value and NaN holes, non-square pixels: the filled DEM is Priority-Flood's,
// bit for bit, in the input's geotransform, CRS and nodata.
TEST_F(DemAlgorithmsTest, FillEqualsPriorityFloodBitForBit)
{
  const TestDem d = randomDem(97, 83, 1);
  writeTiff(path("dem.tif"), d);
  const RunResult result = run(kFill, path("dem.tif"), {{QStringLiteral("OUTPUT"), path("filled.tif")}});
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  EXPECT_EQ(result.outputs.value(QStringLiteral("OUTPUT")).toString(), path("filled.tif"));

  double noData = 0, transform[6];
  const auto filled = read<float>(path("filled.tif"), GDT_Float32, &noData, transform);
  EXPECT_EQ(noData, -9999.0);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(transform[i], d.geoTransform[i]) << i;
  const auto reference = dem::reference::priorityFlood(readerGrid(path("dem.tif"), d.z).grid);
  int64_t raised = 0;
  for (size_t i = 0; i < filled.size(); ++i)
  {
    if (std::isnan(d.z[i]))
    {
      ASSERT_EQ(filled[i], -9999.0f) << i;
      continue;
    }
    ASSERT_TRUE(sameBits(filled[i], reference[i])) << "cell " << i << ": " << filled[i] << " vs " << reference[i];
    ASSERT_GE(filled[i], d.z[i]);
    raised += filled[i] > d.z[i];
  }
  EXPECT_GT(raised, 48);  // the flat-floored basin at least
  EXPECT_TRUE(result.logContains(QStringLiteral("Raised %1 of").arg(raised))) << result.log.join('\n').toStdString();
  EXPECT_TRUE(result.logContains(QStringLiteral("Backend: CPU")));
  EXPECT_TRUE(result.logContains(QStringLiteral("Stage times: read")));
  EXPECT_TRUE(result.logContains(QStringLiteral("fill")));
  EXPECT_TRUE(result.logContains(QStringLiteral("write")));
  EXPECT_TRUE(result.logContains(QStringLiteral("Cells of 10 x 7.5 m")));

  QgsRasterLayer output(path("filled.tif"), QStringLiteral("filled"), QStringLiteral("gdal"));
  EXPECT_EQ(output.crs().authid(), QStringLiteral("EPSG:32633"));
}

// FLATS: the exact fill, then each flat cell raised by its gradient (Barnes et al.'s mask, or the
// steps to the outlet) in float32 steps, as the native core raises them; plain D8 drains every cell.
TEST_F(DemAlgorithmsTest, FlatsResolvedOrGivenAnEpsilonGradientDrainWithPlainD8)
{
  const TestDem d = randomDem(97, 83, 1);
  writeTiff(path("dem.tif"), d);
  const auto reader = readerGrid(path("dem.tif"), d.z);
  std::vector<float> exact = dem::reference::priorityFlood(reader.grid);
  dem::Grid exactGrid = reader.grid;
  exactGrid.z = exact.data();
  gpugeo::RunControl control;
  for (int flats : {1, 2})
  {
    const QString out = path(QStringLiteral("flats%1.tif").arg(flats));
    const RunResult result = run(kFill, path("dem.tif"), {{QStringLiteral("FLATS"), flats}, {QStringLiteral("OUTPUT"), out}});
    ASSERT_TRUE(result.ok) << result.error.toStdString();
    EXPECT_TRUE(result.logContains(QStringLiteral("cells raised by their gradient"))) << flats;
    const auto got = read<float>(out, GDT_Float32);
    const std::vector<int32_t> mask =
      dem::flatMask(gpugeo::Backend::Cpu, exactGrid, 1, control, nullptr,
                    flats == 1 ? dem::FlatGradient::Combined : dem::FlatGradient::TowardsOutlet);
    const dem::RaisedFlats want = dem::raiseFlats(exactGrid, mask);
    int64_t raisedCells = 0;
    for (size_t i = 0; i < got.size(); ++i)
    {
      if (std::isnan(d.z[i]))
        continue;
      ASSERT_TRUE(sameBits(got[i], want.z[i])) << "FLATS " << flats << " cell " << i;
      raisedCells += got[i] > exact[i];
    }
    EXPECT_GT(raisedCells, 0) << flats;
    std::vector<float> values = got;
    for (size_t i = 0; i < values.size(); ++i)
      if (std::isnan(d.z[i]))
        values[i] = std::numeric_limits<float>::quiet_NaN();
    dem::Grid raisedGrid = reader.grid;
    raisedGrid.z = values.data();
    const std::vector<uint8_t> dirs = dem::flowDirections(gpugeo::Backend::Cpu, raisedGrid, false, 1, control);
    EXPECT_EQ(std::count(dirs.begin(), dirs.end(), dem::kNoFlow), 0) << "FLATS " << flats;
  }
}

// The shipped SRTM DEM warped to UTM 16N at 80 m by bilinear resampling (gdalwarp -t_srs EPSG:32616
// -tr 80 80 -tap -r bilinear -dstnodata -9999 -ot Float32): its flats have rims a few float32 steps
// above them, which the raised flat cells overtook (a cell 0.0004 m above a flat became a pit that
// 2,406 cells drained into). With either FLATS option no inner cell may be left without a lower
// neighbour, and plain D8 gives every cell a direction.
TEST_F(DemAlgorithmsTest, RaisedFlatsOfAWarpedSrtmDemLeaveNoPit)
{
  const QByteArray source = QByteArray(GPUGEO_TEST_DATA_DIR) + "/jacksboro_srtm3.tif";
  GDALDatasetH input = GDALOpen(source.constData(), GA_ReadOnly);
  ASSERT_TRUE(input);
  const char* arguments[] = {"-t_srs", "EPSG:32616", "-tr", "80", "80", "-tap", "-r", "bilinear",
                             "-dstnodata", "-9999", "-ot", "Float32", nullptr};
  GDALWarpAppOptions* options = GDALWarpAppOptionsNew(const_cast<char**>(arguments), nullptr);
  const QByteArray warped = path("warped.tif").toUtf8();
  GDALDatasetH output = GDALWarp(warped.constData(), nullptr, 1, &input, options, nullptr);
  GDALWarpAppOptionsFree(options);
  ASSERT_TRUE(output);
  GDALClose(output);
  GDALClose(input);
  double noData = 0;
  for (int flats : {1, 2})
  {
    const QString out = path(QStringLiteral("warped_flats%1.tif").arg(flats));
    const RunResult result = run(kFill, path("warped.tif"), {{QStringLiteral("FLATS"), flats}, {QStringLiteral("OUTPUT"), out}});
    ASSERT_TRUE(result.ok) << result.error.toStdString();
    int width = 0, height = 0;
    double transform[6];
    std::vector<float> z = readRaster<float>(out, GDT_Float32, width, height, transform, &noData);
    for (float& v : z)
      if (v == float(noData))
        v = kNaN;
    int64_t pits = 0;
    for (int y = 1; y + 1 < height; ++y)
      for (int x = 1; x + 1 < width; ++x)
      {
        const float v = z[size_t(y) * width + x];
        bool inner = !std::isnan(v), lower = false;
        for (int d = 0; d < 8 && inner; ++d)
        {
          const float n = z[size_t(y + dem::kDy[d]) * width + x + dem::kDx[d]];
          inner = !std::isnan(n);
          lower = lower || n < v;
        }
        pits += inner && !lower;
      }
    EXPECT_EQ(pits, 0) << "FLATS " << flats << ": inner cells without a lower neighbour";
    EXPECT_TRUE(result.logContains(QStringLiteral("were raised in turn"))) << "FLATS " << flats;

    const QString directions = path(QStringLiteral("warped_dirs%1.tif").arg(flats));
    const RunResult d8 = run(kDirection, out, {{QStringLiteral("RESOLVE_FLATS"), false}, {QStringLiteral("OUTPUT"), directions}});
    ASSERT_TRUE(d8.ok) << d8.error.toStdString();
    EXPECT_TRUE(d8.logContains(QStringLiteral("; 0 cells have no direction."))) << d8.log.join('\n').toStdString();
    const auto codes = read<uint8_t>(directions, GDT_Byte);
    EXPECT_EQ(std::count(codes.begin(), codes.end(), uint8_t(0)), 0) << "FLATS " << flats << ": cells without a direction";
  }
}

// An Int16 DEM in band 2 of 2 (band 1 is something else), nodata -32768: the fill of band 2, with the
// nodata value carried over; a raster without nodata value keeps NaN as nodata.
TEST_F(DemAlgorithmsTest, FillReadsTheChosenBandAndItsNoData)
{
  TestDem d = randomDem(60, 45, 2);
  for (float& v : d.z)
    if (!std::isnan(v))
      v = std::round(v);
  std::vector<float> other(d.z.size());
  for (size_t i = 0; i < other.size(); ++i)
    other[i] = float(i % 17);
  writeTiff(path("two.tif"), d, {other, d.z}, GDT_Int16, -32768.0);
  const RunResult result = run(kFill, path("two.tif"), {{QStringLiteral("BAND"), 2}, {QStringLiteral("OUTPUT"), path("f2.tif")}});
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  double noData = 0;
  const auto filled = read<float>(path("f2.tif"), GDT_Float32, &noData);
  EXPECT_EQ(noData, -32768.0);
  const auto reference = dem::reference::priorityFlood(readerGrid(path("two.tif"), d.z, 2).grid);
  for (size_t i = 0; i < filled.size(); ++i)
    ASSERT_TRUE(std::isnan(d.z[i]) ? filled[i] == -32768.0f : sameBits(filled[i], reference[i])) << i;

  // No nodata value: NaN is nodata, and the output's nodata is NaN.
  writeTiff(path("nan.tif"), d, GDT_Float32, std::nullopt);
  const RunResult nan = run(kFill, path("nan.tif"), {{QStringLiteral("OUTPUT"), path("fnan.tif")}});
  ASSERT_TRUE(nan.ok) << nan.error.toStdString();
  const auto filledNan = read<float>(path("fnan.tif"), GDT_Float32, &noData);
  EXPECT_TRUE(std::isnan(noData));
  for (size_t i = 0; i < filledNan.size(); ++i)
    ASSERT_TRUE(std::isnan(d.z[i]) ? std::isnan(filledNan[i]) : sameBits(filledNan[i], reference[i])) << i;

  // Infinities in a float32 band are nodata, counted in a warning; the fill is that of the DEM with
  // those cells as nodata.
  TestDem infinite = d;
  infinite.z[100] = std::numeric_limits<float>::infinity();
  infinite.z[1000] = -std::numeric_limits<float>::infinity();
  writeTiff(path("inf.tif"), infinite, GDT_Float32, -9999.0);
  const RunResult inf = run(kFill, path("inf.tif"), {{QStringLiteral("OUTPUT"), path("finf.tif")}});
  ASSERT_TRUE(inf.ok) << inf.error.toStdString();
  EXPECT_TRUE(inf.logContains(QStringLiteral("2 cells hold an infinite value")));
  TestDem holed = d;
  holed.z[100] = holed.z[1000] = std::nanf("");
  const auto holedReference = dem::reference::priorityFlood(readerGrid(path("inf.tif"), holed.z).grid);
  const auto filledInf = read<float>(path("finf.tif"), GDT_Float32, &noData);
  for (size_t i = 0; i < filledInf.size(); ++i)
    ASSERT_TRUE(std::isnan(holed.z[i]) ? filledInf[i] == -9999.0f : sameBits(filledInf[i], holedReference[i])) << i;
}

// Flow directions against the brute-force D8 with the native flat mask, both encodings, with and
// without flat resolution, on an unfilled DEM (pits) and on its fill (flats).
TEST_F(DemAlgorithmsTest, DirectionsMatchTheReferenceInBothEncodings)
{
  TestDem d = randomDem(90, 70, 3);
  // A tie: a cone whose cells have equal drops east and south-east is built in by the quantisation.
  writeTiff(path("dem.tif"), d);
  const ReaderGrid raw = readerGrid(path("dem.tif"), d.z);
  TestDem f = d;
  f.z = dem::reference::priorityFlood(raw.grid);
  writeTiff(path("filled.tif"), f);
  const ReaderGrid filled = readerGrid(path("filled.tif"), f.z);
  const gpugeo::RunControl control;

  for (const ReaderGrid* input : {&raw, &filled})
  {
    const QString source = input == &raw ? path("dem.tif") : path("filled.tif");
    for (bool resolve : {true, false})
    {
      const std::vector<int32_t> mask =
        resolve ? dem::flatMask(gpugeo::Backend::Cpu, input->grid, 1, control) : std::vector<int32_t>();
      const std::vector<uint8_t> expected = dem::reference::directions(input->grid, mask);
      for (int encoding : {0, 1})
      {
        const QString out = path(QStringLiteral("dir_%1_%2_%3.tif").arg(input == &raw).arg(resolve).arg(encoding));
        const RunResult result = run(kDirection, source,
                                     {{QStringLiteral("RESOLVE_FLATS"), resolve},
                                      {QStringLiteral("ENCODING"), encoding},
                                      {QStringLiteral("OUTPUT"), out}});
        ASSERT_TRUE(result.ok) << result.error.toStdString();
        double noData = 0, transform[6];
        const auto codes = read<uint8_t>(out, GDT_Byte, &noData, transform);
        EXPECT_EQ(noData, 255.0);
        EXPECT_EQ(transform[5], -7.5);
        int64_t pits = 0;
        for (size_t i = 0; i < codes.size(); ++i)
        {
          const uint8_t got = encoding == 0 ? decodeEsri(codes[i]) : decodeClockwise(codes[i]);
          ASSERT_EQ(got, expected[i]) << "cell " << i << " resolve " << resolve << " encoding " << encoding;
          pits += got == dem::kNoFlow;
        }
        EXPECT_TRUE(result.logContains(QStringLiteral("%1 cells have no direction").arg(pits)))
          << result.log.join('\n').toStdString();
        if (input == &filled && resolve)
          EXPECT_EQ(pits, 0);  // a filled DEM with its flats resolved drains everywhere
        else
          EXPECT_GT(pits, 0);
        EXPECT_TRUE(result.logContains(resolve ? QStringLiteral("flats") : QStringLiteral("directions")));
      }
    }
  }
}

// A geographic DEM (3 arc-seconds at 60 degrees north): each row's cell sizes from the WGS 84
// ellipsoid at its latitude; the directions and the areas use them.
TEST_F(DemAlgorithmsTest, GeographicCellSizesFromTheEllipsoid)
{
  TestDem d = randomDem(80, 120, 4, 1);
  const double step = 1.0 / 1200.0;
  const double gt[6] = {10.0, step, 0.0, 60.05, 0.0, -step};
  std::copy(gt, gt + 6, d.geoTransform);
  writeTiff(path("geo.tif"), d, GDT_Float32, -9999.0, "EPSG:4326");
  TestDem f = d;
  const ReaderGrid raw = readerGrid(path("geo.tif"), d.z);
  // The formula of the help, with WGS 84's axes.
  const double a = 6378137.0, b = 6356752.314245179, e2 = 1.0 - b * b / (a * a), pi = std::acos(-1.0);
  for (int y = 0; y < d.height; ++y)
  {
    const double phi = (60.05 - (y + 0.5) * step) * pi / 180.0;
    const double s2 = std::sin(phi) * std::sin(phi);
    const double width = a / std::sqrt(1.0 - e2 * s2) * std::cos(phi) * step * pi / 180.0;
    const double height = a * (1.0 - e2) / std::pow(1.0 - e2 * s2, 1.5) * step * pi / 180.0;
    EXPECT_NEAR(raw.raster.cellWidth[size_t(y)], width, 1e-9 * width) << y;
    EXPECT_NEAR(raw.raster.cellHeight[size_t(y)], height, 1e-9 * height) << y;
  }
  EXPECT_NEAR(raw.raster.cellWidth[0], 46.43, 0.02);   // 3" of longitude at 60 N
  EXPECT_NEAR(raw.raster.cellHeight[0], 92.84, 0.02);  // 3" of latitude
  EXPECT_LT(raw.raster.cellWidth[0], raw.raster.cellWidth[size_t(d.height - 1)]);

  f.z = dem::reference::priorityFlood(raw.grid);
  writeTiff(path("geo_filled.tif"), f, GDT_Float32, -9999.0, "EPSG:4326");
  const ReaderGrid filled = readerGrid(path("geo_filled.tif"), f.z);
  const RunResult result = run(kDirection, path("geo_filled.tif"), {{QStringLiteral("OUTPUT"), path("geo_dir.tif")}});
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  EXPECT_TRUE(result.logContains(QStringLiteral("from the ellipsoid"))) << result.log.join('\n').toStdString();
  const gpugeo::RunControl control;
  const auto expected =
    dem::reference::directions(filled.grid, dem::flatMask(gpugeo::Backend::Cpu, filled.grid, 1, control));
  const auto codes = read<uint8_t>(path("geo_dir.tif"), GDT_Byte);
  std::vector<uint8_t> got(codes.size());
  for (size_t i = 0; i < codes.size(); ++i)
  {
    got[i] = decodeEsri(codes[i]);
    ASSERT_EQ(got[i], expected[i]) << i;
  }
  // On square-degree cells at 60 N a cell is half as wide as it is high: with degrees as lengths
  // the directions would differ.
  std::vector<double> degrees(size_t(d.height), 1.0);
  const dem::Grid naive{f.z.data(), f.width, f.height, degrees.data(), degrees.data()};
  EXPECT_NE(dem::reference::directions(naive, dem::flatMask(gpugeo::Backend::Cpu, naive, 1, control)), expected);

  const RunResult accumulation = run(kAccumulation, path("geo_dir.tif"),
                                     {{QStringLiteral("UNITS"), 1},
                                      {QStringLiteral("OUTPUT_CELLS"), path("geo_cells.tif")},
                                      {QStringLiteral("OUTPUT_AREA"), path("geo_area.tif")}});
  ASSERT_TRUE(accumulation.ok) << accumulation.error.toStdString();
  const dem::Accumulation reference = dem::reference::accumulation(filled.grid, expected);
  const auto area = read<double>(path("geo_area.tif"), GDT_Float64);
  for (size_t i = 0; i < area.size(); ++i)
    ASSERT_EQ(area[i], std::isnan(f.z[i]) ? -1.0 : double(reference.area[i]) * 1e-12) << i;
}

// Accumulation of the directions of a filled DEM against the reference walk: cells, m² and km²;
// the outlets' counts add up to the valid cells. Both encodings read back.
TEST_F(DemAlgorithmsTest, AccumulationMatchesTheReferenceAndEveryCellDrains)
{
  const TestDem d = randomDem(110, 75, 5);
  writeTiff(path("dem.tif"), d);
  // The chain through the algorithms.
  ASSERT_TRUE(run(kFill, path("dem.tif"), {{QStringLiteral("OUTPUT"), path("filled.tif")}}).ok);
  for (int encoding : {0, 1})
  {
    const QString directions = path(QStringLiteral("dir%1.tif").arg(encoding));
    ASSERT_TRUE(run(kDirection, path("filled.tif"), {{QStringLiteral("ENCODING"), encoding}, {QStringLiteral("OUTPUT"), directions}}).ok);
    for (int units : {0, 1})
    {
      const QString cells = path(QStringLiteral("cells%1%2.tif").arg(encoding).arg(units));
      const QString area = path(QStringLiteral("area%1%2.tif").arg(encoding).arg(units));
      const RunResult result = run(kAccumulation, directions,
                                   {{QStringLiteral("ENCODING"), encoding},
                                    {QStringLiteral("UNITS"), units},
                                    {QStringLiteral("OUTPUT_CELLS"), cells},
                                    {QStringLiteral("OUTPUT_AREA"), area}});
      ASSERT_TRUE(result.ok) << result.error.toStdString();
      EXPECT_TRUE(result.logContains(QStringLiteral("accumulation"))) << result.log.join('\n').toStdString();

      std::vector<float> filled = read<float>(path("filled.tif"), GDT_Float32);
      for (float& v : filled)
        if (v == -9999.0f)
          v = kNaN;
      const ReaderGrid grid = readerGrid(path("filled.tif"), filled);
      const gpugeo::RunControl control;
      const auto expectedDirections =
        dem::reference::directions(grid.grid, dem::flatMask(gpugeo::Backend::Cpu, grid.grid, 1, control));
      const dem::Accumulation expected = dem::reference::accumulation(grid.grid, expectedDirections);
      double noData = 0, areaNoData = 0;
      const auto gotCells = read<int32_t>(cells, GDT_Int32, &noData);
      const auto gotArea = read<double>(area, GDT_Float64, &areaNoData);
      EXPECT_EQ(noData, -1.0);
      EXPECT_EQ(areaNoData, -1.0);
      int64_t valid = 0, atOutlets = 0, largest = 0;
      const int w = d.width, h = d.height;
      for (int64_t c = 0; c < int64_t(gotCells.size()); ++c)
      {
        const size_t i = size_t(c);
        if (std::isnan(filled[i]))
        {
          ASSERT_EQ(gotCells[i], -1);
          ASSERT_EQ(gotArea[i], -1.0);
          continue;
        }
        ++valid;
        ASSERT_EQ(gotCells[i], expected.cells[i]) << c;
        ASSERT_EQ(gotArea[i], double(expected.area[i]) * (units ? 1e-12 : 1e-6)) << c;
        ASSERT_LT(expectedDirections[i], 8) << "a filled DEM with resolved flats has no pit";
        const int dd = expectedDirections[i];
        const int64_t nx = c % w + dem::kDx[dd], ny = c / w + dem::kDy[dd];
        if (nx < 0 || ny < 0 || nx >= w || ny >= h || std::isnan(filled[size_t(ny * w + nx)]))
        {
          atOutlets += gotCells[i];
          largest = std::max<int64_t>(largest, gotCells[i]);
        }
      }
      EXPECT_EQ(atOutlets, valid);
      EXPECT_TRUE(result.logContains(QStringLiteral(": %1 cells,").arg(largest))) << result.log.join('\n').toStdString();
      EXPECT_TRUE(result.logContains(QStringLiteral("and 0 pits"))) << result.log.join('\n').toStdString();
    }
  }
}

// OUTPUT_AREA is optional: without it only the cells are written.
TEST_F(DemAlgorithmsTest, AccumulationAreaIsOptional)
{
  TestDem d;
  d.width = 3;
  d.height = 2;
  // All drain east, out of the grid.
  d.z = {1, 1, 1, 1, 1, 1};
  writeTiff(path("dir.tif"), d, GDT_Byte, 255.0);
  const RunResult result = run(kAccumulation, path("dir.tif"), {{QStringLiteral("OUTPUT_CELLS"), path("cells.tif")}});
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  EXPECT_FALSE(result.outputs.contains(QStringLiteral("OUTPUT_AREA")));
  EXPECT_EQ(read<int32_t>(path("cells.tif"), GDT_Int32), (std::vector<int32_t>{1, 2, 3, 1, 2, 3}));
}

// Loaded into a project, the directions get one class per code and the accumulation a ramp.
TEST_F(DemAlgorithmsTest, OutputsLoadedIntoAProjectGetDefaultStyles)
{
  const TestDem d = randomDem(50, 40, 6);
  writeTiff(path("dem.tif"), d);
  ASSERT_TRUE(run(kFill, path("dem.tif"), {{QStringLiteral("OUTPUT"), path("filled.tif")}}).ok);
  QgsProcessingContext context;
  context.addLayerToLoadOnCompletion(path("dir.tif"), QgsProcessingContext::LayerDetails(QStringLiteral("dir"), QgsProject::instance()));
  ASSERT_TRUE(run(kDirection, path("filled.tif"), {{QStringLiteral("OUTPUT"), path("dir.tif")}}, context).ok);
  QgsRasterLayer directions(path("dir.tif"), QStringLiteral("dir"));
  RecordingFeedback feedback;
  ASSERT_TRUE(context.layerToLoadOnCompletionDetails(path("dir.tif")).postProcessor());
  context.layerToLoadOnCompletionDetails(path("dir.tif")).postProcessor()->postProcessLayer(&directions, context, &feedback);
  auto* paletted = dynamic_cast<QgsPalettedRasterRenderer*>(directions.renderer());
  ASSERT_TRUE(paletted);
  QList<double> values;
  for (const QgsPalettedRasterRenderer::Class& c : paletted->classes())
    values << c.value;
  EXPECT_EQ(values, (QList<double>{1, 2, 4, 8, 16, 32, 64, 128}));

  QgsProcessingContext second;
  second.addLayerToLoadOnCompletion(path("cells.tif"), QgsProcessingContext::LayerDetails(QStringLiteral("cells"), QgsProject::instance()));
  ASSERT_TRUE(run(kAccumulation, path("dir.tif"), {{QStringLiteral("OUTPUT_CELLS"), path("cells.tif")}}, second).ok);
  QgsRasterLayer cells(path("cells.tif"), QStringLiteral("cells"));
  second.layerToLoadOnCompletionDetails(path("cells.tif")).postProcessor()->postProcessLayer(&cells, second, &feedback);
  auto* ramp = dynamic_cast<QgsSingleBandPseudoColorRenderer*>(cells.renderer());
  ASSERT_TRUE(ramp);
  EXPECT_EQ(ramp->classificationMin(), 1.0);
  EXPECT_GT(ramp->classificationMax(), 1.0);
}

TEST_F(DemAlgorithmsTest, BadInputIsRefusedWithAClearMessageAndNoOutput)
{
  TestDem d = randomDem(20, 15, 7, 0);
  writeTiff(path("good.tif"), d);
  TestDem empty = d;
  std::fill(empty.z.begin(), empty.z.end(), kNaN);
  writeTiff(path("empty.tif"), empty);
  TestDem rotated = d;
  rotated.geoTransform[2] = 0.5;
  writeTiff(path("rotated.tif"), rotated);
  TestDem southUp = d;
  southUp.geoTransform[5] = 7.5;
  writeTiff(path("southup.tif"), southUp);
  writeTiff(path("nogeo.tif"), d, {d.z}, GDT_Float32, -9999.0, nullptr, false);
  TestDem codes = d;
  std::fill(codes.z.begin(), codes.z.end(), 1.0f);
  codes.z[5] = 3.0f;  // 0-7 but not ESRI
  writeTiff(path("codes07.tif"), codes, GDT_Byte, 255.0);
  codes.z[5] = 200.0f;  // neither
  writeTiff(path("codesbad.tif"), codes, GDT_Byte, 255.0);
  TestDem loop = d;
  std::fill(loop.z.begin(), loop.z.end(), 1.0f);  // east
  loop.at(5, 5) = 16.0f;                          // (4,5) -> (5,5) -> (4,5)
  writeTiff(path("loop.tif"), loop, GDT_Byte, 255.0);
  // Cells of 1,000 km, all draining east in one row: the outlet's catchment passes the fixed-point
  // range (a refusal that is not about loops: no hint about D8 tools and encodings).
  TestDem wide = d;
  wide.geoTransform[1] = 1e6;
  wide.geoTransform[5] = -1e6;
  std::fill(wide.z.begin(), wide.z.end(), 1.0f);
  writeTiff(path("wide.tif"), wide, GDT_Byte, 255.0);
  // Cells of 1e-300 m and of 5,000 km: outside the sizes taken.
  TestDem tiny = d, huge = d;
  tiny.geoTransform[1] = 1e-300;
  huge.geoTransform[5] = -5e6;
  writeTiff(path("tiny.tif"), tiny);
  writeTiff(path("huge.tif"), huge);

  struct Case
  {
    QString algorithm;
    QString input;
    QVariantMap parameters;
    QString expected;
  };
  const std::vector<Case> cases = {
    {kFill, path("empty.tif"), {}, "has no valid cell"},
    {kDirection, path("empty.tif"), {}, "has no valid cell"},
    {kFill, path("good.tif"), {{QStringLiteral("BAND"), 3}}, "there is no band 3"},
    {kDirection, path("good.tif"), {{QStringLiteral("BAND"), 2}}, "there is no band 2"},
    {kFill, path("rotated.tif"), {}, "rotated or sheared"},
    {kFill, path("southup.tif"), {}, "not stored north-up"},
    {kFill, path("nogeo.tif"), {}, "no georeference"},
    {kAccumulation, path("codes07.tif"), {}, "set ENCODING=1"},
    {kAccumulation, path("codesbad.tif"), {{QStringLiteral("ENCODING"), 1}}, "not flow directions in the 0 to 7 encoding"},
    {kAccumulation, path("loop.tif"), {}, "go round in a loop; they cannot be accumulated. Were the directions made by a D8 tool from a DEM, and does ENCODING (ESRI) match"},
    {kAccumulation, path("empty.tif"), {}, "has no valid cell"},
    {kAccumulation, path("wide.tif"), {}, "its area could pass the 9.2 million km²"},
    {kFill, path("tiny.tif"), {}, "cell sizes must lie between 1 mm and 1,000 km"},
    {kDirection, path("huge.tif"), {}, "cell sizes must lie between 1 mm and 1,000 km"},
  };
  for (const Case& c : cases)
  {
    QVariantMap parameters = c.parameters;
    parameters.insert(QStringLiteral("OUTPUT"), path("bad.tif"));
    parameters.insert(QStringLiteral("OUTPUT_CELLS"), path("bad.tif"));
    parameters.insert(QStringLiteral("OUTPUT_AREA"), path("bad_area.tif"));
    if (c.algorithm != kAccumulation)
    {
      parameters.remove(QStringLiteral("OUTPUT_CELLS"));
      parameters.remove(QStringLiteral("OUTPUT_AREA"));
    }
    else
      parameters.remove(QStringLiteral("OUTPUT"));
    const RunResult result = run(c.algorithm, c.input, parameters);
    EXPECT_FALSE(result.ok) << c.expected.toStdString();
    EXPECT_TRUE(result.error.contains(c.expected)) << c.expected.toStdString() << ": " << result.error.toStdString();
    EXPECT_EQ(result.error.contains(QStringLiteral("Were the directions made by a D8 tool")),
              c.expected.contains(QStringLiteral("loop")))
      << result.error.toStdString();
    EXPECT_FALSE(QFile::exists(path("bad.tif"))) << c.expected.toStdString();
    EXPECT_FALSE(QFile::exists(path("bad_area.tif"))) << c.expected.toStdString();
  }
}

// A 1 x 1 DEM writes a file of its size (it was 256 KB: one uncompressed 256 x 256 tile); a complex
// band (CFloat32) is refused rather than read through its real part.
TEST_F(DemAlgorithmsTest, ASmallDemWritesASmallFileAndAComplexBandIsRefused)
{
  TestDem one;
  one.width = one.height = 1;
  one.z = {42.5f};
  writeTiff(path("one.tif"), one);
  const RunResult result = run(kFill, path("one.tif"), {{QStringLiteral("OUTPUT"), path("one_filled.tif")}});
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  EXPECT_EQ(read<float>(path("one_filled.tif"), GDT_Float32), std::vector<float>{42.5f});
  EXPECT_LT(QFileInfo(path("one_filled.tif")).size(), 4096);
  const RunResult directions = run(kDirection, path("one.tif"), {{QStringLiteral("OUTPUT"), path("one_dir.tif")}});
  ASSERT_TRUE(directions.ok) << directions.error.toStdString();
  EXPECT_LT(QFileInfo(path("one_dir.tif")).size(), 4096);

  TestDem d = randomDem(20, 15, 5, 0);
  writeTiff(path("complex.tif"), d, {d.z}, GDT_CFloat32, std::nullopt);
  const RunResult complex = run(kFill, path("complex.tif"), {{QStringLiteral("OUTPUT"), path("complex_filled.tif")}});
  EXPECT_FALSE(complex.ok);
  EXPECT_TRUE(complex.error.contains(QStringLiteral("Band 1 holds complex numbers (CFloat32)"))) << complex.error.toStdString();
  EXPECT_FALSE(QFile::exists(path("complex_filled.tif")));
}

TEST_F(DemAlgorithmsTest, GpuRequestedWithoutAGpuNamesTheReason)
{
  if (gpugeo::probeGpu().usable)
    GTEST_SKIP() << "a GPU is present";
  const TestDem d = randomDem(20, 15, 8);
  writeTiff(path("dem.tif"), d);
  for (const QString& id : {kFill, kDirection})
  {
    const RunResult result = run(id, path("dem.tif"), {{QStringLiteral("DEVICE"), 2}, {QStringLiteral("OUTPUT"), path("gpu.tif")}});
    EXPECT_FALSE(result.ok);
    EXPECT_TRUE(result.error.contains(QString::fromStdString(gpugeo::probeGpu().reason))) << result.error.toStdString();
    EXPECT_TRUE(result.error.contains(QStringLiteral("DEVICE=GPU"))) << result.error.toStdString();
    EXPECT_FALSE(QFile::exists(path("gpu.tif")));
  }
}

TEST_F(DemAlgorithmsTest, AutoGivesTheSameRastersAsCpu)
{
  const TestDem d = randomDem(70, 50, 9);
  writeTiff(path("dem.tif"), d);
  for (int device : {0, 1})
  {
    const QString suffix = QString::number(device);
    ASSERT_TRUE(run(kFill, path("dem.tif"), {{QStringLiteral("DEVICE"), device}, {QStringLiteral("OUTPUT"), path("f" + suffix + ".tif")}}).ok);
    ASSERT_TRUE(run(kDirection, path("f" + suffix + ".tif"), {{QStringLiteral("DEVICE"), device}, {QStringLiteral("OUTPUT"), path("d" + suffix + ".tif")}}).ok);
    ASSERT_TRUE(run(kAccumulation, path("d" + suffix + ".tif"),
                    {{QStringLiteral("DEVICE"), device},
                     {QStringLiteral("OUTPUT_CELLS"), path("c" + suffix + ".tif")},
                     {QStringLiteral("OUTPUT_AREA"), path("a" + suffix + ".tif")}})
                  .ok);
  }
  EXPECT_EQ(read<float>(path("f0.tif"), GDT_Float32), read<float>(path("f1.tif"), GDT_Float32));
  EXPECT_EQ(read<uint8_t>(path("d0.tif"), GDT_Byte), read<uint8_t>(path("d1.tif"), GDT_Byte));
  EXPECT_EQ(read<int32_t>(path("c0.tif"), GDT_Int32), read<int32_t>(path("c1.tif"), GDT_Int32));
  EXPECT_EQ(read<double>(path("a0.tif"), GDT_Float64), read<double>(path("a1.tif"), GDT_Float64));
}

TEST_F(DemAlgorithmsTest, CancelLeavesNoOutputBehind)
{
  const TestDem d = randomDem(300, 260, 10);
  writeTiff(path("dem.tif"), d);
  ASSERT_TRUE(run(kFill, path("dem.tif"), {{QStringLiteral("OUTPUT"), path("filled.tif")}}).ok);
  ASSERT_TRUE(run(kDirection, path("filled.tif"), {{QStringLiteral("OUTPUT"), path("dir.tif")}}).ok);
  const std::vector<std::pair<QString, QVariantMap>> runs = {
    {kFill, {{QStringLiteral("OUTPUT"), path("canceled.tif")}}},
    {kDirection, {{QStringLiteral("OUTPUT"), path("canceled.tif")}}},
    {kAccumulation, {{QStringLiteral("OUTPUT_CELLS"), path("canceled.tif")}, {QStringLiteral("OUTPUT_AREA"), path("canceled_area.tif")}}},
  };
  for (const auto& [id, parameters] : runs)
  {
    const RunResult result = run(id, id == kAccumulation ? path("dir.tif") : path("dem.tif"), parameters, true);
    EXPECT_FALSE(result.ok) << id.toStdString();
    EXPECT_TRUE(result.error.contains(QStringLiteral("Canceled"))) << id.toStdString() << ": " << result.error.toStdString();
    EXPECT_FALSE(QFile::exists(path("canceled.tif"))) << id.toStdString();
    EXPECT_FALSE(QFile::exists(path("canceled_area.tif"))) << id.toStdString();
  }
}
