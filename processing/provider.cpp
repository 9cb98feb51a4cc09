#include "provider.h"

#include <dlfcn.h>

#include <QDir>
#include <QFileInfo>
#include <QIcon>

#include "dbscan_algorithm.h"
#include "breachdepressions_algorithm.h"
#include "filldepressions_algorithm.h"
#include "flowaccumulation_algorithm.h"
#include "flowdirection_algorithm.h"
#include "hand_algorithm.h"
#include "isochrones_algorithm.h"
#include "snappourpoints_algorithm.h"
#include "streamnetwork_algorithm.h"
#include "subbasins_algorithm.h"
#include "watersheds_algorithm.h"
#include "meshcontours_algorithm.h"
#include "pointneighbours_algorithm.h"
#include "qtmvoronoi_algorithm.h"
#ifdef GPUGEO_WITH_CGAL
#include "spherevoronoi_algorithm.h"
#include "voronoipolygons_algorithm.h"
#endif
#include "voronoiraster_algorithm.h"

namespace gpugeo {

namespace {

// `relative` to the folder of this library (lib/ in the installed plugin), when it exists.
QString besideLibrary(const QString& relative)
{
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&besideLibrary), &info) && info.dli_fname)
  {
    const QDir libraryFolder = QFileInfo(QString::fromLocal8Bit(info.dli_fname)).absoluteDir();
    const QString path = libraryFolder.absoluteFilePath(relative);
    if (QFileInfo::exists(path))
      return QDir::cleanPath(path);
  }
  return QString();
}

}  // namespace

QString iconFolder()
{
  const QString installed = besideLibrary(QStringLiteral("../icons"));
  return installed.isEmpty() ? QStringLiteral(GPUGEO_SOURCE_ICON_DIR) : installed;
}

QString helpFile()
{
  const QString installed = besideLibrary(QStringLiteral("../help/index.html"));
  if (!installed.isEmpty())
    return installed;
  return QFileInfo::exists(QStringLiteral(GPUGEO_BUILD_HELP_FILE)) ? QStringLiteral(GPUGEO_BUILD_HELP_FILE) : QString();
}

QString helpAnchor(const QString& algorithmId)
{
  return QString(algorithmId).replace(QLatin1Char(':'), QLatin1Char('-'));
}

QString Provider::id() const
{
  return QStringLiteral("gpugeo");
}

QString Provider::name() const
{
  return QStringLiteral("GPU Geoprocessing");
}

// No GPU probe here: it would start a CUDA context in QGIS just to show a name. The log of each run
// says which backend and device ran.
QString Provider::longName() const
{
  return QStringLiteral("GPU Geoprocessing (CUDA, with a multi-threaded CPU path)");
}

QIcon Provider::icon() const
{
  return QIcon(svgIconPath());
}

QString Provider::svgIconPath() const
{
  return iconFolder() + QStringLiteral("/gpugeo.svg");
}

QStringList Provider::supportedOutputRasterLayerExtensions() const
{
  return {QStringLiteral("tif")};
}

QString Provider::defaultRasterFileExtension() const
{
  return QStringLiteral("tif");
}

void Provider::loadAlgorithms()
{
  addAlgorithm(new VoronoiRasterAlgorithm());
  addAlgorithm(new QtmVoronoiAlgorithm());
#ifdef GPUGEO_WITH_CGAL
  addAlgorithm(new SphereVoronoiAlgorithm());
  addAlgorithm(new VoronoiPolygonsAlgorithm());
#endif
  addAlgorithm(new PointNeighboursAlgorithm());
  addAlgorithm(new DbscanAlgorithm());
  addAlgorithm(new MeshContoursAlgorithm());
  addAlgorithm(new FillDepressionsAlgorithm());
  addAlgorithm(new BreachDepressionsAlgorithm());
  addAlgorithm(new FlowDirectionAlgorithm());
  addAlgorithm(new FlowAccumulationAlgorithm());
  addAlgorithm(new IsochronesAlgorithm());
  addAlgorithm(new WatershedsAlgorithm());
  addAlgorithm(new HandAlgorithm());
  addAlgorithm(new SnapPourPointsAlgorithm());
  addAlgorithm(new StreamNetworkAlgorithm());
  addAlgorithm(new SubbasinsAlgorithm());
}

}  // namespace gpugeo
