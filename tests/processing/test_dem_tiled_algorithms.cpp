// The DEM tools tile by tile through the QGIS API (MEMORY_BUDGET, TILED): the in-memory rasters bit for
// bit on float32, Int16 and geographic DEMs; budgets too small, bad codes, DEMs all nodata and of one
// row; VRT mosaics (and one with a file gone), a DEM across the antimeridian; a disk that fills.
#include "dem_algorithms_fixture.h"

using namespace gpugeo::test::dem_algorithms;

// Tile by tile (MEMORY_BUDGET below the in-memory need: tiles of 96 cells on this DEM of
// 300 x 260, odd tiles at the right and bottom; or TILED with the default budget): the filled DEM
// and the directions are the in-memory run's, bit for bit, and so are the upstream cells and areas,
// for a float32 DEM with NaN and nodata holes, an Int16 DEM, and a geographic one; the log says which
// path ran.
TEST_F(DemAlgorithmsTest, TiledRunsGiveTheInMemoryRastersBitForBit)
{
  const TestDem d = randomDem(300, 260, 11, 12);
  writeTiff(path("dem.tif"), d);
  writeTiff(path("dem_int16.tif"), d, GDT_Int16, -32768.0);
  TestDem geographic = d;  // 3" cells at 60 N: widths change row by row
  const double step = 1.0 / 1200.0, gt[6] = {10.0, step, 0.0, 60.05, 0.0, -step};
  std::copy(gt, gt + 6, geographic.geoTransform);
  writeTiff(path("dem_geo.tif"), geographic, GDT_Float32, -9999.0, "EPSG:4326");
  const QVariantMap small{{QStringLiteral("MEMORY_BUDGET"), 1}};
  const QVariantMap forced{{QStringLiteral("TILED"), true}};
  for (const QString& input : {QStringLiteral("dem"), QStringLiteral("dem_int16"), QStringLiteral("dem_geo")})
    for (const QVariantMap& tiling : {small, forced})
    {
      SCOPED_TRACE(input.toStdString() + (tiling.contains(QStringLiteral("TILED")) ? " TILED" : " MEMORY_BUDGET=1"));
      const QString memory = path(input + "_filled_memory.tif"), tiled = path(input + "_filled_tiled.tif");
      const RunResult inMemory = run(kFill, path(input + ".tif"), {{QStringLiteral("OUTPUT"), memory}});
      ASSERT_TRUE(inMemory.ok) << inMemory.error.toStdString();
      EXPECT_TRUE(inMemory.logContains(QStringLiteral("In memory: the run needs about")));
      QVariantMap parameters = tiling;
      parameters.insert(QStringLiteral("OUTPUT"), tiled);
      const RunResult result = run(kFill, path(input + ".tif"), parameters);
      ASSERT_TRUE(result.ok) << result.error.toStdString();
      EXPECT_TRUE(result.logContains(QStringLiteral("Tile by tile: the in-memory run would need about")))
        << result.log.join('\n').toStdString();
      if (tiling.contains(QStringLiteral("MEMORY_BUDGET")))
      {
        EXPECT_TRUE(result.logContains(QStringLiteral("Tiles of 96 x 96 cells"))) << result.log.join('\n').toStdString();
        EXPECT_TRUE(result.logContains(QStringLiteral("Tiled run: 12 tiles of up to 96 x 96 cells; 3 passes")))
          << result.log.join('\n').toStdString();
        EXPECT_TRUE(result.logContains(QStringLiteral("Peak resident memory of this process so far: ")))
          << result.log.join('\n').toStdString();
      }
      double noDataMemory = 0, noDataTiled = 0, transformMemory[6], transformTiled[6];
      const auto expected = read<float>(memory, GDT_Float32, &noDataMemory, transformMemory);
      const auto got = read<float>(tiled, GDT_Float32, &noDataTiled, transformTiled);
      ASSERT_EQ(got.size(), expected.size());
      EXPECT_EQ(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)), 0);
      EXPECT_EQ(noDataTiled, noDataMemory);
      for (int i = 0; i < 6; ++i)
        EXPECT_EQ(transformTiled[i], transformMemory[i]);
      // The same raised count, deepest fill and volume in the log.
      for (const QString& line : inMemory.log)
        if (line.startsWith(QStringLiteral("Raised ")))
          EXPECT_TRUE(result.logContains(line.left(line.indexOf(QStringLiteral("filled volume"))))) << line.toStdString();

      // The flats raised (FLATS 1 and 2), both ways; the scratch folder gone.
      for (const int flats : {1, 2})
      {
        const QString raisedMemory = path(input + QStringLiteral("_flats%1_memory.tif").arg(flats));
        const QString raisedTiled = path(input + QStringLiteral("_flats%1_tiled.tif").arg(flats));
        const RunResult memoryFlats =
          run(kFill, path(input + ".tif"), {{QStringLiteral("FLATS"), flats}, {QStringLiteral("OUTPUT"), raisedMemory}});
        ASSERT_TRUE(memoryFlats.ok) << memoryFlats.error.toStdString();
        QVariantMap withFlats = tiling;
        withFlats.insert(QStringLiteral("FLATS"), flats);
        withFlats.insert(QStringLiteral("OUTPUT"), raisedTiled);
        const RunResult tiledFlats = run(kFill, path(input + ".tif"), withFlats);
        ASSERT_TRUE(tiledFlats.ok) << tiledFlats.error.toStdString();
        const auto a = read<float>(raisedMemory, GDT_Float32), b = read<float>(raisedTiled, GDT_Float32);
        ASSERT_EQ(a.size(), b.size());
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << "FLATS=" << flats;
        for (const QString& line : memoryFlats.log)
          if (line.startsWith(QStringLiteral("Flats: ")) || line.contains(QStringLiteral("raised in turn")))
            EXPECT_TRUE(tiledFlats.logContains(line)) << line.toStdString();
        EXPECT_TRUE(tiledFlats.logContains(QStringLiteral("removed now")));
        EXPECT_TRUE(QDir(QgsProcessingUtils::tempFolder())
                      .entryList({QStringLiteral("gpugeo-scratch-*")}, QDir::AllEntries)
                      .isEmpty());
      }

      // Directions (no flat resolution) from the filled DEM, both ways.
      QVariantMap directions = tiling;
      directions.insert(QStringLiteral("RESOLVE_FLATS"), false);
      directions.insert(QStringLiteral("OUTPUT"), path(input + "_dir_tiled.tif"));
      const RunResult tiledDirections = run(kDirection, memory, directions);
      ASSERT_TRUE(tiledDirections.ok) << tiledDirections.error.toStdString();
      const RunResult memoryDirections = run(kDirection, memory,
                                             {{QStringLiteral("RESOLVE_FLATS"), false},
                                              {QStringLiteral("OUTPUT"), path(input + "_dir_memory.tif")}});
      ASSERT_TRUE(memoryDirections.ok) << memoryDirections.error.toStdString();
      EXPECT_EQ(read<uint8_t>(path(input + "_dir_tiled.tif"), GDT_Byte),
                read<uint8_t>(path(input + "_dir_memory.tif"), GDT_Byte));
      for (const QString& line : memoryDirections.log)
        if (line.contains(QStringLiteral("drain out of the grid")))
          EXPECT_TRUE(tiledDirections.logContains(line)) << line.toStdString();

      // Directions with the flats resolved, both ways (the flat mask in the scratch folder, removed).
      const QString resolved = path(input + "_dir_resolved.tif");
      ASSERT_TRUE(run(kDirection, memory, {{QStringLiteral("OUTPUT"), resolved}}).ok);
      QVariantMap withFlats = tiling;
      withFlats.insert(QStringLiteral("OUTPUT"), path(input + "_dir_resolved_tiled.tif"));
      const RunResult tiledFlats = run(kDirection, memory, withFlats);
      ASSERT_TRUE(tiledFlats.ok) << tiledFlats.error.toStdString();
      EXPECT_TRUE(tiledFlats.logContains(QStringLiteral("Flats resolved in"))) << tiledFlats.log.join('\n').toStdString();
      EXPECT_EQ(read<uint8_t>(path(input + "_dir_resolved_tiled.tif"), GDT_Byte), read<uint8_t>(resolved, GDT_Byte));
      const QDir temporary(QgsProcessingUtils::tempFolder());
      EXPECT_TRUE(temporary.entryList({QStringLiteral("gpugeo-scratch-*")}, QDir::AllEntries).isEmpty());

      // Accumulation along those directions (paths through many tiles), in km² for the geographic DEM.
      const int units = input == QStringLiteral("dem_geo") ? 1 : 0;
      QVariantMap accumulation = tiling;
      accumulation.insert(QStringLiteral("UNITS"), units);
      accumulation.insert(QStringLiteral("OUTPUT_CELLS"), path(input + "_cells_tiled.tif"));
      accumulation.insert(QStringLiteral("OUTPUT_AREA"), path(input + "_area_tiled.tif"));
      const RunResult tiledAccumulation = run(kAccumulation, resolved, accumulation);
      ASSERT_TRUE(tiledAccumulation.ok) << tiledAccumulation.error.toStdString();
      EXPECT_TRUE(tiledAccumulation.logContains(QStringLiteral("Tile by tile")));
      const RunResult memoryAccumulation =
        run(kAccumulation, resolved,
            {{QStringLiteral("UNITS"), units},
             {QStringLiteral("OUTPUT_CELLS"), path(input + "_cells_memory.tif")},
             {QStringLiteral("OUTPUT_AREA"), path(input + "_area_memory.tif")}});
      ASSERT_TRUE(memoryAccumulation.ok) << memoryAccumulation.error.toStdString();
      double cellsNoData = 0, areaNoData = 0;
      EXPECT_EQ(read<int32_t>(path(input + "_cells_tiled.tif"), GDT_Int32, &cellsNoData),
                read<int32_t>(path(input + "_cells_memory.tif"), GDT_Int32));
      EXPECT_EQ(cellsNoData, -1.0);
      EXPECT_EQ(read<double>(path(input + "_area_tiled.tif"), GDT_Float64, &areaNoData),
                read<double>(path(input + "_area_memory.tif"), GDT_Float64));
      EXPECT_EQ(areaNoData, -1.0);
      for (const QString& line : memoryAccumulation.log)
        if (line.contains(QStringLiteral("The largest catchment drains out")))
          EXPECT_TRUE(tiledAccumulation.logContains(line)) << line.toStdString();
    }
}

