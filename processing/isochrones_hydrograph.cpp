// gpugeo:isochrones' hydrograph: its parameters, the rainfall excess read and checked before the run,
// and the HYDROGRAPH table from the bands' areas (native dem/hydrograph.h, the time–area method).
#include <cmath>
#include <memory>
#include <vector>

#include <qgsexception.h>
#include <qgsfeature.h>
#include <qgsfeaturerequest.h>
#include <qgsfeaturesink.h>
#include <qgsprocessingfeedback.h>
#include <qgsprocessingparameters.h>
#include <qgsprocessingutils.h>

#include "adapters/number_text.h"
#include "core/errors.h"
#include "dem/hydrograph.h"
#include "isochrones_algorithm.h"

namespace gpugeo {

namespace {

bool given(const QVariantMap& parameters, const QString& name)
{
  const QVariant value = parameters.value(name);
  return value.isValid() && !value.isNull() && !(value.type() == QVariant::String && value.toString().isEmpty());
}

// The native check's words as the algorithm's error.
template <typename Work>
auto refusingBadExcess(Work work)
{
  try
  {
    return work();
  }
  catch (const InvalidInput& e)
  {
    throw QgsProcessingException(QObject::tr("Hydrograph: %1.").arg(QString::fromStdString(e.what())));
  }
}

}  // namespace

void IsochronesAlgorithm::addHydrographParameters()
{
  const auto advanced = [](QgsProcessingParameterDefinition* parameter) {
    parameter->setFlags(parameter->flags() | QgsProcessingParameterDefinition::FlagAdvanced);
    return parameter;
  };
  addParameter(advanced(new QgsProcessingParameterFeatureSource(
    QStringLiteral("EXCESS_TABLE"), QObject::tr("Hydrograph: rainfall excess table (one row per isochrone interval)"),
    QList<int>() << QgsProcessing::TypeVector, QVariant(), true)));
  addParameter(advanced(new QgsProcessingParameterField(
    QStringLiteral("EXCESS_FIELD"), QObject::tr("Hydrograph: rainfall excess field (mm/h)"), QVariant(),
    QStringLiteral("EXCESS_TABLE"), QgsProcessingParameterField::Numeric, false, true)));
  auto* intensity = new QgsProcessingParameterNumber(QStringLiteral("EXCESS_INTENSITY"),
                                                     QObject::tr("Hydrograph: constant rainfall excess (mm/h)"),
                                                     QgsProcessingParameterNumber::Double, 10.0, false, 0.0);
  addParameter(advanced(intensity));
  auto* duration = new QgsProcessingParameterNumber(QStringLiteral("EXCESS_DURATION"),
                                                    QObject::tr("Hydrograph: constant rainfall excess duration (minutes)"),
                                                    QgsProcessingParameterNumber::Double, 60.0, false, 0.0,
                                                    double(dem::kMaxHydrographSteps));
  addParameter(advanced(duration));
}

void IsochronesAlgorithm::readExcess(const QVariantMap& parameters, QgsProcessingContext& context,
                                     Request& request) const
{
  request.wantHydrograph = outputRequested(parameters, QStringLiteral("HYDROGRAPH"));
  if (!request.wantHydrograph)
    return;
  if (!given(parameters, QStringLiteral("EXCESS_TABLE")))
  {
    request.excessIntensity = parameterAsDouble(parameters, QStringLiteral("EXCESS_INTENSITY"), context);
    request.excessDuration = parameterAsDouble(parameters, QStringLiteral("EXCESS_DURATION"), context);
    if (!(request.excessDuration > 0))
      throw QgsProcessingException(QObject::tr("EXCESS_DURATION (the constant rainfall excess's duration) must be "
                                               "more than 0 minutes."));
    if (request.interval > 0)  // else the automatic interval is known after the run
      refusingBadExcess([&] {
        return dem::constantExcess(request.excessIntensity, request.excessDuration, request.interval);
      });
    return;
  }
  // A series: one value per interval, so the interval must be the series' step.
  if (!(request.interval > 0))
    throw QgsProcessingException(QObject::tr(
      "A rainfall excess table (EXCESS_TABLE) gives one value per time step: set INTERVAL (the isochrone interval) "
      "to its time step in minutes."));
  std::unique_ptr<QgsProcessingFeatureSource> table(
    parameterAsSource(parameters, QStringLiteral("EXCESS_TABLE"), context));
  if (!table)
    throw QgsProcessingException(invalidSourceError(parameters, QStringLiteral("EXCESS_TABLE")));
  const QString field = parameterAsString(parameters, QStringLiteral("EXCESS_FIELD"), context);
  const int index = table->fields().lookupField(field);
  if (field.isEmpty() || index < 0)
    throw QgsProcessingException(
      QObject::tr("EXCESS_FIELD must name the field of EXCESS_TABLE that holds the rainfall excess (mm/h)%1.")
        .arg(field.isEmpty() ? QString() : QObject::tr("; the table has no field \"%1\"").arg(field)));
  QgsFeatureIterator rows = table->getFeatures(
    QgsFeatureRequest().setFlags(QgsFeatureRequest::NoGeometry).setSubsetOfAttributes(QgsAttributeList() << index));
  QgsFeature row;
  while (rows.nextFeature(row))
  {
    bool ok = false;
    const QVariant value = row.attribute(index);
    const double mmPerHour = value.isNull() ? std::nan("") : value.toDouble(&ok);
    if (!ok || !(mmPerHour >= 0) || !std::isfinite(mmPerHour))
      throw QgsProcessingException(QObject::tr("EXCESS_TABLE: row %1 (feature %2) has no rainfall excess of 0 mm/h "
                                               "or more in \"%3\" (%4).")
                                     .arg(request.excessSeries.size() + 1)
                                     .arg(row.id())
                                     .arg(field, value.isNull() ? QObject::tr("no value") : value.toString()));
    request.excessSeries.push_back(mmPerHour);
    if (int64_t(request.excessSeries.size()) > dem::kMaxHydrographSteps)
      throw QgsProcessingException(QObject::tr("EXCESS_TABLE has more than %1 rows: use a longer time step.")
                                     .arg(dem::kMaxHydrographSteps));
  }
  if (request.excessSeries.empty())
    throw QgsProcessingException(QObject::tr("EXCESS_TABLE has no rows."));
}

void IsochronesAlgorithm::writeHydrograph(const Request& request, const Outcome& outcome, const QVariantMap& parameters,
                                          QgsProcessingContext& context, QgsProcessingFeedback* feedback,
                                          QVariantMap& outputs) const
{
  if (!request.wantHydrograph)
    return;
  const double step = outcome.interval;
  const dem::Hydrograph h = refusingBadExcess([&] {
    const std::vector<double> excess =
      request.excessSeries.empty() ? dem::constantExcess(request.excessIntensity, request.excessDuration, step)
                                   : request.excessSeries;
    return dem::timeAreaHydrograph(outcome.bandArea, excess, step);
  });

  QgsFields fields;
  fields.append(QgsField(QStringLiteral("step"), QVariant::Int));
  fields.append(QgsField(QStringLiteral("t_min"), QVariant::Double));
  fields.append(QgsField(QStringLiteral("t_max"), QVariant::Double));
  fields.append(QgsField(QStringLiteral("excess_mm_h"), QVariant::Double));
  fields.append(QgsField(QStringLiteral("discharge_m3s"), QVariant::Double));
  fields.append(QgsField(QStringLiteral("unit_m3s"), QVariant::Double));
  QString id;
  std::unique_ptr<QgsFeatureSink> sink = createSink(parameters, QStringLiteral("HYDROGRAPH"), context, id, fields,
                                                    QgsWkbTypes::NoGeometry, QgsCoordinateReferenceSystem());
  for (std::size_t n = 0; n < h.discharge.size(); ++n)
  {
    if (feedback->isCanceled())
      throw Canceled();
    QgsFeature feature(fields);
    feature.setAttributes(QgsAttributes() << int(n + 1) << double(n) * step << double(n + 1) * step << h.excess[n]
                                          << h.discharge[n] << h.unit[n]);
    if (!sink->addFeature(feature, QgsFeatureSink::FastInsert))
      throw QgsProcessingException(writeFeatureError(sink.get(), parameters, QStringLiteral("HYDROGRAPH")));
  }
  outputs.insert(QStringLiteral("HYDROGRAPH"), id);
  const double peak = h.peakStep >= 0 ? h.discharge[std::size_t(h.peakStep)] : 0.0;
  const double peakTime = h.peakStep >= 0 ? double(h.peakStep + 1) * step : 0.0;
  outputs.insert(QStringLiteral("PEAK_DISCHARGE_M3S"), peak);
  outputs.insert(QStringLiteral("PEAK_TIME_MIN"), peakTime);
  feedback->pushInfo(
    QObject::tr("Hydrograph (time–area method, steps of %1 min, %2 steps): peak %3 m³/s in the step ending at "
                "%4 min; %5 m³ of rainfall excess delivered over %6 km².")
      .arg(number(step))
      .arg(h.discharge.size())
      .arg(number(peak), number(peakTime), number(h.volume), number(outcome.watershedArea * 1e-6)));
}

}  // namespace gpugeo
