// The DEM algorithms with MPI_PROCESSES: the run handed to gpugeo_dem under mpiexec (2 and 3
// processes, on the in-process plan's tiles) gives the in-process tiled run's rasters bit for bit
// and, for the isochrones, the same vector outputs, feature for feature; without mpiexec on the PATH the algorithm runs in-process with
// a warning; a bad host file is refused; a cancel ends the job and leaves no output. Skipped where
// mpiexec or gpugeo_dem's MPI build is missing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>

#include <QDir>
#include <QStandardPaths>

#include <qgsfeature.h>
#include <qgsfeatureiterator.h>
#include <qgsgeometry.h>
#include <qgsprocessingutils.h>
#include <qgsvectorlayer.h>

#include "dem_algorithms_fixture.h"
#include "mpi_launch.h"

using namespace gpugeo::test::dem_algorithms;

namespace {

bool mpiUsable()
{
  return !gpugeo::mpiexecPath().isEmpty() && !gpugeo::demProgramPath().isEmpty();
}

// Every feature's attributes and geometry (as WKT with full precision) of a vector file.
std::vector<std::pair<QgsAttributes, QString>> features(const QString& file)
{
  QgsVectorLayer layer(file, QStringLiteral("v"), QStringLiteral("ogr"));
  EXPECT_TRUE(layer.isValid()) << file.toStdString();
  std::vector<std::pair<QgsAttributes, QString>> out;
  QgsFeature f;
  QgsFeatureIterator it = layer.getFeatures();
  while (it.nextFeature(f))
  {
    QgsAttributes a = f.attributes();
    a.removeFirst();  // the fid
    out.emplace_back(a, f.geometry().asWkt(17));
  }
  return out;
}

class DemMpiTest : public DemAlgorithmsTest
{
protected:
  // Two rasters' cells, bit for bit, and their nodata values.
  template <typename T>
  bool sameRaster(const QString& a, const QString& b, GDALDataType type)
  {
    double na = 0, nb = 0;
    const std::vector<T> x = read<T>(a, type, &na), y = read<T>(b, type, &nb);
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0 &&
           (na == nb || (std::isnan(na) && std::isnan(nb)));
  }
};

}  // namespace

TEST_F(DemMpiTest, TwoAndThreeProcessesGiveTheInProcessRasters)
{
  if (!mpiUsable())
    GTEST_SKIP() << "mpiexec or gpugeo_dem with MPI is missing";
  const TestDem d = randomDem(211, 187, 6, 13);
  writeTiff(path("dem.tif"), d);
  const QVariantMap tiled{{QStringLiteral("TILED"), true}, {QStringLiteral("MEMORY_BUDGET"), 1}};
  const auto with = [&](QVariantMap p, const QVariantMap& more) {
    for (auto it = more.begin(); it != more.end(); ++it)
      p.insert(it.key(), it.value());
    return p;
  };
  for (const int processes : {2, 3})
  {
    SCOPED_TRACE(std::to_string(processes) + " processes");
    const QVariantMap mpi{{QStringLiteral("MPI_PROCESSES"), processes}, {QStringLiteral("MEMORY_BUDGET"), 1}};
    const QString n = QString::number(processes);
    // The fill with flats resolved.
    const RunResult local = run(kFill, path("dem.tif"),
                                with(tiled, {{QStringLiteral("FLATS"), 1}, {QStringLiteral("OUTPUT"), path("fill_local.tif")}}));
    ASSERT_TRUE(local.ok) << local.error.toStdString();
    const RunResult remote = run(kFill, path("dem.tif"),
                                 with(mpi, {{QStringLiteral("FLATS"), 1}, {QStringLiteral("OUTPUT"), path("fill_" + n + ".tif")}}));
    ASSERT_TRUE(remote.ok) << remote.error.toStdString();
    EXPECT_TRUE(remote.logContains(QStringLiteral("Running ") + n + QStringLiteral(" processes under MPI")))
      << remote.log.join('\n').toStdString();
    EXPECT_TRUE(remote.logContains(QStringLiteral("worker rank(s) besides rank 0"))) << remote.log.join('\n').toStdString();
    EXPECT_TRUE(sameRaster<float>(path("fill_local.tif"), path("fill_" + n + ".tif"), GDT_Float32));
    // The directions (flats resolved) and the accumulation.
    ASSERT_TRUE(run(kDirection, path("fill_local.tif"), with(tiled, {{QStringLiteral("OUTPUT"), path("dir_local.tif")}})).ok);
    const RunResult dir = run(kDirection, path("fill_local.tif"), with(mpi, {{QStringLiteral("OUTPUT"), path("dir_" + n + ".tif")}}));
    ASSERT_TRUE(dir.ok) << dir.error.toStdString();
    EXPECT_TRUE(sameRaster<uint8_t>(path("dir_local.tif"), path("dir_" + n + ".tif"), GDT_Byte));
    const QVariantMap accOutputs{{QStringLiteral("OUTPUT_CELLS"), path("cells_local.tif")},
                                 {QStringLiteral("OUTPUT_AREA"), path("area_local.tif")},
                                 {QStringLiteral("UNITS"), 1}};
    ASSERT_TRUE(run(kAccumulation, path("dir_local.tif"), with(tiled, accOutputs)).ok);
    const RunResult acc = run(kAccumulation, path("dir_local.tif"),
                              with(mpi, {{QStringLiteral("OUTPUT_CELLS"), path("cells_" + n + ".tif")},
                                         {QStringLiteral("OUTPUT_AREA"), path("area_" + n + ".tif")},
                                         {QStringLiteral("UNITS"), 1}}));
    ASSERT_TRUE(acc.ok) << acc.error.toStdString();
    EXPECT_TRUE(sameRaster<int32_t>(path("cells_local.tif"), path("cells_" + n + ".tif"), GDT_Int32));
    EXPECT_TRUE(sameRaster<double>(path("area_local.tif"), path("area_" + n + ".tif"), GDT_Float64));
    EXPECT_EQ(acc.outputs.value(QStringLiteral("OUTPUT_AREA")).toString(), path("area_" + n + ".tif"));
  }
  EXPECT_TRUE(QDir(QgsProcessingUtils::tempFolder()).entryList({QStringLiteral("gpugeo-scratch-*")}, QDir::AllEntries).isEmpty());
}

