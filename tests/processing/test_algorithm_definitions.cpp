// What a user sees of the algorithms before running them: display names apart from QGIS's own, a Help
// button that opens the algorithm's section of the documentation shipped with the plugin, help texts
// that say what a user needs (each numeric parameter's accepted values among them) and leave the
// implementation to that documentation, dialogs whose parameters say what the algorithm does with
// them (a radius in metres on a geographic layer), defaults that run, and gpugeo:isochrones' basic
// section kept to what every run needs, its models' settings named after their model.
#include <gtest/gtest.h>

#include <memory>

#include <QFile>
#include <QRegularExpression>
#include <QUrl>

#include <qgsgeometry.h>
#include <qgsprocessingalgorithm.h>
#include <qgsprocessingparameters.h>
#include <qgsprocessingprovider.h>
#include <qgsprocessingregistry.h>
#include <qgsvectorlayer.h>

#include "processing_test_support.h"

namespace {

using gpugeo::test::RunResult;

class AlgorithmDefinitionsTest : public gpugeo::test::AlgorithmTest
{
protected:
  static void SetUpTestSuite()
  {
    registerNativeAlgorithms();
  }

  static QList<const QgsProcessingAlgorithm*> ours()
  {
    return QgsApplication::processingRegistry()->providerById(QStringLiteral("gpugeo"))->algorithms();
  }
};

}  // namespace

// Names: none reads as one of QGIS's own algorithms (search, "Recently used" and the modeler show the
// name alone), and each fits the toolbox's default width.
TEST_F(AlgorithmDefinitionsTest, DisplayNamesStandApartFromQgisAndAreShort)
{
  QSet<QString> qgisNames;
  for (const QgsProcessingAlgorithm* a : QgsApplication::processingRegistry()->providerById(QStringLiteral("native"))->algorithms())
    qgisNames.insert(a->displayName().toLower());
  EXPECT_TRUE(qgisNames.contains(QStringLiteral("dbscan clustering")));
  EXPECT_TRUE(qgisNames.contains(QStringLiteral("export contours")));
  QSet<QString> seen;
  for (const QgsProcessingAlgorithm* a : ours())
  {
    EXPECT_FALSE(qgisNames.contains(a->displayName().toLower())) << a->id().toStdString();
    EXPECT_LE(a->displayName().size(), 28) << a->displayName().toStdString();
    EXPECT_FALSE(seen.contains(a->displayName())) << a->displayName().toStdString();
    seen.insert(a->displayName());
  }
  EXPECT_EQ(seen.size(), ours().size());
}

// The Help button: a file: URL to help/index.html (the build folder's copy here) with the algorithm's
// anchor, which that page holds with the algorithm's parameters.
TEST_F(AlgorithmDefinitionsTest, EveryAlgorithmHasAHelpPageSection)
{
  for (const QgsProcessingAlgorithm* a : ours())
  {
    const QUrl url(a->helpUrl());
    ASSERT_TRUE(url.isLocalFile()) << a->id().toStdString() << ": " << a->helpUrl().toStdString();
    EXPECT_EQ(url.fragment(), QString(a->id()).replace(QLatin1Char(':'), QLatin1Char('-')));
    QFile page(url.toLocalFile());
    ASSERT_TRUE(page.open(QIODevice::ReadOnly)) << url.toLocalFile().toStdString();
    const QString html = QString::fromUtf8(page.readAll());
    EXPECT_TRUE(html.contains(QStringLiteral("id=\"%1\"").arg(url.fragment()))) << a->id().toStdString();
    for (const QgsProcessingParameterDefinition* p : a->parameterDefinitions())
      EXPECT_TRUE(html.contains(QStringLiteral("<code>%1</code>").arg(p->name()))) << a->id().toStdString() << " " << p->name().toStdString();
  }
}

// Help texts: every numeric parameter with its accepted values; no implementation notes (those are in
// the documentation the Help button opens); mesh contours says where it differs from QGIS on purpose.
TEST_F(AlgorithmDefinitionsTest, HelpSaysWhatAUserNeeds)
{
  for (const QgsProcessingAlgorithm* a : ours())
  {
    const QString help = a->shortHelpString();
    const std::string id = a->id().toStdString();
    EXPECT_LT(help.size(), 8000) << id;
    for (const char* implementation : {"thread block", "kernel", "shared memory", "pointer jumping", "CUB"})
      EXPECT_FALSE(help.contains(QLatin1String(implementation), Qt::CaseInsensitive)) << id << " mentions " << implementation;
    for (const QgsProcessingParameterDefinition* p : a->parameterDefinitions())
      if (dynamic_cast<const QgsProcessingParameterNumber*>(p))
        EXPECT_TRUE(help.contains(QRegularExpression(QStringLiteral("Accepted values.*%1: a ").arg(p->name()))))
          << id << " does not state the range of " << p->name().toStdString();
  }
  const QString mesh = QgsApplication::processingRegistry()->algorithmById(QStringLiteral("gpugeo:meshcontours"))->shortHelpString();
  for (const char* words : {"Differences from QGIS's algorithm, on purpose", "the fields and their names are QGIS's",
                            "one whole part", "exactly through a vertex at the level is kept", "one multipolygon"})
    EXPECT_TRUE(mesh.contains(QLatin1String(words))) << words;
}

