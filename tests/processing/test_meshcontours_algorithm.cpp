// gpugeo:meshcontours through the QGIS API: small 2DM meshes written here (with ASCII DAT datasets
// attached for vector and time-varying data), run through QGIS's own native:meshcontours and through
// gpugeo:meshcontours, and compared feature by feature: the same fields, attributes and order; per
// level the same total line length and per band the same polygon area (1e-9 relative); ours in no
// more parts than QGIS's, as whole lines, and valid polygons.
//
// Levels lie off the vertex values (QGIS drops a line where it passes exactly through a vertex; a test
// of its own shows ours keeps it). QGIS's own level generation stops before MAXIMUM; ours includes it
// (a test documents the difference).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <vector>

#include <QDir>
#include <QFile>
#include <QTextStream>

#include <qgsconfig.h>
#include <qgscoordinatereferencesystem.h>
#include <qgsfeature.h>
#include <qgsfeatureiterator.h>
#include <qgsgeometry.h>
#include <qgsgeometrycollection.h>
#include <qgslinestring.h>
#include <qgsmeshlayer.h>
#include <qgsmeshlayertemporalproperties.h>
#include <qgspolygon.h>
#include <qgsprocessingregistry.h>
#include <qgsprocessingutils.h>
#include <qgsproviderregistry.h>
#include <qgsvectorlayer.h>

#include "core/backend.h"
#include "mesh/mesh_contours.h"
#include "processing_test_support.h"

namespace {

using gpugeo::test::featuresOf;
using gpugeo::test::RunResult;

const QString kOurs = QStringLiteral("gpugeo:meshcontours");
const QString kQgis = QStringLiteral("native:meshcontours");

struct Mesh2dm
{
  std::vector<std::array<double, 3>> nodes;  // x, y, z
  std::vector<std::vector<int>> faces;       // 0-based node indices
  std::vector<double> faceValues;            // one per face (group "Bed Elevation (Face)"), or none
};

QString number(double v)
{
  return std::isnan(v) ? QStringLiteral("nan") : QString::number(v, 'g', 17);
}

// The 2DM syntax MDAL reads: ND id x y z; E3T/E4Q/E6T id nodes... material [face value].
void write2dm(const QString& path, const Mesh2dm& mesh)
{
  QFile file(path);
  ASSERT_TRUE(file.open(QIODevice::WriteOnly | QIODevice::Text)) << path.toStdString();
  QTextStream out(&file);
  out << "MESH2D\n";
  for (std::size_t i = 0; i < mesh.nodes.size(); ++i)
    out << "ND " << i + 1 << ' ' << number(mesh.nodes[i][0]) << ' ' << number(mesh.nodes[i][1]) << ' '
        << number(mesh.nodes[i][2]) << '\n';
  for (std::size_t f = 0; f < mesh.faces.size(); ++f)
  {
    const std::vector<int>& face = mesh.faces[f];
    out << (face.size() == 3 ? "E3T " : face.size() == 4 ? "E4Q " : "E6T ") << f + 1;
    for (int v : face)
      out << ' ' << v + 1;
    out << " 1";
    if (!mesh.faceValues.empty())
      out << ' ' << number(mesh.faceValues[f]);
    out << '\n';
  }
}

enum class Cells
{
  Quads,
  Triangles,
  Mixed  // quads, some clockwise; every third cell as two triangles
};

// (n + 1) x (n + 1) nodes at (x0 + i step, y0 + j step), z = f(i, j); cells of `cells`; face values
// faceValue(i, j) of the cell's lower-left corner, when given.
Mesh2dm gridMesh(int n, const std::function<double(int, int)>& f, Cells cells, double step = 1.0, double x0 = 0.0,
                 double y0 = 0.0, const std::function<double(int, int)>& faceValue = nullptr)
{
  Mesh2dm mesh;
  for (int j = 0; j <= n; ++j)
    for (int i = 0; i <= n; ++i)
      mesh.nodes.push_back({x0 + i * step, y0 + j * step, f(i, j)});
  const auto node = [n](int i, int j) { return j * (n + 1) + i; };
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i)
    {
      const int a = node(i, j), b = node(i + 1, j), c = node(i + 1, j + 1), d = node(i, j + 1);
      const bool split = cells == Cells::Triangles || (cells == Cells::Mixed && (i + j) % 3 == 0);
      const int faces = split ? 2 : 1;
      if (!split && cells == Cells::Mixed && (i * 7 + j) % 5 == 0)
        mesh.faces.push_back({a, d, c, b});
      else if (!split)
        mesh.faces.push_back({a, b, c, d});
      else if ((i + j) % 2 == 0)
        mesh.faces.insert(mesh.faces.end(), {{a, b, c}, {a, c, d}});
      else
        mesh.faces.insert(mesh.faces.end(), {{a, b, d}, {b, c, d}});
      if (faceValue)
        mesh.faceValues.insert(mesh.faceValues.end(), std::size_t(faces), faceValue(i, j));
    }
  return mesh;
}

// The mesh of the research notes: 9 nodes, 3 quads and 2 triangles, integer z from 0 to 4.
Mesh2dm quadsAndTriangles()
{
  Mesh2dm mesh;
  mesh.nodes = {{0, 0, 0}, {10, 0, 1}, {20, 0, 2}, {0, 10, 1}, {10, 10, 2.5}, {20, 10, 3}, {0, 20, 2}, {10, 20, 3}, {20, 20, 4}};
  mesh.faces = {{0, 1, 4, 3}, {1, 2, 5}, {1, 5, 4}, {3, 4, 7, 6}, {4, 5, 8, 7}};
  return mesh;
}

int partCount(const QgsGeometry& geometry)
{
  const auto* collection = qgsgeometry_cast<const QgsGeometryCollection*>(geometry.constGet());
  return collection ? collection->numGeometries() : (geometry.isEmpty() ? 0 : 1);
}

void expectRelativelyEqual(double ours, double qgis, double tolerance, const std::string& where)
{
  EXPECT_LE(std::abs(ours - qgis), tolerance * std::max(std::abs(ours), std::abs(qgis))) << where << ": ours " << ours
                                                                                           << ", QGIS's " << qgis;
}