// What the tiled path cannot fit is refused before anything is written: a budget that cannot hold the
// smallest tiles, a DEM all nodata; a DEM of one row runs; values that are not directions get the
// in-memory message.
TEST_F(DemAlgorithmsTest, TiledRunsRefuseBudgetsTooSmallAndBadCodes)
{
  const TestDem d = randomDem(400, 300, 12);
  writeTiff(path("dem.tif"), d);
  // 2,000 x 2,000 cells: the perimeters of the tiles that fit 1 MiB alone need more.
  TestDem large;
  large.width = large.height = 2000;
  large.z.assign(size_t(2000 * 2000), 5.0f);
  writeTiff(path("large.tif"), large);
  const RunResult tiny = run(kFill, path("large.tif"),
                             {{QStringLiteral("MEMORY_BUDGET"), 1}, {QStringLiteral("OUTPUT"), path("out.tif")}});
  EXPECT_FALSE(tiny.ok);
  EXPECT_TRUE(tiny.error.contains(QStringLiteral("A memory budget of 1 MiB cannot hold even tiles of 16 x 16 cells")))
    << tiny.error.toStdString();
  EXPECT_FALSE(QFile::exists(path("out.tif")));

  // A DEM all nodata: refused after the count, nothing written; a DEM of one row: the in-memory result.
  TestDem none = randomDem(40, 30, 13, 0);
  std::fill(none.z.begin(), none.z.end(), kNaN);
  writeTiff(path("none.tif"), none);
  const RunResult empty = run(kFill, path("none.tif"),
                              {{QStringLiteral("TILED"), true}, {QStringLiteral("OUTPUT"), path("out.tif")}});
  EXPECT_FALSE(empty.ok);
  EXPECT_TRUE(empty.error.contains(QStringLiteral("no valid cell"))) << empty.error.toStdString();
  EXPECT_FALSE(QFile::exists(path("out.tif")));
  TestDem row;  // (randomDem's basin and holes need rows)
  row.width = 300;
  row.height = 1;
  for (int x = 0; x < row.width; ++x)
    row.z.push_back(float(std::round(20.0 * std::sin(x * 0.07) + 0.1 * x)));
  writeTiff(path("row.tif"), row);
  ASSERT_TRUE(run(kFill, path("row.tif"), {{QStringLiteral("OUTPUT"), path("row_memory.tif")}}).ok);
  ASSERT_TRUE(run(kFill, path("row.tif"),
                  {{QStringLiteral("TILED"), true}, {QStringLiteral("MEMORY_BUDGET"), 1},
                   {QStringLiteral("OUTPUT"), path("row_tiled.tif")}})
                .ok);
  EXPECT_EQ(read<float>(path("row_tiled.tif"), GDT_Float32), read<float>(path("row_memory.tif"), GDT_Float32));

  // Values that are not directions: the same message as in memory (the first in row-major order).
  TestDem codes;
  codes.width = 50;
  codes.height = 40;
  codes.z.assign(size_t(50 * 40), 1.0f);  // ESRI east everywhere
  codes.at(30, 7) = 3.0f;
  codes.at(5, 20) = 6.0f;
  writeTiff(path("codes.tif"), codes, GDT_Byte, 255.0);
  const RunResult memoryCodes = run(kAccumulation, path("codes.tif"), {{QStringLiteral("OUTPUT_CELLS"), path("out.tif")}});
  const RunResult tiledCodes = run(kAccumulation, path("codes.tif"),
                                   {{QStringLiteral("TILED"), true}, {QStringLiteral("OUTPUT_CELLS"), path("out.tif")}});
  EXPECT_FALSE(memoryCodes.ok);
  EXPECT_FALSE(tiledCodes.ok);
  EXPECT_TRUE(tiledCodes.error.contains(QStringLiteral("the first, 3, at column 30, row 7"))) << tiledCodes.error.toStdString();
  EXPECT_EQ(tiledCodes.error, memoryCodes.error);
  EXPECT_FALSE(QFile::exists(path("out.tif")));
}