// Point neighbours: the radius is what the algorithm takes (metres on a geographic layer), not a
// distance widget that would show degrees; MAX_PAIRS is a whole number; the defaults run.
TEST_F(AlgorithmDefinitionsTest, PointNeighboursSaysItsUnitsAndItsDefaultsRun)
{
  const QgsProcessingAlgorithm* a = QgsApplication::processingRegistry()->algorithmById(QStringLiteral("gpugeo:pointneighbours"));
  const QgsProcessingParameterDefinition* radius = a->parameterDefinition(QStringLiteral("RADIUS"));
  EXPECT_EQ(radius->type(), QgsProcessingParameterNumber::typeName());
  EXPECT_TRUE(radius->description().contains(QStringLiteral("metres for a geographic layer"))) << radius->description().toStdString();
  const auto* pairs = dynamic_cast<const QgsProcessingParameterNumber*>(a->parameterDefinition(QStringLiteral("MAX_PAIRS")));
  ASSERT_TRUE(pairs);
  EXPECT_EQ(pairs->dataType(), QgsProcessingParameterNumber::Integer);
  // DBSCAN's EPS stays QGIS's: a distance in the layer's units.
  const QgsProcessingParameterDefinition* eps =
    QgsApplication::processingRegistry()->algorithmById(QStringLiteral("gpugeo:dbscan"))->parameterDefinition(QStringLiteral("EPS"));
  EXPECT_EQ(eps->type(), QgsProcessingParameterDistance::typeName());
  for (const QString crs : {QStringLiteral("EPSG:4326"), QStringLiteral("EPSG:32633")})
  {
    auto* input = new QgsVectorLayer(QStringLiteral("Point?crs=%1").arg(crs), QStringLiteral("p"), QStringLiteral("memory"));
    QgsFeatureList features;
    for (int i = 0; i < 30; ++i)
    {
      QgsFeature f;
      f.setGeometry(QgsGeometry::fromPointXY(QgsPointXY(10.0 + 0.01 * (i % 6), 45.0 + 0.01 * (i / 6))));
      features << f;
    }
    input->dataProvider()->addFeatures(features);
    QgsProcessingContext context;
    const RunResult result = runAlgorithm(QStringLiteral("gpugeo:pointneighbours"), input,
                                          {{QStringLiteral("OUTPUT"), QStringLiteral("memory:")}}, context);
    EXPECT_TRUE(result.ok) << crs.toStdString() << ": " << result.error.toStdString();
    QgsVectorLayer* output = outputLayer(result, QStringLiteral("OUTPUT"), context);
    ASSERT_TRUE(output);
    for (const QgsFeature& f : gpugeo::test::featuresOf(output))
      EXPECT_EQ(f.attribute(QStringLiteral("NB_COUNT")).toInt(), 8);
    delete input;
  }
}

// Isochrones: the basic section holds what every run needs; each model's settings are advanced and
// named after their model, in the models' order, then the hydrograph's, named after it.
TEST_F(AlgorithmDefinitionsTest, IsochronesGroupsItsParametersByModel)
{
  const QgsProcessingAlgorithm* a = QgsApplication::processingRegistry()->algorithmById(QStringLiteral("gpugeo:isochrones"));
  QStringList basic, prefixes;
  for (const QgsProcessingParameterDefinition* p : a->parameterDefinitions())
  {
    if (p->isDestination())
      continue;
    if (!(p->flags() & QgsProcessingParameterDefinition::FlagAdvanced))
    {
      basic << p->name();
      continue;
    }
    if (p->name() == QLatin1String("DEVICE") || p->name() == QLatin1String("MEMORY_BUDGET") ||
        p->name() == QLatin1String("TILED") || p->name() == QLatin1String("COG") ||
        p->name() == QLatin1String("CREATION_OPTIONS") ||
        p->name().startsWith(QLatin1String("MPI_")))
      continue;
    const QString prefix = p->description().section(QLatin1Char(':'), 0, 0);
    EXPECT_TRUE(prefix.endsWith(QLatin1String("model")) || prefix.endsWith(QLatin1String("models")) ||
                prefix == QLatin1String("Hydrograph"))
      << p->name().toStdString() << ": " << p->description().toStdString();
    if (prefixes.isEmpty() || prefixes.last() != prefix)
      prefixes << prefix;
  }
  EXPECT_EQ(basic, (QStringList{"INPUT", "BAND", "OUTLET", "SNAP_DISTANCE", "VELOCITY_MODEL", "INTERVAL"}));
  EXPECT_EQ(prefixes,
            (QStringList{"Constant model", "Slope model", "Slope and Manning models", "Manning model", "Hydrograph"}));
}