// Whole lines: no point where exactly two part ends meet (those would be one line), a closed part's
// two ends counting as one part's.
void expectWholeLines(const QgsGeometry& geometry, const std::string& where)
{
  const auto* collection = qgsgeometry_cast<const QgsGeometryCollection*>(geometry.constGet());
  ASSERT_TRUE(collection) << where;
  std::map<std::pair<double, double>, int> ends;
  for (int p = 0; p < collection->numGeometries(); ++p)
  {
    const auto* line = qgsgeometry_cast<const QgsLineString*>(collection->geometryN(p));
    ASSERT_TRUE(line) << where;
    ASSERT_GE(line->numPoints(), 2) << where;
    if (line->isClosed())
      continue;
    ++ends[{line->xAt(0), line->yAt(0)}];
    ++ends[{line->xAt(line->numPoints() - 1), line->yAt(line->numPoints() - 1)}];
  }
  for (const auto& [point, count] : ends)
    EXPECT_NE(count, 2) << where << ": two line parts end at (" << point.first << ", " << point.second << ")";
}

struct Outputs
{
  RunResult result;
  std::vector<QgsFeature> lines, polygons;
  QgsWkbTypes::Type lineType = QgsWkbTypes::Unknown, polygonType = QgsWkbTypes::Unknown;
  QgsFields lineFields, polygonFields;
  QgsCoordinateReferenceSystem crs;
};

class MeshContoursAlgorithmTest : public gpugeo::test::AlgorithmTest
{
protected:
  // QGIS's native algorithms, for native:meshcontours (processing_test_main.cpp registers only
  // gpugeo's provider, and loads QGIS's MDAL provider, which reads 2DM files).
  static void SetUpTestSuite()
  {
    ASSERT_TRUE(QgsProviderRegistry::instance()->providerList().contains(QStringLiteral("mdal")));
    registerNativeAlgorithms();
  }

  // A 2DM in the test's folder, loaded as a mesh layer.
  std::unique_ptr<QgsMeshLayer> meshLayer(const Mesh2dm& mesh, const QString& name = QStringLiteral("mesh.2dm"))
  {
    write2dm(path(name), mesh);
    auto layer = std::make_unique<QgsMeshLayer>(path(name), name, QStringLiteral("mdal"));
    EXPECT_TRUE(layer->isValid()) << name.toStdString();
    return layer;
  }

  static RunResult run(const QString& id, QgsMeshLayer* input, QVariantMap parameters, QgsProcessingContext& context,
                       bool cancelMidway = false)
  {
    return runAlgorithm(id, input, std::move(parameters), context, cancelMidway);
  }

  // Static time, one group, memory outputs; levels from CONTOUR_LEVEL_LIST when given.
  static QVariantMap parameters(const QString& levels, const QVariantList& groups = {0})
  {
    QVariantMap p{{QStringLiteral("DATASET_GROUPS"), groups},
                  {QStringLiteral("DATASET_TIME"), QVariantMap{{QStringLiteral("type"), QStringLiteral("static")}}},
                  {QStringLiteral("OUTPUT_LINES"), QStringLiteral("memory:")},
                  {QStringLiteral("OUTPUT_POLYGONS"), QStringLiteral("memory:")}};
    if (!levels.isEmpty())
      p.insert(QStringLiteral("CONTOUR_LEVEL_LIST"), levels);
    return p;
  }

  // Runs `id` (ours on the CPU unless DEVICE is given) and reads its outputs.
  static Outputs runAndRead(const QString& id, QgsMeshLayer* input, QVariantMap p)
  {
    if (id == kOurs && !p.contains(QStringLiteral("DEVICE")))
      p.insert(QStringLiteral("DEVICE"), 1);
    Outputs out;
    QgsProcessingContext context;
    out.result = run(id, input, p, context);
    EXPECT_TRUE(out.result.ok) << id.toStdString() << ": " << out.result.error.toStdString();
    if (!out.result.ok)
      return out;
    QgsVectorLayer* lines = outputLayer(out.result, QStringLiteral("OUTPUT_LINES"), context);
    QgsVectorLayer* polygons = outputLayer(out.result, QStringLiteral("OUTPUT_POLYGONS"), context);
    EXPECT_TRUE(lines && polygons) << id.toStdString();
    if (!lines || !polygons)
      return out;
    out.lines = featuresOf(lines);
    out.polygons = featuresOf(polygons);
    out.lineType = lines->wkbType();
    out.polygonType = polygons->wkbType();
    out.lineFields = lines->fields();
    out.polygonFields = polygons->fields();
    out.crs = lines->crs();
    return out;
  }

  static void expectSameFields(const QgsFields& ours, const QgsFields& qgis)
  {
    ASSERT_EQ(ours.names(), qgis.names());
    for (int i = 0; i < ours.count(); ++i)
      EXPECT_EQ(ours.at(i).type(), qgis.at(i).type()) << ours.at(i).name().toStdString();
  }

