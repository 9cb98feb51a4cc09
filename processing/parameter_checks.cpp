#include "parameter_checks.h"

#include <sys/stat.h>

#include <climits>
#include <cmath>
#include <optional>
#include <vector>

#include <QDir>
#include <QFileInfo>
#include <QRegularExpression>
#include <QStringList>

#include <qgscoordinatereferencesystem.h>
#include <qgsdatasourceuri.h>
#include <qgsmaplayer.h>
#include <qgsprocessing.h>
#include <qgsprocessingalgorithm.h>
#include <qgsprocessingcontext.h>
#include <qgsprocessingparameters.h>
#include <qgsproperty.h>
#include <qgsproviderregistry.h>
#include <qgsrectangle.h>

#include "adapters/number_text.h"

namespace gpugeo {

namespace {

const char* const kMinimumExcluded = "gpugeo/minimumExcluded";

QString named(const QgsProcessingParameterDefinition& definition)
{
  return QStringLiteral("%1 (%2)").arg(definition.name(), definition.description());
}

// What the user gave: a number as it is, a text cut to a readable length.
QString givenText(const QVariant& value)
{
  bool ok = false;
  const double v = value.toDouble(&ok);
  if (ok)
    return number(v);
  const QString text = value.toString();
  return text.size() > 40 ? text.left(37) + QStringLiteral("...") : text;
}

// The value given for a parameter, data-defined values evaluated; invalid when none was given (the
// default applies).
QVariant givenValue(const QgsProcessingParameterDefinition& definition, const QVariantMap& parameters,
                    QgsProcessingContext& context)
{
  QVariant value = parameters.value(definition.name());
  if (value.userType() == qMetaTypeId<QgsProperty>())
    value = value.value<QgsProperty>().value(context.expressionContext(), definition.defaultValue());
  if (!value.isValid() || value.isNull() || (value.type() == QVariant::String && value.toString().trimmed().isEmpty()))
    return QVariant();
  return value;
}

struct Bounds
{
  double minimum = -std::numeric_limits<double>::max();
  double maximum = std::numeric_limits<double>::max();
  bool integer = false;
  bool minimumExcluded = false;
};

std::optional<Bounds> boundsOf(const QgsProcessingParameterDefinition& definition)
{
  Bounds b;
  if (const auto* n = dynamic_cast<const QgsProcessingParameterNumber*>(&definition))
  {
    b.minimum = n->minimum();
    b.maximum = n->maximum();
    b.integer = n->dataType() == QgsProcessingParameterNumber::Integer;
    b.minimumExcluded = definition.metadata().value(QLatin1String(kMinimumExcluded)).toBool();
  }
  else if (definition.type() == QgsProcessingParameterBand::typeName())
  {
    b.minimum = 1;
    b.integer = true;
  }
  else
    return std::nullopt;
  if (b.integer)
  {
    b.minimum = std::max(b.minimum, double(INT_MIN + 1));
    b.maximum = std::min(b.maximum, double(INT_MAX));
  }
  return b;
}

QString numberProblem(const QgsProcessingParameterDefinition& definition, const Bounds& b, const QVariant& value)
{
  bool ok = false;
  const double v = value.toDouble(&ok);
  const bool fits = ok && std::isfinite(v) && (b.minimumExcluded ? v > b.minimum : v >= b.minimum) &&
                    v <= b.maximum && (!b.integer || v == std::floor(v));
  if (fits)
    return QString();
  return QObject::tr("%1 must be %2; got %3.").arg(named(definition), acceptedRange(definition), givenText(value));
}

QString crsProblem(const QgsProcessingParameterDefinition& definition, const QVariantMap& parameters,
                   QgsProcessingContext& context)
{
  const QVariant value = givenValue(definition, parameters, context);
  if (!value.isValid())
    return QString();
  if (QgsProcessingParameters::parameterAsCrs(&definition, parameters, context).isValid())
    return QString();
  return QObject::tr("%1: \"%2\" is not a coordinate reference system QGIS knows (give an authority id such as "
                     "EPSG:4326, a WKT or a PROJ string).")
    .arg(named(definition), givenText(value));
}

QString extentProblem(const QgsProcessingParameterDefinition& definition, const QVariantMap& parameters,
                      QgsProcessingContext& context)
{
  const QVariant value = givenValue(definition, parameters, context);
  if (!value.isValid())
    return QString();
  const QgsRectangle r = QgsProcessingParameters::parameterAsExtent(&definition, parameters, context);
  if (std::isfinite(r.xMinimum()) && std::isfinite(r.xMaximum()) && std::isfinite(r.yMinimum()) &&
      std::isfinite(r.yMaximum()) && std::isfinite(r.width()) && std::isfinite(r.height()))
    return QString();
  return QObject::tr("%1 must be four finite numbers xmin, xmax, ymin, ymax whose differences are finite too; got "
                     "%2, %3, %4, %5.")
    .arg(named(definition), number(r.xMinimum()), number(r.xMaximum()), number(r.yMinimum()), number(r.yMaximum()));
}

// A file as the run sees it: the parameter, the path, the layer in it (for containers such as a
// GeoPackage), whether it exists, and its identity (device and inode: links resolved).
struct FileUse
{
  const QgsProcessingParameterDefinition* parameter = nullptr;
  QString path;
  QString layer;
  bool exists = false;
  dev_t device = 0;
  ino_t inode = 0;
};

FileUse fileUse(const QgsProcessingParameterDefinition& parameter, const QString& path, const QString& layer)
{
  FileUse use;
  use.parameter = &parameter;
  use.layer = layer;
  QFileInfo info(path);
  // A link to a file not yet written names that file (followed a few levels; a loop stays a link).
  for (int level = 0; level < 8 && info.isSymLink() && !info.exists(); ++level)
    info = QFileInfo(info.symLinkTarget());
  struct stat status;
  if (::stat(QFile::encodeName(info.absoluteFilePath()).constData(), &status) == 0)
  {
    use.exists = true;
    use.device = status.st_dev;
    use.inode = status.st_ino;
    use.path = info.canonicalFilePath();
  }
  else
  {
    const QString folder = QFileInfo(info.absolutePath()).canonicalFilePath();
    use.path = folder.isEmpty() ? info.absoluteFilePath() : folder + QLatin1Char('/') + info.fileName();
  }
  return use;
}

bool sameFile(const FileUse& a, const FileUse& b)
{
  if (a.exists && b.exists)
    return a.device == b.device && a.inode == b.inode;
  return a.path == b.path;
}

// Two layers of one file that do not overwrite each other: each named, and not the same name.
bool separateLayers(const FileUse& a, const FileUse& b)
{
  return !a.layer.isEmpty() && !b.layer.isEmpty() && a.layer.compare(b.layer, Qt::CaseInsensitive) != 0;
}

// The file a destination parameter names; nothing for temporary, memory and database outputs.
std::optional<FileUse> destinationFile(const QgsProcessingParameterDefinition& definition,
                                       const QVariantMap& parameters, QgsProcessingContext& context)
{
  QVariant value = parameters.value(definition.name());
  if (value.userType() == qMetaTypeId<QgsProcessingOutputLayerDefinition>())
    value = value.value<QgsProcessingOutputLayerDefinition>().sink;
  QString destination;
  if (value.userType() == qMetaTypeId<QgsProperty>())
    destination = value.value<QgsProperty>().valueAsString(context.expressionContext(), definition.defaultValue().toString());
  else if (!value.isValid() || value.toString().isEmpty())
    destination = definition.defaultValue().toString();
  else
    destination = value.toString();
  destination = destination.trimmed();
  if (destination.isEmpty() || destination == QgsProcessing::TEMPORARY_OUTPUT ||
      destination.startsWith(QLatin1String("memory:")))
    return std::nullopt;

  QString path = destination, layer;
  static const QRegularExpression provider(QStringLiteral("^([A-Za-z_]{3,}):(.*)$"));
  const QRegularExpressionMatch match = provider.match(destination);
  if (match.hasMatch())
  {
    if (match.captured(1) != QLatin1String("ogr"))
      return std::nullopt;  // a database, not a file
    const QgsDataSourceUri uri(match.captured(2));
    path = uri.database().isEmpty() ? match.captured(2) : uri.database();
    layer = uri.table();
  }
  else if (destination.contains(QLatin1String("|layername=")))
  {
    path = destination.section(QLatin1Char('|'), 0, 0);
    layer = destination.section(QLatin1String("|layername="), 1).section(QLatin1Char('|'), 0, 0);
  }
  const auto* destinationParameter = dynamic_cast<const QgsProcessingDestinationParameter*>(&definition);
  if (QFileInfo(path).suffix().isEmpty() && destinationParameter)
    path += QLatin1Char('.') + destinationParameter->defaultFileExtension();
  return fileUse(definition, path, layer);
}

bool isLayerInput(const QgsProcessingParameterDefinition& definition)
{
  const QString type = definition.type();
  return type == QgsProcessingParameterRasterLayer::typeName() ||
         type == QgsProcessingParameterFeatureSource::typeName() ||
         type == QgsProcessingParameterVectorLayer::typeName() || type == QgsProcessingParameterMeshLayer::typeName() ||
         type == QgsProcessingParameterMapLayer::typeName();
}

// The files the run reads: each layer input's file (memory and database layers have none).
std::vector<FileUse> inputFiles(const QgsProcessingAlgorithm& algorithm, const QVariantMap& parameters,
                                QgsProcessingContext& context)
{
  std::vector<FileUse> inputs;
  for (const QgsProcessingParameterDefinition* definition : algorithm.parameterDefinitions())
  {
    if (!isLayerInput(*definition) || !givenValue(*definition, parameters, context).isValid())
      continue;
    const QgsMapLayer* layer = QgsProcessingParameters::parameterAsLayer(definition, parameters, context);
    if (!layer)
      continue;
    const QVariantMap parts = QgsProviderRegistry::instance()->decodeUri(layer->providerType(), layer->source());
    const QString path = parts.value(QStringLiteral("path")).toString();
    if (!path.isEmpty() && QFileInfo::exists(path))
      inputs.push_back(fileUse(*definition, path, parts.value(QStringLiteral("layerName")).toString()));
  }
  return inputs;
}

}  // namespace

void setMinimumExcluded(QgsProcessingParameterDefinition& definition)
{
  QVariantMap metadata = definition.metadata();
  metadata.insert(QLatin1String(kMinimumExcluded), true);
  definition.setMetadata(metadata);
}

QString acceptedRange(const QgsProcessingParameterDefinition& definition)
{
  const std::optional<Bounds> b = boundsOf(definition);
  if (!b)
    return QString();
  const bool low = b->minimum > -1e300 && !(b->integer && b->minimum <= INT_MIN + 1);
  const bool high = b->maximum < 1e300 && !(b->integer && b->maximum >= INT_MAX);
  const QString kind = b->integer ? QObject::tr("a whole number") : QObject::tr("a number");
  if (low && high)
    return b->minimumExcluded ? QObject::tr("%1 greater than %2 and at most %3").arg(kind, number(b->minimum), number(b->maximum))
                              : QObject::tr("%1 from %2 to %3").arg(kind, number(b->minimum), number(b->maximum));
  if (low)
    return b->minimumExcluded ? QObject::tr("%1 greater than %2").arg(kind, number(b->minimum))
                              : QObject::tr("%1, %2 or more").arg(kind, number(b->minimum));
  if (high)
    return QObject::tr("%1, at most %2").arg(kind, number(b->maximum));
  return QObject::tr("%1 (any finite value)").arg(kind);
}

QString rangesHelp(const QgsProcessingAlgorithm& algorithm)
{
  QStringList items;
  for (const QgsProcessingParameterDefinition* definition : algorithm.parameterDefinitions())
    if (boundsOf(*definition) && !(definition->flags() & QgsProcessingParameterDefinition::FlagHidden))
      items << QStringLiteral("%1: %2").arg(definition->name(), acceptedRange(*definition));
  if (items.isEmpty())
    return QString();
  return QObject::tr("<p><b>Accepted values</b>: %1. NaN and infinite values are refused.</p>")
    .arg(items.join(QStringLiteral("; ")));
}

QString parameterValueProblem(const QgsProcessingAlgorithm& algorithm, const QVariantMap& parameters,
                              QgsProcessingContext& context)
{
  for (const QgsProcessingParameterDefinition* definition : algorithm.parameterDefinitions())
  {
    QString problem;
    if (const std::optional<Bounds> b = boundsOf(*definition))
    {
      const QVariant value = givenValue(*definition, parameters, context);
      if (value.isValid())
        problem = numberProblem(*definition, *b, value);
    }
    else if (definition->type() == QgsProcessingParameterCrs::typeName())
      problem = crsProblem(*definition, parameters, context);
    else if (definition->type() == QgsProcessingParameterExtent::typeName())
      problem = extentProblem(*definition, parameters, context);
    if (!problem.isEmpty())
      return problem;
  }
  return QString();
}

QString outputConflict(const QgsProcessingAlgorithm& algorithm, const QVariantMap& parameters,
                       QgsProcessingContext& context)
{
  std::vector<FileUse> outputs;
  for (const QgsProcessingParameterDefinition* definition : algorithm.destinationParameterDefinitions())
    if (std::optional<FileUse> use = destinationFile(*definition, parameters, context))
      outputs.push_back(*use);
  if (outputs.empty())
    return QString();
  for (std::size_t i = 0; i < outputs.size(); ++i)
    for (std::size_t j = i + 1; j < outputs.size(); ++j)
      if (sameFile(outputs[i], outputs[j]) && !separateLayers(outputs[i], outputs[j]))
        return QObject::tr("%1 and %2 are both set to %3: give each output its own file (or, in a GeoPackage, its "
                           "own layer name). Nothing was written.")
          .arg(named(*outputs[i].parameter), named(*outputs[j].parameter), QDir::toNativeSeparators(outputs[i].path));
  for (const FileUse& input : inputFiles(algorithm, parameters, context))
    for (const FileUse& output : outputs)
      if (sameFile(input, output) && !separateLayers(input, output))
        return QObject::tr("%1 would be written over %2, an input of this run: both are %3. Choose another output "
                           "file; nothing was written.")
          .arg(named(*output.parameter), named(*input.parameter), QDir::toNativeSeparators(input.path));
  return QString();
}

}  // namespace gpugeo
