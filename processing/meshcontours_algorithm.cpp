#include "meshcontours_algorithm.h"

#include <cmath>
#include <limits>
#include <memory>
#include <new>

#include <QVector>

#include <qgscoordinatetransform.h>
#include <qgsexception.h>
#include <qgsfeature.h>
#include <qgsfeaturesink.h>
#include <qgsinterval.h>
#include <qgslinestring.h>
#include <qgsmeshdataprovider.h>
#include <qgsmeshdataset.h>
#include <qgsmeshlayer.h>
#include <qgsmeshlayertemporalproperties.h>
#include <qgsmeshrenderersettings.h>
#include <qgsmultilinestring.h>
#include <qgsmultipolygon.h>
#include <qgspolygon.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>
#include <qgsprocessingparametermeshdataset.h>
#include <qgsprocessingutils.h>

#include "adapters/band_geometry.h"
#include "adapters/number_text.h"
#include "core/errors.h"
#include "mesh/mesh_contours.h"
#include "parameter_checks.h"

namespace gpugeo {

namespace {

// QGIS's datasetRelativetime() (qgsalgorithmexportmesh.cpp): the time DATASET_TIME asks for, relative
// to the layer's reference time.
QgsInterval relativeTimeOf(const QVariant& value, QgsMeshLayer& layer, const QgsProcessingContext& context)
{
  const QDateTime reference =
    static_cast<QgsMeshLayerTemporalProperties*>(layer.temporalProperties())->referenceTime();
  const QString type = QgsProcessingParameterMeshDatasetTime::valueAsTimeType(value);
  if (type == QLatin1String("dataset-time-step"))
    return layer.datasetRelativeTime(QgsProcessingParameterMeshDatasetTime::timeValueAsDatasetIndex(value));
  QDateTime dateTime;
  if (type == QLatin1String("defined-date-time"))
    dateTime = QgsProcessingParameterMeshDatasetTime::timeValueAsDefinedDateTime(value);
  else if (type == QLatin1String("current-context-time"))
    dateTime = context.currentTimeRange().begin();
  return dateTime.isValid() ? QgsInterval(reference.secsTo(dateTime)) : QgsInterval(0);
}

// The range of the values of the triangles that take part (active, three values, three coordinates).
struct ValueRange
{
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  bool empty() const { return min > max; }
};

ValueRange valueRange(const MeshTriangles& mesh, const VertexField& field)
{
  ValueRange range;
  for (int64_t t = 0; t < mesh.triangleCount(); ++t)
  {
    if (!field.active[std::size_t(t)])
      continue;
    const int32_t* corner = mesh.triangles.data() + 3 * t;
    bool usable = true;
    for (int k = 0; k < 3; ++k)
    {
      const std::size_t v = std::size_t(corner[k]);
      usable = usable && std::isfinite(field.values[v]) && std::isfinite(mesh.x[v]) && std::isfinite(mesh.y[v]);
    }
    if (!usable)
      continue;
    for (int k = 0; k < 3; ++k)
    {
      const double value = field.values[std::size_t(corner[k])];
      range.min = std::min(range.min, value);
      range.max = std::max(range.max, value);
    }
  }
  return range;
}

// Levels and data values in messages: up to 12 significant digits.
constexpr int kLevelDigits = 12;

// Points [first, last) of x, y, z as one line string (QgsLineString's array constructor: no per-point
// objects).
QgsLineString* lineString(const std::vector<double>& x, const std::vector<double>& y, const std::vector<double>& z,
                          int64_t first, int64_t last)
{
  const auto slice = [first, last](const std::vector<double>& v) {
    return QVector<double>(v.begin() + std::ptrdiff_t(first), v.begin() + std::ptrdiff_t(last));
  };
  return new QgsLineString(slice(x), slice(y), slice(z));
}

}  // namespace

QString MeshContoursAlgorithm::name() const
{
  return QStringLiteral("meshcontours");
}

QString MeshContoursAlgorithm::displayName() const
{
  return QObject::tr("Mesh contours (GPU)");
}

QStringList MeshContoursAlgorithm::tags() const
{
  return QObject::tr("mesh,contours,contour,isolines,isobands,filled contours,levels,export,tin,triangles,gpu,cuda")
    .split(',');
}

QString MeshContoursAlgorithm::group() const
{
  return QObject::tr("Mesh");
}

QString MeshContoursAlgorithm::groupId() const
{
  return QStringLiteral("mesh");
}

QString MeshContoursAlgorithm::iconFile() const
{
  return QStringLiteral("meshcontours.svg");
}

QString MeshContoursAlgorithm::shortDescription() const
{
  return QObject::tr("Contour lines and filled contour polygons of mesh datasets, as whole lines and valid polygons, "
                     "on the GPU or all processor cores: a drop-in for QGIS's own Export contours.");
}

QString MeshContoursAlgorithm::shortHelpString() const
{
  return QObject::tr(
           "<p>Contour lines and filled contour polygons of mesh datasets, on the GPU or on all processor cores. It "
           "takes the same parameters and writes the same fields as QGIS's <i>Export contours</i> "
           "(native:meshcontours), so a model can switch between the two.</p>"
           "<p><b>Input mesh layer</b>: its faces are cut into triangles as QGIS cuts them (a fan from each face's "
           "first vertex; faces of fewer than three vertices are left out). The data is linear over each triangle. "
           "Triangles of inactive faces, with a vertex without a value (NaN) or a vertex the output CRS cannot "
           "reach are left out; the log counts them.</p>"
           "<p><b>Dataset groups</b> (DATASET_GROUPS): the groups to contour, in order (on the command line one "
           "group index, e.g. DATASET_GROUPS=0: group 0 of a 2DM file is its <i>Bed Elevation</i>). Vector data "
           "is contoured on its magnitude; data on faces is first averaged to the vertices (the plain mean of the "
           "active faces with a value around each vertex, as QGIS does); data on volumes is first averaged to the "
           "faces with the layer's 3D averaging method. Groups on edges are skipped with a warning. A group the "
           "mesh does not have is refused (QGIS writes nothing for it).</p>"
           "<p><b>Dataset time</b> (DATASET_TIME): static, a date and time (on the command line an ISO date, e.g. "
           "2021-01-01T00:00:00, taken relative to the layer's reference time), the time of one dataset, or the "
           "current map time. Each group uses its last dataset at or before that time (a group without time, its "
           "only dataset); a group with none is skipped with a warning. The <i>time</i> field holds the requested "
           "time as QGIS writes it (e.g. <i>0 d 00:00:00</i>).</p>"
           "<p><b>Levels</b>: <b>List of contours level</b> (CONTOUR_LEVEL_LIST), numbers separated by commas in "
           "increasing order; when it is filled, the increment, minimum and maximum are ignored. Otherwise "
           "<b>Minimum contour level</b> + i &times; <b>Increment between contour levels</b> up to <b>Maximum contour "
           "level</b>, <i>the maximum included</i> when it falls on the sequence: 0, 4 and 1 give 0, 1, 2, 3 and 4, "
           "where QGIS stops at 3. At most 10,000 levels.</p>"
           "<p><b>Output coordinate system</b> (CRS_OUTPUT, optional): the mesh is transformed to it before "
           "contouring and the outputs are in it. Without it the outputs are in the mesh's CRS (QGIS leaves "
           "their CRS undefined then).</p>"
           "<p><b>Exported contour lines</b>: one MultiLineStringZ feature per group and level, with <i>group</i> "
           "(the group's name), <i>time</i> and <i>value</i> (the level). <b>Exported contour polygons</b>: one "
           "MultiPolygonZ feature per group and band between two consecutive levels, with <i>group</i>, "
           "<i>time</i>, <i>min_value</i> and <i>max_value</i>; a band covers the values from its minimum to its "
           "maximum, both included. Features come group by group, levels and bands ascending; empty ones are "
           "left out. Z is the mesh's vertex z, interpolated along the triangle edges.</p>"
           "<p><b>Differences from QGIS's algorithm, on purpose</b>: the fields and their names are QGIS's, and so "
           "are the features' order and attributes; the geometries differ. Each contour line is one whole part "
           "(closed where it closes, open where it meets the mesh's boundary or a gap in the data), where QGIS "
           "writes it in many fragments; a line that passes exactly through a vertex at the level is kept (QGIS "
           "drops it there); each band is one multipolygon, valid (shells counter-clockwise, holes clockwise); the "
           "maximum level is included; the output layers are declared multi (QGIS declares single types and "
           "writes multi geometries); the CRS is carried through.</p>"
           "<p><b>Method</b>: each triangle's segment of each level and piece of each band, after the "
           "cell-sequence method of contouring triangle meshes on the GPU of Du, Liu &amp; Liu (Northeastern "
           "University, Shenyang), joined along the mesh's edges into whole lines and polygons with holes; both "
           "backends give the same result. Where the mesh's triangles overlap or its faces are corrupt, the "
           "joined band is not a valid polygon: that band is then made as the union of its triangles' pieces, as "
           "QGIS makes every band, with a warning.</p>") +
         rangesHelp(*this) + deviceHelp();
}

MeshContoursAlgorithm* MeshContoursAlgorithm::createInstance() const
{
  return new MeshContoursAlgorithm();
}

void MeshContoursAlgorithm::initAlgorithm(const QVariantMap&)
{
  addParameter(new QgsProcessingParameterMeshLayer(QStringLiteral("INPUT"), QObject::tr("Input mesh layer")));
  addParameter(new QgsProcessingParameterMeshDatasetGroups(
    QStringLiteral("DATASET_GROUPS"), QObject::tr("Dataset groups"), QStringLiteral("INPUT"),
    QSet<int>{QgsMeshDatasetGroupMetadata::DataOnVertices, QgsMeshDatasetGroupMetadata::DataOnFaces,
              QgsMeshDatasetGroupMetadata::DataOnVolumes}));
  addParameter(new QgsProcessingParameterMeshDatasetTime(QStringLiteral("DATASET_TIME"), QObject::tr("Dataset time"),
                                                         QStringLiteral("INPUT"), QStringLiteral("DATASET_GROUPS")));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("INCREMENT"),
                                                QObject::tr("Increment between contour levels"),
                                                QgsProcessingParameterNumber::Double, QVariant(), true));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("MINIMUM"), QObject::tr("Minimum contour level"),
                                                QgsProcessingParameterNumber::Double, QVariant(), true));
  addParameter(new QgsProcessingParameterNumber(QStringLiteral("MAXIMUM"), QObject::tr("Maximum contour level"),
                                                QgsProcessingParameterNumber::Double, QVariant(), true));
  auto levelList = std::make_unique<QgsProcessingParameterString>(
    QStringLiteral("CONTOUR_LEVEL_LIST"), QObject::tr("List of contours level"), QVariant(), false, true);
  levelList->setHelp(QObject::tr("Comma separated list of values to export. If filled, the increment, minimum and "
                                 "maximum settings are ignored."));
  addParameter(levelList.release());
  addParameter(new QgsProcessingParameterCrs(QStringLiteral("CRS_OUTPUT"), QObject::tr("Output coordinate system"),
                                             QVariant(), true));
  addDeviceParameter();
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT_LINES"),
                                                     QObject::tr("Exported contour lines"),
                                                     QgsProcessing::TypeVectorLine));
  addParameter(new QgsProcessingParameterFeatureSink(QStringLiteral("OUTPUT_POLYGONS"),
                                                     QObject::tr("Exported contour polygons"),
                                                     QgsProcessing::TypeVectorPolygon));
}