  // Our outputs against QGIS's on the same parameters: multi layers; the same fields; the same
  // features in the same order with the same attributes; per line feature the same length and no more
  // parts, as whole lines; per polygon feature the same area, valid. Returns both.
  static std::pair<Outputs, Outputs> compareWithQgis(QgsMeshLayer* input, const QVariantMap& p)
  {
    Outputs ours = runAndRead(kOurs, input, p);
    Outputs qgis = runAndRead(kQgis, input, p);
    if (!ours.result.ok || !qgis.result.ok)
      return {ours, qgis};
    EXPECT_EQ(ours.lineType, QgsWkbTypes::MultiLineStringZ);
    EXPECT_EQ(ours.polygonType, QgsWkbTypes::MultiPolygonZ);
    expectSameFields(ours.lineFields, qgis.lineFields);
    expectSameFields(ours.polygonFields, qgis.polygonFields);
    EXPECT_EQ(ours.lines.size(), qgis.lines.size());
    for (std::size_t i = 0; i < std::min(ours.lines.size(), qgis.lines.size()); ++i)
    {
      const std::string where = "line feature " + std::to_string(i) + " (" +
                                ours.lines[i].attributes().value(2).toString().toStdString() + ")";
      EXPECT_EQ(ours.lines[i].attributes(), qgis.lines[i].attributes()) << where;
      expectRelativelyEqual(ours.lines[i].geometry().length(), qgis.lines[i].geometry().length(), 1e-9, where);
      EXPECT_LE(partCount(ours.lines[i].geometry()), partCount(qgis.lines[i].geometry())) << where;
      expectWholeLines(ours.lines[i].geometry(), where);
    }
    EXPECT_EQ(ours.polygons.size(), qgis.polygons.size());
    for (std::size_t i = 0; i < std::min(ours.polygons.size(), qgis.polygons.size()); ++i)
    {
      const std::string where = "polygon feature " + std::to_string(i) + " (" +
                                ours.polygons[i].attributes().value(2).toString().toStdString() + " to " +
                                ours.polygons[i].attributes().value(3).toString().toStdString() + ")";
      EXPECT_EQ(ours.polygons[i].attributes(), qgis.polygons[i].attributes()) << where;
      expectRelativelyEqual(ours.polygons[i].geometry().area(), qgis.polygons[i].geometry().area(), 1e-9, where);
      EXPECT_TRUE(ours.polygons[i].geometry().isGeosValid()) << where;
    }
    return {ours, qgis};
  }
};

double paraboloid(int i, int j)
{
  return (i - 20.0) * (i - 20.0) + (j - 20.0) * (j - 20.0);
}

double wave(int i, int j)
{
  return 10.0 * std::sin(i / 4.3) * std::cos(j / 6.1) + 0.07 * i;
}

}  // namespace

// f = (x - 20)^2 + (y - 20)^2 on a 40 x 40 grid: every level is one circle, one closed ring in ours
// (QGIS's come in fragments); every band one polygon with one hole. Quads and triangles.
TEST_F(MeshContoursAlgorithmTest, SmoothFieldGivesOneClosedRingPerLevelAndMatchesQgis)
{
  for (Cells cells : {Cells::Quads, Cells::Triangles, Cells::Mixed})
  {
    SCOPED_TRACE("cells " + std::to_string(int(cells)));
    auto mesh = meshLayer(gridMesh(40, paraboloid, cells), QStringLiteral("paraboloid%1.2dm").arg(int(cells)));
    const auto [ours, qgis] = compareWithQgis(mesh.get(), parameters(QStringLiteral("10.5,50.5,100.5,200.5,350.5")));
    ASSERT_EQ(ours.lines.size(), 5u);
    ASSERT_EQ(ours.polygons.size(), 4u);
    int qgisParts = 0;
    for (std::size_t k = 0; k < 5; ++k)
    {
      const auto* multi = qgsgeometry_cast<const QgsGeometryCollection*>(ours.lines[k].geometry().constGet());
      ASSERT_TRUE(multi);
      ASSERT_EQ(multi->numGeometries(), 1) << "level " << k;
      const auto* ring = qgsgeometry_cast<const QgsLineString*>(multi->geometryN(0));
      ASSERT_TRUE(ring);
      EXPECT_TRUE(ring->isClosed()) << "level " << k;
      EXPECT_TRUE(ring->is3D());
      // z is the node z, which is the value here
      for (int v = 0; v < ring->numPoints(); v += 7)
        EXPECT_NEAR(ring->zAt(v), ours.lines[k].attribute(QStringLiteral("value")).toDouble(), 1e-9);
      qgisParts += partCount(qgis.lines[k].geometry());
    }
    std::cout << "parts of the 5 levels: ours 5, QGIS's " << qgisParts << std::endl;
    for (std::size_t k = 0; k < 4; ++k)
    {
      const auto* multi = qgsgeometry_cast<const QgsGeometryCollection*>(ours.polygons[k].geometry().constGet());
      ASSERT_TRUE(multi);
      ASSERT_EQ(multi->numGeometries(), 1) << "band " << k;
      const auto* polygon = qgsgeometry_cast<const QgsPolygon*>(multi->geometryN(0));
      ASSERT_TRUE(polygon);
      EXPECT_EQ(polygon->numInteriorRings(), 1) << "band " << k;
    }
    EXPECT_EQ(ours.lines[0].attribute(QStringLiteral("group")).toString(), QStringLiteral("Bed Elevation"));
    EXPECT_EQ(ours.lines[0].attribute(QStringLiteral("time")).toString(), QStringLiteral("0 d 00:00:00"));
  }
}

// A wavy field on quads (some clockwise) and triangles, the notes' small mesh, and a hexagon (a 2DM
// E6T face, cut as a fan like QGIS's): the same lengths and areas as QGIS's, in fewer parts.
TEST_F(MeshContoursAlgorithmTest, QuadsTrianglesAndHexagonsMatchQgis)
{
  {
    auto mesh = meshLayer(gridMesh(30, wave, Cells::Mixed, 10.0, 1000.0, 2000.0), QStringLiteral("wave.2dm"));
    const auto [ours, qgis] = compareWithQgis(mesh.get(), parameters(QStringLiteral("-7.3,-3.1,0.123,2.7,5.55,8.01")));
    EXPECT_EQ(ours.lines.size(), 6u);
    EXPECT_EQ(ours.polygons.size(), 5u);
    int oursParts = 0, qgisParts = 0;
    for (std::size_t k = 0; k < ours.lines.size(); ++k)
    {
      oursParts += partCount(ours.lines[k].geometry());
      qgisParts += partCount(qgis.lines[k].geometry());
    }
    std::cout << "wave: line parts ours " << oursParts << ", QGIS's " << qgisParts << std::endl;
  }
  {
    auto mesh = meshLayer(quadsAndTriangles(), QStringLiteral("quad.2dm"));
    const auto [ours, qgis] = compareWithQgis(mesh.get(), parameters(QStringLiteral("0.5,1.5,2.2,2.75,3.5")));
    EXPECT_EQ(ours.lines.size(), 5u);
    EXPECT_EQ(ours.polygons.size(), 4u);
  }
  {
    Mesh2dm hexagon;
    hexagon.nodes = {{0, 0, 0}, {10, 0, 1}, {20, 5, 2}, {10, 10, 3}, {0, 10, 2}, {-5, 5, 1}, {30, 5, 1}};
    hexagon.faces = {{0, 1, 2, 3, 4, 5}, {1, 6, 2}};
    auto mesh = meshLayer(hexagon, QStringLiteral("hexagon.2dm"));
    const auto [ours, qgis] = compareWithQgis(mesh.get(), parameters(QStringLiteral("0.5,1.5,2.5")));
    EXPECT_EQ(ours.lines.size(), 3u);
    EXPECT_EQ(ours.polygons.size(), 2u);
  }
}