TEST_F(DemMpiTest, IsochronesUnderMpiWriteTheInProcessOutputs)
{
  if (!mpiUsable())
    GTEST_SKIP() << "mpiexec or gpugeo_dem with MPI is missing";
  const TestDem d = randomDem(173, 151, 8, 13);
  writeTiff(path("dem.tif"), d);
  const auto outputs = [&](const QString& prefix) {
    return QVariantMap{{QStringLiteral("TRAVEL_TIME"), path(prefix + "_time.tif")},
                       {QStringLiteral("WATERSHED"), path(prefix + "_watershed.gpkg")},
                       {QStringLiteral("ISOCHRONES"), path(prefix + "_isochrones.gpkg")},
                       {QStringLiteral("TIME_AREA"), path(prefix + "_table.gpkg")},
                       {QStringLiteral("FILLED"), path(prefix + "_filled.tif")},
                       {QStringLiteral("FLOWDIR"), path(prefix + "_dir.tif")},
                       {QStringLiteral("ACCUMULATION"), path(prefix + "_acc.tif")},
                       {QStringLiteral("INTERVAL"), 2.0},
                       {QStringLiteral("MEMORY_BUDGET"), 1}};
  };
  QVariantMap local = outputs(QStringLiteral("local"));
  local.insert(QStringLiteral("TILED"), true);
  const RunResult a = run(kIsochronesId, path("dem.tif"), local);
  ASSERT_TRUE(a.ok) << a.error.toStdString();
  QVariantMap mpi = outputs(QStringLiteral("mpi"));
  mpi.insert(QStringLiteral("MPI_PROCESSES"), 2);
  const RunResult b = run(kIsochronesId, path("dem.tif"), mpi);
  ASSERT_TRUE(b.ok) << b.error.toStdString();
  EXPECT_TRUE(b.logContains(QStringLiteral("Running 2 processes under MPI"))) << b.log.join('\n').toStdString();
  EXPECT_TRUE(sameRaster<double>(path("local_time.tif"), path("mpi_time.tif"), GDT_Float64));
  EXPECT_TRUE(sameRaster<float>(path("local_filled.tif"), path("mpi_filled.tif"), GDT_Float32));
  EXPECT_TRUE(sameRaster<uint8_t>(path("local_dir.tif"), path("mpi_dir.tif"), GDT_Byte));
  EXPECT_TRUE(sameRaster<int32_t>(path("local_acc.tif"), path("mpi_acc.tif"), GDT_Int32));
  for (const char* vector : {"_watershed.gpkg", "_isochrones.gpkg", "_table.gpkg"})
  {
    const auto x = features(path(QStringLiteral("local") + vector)), y = features(path(QStringLiteral("mpi") + vector));
    EXPECT_FALSE(x.empty()) << vector;
    EXPECT_TRUE(x == y) << vector;
  }
  for (const char* key : {"WATERSHED_AREA_KM2", "MAX_TIME_MIN", "INTERVAL_MIN", "OUTLET_X", "OUTLET_Y"})
    EXPECT_EQ(a.outputs.value(QString::fromLatin1(key)), b.outputs.value(QString::fromLatin1(key))) << key;
  // The same log lines on the outlet and the watershed.
  for (const QString& line : a.log)
    if (line.startsWith(QStringLiteral("Outlet")) || line.startsWith(QStringLiteral("Watershed:")) ||
        line.startsWith(QStringLiteral("Filling raised")))
      EXPECT_TRUE(b.logContains(line)) << line.toStdString();
}

