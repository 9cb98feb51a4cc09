#include "layer_styles.h"

#include <algorithm>
#include <cmath>

#include <qgscolorramp.h>
#include <qgsfillsymbol.h>
#include <qgsgraduatedsymbolrenderer.h>
#include <qgslayertree.h>
#include <qgslinesymbol.h>
#include <qgspalettedrasterrenderer.h>
#include <qgsproject.h>
#include <qgsproperty.h>
#include <qgsrasterlayer.h>
#include <qgsrendererrange.h>
#include <qgssinglebandpseudocolorrenderer.h>
#include <qgssinglesymbolrenderer.h>
#include <qgsstyle.h>
#include <qgsvectorlayer.h>

#include "number_text.h"

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

void placeByRank(QgsMapLayer* layer, int rank, const LoadOrder& order, QgsProcessingContext& context)
{
  if (!order || !layer)
    return;
  order->insert(layer->id(), rank);
  QgsProject* project = context.project();
  QgsLayerTreeLayer* node = project ? project->layerTreeRoot()->findLayer(layer) : nullptr;
  QgsLayerTreeGroup* parent = node ? qobject_cast<QgsLayerTreeGroup*>(node->parent()) : nullptr;
  if (!parent)
    return;
  // The run's layers in this group, where the first of them stands; then sorted, highest rank first
  // (the top of the tree), each moved as QGIS's own "move to top" does: a clone in place, the old
  // node out.
  QList<QgsLayerTreeLayer*> ours;
  int first = -1;
  const QList<QgsLayerTreeNode*> children = parent->children();
  for (int i = 0; i < children.size(); ++i)
    if (QgsLayerTree::isLayer(children[i]) && order->contains(QgsLayerTree::toLayer(children[i])->layerId()))
    {
      if (first < 0)
        first = i;
      ours << QgsLayerTree::toLayer(children[i]);
    }
  std::stable_sort(ours.begin(), ours.end(), [&](QgsLayerTreeLayer* a, QgsLayerTreeLayer* b) {
    return order->value(a->layerId()) > order->value(b->layerId());
  });
  for (int i = 0; i < ours.size(); ++i)
  {
    if (parent->children().indexOf(ours[i]) == first + i)
      continue;
    parent->insertChildNode(first + i, ours[i]->clone());
    parent->removeChildNode(ours[i]);
  }
}

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

LayerPlace::LayerPlace(LoadOrder order, int rank) : mOrder(std::move(order)), mRank(rank) {}

void LayerPlace::postProcessLayer(QgsMapLayer* layer, QgsProcessingContext& context, QgsProcessingFeedback*)
{
  style(layer);
  placeByRank(layer, mRank, mOrder, context);
}

ContinuousRasterStyle::ContinuousRasterStyle(double minimum, double maximum, LoadOrder order, int rank,
                                             const QString& ramp)
  : LayerPlace(std::move(order), rank), mMinimum(minimum), mMaximum(maximum), mRamp(ramp)
{
}

void ContinuousRasterStyle::style(QgsMapLayer* layer)
{
  if (auto* raster = qobject_cast<QgsRasterLayer*>(layer); raster && raster->dataProvider())
    applyRamp(raster, mMinimum, mMaximum, mRamp);
}

void OutlineStyle::style(QgsMapLayer* layer)
{
  if (auto* vector = qobject_cast<QgsVectorLayer*>(layer))
  {
    QgsFillSymbol* symbol = QgsFillSymbol::createSimple({{QStringLiteral("style"), QStringLiteral("no")},
                                                         {QStringLiteral("outline_color"), QStringLiteral("35,35,35,255")},
                                                         {QStringLiteral("outline_width"), QStringLiteral("0.6")}});
    vector->setRenderer(new QgsSingleSymbolRenderer(symbol));
    vector->triggerRepaint();
  }
}

BandStyle::BandStyle(int bands, double interval, LoadOrder order, int rank)
  : LayerPlace(std::move(order), rank), mBands(bands), mInterval(interval)
{
}

void BandStyle::style(QgsMapLayer* layer)
{
  auto* vector = qobject_cast<QgsVectorLayer*>(layer);
  if (!vector || mBands <= 0)
    return;
  std::unique_ptr<QgsColorRamp> ramp(QgsStyle::defaultStyle()->colorRamp(QStringLiteral("Viridis")));
  if (!ramp)
    ramp = std::make_unique<QgsGradientColorRamp>();
  // One class a band, or ten of equal width; band k covers (k - 1) x interval to k x interval.
  const int classes = mBands <= kMaxClasses ? mBands : 10;
  const double perClass = double(mBands) / classes;
  QgsRangeList ranges;
  for (int c = 0; c < classes; ++c)
  {
    const int firstBand = int(std::floor(c * perClass)) + 1, lastBand = int(std::floor((c + 1) * perClass));
    QgsSymbol* symbol = QgsSymbol::defaultSymbol(QgsWkbTypes::PolygonGeometry);
    symbol->setColor(ramp->color(classes > 1 ? double(c) / (classes - 1) : 0.0));
    const QString label = QObject::tr("%1 – %2 min").arg(number((firstBand - 1) * mInterval), number(lastBand * mInterval));
    ranges << QgsRendererRange(firstBand - 0.5, lastBand + 0.5, symbol, label);
  }
  vector->setRenderer(new QgsGraduatedSymbolRenderer(QStringLiteral("band"), ranges));
  vector->triggerRepaint();
}

void StreamLineStyle::style(QgsMapLayer* layer)
{
  auto* lines = qobject_cast<QgsVectorLayer*>(layer);
  if (!lines)
    return;
  QgsLineSymbol* symbol = QgsLineSymbol::createSimple(
    {{QStringLiteral("line_color"), QStringLiteral("31,120,180,255")}, {QStringLiteral("line_width"), QStringLiteral("0.2")}});
  symbol->setDataDefinedWidth(
    QgsProperty::fromExpression(QStringLiteral("0.2 + 0.3 * (coalesce(\"strahler\", 1) - 1)")));
  lines->setRenderer(new QgsSingleSymbolRenderer(symbol));
  lines->triggerRepaint();
}

}  // namespace gpugeo