// Meshes that are no planar subdivision: two squares that overlap without sharing a node, and a
// garbage 2DM that MDAL still loads (a bow-tie quad, a triangle given twice, a triangle folded over
// its neighbour, a degenerate triangle, two nodes at one place). Band polygons joined along the
// mesh's edges are not valid there (ours were written invalid); each such band is made again as the
// union of its triangles' pieces, with a warning: every polygon valid, with QGIS's area where QGIS
// writes the band.
TEST_F(MeshContoursAlgorithmTest, OverlappingAndCorruptMeshesGiveValidPolygons)
{
  Mesh2dm overlap;
  overlap.nodes = {{0, 0, 0}, {10, 0, 10}, {10, 10, 20}, {0, 10, 10}, {5, 5, 5}, {15, 5, 15}, {15, 15, 25}, {5, 15, 15}};
  overlap.faces = {{0, 1, 2}, {0, 2, 3}, {4, 5, 6}, {4, 6, 7}};
  Mesh2dm garbage;
  garbage.nodes = {{0, 0, 0},  {10, 0, 4}, {10, 10, 8}, {0, 10, 4}, {20, 0, 8}, {20, 10, 12},
                   {10, 10, 8}, {15, 5, 3}, {30, 0, 12}, {40, 0, 16}, {35, 0, 14}};
  garbage.faces = {{0, 1, 2, 3}, {1, 4, 5, 6}, {1, 5, 2}, {1, 5, 2}, {1, 7, 5}, {4, 2, 5}, {8, 9, 10}, {4, 8, 5}};
  struct Case
  {
    QString name;
    Mesh2dm mesh;
    QString levels;
  };
  for (const Case& c : {Case{QStringLiteral("overlap.2dm"), overlap, QStringLiteral("0,5,10,15,20,25")},
                        Case{QStringLiteral("garbage.2dm"), garbage, QStringLiteral("1,2.5,4,6,7.5,9,11,13,15")}})
  {
    const QString& name = c.name;
    auto mesh = meshLayer(c.mesh, name);
    const QVariantMap p = parameters(c.levels);
    const Outputs ours = runAndRead(kOurs, mesh.get(), p);
    const Outputs qgis = runAndRead(kQgis, mesh.get(), p);
    ASSERT_TRUE(ours.result.ok && qgis.result.ok) << name.toStdString();
    EXPECT_TRUE(ours.result.logContains(QStringLiteral("were not valid polygons when joined along the mesh's edges")))
      << name.toStdString() << ": " << ours.result.log.join('\n').toStdString();
    std::map<double, double> qgisArea;
    for (const QgsFeature& f : qgis.polygons)
      qgisArea[f.attribute(QStringLiteral("min_value")).toDouble()] = f.geometry().area();
    EXPECT_FALSE(ours.polygons.empty());
    for (const QgsFeature& f : ours.polygons)
    {
      const double lo = f.attribute(QStringLiteral("min_value")).toDouble();
      const std::string where = name.toStdString() + " band from " + std::to_string(lo);
      EXPECT_TRUE(f.geometry().isGeosValid()) << where;
      EXPECT_EQ(f.geometry().wkbType(), QgsWkbTypes::MultiPolygonZ) << where;
      if (qgisArea.count(lo))
        expectRelativelyEqual(f.geometry().area(), qgisArea[lo], 1e-9, where);
    }
  }
}

// Data on faces (the 2DM's face value column: group 1, "Bed Elevation (Face)"), averaged to the nodes
// as QGIS does, a face without a value (NaN) left out of the averages; the groups in the order given
// (faces first), with QGIS's attributes.
TEST_F(MeshContoursAlgorithmTest, FaceDataGroupsMatchQgis)
{
  const auto faceValue = [](int i, int j) { return i == 7 && j == 9 ? std::nan("") : 3.0 * std::sin(i / 3.7) + j / 2.9; };
  auto mesh = meshLayer(gridMesh(25, wave, Cells::Mixed, 5.0, 0.0, 0.0, faceValue), QStringLiteral("faces.2dm"));
  ASSERT_EQ(mesh->datasetGroupCount(), 2);
  EXPECT_EQ(mesh->datasetGroupMetadata(QgsMeshDatasetIndex(1, 0)).name(), QStringLiteral("Bed Elevation (Face)"));
  EXPECT_EQ(mesh->datasetGroupMetadata(QgsMeshDatasetIndex(1, 0)).dataType(), QgsMeshDatasetGroupMetadata::DataOnFaces);
  const auto [ours, qgis] =
    compareWithQgis(mesh.get(), parameters(QStringLiteral("-1.1,1.3,3.7,6.1,8.3"), QVariantList{1, 0}));
  ASSERT_GE(ours.lines.size(), 6u);
  EXPECT_EQ(ours.lines.front().attribute(QStringLiteral("group")).toString(), QStringLiteral("Bed Elevation (Face)"));
  EXPECT_EQ(ours.lines.back().attribute(QStringLiteral("group")).toString(), QStringLiteral("Bed Elevation"));
}