std::vector<double> MeshContoursAlgorithm::levels(const QVariantMap& parameters, QgsProcessingContext& context) const
{
  std::vector<double> levels;
  const QString list = parameterAsString(parameters, QStringLiteral("CONTOUR_LEVEL_LIST"), context);
  if (!list.isEmpty())
  {
    // QGIS's parsing and messages; a number that is not finite is refused too (QGIS takes "nan").
    for (const QString& token : list.split(QLatin1Char(',')))
    {
      bool ok = false;
      const double value = token.toDouble(&ok);
      if (!ok)
        throw QgsProcessingException(
          QObject::tr("Invalid format for level values, must be numbers separated with comma"));
      if (!std::isfinite(value))
        throw QgsProcessingException(
          QObject::tr("Invalid level %1 in the list of contours level: levels must be finite numbers.").arg(token.trimmed()));
      if (!levels.empty() && value <= levels.back())
        throw QgsProcessingException(
          QObject::tr("Invalid format for level values, must be different numbers and in increasing order"));
      levels.push_back(value);
    }
    if (levels.size() > std::size_t(mesh::kMaxLevels))
      throw QgsProcessingException(QObject::tr("The list of contours level has %1 levels; at most %2 are allowed.")
                                     .arg(levels.size())
                                     .arg(mesh::kMaxLevels));
    return levels;
  }
  // A missing value is 0, as in QGIS.
  const double minimum = parameterAsDouble(parameters, QStringLiteral("MINIMUM"), context);
  const double maximum = parameterAsDouble(parameters, QStringLiteral("MAXIMUM"), context);
  const double increment = parameterAsDouble(parameters, QStringLiteral("INCREMENT"), context);
  if (std::isfinite(minimum) && std::isfinite(maximum) && increment > 0.0 && minimum < maximum &&
      increment <= maximum - minimum)
  {
    const double count = std::floor((maximum - minimum) / increment + 1e-9) + 1.0;
    if (count > double(mesh::kMaxLevels))
      throw QgsProcessingException(
        QObject::tr("The minimum %1, maximum %2 and increment %3 give %4 levels; at most %5 are allowed. Use a "
                    "larger increment or a narrower range.")
          .arg(number(minimum, kLevelDigits), number(maximum, kLevelDigits), number(increment, kLevelDigits),
               number(count))
          .arg(mesh::kMaxLevels));
  }
  return mesh::levelsFromRange(minimum, maximum, increment);  // QGIS's checks and messages
}