// Any GDAL raster as input: a VRT mosaic of four GeoTIFFs gives, tiled, the filled DEM the in-memory
// run gives; a VRT one of whose files is gone is refused (a read error naming the mosaic) with
// nothing written. A geographic DEM across the antimeridian, tiled: the in-memory result.
TEST_F(DemAlgorithmsTest, TiledRunsReadVrtMosaicsAndDemsAcrossTheAntimeridian)
{
  const TestDem d = randomDem(200, 160, 15, 6);
  writeTiff(path("whole.tif"), d);
  std::vector<std::string> parts;
  for (int k = 0; k < 4; ++k)
  {
    const int x0 = (k % 2) * 100, y0 = (k / 2) * 80;
    const std::string part = path(QStringLiteral("part%1.tif").arg(k)).toStdString();
    const std::string window[] = {"-srcwin", std::to_string(x0), std::to_string(y0), "100", "80"};
    char** options = nullptr;
    for (const std::string& word : window)
      options = CSLAddString(options, word.c_str());
    GDALTranslateOptions* translate = GDALTranslateOptionsNew(options, nullptr);
    CSLDestroy(options);
    GDALDatasetH whole = GDALOpen(path("whole.tif").toUtf8().constData(), GA_ReadOnly);
    GDALDatasetH out = GDALTranslate(part.c_str(), whole, translate, nullptr);
    ASSERT_TRUE(out);
    GDALClose(out);
    GDALClose(whole);
    GDALTranslateOptionsFree(translate);
    parts.push_back(part);
  }
  std::vector<const char*> names;
  for (const std::string& part : parts)
    names.push_back(part.c_str());
  GDALDatasetH vrt = GDALBuildVRT(path("mosaic.vrt").toUtf8().constData(), int(names.size()), nullptr, names.data(),
                                  nullptr, nullptr);
  ASSERT_TRUE(vrt);
  GDALClose(vrt);
  ASSERT_TRUE(run(kFill, path("mosaic.vrt"), {{QStringLiteral("OUTPUT"), path("mosaic_memory.tif")}}).ok);
  const RunResult tiled = run(kFill, path("mosaic.vrt"),
                              {{QStringLiteral("TILED"), true},
                               {QStringLiteral("MEMORY_BUDGET"), 1},
                               {QStringLiteral("OUTPUT"), path("mosaic_tiled.tif")}});
  ASSERT_TRUE(tiled.ok) << tiled.error.toStdString();
  EXPECT_TRUE(tiled.logContains(QStringLiteral("Tiled run: 6 tiles of up to 96 x 96 cells")))
    << tiled.log.join('\n').toStdString();
  const auto a = read<float>(path("mosaic_memory.tif"), GDT_Float32), b = read<float>(path("mosaic_tiled.tif"), GDT_Float32);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  // The mosaic is the whole DEM: the same filled DEM as the whole file's.
  ASSERT_TRUE(run(kFill, path("whole.tif"), {{QStringLiteral("OUTPUT"), path("whole_filled.tif")}}).ok);
  const auto whole = read<float>(path("whole_filled.tif"), GDT_Float32);
  ASSERT_EQ(whole.size(), a.size());
  EXPECT_EQ(std::memcmp(whole.data(), a.data(), a.size() * sizeof(float)), 0);

  // One file of the mosaic gone.
  ASSERT_TRUE(QFile::remove(QString::fromStdString(parts[3])));
  const RunResult missing = run(kFill, path("mosaic.vrt"),
                                {{QStringLiteral("TILED"), true}, {QStringLiteral("OUTPUT"), path("missing.tif")}});
  EXPECT_FALSE(missing.ok);
  EXPECT_TRUE(missing.error.contains(QStringLiteral("mosaic.vrt"))) << missing.error.toStdString();
  EXPECT_FALSE(QFile::exists(path("missing.tif")));

  // Across the antimeridian: 179.5 E to 180.5 E (past 180), 3" cells at 60 N.
  TestDem across = randomDem(120, 90, 16, 2);
  const double step = 1.0 / 120.0, gt[6] = {179.5, step, 0.0, 60.5, 0.0, -step};
  std::copy(gt, gt + 6, across.geoTransform);
  writeTiff(path("across.tif"), across, GDT_Float32, -9999.0, "EPSG:4326");
  ASSERT_TRUE(run(kFill, path("across.tif"), {{QStringLiteral("OUTPUT"), path("across_memory.tif")}}).ok);
  const RunResult acrossTiled = run(kFill, path("across.tif"),
                                    {{QStringLiteral("TILED"), true},
                                     {QStringLiteral("MEMORY_BUDGET"), 1},
                                     {QStringLiteral("OUTPUT"), path("across_tiled.tif")}});
  ASSERT_TRUE(acrossTiled.ok) << acrossTiled.error.toStdString();
  const auto c = read<float>(path("across_memory.tif"), GDT_Float32), e = read<float>(path("across_tiled.tif"), GDT_Float32);
  ASSERT_EQ(c.size(), e.size());
  EXPECT_EQ(std::memcmp(c.data(), e.data(), c.size() * sizeof(float)), 0);
}