TEST_F(DemMpiTest, WithoutMpiexecTheRunStaysInProcess)
{
  const TestDem d = randomDem(60, 50, 3, 13);
  writeTiff(path("dem.tif"), d);
  const QByteArray saved = qgetenv("PATH");
  qputenv("PATH", path("nothing-here").toUtf8());
  const RunResult result = run(kFill, path("dem.tif"),
                               {{QStringLiteral("MPI_PROCESSES"), 2}, {QStringLiteral("OUTPUT"), path("fill.tif")}});
  qputenv("PATH", saved);
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  EXPECT_TRUE(result.logContains(QStringLiteral("mpiexec is not on the PATH: the run stays in-process")))
    << result.log.join('\n').toStdString();
  EXPECT_TRUE(QFile::exists(path("fill.tif")));
}

TEST_F(DemMpiTest, AMissingHostFileIsRefused)
{
  if (!mpiUsable())
    GTEST_SKIP() << "mpiexec or gpugeo_dem with MPI is missing";
  const TestDem d = randomDem(60, 50, 3, 13);
  writeTiff(path("dem.tif"), d);
  const RunResult result = run(kFill, path("dem.tif"),
                               {{QStringLiteral("MPI_PROCESSES"), 2}, {QStringLiteral("MPI_HOSTFILE"), path("no_hosts")},
                                {QStringLiteral("OUTPUT"), path("fill.tif")}});
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(result.error.contains(QStringLiteral("host file"))) << result.error.toStdString();
  EXPECT_FALSE(QFile::exists(path("fill.tif")));
}

TEST_F(DemMpiTest, ACancelEndsTheJobAndLeavesNothing)
{
  if (!mpiUsable())
    GTEST_SKIP() << "mpiexec or gpugeo_dem with MPI is missing";
  const TestDem d = randomDem(900, 800, 20, 13);
  writeTiff(path("dem.tif"), d);
  const RunResult result = run(kFill, path("dem.tif"),
                               {{QStringLiteral("MPI_PROCESSES"), 2}, {QStringLiteral("FLATS"), 1},
                                {QStringLiteral("MEMORY_BUDGET"), 8}, {QStringLiteral("OUTPUT"), path("fill.tif")}},
                               true);
  EXPECT_FALSE(result.ok) << result.log.join('\n').toStdString();
  EXPECT_TRUE(result.error.contains(QStringLiteral("cancel"), Qt::CaseInsensitive)) << result.error.toStdString();
  EXPECT_TRUE(result.logContains(QStringLiteral("Running 2 processes under MPI"))) << result.log.join('\n').toStdString();
  EXPECT_FALSE(QFile::exists(path("fill.tif")));
  EXPECT_TRUE(QDir(QgsProcessingUtils::tempFolder()).entryList({QStringLiteral("gpugeo-scratch-*")}, QDir::AllEntries).isEmpty());
}

// COG and CREATION_OPTIONS reach gpugeo_dem: the job's fill is a COG compressed as asked, with the
// in-process run's values.
TEST_F(DemMpiTest, TheOutputFormatTravelsToTheJob)
{
  if (!mpiUsable())
    GTEST_SKIP() << "mpiexec or gpugeo_dem with MPI is missing";
  const TestDem d = randomDem(120, 90, 4, 13);
  writeTiff(path("dem.tif"), d);
  ASSERT_TRUE(run(kFill, path("dem.tif"), {{QStringLiteral("OUTPUT"), path("fill_local.tif")}}).ok);
  const RunResult result = run(kFill, path("dem.tif"),
                               {{QStringLiteral("MPI_PROCESSES"), 2}, {QStringLiteral("MEMORY_BUDGET"), 1},
                                {QStringLiteral("COG"), true}, {QStringLiteral("CREATION_OPTIONS"), QStringLiteral("COMPRESS=LZW")},
                                {QStringLiteral("OUTPUT"), path("fill_job.tif")}});
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  EXPECT_TRUE(result.logContains(QStringLiteral("Running 2 processes under MPI"))) << result.log.join('\n').toStdString();
  GDALDatasetH dataset = GDALOpen(path("fill_job.tif").toUtf8().constData(), GA_ReadOnly);
  ASSERT_TRUE(dataset);
  const char* layout = GDALGetMetadataItem(dataset, "LAYOUT", "IMAGE_STRUCTURE");
  const char* compression = GDALGetMetadataItem(dataset, "COMPRESSION", "IMAGE_STRUCTURE");
  EXPECT_STREQ(layout ? layout : "", "COG");
  EXPECT_STREQ(compression ? compression : "", "LZW");
  GDALClose(dataset);
  EXPECT_TRUE(sameRaster<float>(path("fill_local.tif"), path("fill_job.tif"), GDT_Float32));
}