// A vector dataset with two time steps and an inactive face (an ASCII DAT with status flags, attached
// with addDatasets): the magnitude is contoured, the dataset at the requested time step is used, and
// the time attribute is QGIS's. Before the first time step the group has no dataset: a warning and no
// features for it, while the static group 0 is written.
TEST_F(MeshContoursAlgorithmTest, VectorDataAtATimeStepAndInactiveFacesMatchQgis)
{
  const int n = 12;
  auto mesh = meshLayer(gridMesh(n, wave, Cells::Mixed, 10.0), QStringLiteral("vector.2dm"));
  const int nodes = (n + 1) * (n + 1);
  const int faces = mesh->dataProvider()->faceCount();
  {
    QFile file(path(QStringLiteral("velocity.dat")));
    ASSERT_TRUE(file.open(QIODevice::WriteOnly | QIODevice::Text));
    QTextStream out(&file);
    out << "DATASET\nOBJTYPE \"mesh2d\"\nBEGVEC\nND " << nodes << "\nNC " << faces
        << "\nNAME \"Velocity\"\nTIMEUNITS hours\n";
    for (int step = 0; step < 2; ++step)
    {
      out << "TS 1 " << step * 2.0 << '\n';
      for (int f = 0; f < faces; ++f)
        out << (f == 17 || (step == 1 && f == 40) ? 0 : 1) << '\n';
      for (int v = 0; v < nodes; ++v)
      {
        const int i = v % (n + 1), j = v / (n + 1);
        out << number(std::cos(i / 3.1 + step) * (j + 1) / 3.0) << ' ' << number(std::sin(j / 2.3 - step) * 2.0)
            << '\n';
      }
    }
    out << "ENDDS\n";
  }
  ASSERT_TRUE(mesh->addDatasets(path(QStringLiteral("velocity.dat"))));
  ASSERT_EQ(mesh->datasetGroupCount(), 2);
  const int velocity = 1;
  ASSERT_TRUE(mesh->datasetGroupMetadata(QgsMeshDatasetIndex(velocity, 0)).isVector());
  ASSERT_EQ(mesh->datasetCount(QgsMeshDatasetIndex(velocity, 0)), 2);

  QVariantMap p = parameters(QStringLiteral("0.31,0.77,1.23,1.91,2.45"), QVariantList{velocity});
  p.insert(QStringLiteral("DATASET_TIME"),
           QVariantMap{{QStringLiteral("type"), QStringLiteral("dataset-time-step")},
                       {QStringLiteral("value"), QVariantList{velocity, 1}}});
  const auto [ours, qgis] = compareWithQgis(mesh.get(), p);
  ASSERT_GE(ours.lines.size(), 3u);
  EXPECT_EQ(ours.lines[0].attribute(QStringLiteral("time")).toString(), QStringLiteral("0 d 02:00:00"));
  EXPECT_EQ(ours.lines[0].attribute(QStringLiteral("group")).toString(), QStringLiteral("Velocity"));

  // a day before the reference time: group 0 (static) only
  const QDateTime reference =
    static_cast<QgsMeshLayerTemporalProperties*>(mesh->temporalProperties())->referenceTime();
  ASSERT_TRUE(reference.isValid());
  p.insert(QStringLiteral("DATASET_GROUPS"), QVariantList{0, velocity});
  p.insert(QStringLiteral("DATASET_TIME"), reference.addDays(-1));
  p.insert(QStringLiteral("CONTOUR_LEVEL_LIST"), QStringLiteral("-3.3,1.1,4.4"));
  const auto [oursBefore, qgisBefore] = compareWithQgis(mesh.get(), p);
  ASSERT_EQ(oursBefore.lines.size(), 3u);
  for (const QgsFeature& f : oursBefore.lines)
    EXPECT_EQ(f.attribute(QStringLiteral("group")).toString(), QStringLiteral("Bed Elevation"));
  EXPECT_TRUE(oursBefore.result.logContains(QStringLiteral("WARNING Dataset group 1 (Velocity) has no dataset at time")))
    << oursBefore.result.log.join('\n').toStdString();
}

// CRS_OUTPUT: the mesh (EPSG:32633) is transformed before contouring, as QGIS does; the outputs are
// in CRS_OUTPUT. Without it ours are in the mesh's CRS; QGIS's sinks get no CRS (a memory layer then
// takes its default, EPSG:4326, although the coordinates are UTM).
TEST_F(MeshContoursAlgorithmTest, OutputCrsTransformsTheMeshAndIsCarriedThrough)
{
  auto mesh = meshLayer(gridMesh(30, wave, Cells::Mixed, 100.0, 500000.0, 5000000.0), QStringLiteral("utm.2dm"));
  mesh->setCrs(QgsCoordinateReferenceSystem(QStringLiteral("EPSG:32633")));
  QVariantMap p = parameters(QStringLiteral("-4.1,0.9,5.3"));
  p.insert(QStringLiteral("CRS_OUTPUT"), QStringLiteral("EPSG:4326"));
  const auto [ours, qgis] = compareWithQgis(mesh.get(), p);
  EXPECT_EQ(ours.crs.authid(), QStringLiteral("EPSG:4326"));
  ASSERT_FALSE(ours.lines.empty());
  const QgsRectangle box = ours.lines[0].geometry().boundingBox();
  EXPECT_GT(box.xMinimum(), 14.0);
  EXPECT_LT(box.xMaximum(), 16.0);
  EXPECT_GT(box.yMinimum(), 45.0);
  EXPECT_LT(box.yMaximum(), 45.5);

  p.remove(QStringLiteral("CRS_OUTPUT"));
  const auto [native, qgisNative] = compareWithQgis(mesh.get(), p);
  EXPECT_EQ(native.crs.authid(), QStringLiteral("EPSG:32633"));
  EXPECT_NE(qgisNative.crs.authid(), QStringLiteral("EPSG:32633"));
}

// A mesh from longitude 70 to 100 to an orthographic projection centred on (0, 0): the nodes beyond
// longitude 90 cannot be transformed; their triangles are left out, as QGIS leaves them out.
TEST_F(MeshContoursAlgorithmTest, NodesTheTransformCannotReachLeaveTheirTrianglesOut)
{
  auto mesh = meshLayer(gridMesh(30, wave, Cells::Mixed, 1.0, 70.0, -10.0), QStringLiteral("lonlat.2dm"));
  mesh->setCrs(QgsCoordinateReferenceSystem(QStringLiteral("EPSG:4326")));
  const QgsCoordinateReferenceSystem ortho =
    QgsCoordinateReferenceSystem::fromProj(QStringLiteral("+proj=ortho +lat_0=0 +lon_0=0 +R=6371000 +units=m +no_defs"));
  ASSERT_TRUE(ortho.isValid());
  QVariantMap p = parameters(QStringLiteral("-4.1,0.9,5.3"));
  p.insert(QStringLiteral("CRS_OUTPUT"), QVariant::fromValue(ortho));
  const auto [ours, qgis] = compareWithQgis(mesh.get(), p);
  ASSERT_FALSE(ours.lines.empty());
  EXPECT_TRUE(ours.result.logContains(QStringLiteral("WARNING 310 of 961 vertices could not be transformed")))
    << ours.result.log.join('\n').toStdString();
  for (const QgsFeature& f : ours.lines)
    EXPECT_LE(f.geometry().boundingBox().xMaximum(), 6371000.0);
}