bool MeshContoursAlgorithm::prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                                          QgsProcessingFeedback* feedback)
{
  // QGIS turns only a QgsProcessingException thrown here into an error message.
  try
  {
    prepare(parameters, context, feedback);
  }
  catch (const QgsProcessingException&)
  {
    throw;
  }
  catch (const Canceled&)
  {
    throw QgsProcessingException(QObject::tr("Canceled; no output was written."));
  }
  catch (const Error& e)
  {
    throw QgsProcessingException(QString::fromStdString(e.what()));
  }
  catch (const std::bad_alloc&)
  {
    throw QgsProcessingException(
      QObject::tr("Out of memory: the mesh and its datasets need more memory than the machine has."));
  }
  return true;
}

void MeshContoursAlgorithm::prepare(const QVariantMap& parameters, QgsProcessingContext& context,
                                    QgsProcessingFeedback* feedback)
{
  ScopedStage stage(mTimes, "read");
  QgsMeshLayer* layer = parameterAsMeshLayer(parameters, QStringLiteral("INPUT"), context);
  if (!layer || !layer->isValid() || !layer->dataProvider())
    throw QgsProcessingException(QObject::tr("Could not load the mesh layer INPUT (%1).")
                                   .arg(parameters.value(QStringLiteral("INPUT")).toString()));
  mLevels = levels(parameters, context);

  const QList<int> groups =
    QgsProcessingParameterMeshDatasetGroups::valueAsDatasetGroup(parameters.value(QStringLiteral("DATASET_GROUPS")));
  if (groups.isEmpty())
    throw QgsProcessingException(QObject::tr("Choose at least one dataset group (DATASET_GROUPS)."));
  const QList<int> existing = layer->datasetGroupsIndexes();
  for (int group : groups)
    if (!existing.contains(group))
    {
      QStringList indexes;
      for (int index : existing)
        indexes << QString::number(index);
      throw QgsProcessingException(QObject::tr("The mesh has no dataset group %1 (it has %2: %3).")
                                     .arg(group)
                                     .arg(existing.size())
                                     .arg(indexes.join(QStringLiteral(", "))));
    }

  const QgsCoordinateReferenceSystem requested = parameterAsCrs(parameters, QStringLiteral("CRS_OUTPUT"), context);
  mOutputCrs = requested.isValid() ? requested : layer->crs();
  const QgsCoordinateTransform transform(layer->crs(), mOutputCrs, context.transformContext());
  if (requested.isValid() && !layer->crs().isValid())
    feedback->pushWarning(QObject::tr("The mesh has no CRS: its coordinates are written as they are, in %1.")
                            .arg(requested.userFriendlyIdentifier()));

  feedback->setProgressText(QObject::tr("Reading the mesh"));
  QgsMesh ownMesh;
  const QgsMesh* mesh = layer->nativeMesh();
  if (!mesh)
  {
    layer->dataProvider()->populateMesh(&ownMesh);
    mesh = &ownMesh;
  }
  mMesh = triangulateMesh(*mesh, transform, feedback);
  if (mMesh.canceled)
    throw Canceled();
  if (mMesh.badFaces > 0)
    throw QgsProcessingException(QObject::tr("The mesh is broken: %1 of its %2 faces name a vertex it does not have "
                                             "(it has %3 vertices).")
                                   .arg(mMesh.badFaces)
                                   .arg(mMesh.faceCount)
                                   .arg(mMesh.vertexCount()));
  if (mMesh.triangleCount() == 0)
    throw QgsProcessingException(
      QObject::tr("The mesh has no face to contour (%1 vertices, %2 faces, %3 edges): contours need faces of three "
                  "or more vertices.")
        .arg(mesh->vertexCount())
        .arg(mesh->faceCount())
        .arg(mesh->edgeCount()));
  feedback->pushInfo(QObject::tr("Mesh: %1 vertices, %2 faces, %3 triangles.")
                       .arg(mMesh.vertexCount())
                       .arg(mMesh.faceCount)
                       .arg(mMesh.triangleCount()));
  if (mMesh.facesTooSmall > 0)
    feedback->pushWarning(
      QObject::tr("%1 faces have fewer than three vertices and are left out.").arg(mMesh.facesTooSmall));
  if (mMesh.failedVertices > 0)
    feedback->pushWarning(QObject::tr("%1 of %2 vertices could not be transformed to %3; the triangles around them "
                                      "are left out.")
                            .arg(mMesh.failedVertices)
                            .arg(mMesh.vertexCount())
                            .arg(mOutputCrs.userFriendlyIdentifier()));
  feedback->setProgress(5);

  const QgsInterval relativeTime = relativeTimeOf(parameters.value(QStringLiteral("DATASET_TIME")), *layer, context);
  mTime = layer->formatTime(relativeTime.hours());
  const QgsMeshRendererSettings rendererSettings = layer->rendererSettings();
  feedback->setProgressText(QObject::tr("Reading the datasets"));
  mGroups.clear();
  for (int i = 0; i < groups.size(); ++i)
  {
    if (feedback->isCanceled())
      throw Canceled();
    Group group;
    group.index = groups.at(i);
    const QgsMeshDatasetGroupMetadata metadata = layer->datasetGroupMetadata(QgsMeshDatasetIndex(group.index, 0));
    group.name = metadata.name();
    const QgsMeshDatasetIndex dataset = layer->datasetIndexAtRelativeTime(relativeTime, group.index);
    if (metadata.dataType() == QgsMeshDatasetGroupMetadata::DataOnEdges)
      feedback->pushWarning(QObject::tr("Dataset group %1 (%2) holds data on edges, which is not contoured: nothing "
                                        "is written for it.")
                              .arg(group.index)
                              .arg(group.name));
    else if (!dataset.isValid())
      feedback->pushWarning(QObject::tr("Dataset group %1 (%2) has no dataset at time %3: nothing is written for it.")
                              .arg(group.index)
                              .arg(group.name, mTime));
    else
    {
      group.field = readVertexField(*layer, *mesh, mMesh, dataset, rendererSettings.averagingMethod());
      group.hasData = true;
    }
    mGroups.push_back(std::move(group));
    feedback->setProgress(5.0 + 5.0 * double(i + 1) / double(groups.size()));
  }
}

