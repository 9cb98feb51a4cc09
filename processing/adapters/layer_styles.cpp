#include "layer_styles.h"

#include <algorithm>

#include <qgscolorramp.h>
#include <qgspalettedrasterrenderer.h>
#include <qgsrasterlayer.h>
#include <qgssinglebandpseudocolorrenderer.h>
#include <qgsstyle.h>

namespace gpugeo {

namespace {

void applyRamp(QgsRasterLayer* raster, double minimum, double maximum, const QString& rampName)
{
  auto* renderer = new QgsSingleBandPseudoColorRenderer(raster->dataProvider(), 1);
  renderer->setClassificationMin(minimum);
  renderer->setClassificationMax(maximum);
  QgsColorRamp* ramp = QgsStyle::defaultStyle()->colorRamp(rampName);
  renderer->createShader(ramp ? ramp : new QgsGradientColorRamp());
  raster->setRenderer(renderer);
  raster->triggerRepaint();
}

}  // namespace

LabelRasterStyle::LabelRasterStyle(QVector<int> labels) : mLabels(std::move(labels)) {}

void LabelRasterStyle::postProcessLayer(QgsMapLayer* layer, QgsProcessingContext&, QgsProcessingFeedback*)
{
  auto* raster = qobject_cast<QgsRasterLayer*>(layer);
  if (!raster || !raster->dataProvider() || mLabels.isEmpty())
    return;
  if (mLabels.size() > kMaxClasses)
  {
    const auto [low, high] = std::minmax_element(mLabels.begin(), mLabels.end());
    applyRamp(raster, *low, *high, QStringLiteral("Spectral"));
    return;
  }
  const QList<QColor> colors = QgsLimitedRandomColorRamp::randomColors(mLabels.size());
  QgsPalettedRasterRenderer::ClassData classes;
  classes.reserve(mLabels.size());
  for (int i = 0; i < mLabels.size(); ++i)
    classes << QgsPalettedRasterRenderer::Class(mLabels[i], colors.value(i), QString::number(mLabels[i]));
  raster->setRenderer(new QgsPalettedRasterRenderer(raster->dataProvider(), 1, classes));
  raster->triggerRepaint();
}

ContinuousRasterStyle::ContinuousRasterStyle(double minimum, double maximum) : mMinimum(minimum), mMaximum(maximum) {}

void ContinuousRasterStyle::postProcessLayer(QgsMapLayer* layer, QgsProcessingContext&, QgsProcessingFeedback*)
{
  if (auto* raster = qobject_cast<QgsRasterLayer*>(layer); raster && raster->dataProvider())
    applyRamp(raster, mMinimum, mMaximum, QStringLiteral("Viridis"));
}

}  // namespace gpugeo