// MINIMUM 0.25, MAXIMUM 3.25, INCREMENT 1: ours has the levels 0.25 to 3.25, QGIS's stops at 2.25
// (it never includes MAXIMUM). The features both have are the same.
TEST_F(MeshContoursAlgorithmTest, MaximumIsALevelWhereQgisStopsBeforeIt)
{
  auto mesh = meshLayer(quadsAndTriangles());
  QVariantMap p = parameters(QString());
  p.insert(QStringLiteral("MINIMUM"), 0.25);
  p.insert(QStringLiteral("MAXIMUM"), 3.25);
  p.insert(QStringLiteral("INCREMENT"), 1.0);
  const Outputs ours = runAndRead(kOurs, mesh.get(), p);
  const Outputs qgis = runAndRead(kQgis, mesh.get(), p);
  ASSERT_EQ(ours.lines.size(), 4u);
  ASSERT_EQ(qgis.lines.size(), 3u);
  ASSERT_EQ(ours.polygons.size(), 3u);
  ASSERT_EQ(qgis.polygons.size(), 2u);
  EXPECT_EQ(ours.lines[3].attribute(QStringLiteral("value")).toDouble(), 3.25);
  EXPECT_EQ(ours.polygons[2].attribute(QStringLiteral("min_value")).toDouble(), 2.25);
  EXPECT_EQ(ours.polygons[2].attribute(QStringLiteral("max_value")).toDouble(), 3.25);
  for (std::size_t k = 0; k < 3; ++k)
  {
    EXPECT_EQ(ours.lines[k].attributes(), qgis.lines[k].attributes());
    expectRelativelyEqual(ours.lines[k].geometry().length(), qgis.lines[k].geometry().length(), 1e-9, "line");
  }
  for (std::size_t k = 0; k < 2; ++k)
  {
    EXPECT_EQ(ours.polygons[k].attributes(), qgis.polygons[k].attributes());
    expectRelativelyEqual(ours.polygons[k].geometry().area(), qgis.polygons[k].geometry().area(), 1e-9, "polygon");
  }
  // the same range through CONTOUR_LEVEL_LIST gives the same output
  const Outputs listed = runAndRead(kOurs, mesh.get(), parameters(QStringLiteral("0.25,1.25,2.25,3.25")));
  ASSERT_EQ(listed.lines.size(), ours.lines.size());
  for (std::size_t k = 0; k < listed.lines.size(); ++k)
    EXPECT_TRUE(listed.lines[k].geometry().equals(ours.lines[k].geometry()));
}

// Levels 1 and 3 pass exactly through nodes of the notes' mesh: QGIS writes no line for them (it
// drops a line in every triangle where it runs from a node to the opposite edge); ours has both:
// (0 10)-(4 4)-(10 0) and (10 20)-(13.33 13.33)-(20 10).
TEST_F(MeshContoursAlgorithmTest, LinesThroughNodesAreKeptWhereQgisDropsThem)
{
  auto mesh = meshLayer(quadsAndTriangles());
  const Outputs ours = runAndRead(kOurs, mesh.get(), parameters(QStringLiteral("1,3")));
  const Outputs qgis = runAndRead(kQgis, mesh.get(), parameters(QStringLiteral("1,3")));
  EXPECT_TRUE(qgis.lines.empty());
  ASSERT_EQ(ours.lines.size(), 2u);
  EXPECT_EQ(partCount(ours.lines[0].geometry()), 1);
  EXPECT_EQ(partCount(ours.lines[1].geometry()), 1);
  EXPECT_NEAR(ours.lines[0].geometry().length(), 2.0 * std::sqrt(52.0), 1e-9);
  EXPECT_NEAR(ours.lines[1].geometry().length(), 2.0 * std::sqrt(500.0 / 9.0), 1e-9);
  // the band between them has the same area in both
  ASSERT_EQ(ours.polygons.size(), 1u);
  ASSERT_EQ(qgis.polygons.size(), 1u);
  expectRelativelyEqual(ours.polygons[0].geometry().area(), qgis.polygons[0].geometry().area(), 1e-9, "band 1 to 3");
  EXPECT_TRUE(ours.polygons[0].geometry().isGeosValid());
}

// Levels above the data: no feature (as in QGIS), and the log says why.
TEST_F(MeshContoursAlgorithmTest, LevelsOutsideTheDataGiveEmptyOutputsAndSaySo)
{
  auto mesh = meshLayer(quadsAndTriangles());
  const auto [ours, qgis] = compareWithQgis(mesh.get(), parameters(QStringLiteral("5,6,7")));
  EXPECT_TRUE(ours.lines.empty());
  EXPECT_TRUE(ours.polygons.empty());
  EXPECT_TRUE(ours.result.logContains(QStringLiteral("the levels (5 to 7) lie outside the data's range [0, 4]")))
    << ours.result.log.join('\n').toStdString();
}