// An output on a disk that fills mid-run (a 1 MiB tmpfs, where the tests may mount one): the tiled
// fill and the tiled isochrones fail with the disk named in the error, leave no output, and remove
// their scratch folder.
TEST_F(DemAlgorithmsTest, TiledRunsOnAFullDiskLeaveNothing)
{
  const QString disk = path("full_disk");
  QDir().mkpath(disk);
  if (std::system(QStringLiteral("mount -t tmpfs -o size=1m tmpfs %1 2>/dev/null").arg(disk).toUtf8().constData()) != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs here (not root, or no CAP_SYS_ADMIN)";
  const TestDem d = randomDem(1100, 1000, 14);  // 4.4 MB of float32, written uncompressed
  writeTiff(path("dem.tif"), d);
  const QString filled = disk + QStringLiteral("/filled.tif");
  const RunResult fill =
    run(kFill, path("dem.tif"), {{QStringLiteral("TILED"), true}, {QStringLiteral("OUTPUT"), filled}});
  EXPECT_FALSE(fill.ok);
  EXPECT_TRUE(fill.error.contains(QStringLiteral("disk full"))) << fill.error.toStdString();
  EXPECT_FALSE(QFile::exists(filled));
  const RunResult isochrones = run(kIsochronesId, path("dem.tif"),
                                   {{QStringLiteral("TILED"), true},
                                    {QStringLiteral("TRAVEL_TIME"), path("time.tif")},
                                    {QStringLiteral("FILLED"), filled}});
  EXPECT_FALSE(isochrones.ok);
  EXPECT_TRUE(isochrones.error.contains(QStringLiteral("disk full"))) << isochrones.error.toStdString();
  EXPECT_FALSE(QFile::exists(filled));
  EXPECT_FALSE(QFile::exists(path("time.tif")));
  EXPECT_TRUE(QDir(disk).entryList(QDir::NoDotAndDotDot | QDir::AllEntries).isEmpty());
  EXPECT_TRUE(QDir(QgsProcessingUtils::tempFolder())
                .entryList({QStringLiteral("gpugeo-scratch-*")}, QDir::AllEntries)
                .isEmpty());
  EXPECT_EQ(std::system(QStringLiteral("umount %1").arg(disk).toUtf8().constData()), 0);
}

// The device of a tiled run: DEVICE=GPU without a GPU is refused with the reason, as in memory, and
// nothing is written; Auto runs the tiles on the CPU and says so. (With a GPU, the GPU's tiles are
// checked against the CPU's in the native GPU tests.)
TEST_F(DemAlgorithmsTest, TiledRunsResolveTheDevice)
{
  if (gpugeo::probeGpu().usable)
    GTEST_SKIP() << "a GPU is present";
  const TestDem d = randomDem(60, 50, 21, 3);
  writeTiff(path("dem.tif"), d);
  for (const QString& id : {kFill, kDirection})
  {
    SCOPED_TRACE(id.toStdString());
    const RunResult gpu = run(id, path("dem.tif"),
                              {{QStringLiteral("TILED"), true}, {QStringLiteral("DEVICE"), 2}, {QStringLiteral("OUTPUT"), path("gpu.tif")}});
    EXPECT_FALSE(gpu.ok);
    EXPECT_TRUE(gpu.error.contains(QString::fromStdString(gpugeo::probeGpu().reason))) << gpu.error.toStdString();
    EXPECT_FALSE(QFile::exists(path("gpu.tif")));
    const RunResult automatic = run(id, path("dem.tif"),
                                    {{QStringLiteral("TILED"), true}, {QStringLiteral("DEVICE"), 0}, {QStringLiteral("OUTPUT"), path("auto.tif")}});
    ASSERT_TRUE(automatic.ok) << automatic.error.toStdString();
    EXPECT_TRUE(automatic.logContains(QStringLiteral("Backend: CPU"))) << automatic.log.join('\n').toStdString();
    EXPECT_TRUE(automatic.logContains(QStringLiteral("at a time on the CPU"))) << automatic.log.join('\n').toStdString();
    EXPECT_FALSE(automatic.logContains(QStringLiteral("On the GPU,")));
  }
}

namespace {

// GDAL's word on a file: its layout (COG or none) and band 1's overview count.
std::pair<QString, int> layoutOf(const QString& file)
{
  GDALDatasetH dataset = GDALOpen(file.toUtf8().constData(), GA_ReadOnly);
  if (!dataset)
    return {QStringLiteral("(does not open)"), 0};
  const char* layout = GDALGetMetadataItem(dataset, "LAYOUT", "IMAGE_STRUCTURE");
  const std::pair<QString, int> out{QString::fromUtf8(layout ? layout : ""),
                                    GDALGetOverviewCount(GDALGetRasterBand(dataset, 1))};
  GDALClose(dataset);
  return out;
}

// GDAL's word on a file's compression ("" where it has none).
QString compressionOf(const QString& file)
{
  GDALDatasetH dataset = GDALOpen(file.toUtf8().constData(), GA_ReadOnly);
  if (!dataset)
    return QStringLiteral("(does not open)");
  const char* compression = GDALGetMetadataItem(dataset, "COMPRESSION", "IMAGE_STRUCTURE");
  const QString out = QString::fromUtf8(compression ? compression : "");
  GDALClose(dataset);
  return out;
}

}  // namespace

// COG: the outputs of the four tools, in memory and tile by tile, are Cloud Optimized GeoTIFFs with
// overviews holding the plain run's values bit for bit, the geographic DEM's non-square cells
// included; nothing is left beside them.
TEST_F(DemAlgorithmsTest, CogOutputsHoldThePlainRunsValues)
{
  const TestDem d = randomDem(300, 260, 13, 7);
  writeTiff(path("dem.tif"), d);
  TestDem geographic = d;
  const double step = 1.0 / 1200.0, gt[6] = {10.0, step, 0.0, 60.05, 0.0, -step};
  std::copy(gt, gt + 6, geographic.geoTransform);
  writeTiff(path("geo.tif"), geographic, GDT_Float32, -9999.0, "EPSG:4326");
  for (const QString& input : {QStringLiteral("dem"), QStringLiteral("geo")})
    for (const bool tiled : {false, true})
    {
      SCOPED_TRACE(input.toStdString() + (tiled ? " tiled" : " in memory"));
      const QString plain = path(input + "_plain.tif"), cog = path(input + QStringLiteral("_cog%1.tif").arg(tiled));
      ASSERT_TRUE(run(kFill, path(input + ".tif"), {{QStringLiteral("OUTPUT"), plain}}).ok);
      const RunResult result = run(kFill, path(input + ".tif"),
                                   {{QStringLiteral("OUTPUT"), cog}, {QStringLiteral("COG"), true}, {QStringLiteral("TILED"), tiled}});
      ASSERT_TRUE(result.ok) << result.error.toStdString();
      const auto [layout, overviews] = layoutOf(cog);
      EXPECT_EQ(layout, QStringLiteral("COG"));
      EXPECT_GE(overviews, 1);
      double plainTransform[6], cogTransform[6], plainNoData = 0, cogNoData = 0;
      const auto a = read<float>(plain, GDT_Float32, &plainNoData, plainTransform);
      const auto b = read<float>(cog, GDT_Float32, &cogNoData, cogTransform);
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
      EXPECT_EQ(cogNoData, plainNoData);
      for (int i = 0; i < 6; ++i)
        EXPECT_EQ(cogTransform[i], plainTransform[i]) << i;
      EXPECT_FALSE(QFile::exists(cog + ".cog.tif"));
    }
  // Directions and accumulation as COG too (integer rasters: overviews by nearest).
  const RunResult directions = run(kDirection, path("dem_plain.tif"),
                                   {{QStringLiteral("OUTPUT"), path("dir_cog.tif")}, {QStringLiteral("COG"), true}});
  ASSERT_TRUE(directions.ok) << directions.error.toStdString();
  EXPECT_EQ(layoutOf(path("dir_cog.tif")).first, QStringLiteral("COG"));
  const RunResult accumulation = run(kAccumulation, path("dir_cog.tif"),
                                     {{QStringLiteral("OUTPUT_CELLS"), path("cells_cog.tif")},
                                      {QStringLiteral("COG"), true},
                                      {QStringLiteral("TILED"), true}});
  ASSERT_TRUE(accumulation.ok) << accumulation.error.toStdString();
  EXPECT_EQ(layoutOf(path("cells_cog.tif")).first, QStringLiteral("COG"));
}

// CREATION_OPTIONS: the fill in memory, tile by tile and as a COG (the COG driver's options), and the
// accumulation's two rasters, written as asked and holding the plain runs' values bit for bit; options
// GDAL does not take refused before anything is written.
TEST_F(DemAlgorithmsTest, CreationOptionsGoOverTheDefaults)
{
  const TestDem d = randomDem(300, 260, 13, 7);
  writeTiff(path("dem.tif"), d);
  ASSERT_TRUE(run(kFill, path("dem.tif"), {{QStringLiteral("OUTPUT"), path("plain.tif")}}).ok);
  const std::vector<float> plain = read<float>(path("plain.tif"), GDT_Float32);
  struct Case
  {
    QString name, options, compression;
    bool tiled, cog;
  };
  for (const Case& c : {Case{QStringLiteral("zstd"), QStringLiteral("COMPRESS=ZSTD|ZSTD_LEVEL=5"), QStringLiteral("ZSTD"), false, false},
                        Case{QStringLiteral("lzw_tiled"), QStringLiteral("COMPRESS=LZW PREDICTOR=3"), QStringLiteral("LZW"), true, false},
                        Case{QStringLiteral("cog_lzw"), QStringLiteral("COMPRESS=LZW"), QStringLiteral("LZW"), true, true}})
  {
    SCOPED_TRACE(c.name.toStdString());
    const QString output = path(c.name + ".tif");
    const RunResult result = run(kFill, path("dem.tif"),
                                 {{QStringLiteral("OUTPUT"), output},
                                  {QStringLiteral("CREATION_OPTIONS"), c.options},
                                  {QStringLiteral("TILED"), c.tiled},
                                  {QStringLiteral("COG"), c.cog}});
    ASSERT_TRUE(result.ok) << result.error.toStdString();
    EXPECT_EQ(compressionOf(output), c.compression);
    EXPECT_EQ(layoutOf(output).first, c.cog ? QStringLiteral("COG") : QString());
    const std::vector<float> written = read<float>(output, GDT_Float32);
    ASSERT_EQ(written.size(), plain.size());
    EXPECT_EQ(std::memcmp(written.data(), plain.data(), plain.size() * sizeof(float)), 0);
  }
  ASSERT_TRUE(run(kDirection, path("plain.tif"), {{QStringLiteral("OUTPUT"), path("dir.tif")}}).ok);
  const RunResult accumulation = run(kAccumulation, path("dir.tif"),
                                     {{QStringLiteral("OUTPUT_CELLS"), path("cells.tif")},
                                      {QStringLiteral("OUTPUT_AREA"), path("area.tif")},
                                      {QStringLiteral("CREATION_OPTIONS"), QStringLiteral("COMPRESS=NONE")}});
  ASSERT_TRUE(accumulation.ok) << accumulation.error.toStdString();
  EXPECT_EQ(compressionOf(path("cells.tif")), QString());
  EXPECT_EQ(compressionOf(path("area.tif")), QString());
  for (const QString& bad : {QStringLiteral("COMPRESS=NOPE"), QStringLiteral("NOT_AN_OPTION=1"), QStringLiteral("COMPRESS")})
  {
    const RunResult refused = run(kFill, path("dem.tif"),
                                  {{QStringLiteral("OUTPUT"), path("refused.tif")}, {QStringLiteral("CREATION_OPTIONS"), bad}});
    EXPECT_FALSE(refused.ok) << bad.toStdString();
    EXPECT_TRUE(refused.error.contains(QStringLiteral("reation option"))) << refused.error.toStdString();
    EXPECT_FALSE(QFile::exists(path("refused.tif")));
  }
  // The GeoTIFF driver's ZLEVEL is not the COG driver's.
  const RunResult cogRefused = run(kFill, path("dem.tif"),
                                   {{QStringLiteral("OUTPUT"), path("refused.tif")}, {QStringLiteral("COG"), true},
                                    {QStringLiteral("CREATION_OPTIONS"), QStringLiteral("ZLEVEL=9")}});
  EXPECT_FALSE(cogRefused.ok);
  EXPECT_TRUE(cogRefused.error.contains(QStringLiteral("COG"))) << cogRefused.error.toStdString();
}