namespace {

// Band k as the union of its triangles' pieces (GEOS): valid whatever the mesh, as QGIS's own
// algorithm makes its bands. Throws QgsProcessingException when even that is not valid.
QgsGeometry unionOfPieces(const mesh::Mesh& mesh, const mesh::Field& field, const std::vector<double>& levels,
                          std::size_t band, const RunControl& control)
{
  const mesh::ContourBands pieces = mesh::bandPieces(mesh, field, levels, int32_t(band), control);
  QVector<QgsGeometry> parts;
  std::unique_ptr<QgsMultiPolygon> all = bandMultiPolygon(pieces, 0, true);
  if (all)
    for (int i = 0; i < all->numGeometries(); ++i)
      parts << QgsGeometry(all->geometryN(i)->clone());
  QgsGeometry joined = QgsGeometry::unaryUnion(parts);
  joined.convertToMultiType();
  if (!joined.isNull() && !QgsWkbTypes::hasZ(joined.wkbType()))
    joined.get()->addZValue(0.0);
  if (joined.isNull() || !joined.isGeosValid())
    throw QgsProcessingException(QObject::tr("The band from %1 to %2 could not be made a valid polygon even as the union "
                                             "of its triangles' pieces: the mesh is corrupt. %3")
                                   .arg(number(levels[band], kLevelDigits), number(levels[band + 1], kLevelDigits),
                                        joined.lastError()));
  return joined;
}

}  // namespace