// To GeoPackages: MultiLineStringZ and MultiPolygonZ layers with QGIS's field types.
TEST_F(MeshContoursAlgorithmTest, GeoPackageOutputsAreMultiLayers)
{
  auto mesh = meshLayer(gridMesh(40, paraboloid, Cells::Quads));
  QVariantMap p = parameters(QStringLiteral("10.5,50.5,100.5"));
  p.insert(QStringLiteral("OUTPUT_LINES"), path(QStringLiteral("lines.gpkg")));
  p.insert(QStringLiteral("OUTPUT_POLYGONS"), path(QStringLiteral("polygons.gpkg")));
  p.insert(QStringLiteral("DEVICE"), 1);
  QgsProcessingContext context;
  const RunResult result = run(kOurs, mesh.get(), p, context);
  ASSERT_TRUE(result.ok) << result.error.toStdString();
  QgsVectorLayer lines(path(QStringLiteral("lines.gpkg")), QStringLiteral("l"), QStringLiteral("ogr"));
  QgsVectorLayer polygons(path(QStringLiteral("polygons.gpkg")), QStringLiteral("p"), QStringLiteral("ogr"));
  ASSERT_TRUE(lines.isValid() && polygons.isValid());
  EXPECT_EQ(lines.wkbType(), QgsWkbTypes::MultiLineStringZ);
  EXPECT_EQ(polygons.wkbType(), QgsWkbTypes::MultiPolygonZ);
  EXPECT_EQ(lines.featureCount(), 3);
  EXPECT_EQ(polygons.featureCount(), 2);
  EXPECT_EQ(lines.fields().field(QStringLiteral("group")).type(), QVariant::String);
  EXPECT_EQ(lines.fields().field(QStringLiteral("time")).type(), QVariant::String);
  EXPECT_EQ(lines.fields().field(QStringLiteral("value")).type(), QVariant::Double);
  EXPECT_EQ(polygons.fields().field(QStringLiteral("min_value")).type(), QVariant::Double);
  EXPECT_EQ(polygons.fields().field(QStringLiteral("max_value")).type(), QVariant::Double);
  EXPECT_TRUE(result.logContains(QStringLiteral("Backend: CPU"))) << result.log.join('\n').toStdString();
  EXPECT_TRUE(result.logContains(QStringLiteral("3200 of 3200 triangles used"))) << result.log.join('\n').toStdString();
  EXPECT_TRUE(result.logContains(QStringLiteral("Stage times:"))) << result.log.join('\n').toStdString();
}

// DEVICE=0 (Auto) writes what DEVICE=1 (CPU) writes; without a GPU, Auto says it runs on the CPU.
TEST_F(MeshContoursAlgorithmTest, AutoGivesTheSameOutputAsCpu)
{
  auto mesh = meshLayer(gridMesh(30, wave, Cells::Mixed));
  QVariantMap p = parameters(QStringLiteral("-4.1,0.9,5.3"));
  std::vector<Outputs> outputs;
  for (int device : {1, 0})
  {
    p.insert(QStringLiteral("DEVICE"), device);
    outputs.push_back(runAndRead(kOurs, mesh.get(), p));
    if (device == 0 && !gpugeo::probeGpu().usable)
      EXPECT_TRUE(outputs.back().result.logContains(QStringLiteral("Device: no usable GPU")));
  }
  ASSERT_EQ(outputs[0].lines.size(), outputs[1].lines.size());
  ASSERT_EQ(outputs[0].polygons.size(), outputs[1].polygons.size());
  for (std::size_t i = 0; i < outputs[0].lines.size(); ++i)
    EXPECT_TRUE(outputs[0].lines[i].geometry().equals(outputs[1].lines[i].geometry())) << "line " << i;
  for (std::size_t i = 0; i < outputs[0].polygons.size(); ++i)
    EXPECT_TRUE(outputs[0].polygons[i].geometry().equals(outputs[1].polygons[i].geometry())) << "polygon " << i;
}

// Bad levels and groups are refused before anything is written, with QGIS's message where QGIS has
// one (checked against native:meshcontours).
TEST_F(MeshContoursAlgorithmTest, BadInputIsRefusedWithAClearMessageAndNoOutput)
{
  auto mesh = meshLayer(quadsAndTriangles());
  struct Case
  {
    QString name;
    QVariantMap parameters;
    QString expected;
    bool qgisSays;  // QGIS refuses it with the same message
  };
  const QString min = QStringLiteral("MINIMUM"), max = QStringLiteral("MAXIMUM"), inc = QStringLiteral("INCREMENT"),
                list = QStringLiteral("CONTOUR_LEVEL_LIST");
  QStringList tooMany;
  for (int i = 0; i <= gpugeo::mesh::kMaxLevels; ++i)
    tooMany << QString::number(i);
  const QString badInterval = QStringLiteral("Invalid interval value, must be greater than zero");
  const QString badOrder = QStringLiteral("Invalid format for level values, must be different numbers and in increasing order");
  const QString notNumbers = QStringLiteral("Invalid format for level values, must be numbers separated with comma");
  const std::vector<Case> cases = {
    {"group 5", {{QStringLiteral("DATASET_GROUPS"), QVariantList{0, 5}}, {list, "1.5"}},
     "The mesh has no dataset group 5 (it has 1: 0).", false},
    {"increment 0", {{min, 0.0}, {max, 4.0}, {inc, 0.0}}, badInterval, true},
    {"increment negative", {{min, 0.0}, {max, 4.0}, {inc, -1.0}}, badInterval, true},
    {"no increment", {{min, 0.0}, {max, 4.0}}, badInterval, true},
    {"minimum = maximum", {{min, 4.0}, {max, 4.0}, {inc, 1.0}},
     "Invalid minimum and maximum values, minimum must be lesser than maximum", true},
    {"minimum > maximum", {{min, 5.0}, {max, 4.0}, {inc, 1.0}},
     "Invalid minimum and maximum values, minimum must be lesser than maximum", true},
    {"increment > maximum - minimum", {{min, 0.0}, {max, 1.0}, {inc, 2.0}},
     "Invalid minimum, maximum and interval values, difference between minimum and maximum must be greater or equal "
     "than interval",
     true},
    {"list decreasing", {{list, "3,2"}}, badOrder, true},
    {"list repeated", {{list, "1,1"}}, badOrder, true},
    {"list empty item", {{list, "1,,2"}}, notNumbers, true},
    {"list not numbers", {{list, "abc"}}, notNumbers, true},
    {"list with semicolons", {{list, "1;2"}}, notNumbers, true},
    {"list with nan", {{list, "1,nan"}}, "levels must be finite numbers", false},
    {"list too long", {{list, tooMany.join(',')}}, "has 10001 levels; at most 10000 are allowed", false},
    {"range too fine", {{min, 0.0}, {max, 20000.0}, {inc, 1.0}}, "give 20001 levels; at most 10000 are allowed", false},
  };
  for (const Case& c : cases)
  {
    QVariantMap p = parameters(QString());
    for (auto it = c.parameters.begin(); it != c.parameters.end(); ++it)
      p.insert(it.key(), it.value());
    p.insert(QStringLiteral("OUTPUT_LINES"), path(QStringLiteral("bad_lines.gpkg")));
    p.insert(QStringLiteral("OUTPUT_POLYGONS"), path(QStringLiteral("bad_polygons.gpkg")));
    p.insert(QStringLiteral("DEVICE"), 1);
    QgsProcessingContext context;
    const RunResult result = run(kOurs, mesh.get(), p, context);
    EXPECT_FALSE(result.ok) << c.name.toStdString();
    EXPECT_TRUE(result.error.contains(c.expected)) << c.name.toStdString() << ": " << result.error.toStdString();
    EXPECT_FALSE(QFile::exists(path(QStringLiteral("bad_lines.gpkg")))) << c.name.toStdString();
    EXPECT_FALSE(QFile::exists(path(QStringLiteral("bad_polygons.gpkg")))) << c.name.toStdString();
    if (c.qgisSays)
    {
      p.remove(QStringLiteral("DEVICE"));
      QgsProcessingContext qgisContext;
      const RunResult qgis = run(kQgis, mesh.get(), p, qgisContext);
      EXPECT_FALSE(qgis.ok) << c.name.toStdString();
      EXPECT_TRUE(qgis.error.contains(c.expected)) << c.name.toStdString() << ": QGIS says " << qgis.error.toStdString();
    }
  }
}