QVariantMap MeshContoursAlgorithm::execute(const QVariantMap& parameters, QgsProcessingContext& context,
                                           QgsProcessingFeedback* feedback)
{
  StageTimes times = mTimes;
  BackendChoice device = resolveDevice(parameters, context, feedback);
  const RunControl control = runControl(feedback);
  const mesh::Mesh mesh{mMesh.x.data(),         mMesh.y.data(),        mMesh.z.data(), mMesh.vertexCount(),
                        mMesh.triangles.data(), mMesh.triangleCount()};

  // One contourer for every group. The stages of its preparation are counted once: each contour()
  // call's stages are what its times() gained over them.
  feedback->setProgressText(QObject::tr("Preparing the mesh"));
  std::unique_ptr<mesh::MeshContourer> contourer;
  StageTimes preparation;
  const auto prepareContourer = [&](Backend backend) {
    contourer = mesh::makeMeshContourer(backend, mesh, cpuThreads(), control);
    preparation = contourer->times();
    times.merge(preparation);
  };
  runWithCpuFallback(device, feedback, prepareContourer);
  device.backend = contourer->backend();
  feedback->setProgress(15);

  QgsFields lineFields;
  lineFields.append(QgsField(QStringLiteral("group"), QVariant::String));
  lineFields.append(QgsField(QStringLiteral("time"), QVariant::String));
  lineFields.append(QgsField(QStringLiteral("value"), QVariant::Double));
  QgsFields polygonFields;
  polygonFields.append(QgsField(QStringLiteral("group"), QVariant::String));
  polygonFields.append(QgsField(QStringLiteral("time"), QVariant::String));
  polygonFields.append(QgsField(QStringLiteral("min_value"), QVariant::Double));
  polygonFields.append(QgsField(QStringLiteral("max_value"), QVariant::Double));
  QString linesId, polygonsId;
  std::unique_ptr<QgsFeatureSink> lines = createSink(parameters, QStringLiteral("OUTPUT_LINES"), context, linesId,
                                                     lineFields, QgsWkbTypes::MultiLineStringZ, mOutputCrs);
  std::unique_ptr<QgsFeatureSink> polygons = createSink(parameters, QStringLiteral("OUTPUT_POLYGONS"), context,
                                                        polygonsId, polygonFields, QgsWkbTypes::MultiPolygonZ,
                                                        mOutputCrs);

  const mesh::ContourOptions options;  // lines and bands
  const std::size_t bandCount = mLevels.size() >= 2 ? mLevels.size() - 1 : 0;
  int64_t lineFeatures = 0, polygonFeatures = 0;
  for (std::size_t i = 0; i < mGroups.size(); ++i)
  {
    if (feedback->isCanceled())
      throw Canceled();
    const Group& group = mGroups[i];
    if (!group.hasData)
      continue;
    feedback->setProgressText(QObject::tr("Contouring %1").arg(group.name));
    mesh::Contours contours;
    const mesh::Field field{group.field.values.data(), group.field.active.data()};
    runWithCpuFallback(device, feedback, [&](Backend backend) {
      if (backend != contourer->backend())
        prepareContourer(backend);
      contours = contourer->contour(field, mLevels, options, control);
    });
    device.backend = contourer->backend();
    for (const auto& [stage, ms] : contourer->times().entries())
      times.add(stage, ms - preparation.get(stage));

    ScopedStage write(times, "write");
    const QgsAttributes groupAttributes = QgsAttributes() << group.name << mTime;
    const mesh::ContourLines& l = contours.lines;
    for (std::size_t k = 0; k < mLevels.size() && k + 1 < l.levelPart.size(); ++k)
    {
      if (l.levelPart[k] == l.levelPart[k + 1])
        continue;
      if (feedback->isCanceled())
        throw Canceled();
      auto multi = std::make_unique<QgsMultiLineString>();
      for (int64_t p = l.levelPart[k]; p < l.levelPart[k + 1]; ++p)
        multi->addGeometry(lineString(l.x, l.y, l.z, l.partPoint[std::size_t(p)], l.partPoint[std::size_t(p) + 1]));
      QgsFeature feature(lineFields);
      feature.setGeometry(QgsGeometry(multi.release()));
      feature.setAttributes(QgsAttributes(groupAttributes) << mLevels[k]);
      if (!lines->addFeature(feature, QgsFeatureSink::FastInsert))
        throw QgsProcessingException(writeFeatureError(lines.get(), parameters, QStringLiteral("OUTPUT_LINES")));
      ++lineFeatures;
    }
    const mesh::ContourBands& b = contours.bands;
    int64_t repairedBands = 0;
    for (std::size_t k = 0; k < bandCount && k + 1 < b.bandPolygon.size(); ++k)
    {
      if (b.bandPolygon[k] == b.bandPolygon[k + 1])
        continue;
      if (feedback->isCanceled())
        throw Canceled();
      QgsGeometry geometry(bandMultiPolygon(b, k, true).release());
      if (!geometry.isGeosValid())
      {
        geometry = unionOfPieces(mesh, field, mLevels, k, control);
        ++repairedBands;
      }
      QgsFeature feature(polygonFields);
      feature.setGeometry(geometry);
      feature.setAttributes(QgsAttributes(groupAttributes) << mLevels[k] << mLevels[k + 1]);
      if (!polygons->addFeature(feature, QgsFeatureSink::FastInsert))
        throw QgsProcessingException(writeFeatureError(polygons.get(), parameters, QStringLiteral("OUTPUT_POLYGONS")));
      ++polygonFeatures;
    }
    write.stop();

    const int64_t parts = l.levelPart.empty() ? 0 : l.levelPart.back();
    const int64_t polygonCount = b.bandPolygon.empty() ? 0 : b.bandPolygon.back();
    feedback->pushInfo(QObject::tr("Group %1 (%2): %3 of %4 triangles used (the others inactive, without a value or "
                                   "without coordinates); %5 contour line parts, %6 polygons.")
                         .arg(group.index)
                         .arg(group.name)
                         .arg(contours.trianglesUsed)
                         .arg(mMesh.triangleCount())
                         .arg(parts)
                         .arg(polygonCount));
    if (repairedBands > 0)
      feedback->pushWarning(QObject::tr("Group %1 (%2): %3 bands were not valid polygons when joined along the mesh's "
                                        "edges (its triangles overlap, or its faces are corrupt); each was made again "
                                        "as the union of its triangles' pieces, as QGIS's Export contours makes it.")
                              .arg(group.index)
                              .arg(group.name)
                              .arg(repairedBands));
    if (contours.droppedRings > 0)
      feedback->pushInfo(
        QObject::tr("%1 bits of rings without area (degenerate triangles) were left out.").arg(contours.droppedRings));
    if (parts == 0 && polygonCount == 0)
    {
      const ValueRange range = valueRange(mMesh, group.field);
      if (range.empty())
        feedback->pushWarning(QObject::tr("Group %1 (%2) has no triangle with data (every triangle is inactive or "
                                          "has a vertex without a value): nothing to contour.")
                                .arg(group.index)
                                .arg(group.name));
      else if (mLevels.back() < range.min || mLevels.front() > range.max)
        feedback->pushWarning(QObject::tr("Group %1 (%2): the levels (%3 to %4) lie outside the data's range [%5, %6]: "
                                          "nothing to write.")
                                .arg(group.index)
                                .arg(group.name, number(mLevels.front(), kLevelDigits),
                                     number(mLevels.back(), kLevelDigits), number(range.min, kLevelDigits),
                                     number(range.max, kLevelDigits)));
    }
    feedback->setProgress(15.0 + 85.0 * double(i + 1) / double(mGroups.size()));
  }
  feedback->pushInfo(QObject::tr("Wrote %1 line features and %2 polygon features.").arg(lineFeatures).arg(polygonFeatures));
  logStageTimes(times, feedback);
  return {{QStringLiteral("OUTPUT_LINES"), linesId}, {QStringLiteral("OUTPUT_POLYGONS"), polygonsId}};
}

}  // namespace gpugeo