// A mesh of edges only (a 2DM with E2L lines): nothing to contour, said plainly.
TEST_F(MeshContoursAlgorithmTest, MeshWithoutFacesIsRefused)
{
  QFile file(path(QStringLiteral("edges.2dm")));
  ASSERT_TRUE(file.open(QIODevice::WriteOnly | QIODevice::Text));
  file.write("MESH2D\nND 1 0 0 0\nND 2 10 0 1\nND 3 20 5 2\nE2L 1 1 2 1\nE2L 2 2 3 1\n");
  file.close();
  QgsMeshLayer mesh(path(QStringLiteral("edges.2dm")), QStringLiteral("edges"), QStringLiteral("mdal"));
  ASSERT_TRUE(mesh.isValid());
  QVariantMap p = parameters(QStringLiteral("0.5"));
  p.insert(QStringLiteral("OUTPUT_LINES"), path(QStringLiteral("edges_lines.gpkg")));
  p.insert(QStringLiteral("OUTPUT_POLYGONS"), path(QStringLiteral("edges_polygons.gpkg")));
  QgsProcessingContext context;
  const RunResult result = run(kOurs, &mesh, p, context);
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(result.error.contains(QStringLiteral("The mesh has no face to contour (3 vertices, 0 faces, 2 edges)")))
    << result.error.toStdString();
  EXPECT_FALSE(QFile::exists(path(QStringLiteral("edges_lines.gpkg"))));
}

TEST_F(MeshContoursAlgorithmTest, GpuRequestedWithoutAGpuNamesTheReason)
{
  if (gpugeo::probeGpu().usable)
    GTEST_SKIP() << "a GPU is present";
  auto mesh = meshLayer(quadsAndTriangles());
  QVariantMap p = parameters(QStringLiteral("1.5"));
  p.insert(QStringLiteral("DEVICE"), 2);
  p.insert(QStringLiteral("OUTPUT_LINES"), path(QStringLiteral("gpu_lines.gpkg")));
  p.insert(QStringLiteral("OUTPUT_POLYGONS"), path(QStringLiteral("gpu_polygons.gpkg")));
  QgsProcessingContext context;
  const RunResult result = run(kOurs, mesh.get(), p, context);
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(result.error.contains(QString::fromStdString(gpugeo::probeGpu().reason))) << result.error.toStdString();
  EXPECT_TRUE(result.error.contains(QStringLiteral("DEVICE=GPU"))) << result.error.toStdString();
  EXPECT_FALSE(QFile::exists(path(QStringLiteral("gpu_lines.gpkg"))));
  EXPECT_FALSE(QFile::exists(path(QStringLiteral("gpu_polygons.gpkg"))));
}

// Six groups (the node group and the face group, three times each): canceled once past 60%, after
// the fourth group is written; both GeoPackages are deleted again.
TEST_F(MeshContoursAlgorithmTest, CancelLeavesNoOutputBehind)
{
  const auto faceValue = [](int i, int j) { return std::sin(i / 9.0) * j; };
  auto mesh = meshLayer(gridMesh(150, wave, Cells::Mixed, 1.0, 0.0, 0.0, faceValue));
  QStringList levels;
  for (int k = 0; k < 40; ++k)
    levels << QString::number(-9.87 + 0.5 * k);
  QVariantMap p = parameters(levels.join(','), QVariantList{0, 1, 0, 1, 0, 1});
  p.insert(QStringLiteral("OUTPUT_LINES"), path(QStringLiteral("canceled_lines.gpkg")));
  p.insert(QStringLiteral("OUTPUT_POLYGONS"), path(QStringLiteral("canceled_polygons.gpkg")));
  p.insert(QStringLiteral("DEVICE"), 1);
  QgsProcessingContext context;
  const RunResult result = run(kOurs, mesh.get(), p, context, true);
  EXPECT_FALSE(result.ok);
  EXPECT_TRUE(result.error.contains(QStringLiteral("Canceled; no output was written."))) << result.error.toStdString();
  EXPECT_FALSE(QFile::exists(path(QStringLiteral("canceled_lines.gpkg"))));
  EXPECT_FALSE(QFile::exists(path(QStringLiteral("canceled_polygons.gpkg"))));
  EXPECT_TRUE(result.logContains(QStringLiteral("Group 1 (Bed Elevation (Face))"))) << result.log.join('\n').toStdString();
}
