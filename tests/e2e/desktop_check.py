"""Run inside the QGIS desktop (qgis --code desktop_check.py, under Xvfb) by test_qgis_process.py:
records whether the plugin started through initGui(), whether its provider and algorithms are in
the processing registry, in the Processing toolbox's model and in the graphical modeler's, and
whether unloading the plugin removes the provider (and loading it again restores it). Then opens
each algorithm's dialog and saves a screenshot of it into $GPUGEO_SCREENSHOT_DIR (Isochrones also
with its advanced parameters shown), notes whether the dialog has a Help button, runs
gpugeo:isochrones on the shipped DEM as the dialog's Run does (its outputs loaded into the
project) and records the order and styles of the layers it loaded, and renders them to
isochrones_result.png ($GPUGEO_DESKTOP_DEM names the DEM); runs gpugeo:streamnetwork and
gpugeo:subbasins the same way and records their layers' styles (streams_result.png), and
gpugeo:breachdepressions's change raster's style. Writes JSON to $GPUGEO_DESKTOP_RESULT, then quits.
"""
import json
import os
import time

import processing
import qgis.utils
from qgis.core import (QgsApplication, QgsMapRendererSequentialJob, QgsMapSettings, QgsProject,
                       QgsRasterLayer, QgsVectorLayer)
from qgis.gui import QgsProcessingToolboxProxyModel
from qgis.PyQt.QtCore import QModelIndex, QSize, QTimer
from qgis.PyQt.QtGui import QColor
from qgis.PyQt.QtWidgets import QDialogButtonBox, QGroupBox

SHOTS = os.environ.get("GPUGEO_SCREENSHOT_DIR", "")
DEM = os.environ.get("GPUGEO_DESKTOP_DEM", "")  # (--code runs this file without __file__)


def algorithms_shown(filters):
    model = QgsProcessingToolboxProxyModel(None, QgsApplication.processingRegistry())
    model.setFilters(filters)
    found = []

    def walk(parent):
        for row in range(model.rowCount(parent)):
            index = model.index(row, 0, parent)
            algorithm = model.toolboxModel().algorithmForIndex(model.mapToSource(index))
            if algorithm is not None and algorithm.provider().id() == "gpugeo":
                found.append(algorithm.id())
            walk(index)

    walk(QModelIndex())
    return found


def provider_name():
    provider = QgsApplication.processingRegistry().providerById("gpugeo")
    return provider.name() if provider else None


def settle(seconds):
    """Lets the event loop draw for a while (the dialog's widgets come in several passes)."""
    end = time.time() + seconds
    while time.time() < end:
        QgsApplication.processEvents()
        time.sleep(0.02)


def shoot(widget, name):
    path = os.path.join(SHOTS, name)
    return path if widget.grab().save(path) else None


def dialogs():
    """Every algorithm's dialog: shown, photographed, with or without a Help button."""
    os.makedirs(SHOTS, exist_ok=True)
    result = {}
    for algorithm in sorted(a.id() for a in QgsApplication.processingRegistry().providerById("gpugeo").algorithms()):
        dialog = processing.createAlgorithmDialog(algorithm, {})
        dialog.show()
        settle(0.3)
        # The size and the advanced section's state as a first opening has them (a dialog restores
        # the last one's when shown).
        advanced = [group for group in dialog.findChildren(QGroupBox) if group.objectName() == "grpAdvanced"]
        for group in advanced:
            group.setProperty("collapsed", True)
        dialog.resize(900, 760)
        settle(0.5)
        name = algorithm.replace(":", "_")
        shots = [shoot(dialog, name + ".png")]
        boxes = dialog.findChildren(QDialogButtonBox)
        has_help = any(box.button(QDialogButtonBox.Help) is not None and box.button(QDialogButtonBox.Help).isVisible()
                       for box in boxes)
        if algorithm == "gpugeo:isochrones":
            for group in advanced:
                group.setProperty("collapsed", False)
            dialog.resize(900, 1500)
            settle(0.6)
            shots.append(shoot(dialog, name + "_advanced.png"))
        result[algorithm] = {"help_button": has_help, "shots": [s for s in shots if s]}
        dialog.close()
        dialog.deleteLater()
        settle(0.1)
    return result


def isochrones_result():
    """gpugeo:isochrones on the shipped DEM, its outputs loaded as the dialog loads them; the order
    (top first) and styles of the layers, and the map they make."""
    outputs = {name: "TEMPORARY_OUTPUT" for name in ("TRAVEL_TIME", "WATERSHED", "ISOCHRONES", "TIME_AREA")}
    results = processing.runAndLoadResults("gpugeo:isochrones", dict(outputs, INPUT=DEM, DEVICE=1))
    settle(0.5)
    project = QgsProject.instance()
    # The loaded layers carry their outputs' descriptions as names.
    ids = {project.mapLayersByName(title)[0].id(): name
           for name, title in (("TRAVEL_TIME", "Travel time (minutes)"), ("WATERSHED", "Watershed"),
                               ("ISOCHRONES", "Isochrones"))}
    order = [ids[layer.id()] for layer in project.layerTreeRoot().layerOrder() if layer.id() in ids]
    styles = {}
    for layer_id, name in ids.items():
        layer = project.mapLayer(layer_id)
        renderer = layer.renderer()
        style = {"renderer": renderer.type()}
        if name == "ISOCHRONES":
            style["ranges"] = len(renderer.ranges())
            style["colours"] = len({r.symbol().color().name() for r in renderer.ranges()})
            style["field"] = renderer.classAttribute()
        if name == "WATERSHED":
            style["fill"] = renderer.symbol().symbolLayer(0).properties().get("style")
        styles[name] = style
    shot = None
    if SHOTS:
        settings = QgsMapSettings()
        layers = [layer for layer in project.layerTreeRoot().layerOrder()
                  if isinstance(layer, (QgsRasterLayer, QgsVectorLayer)) and layer.isSpatial()]
        settings.setLayers(layers)
        watershed = project.mapLayersByName("Watershed")[0]
        settings.setDestinationCrs(watershed.crs())
        extent = watershed.extent()
        extent.scale(1.08)
        settings.setExtent(extent)
        settings.setOutputSize(QSize(1000, 800))
        settings.setBackgroundColor(QColor(255, 255, 255))
        job = QgsMapRendererSequentialJob(settings)
        job.start()
        job.waitForFinished()
        path = os.path.join(SHOTS, "isochrones_result.png")
        shot = path if job.renderedImage().save(path) else None
    return {"order": order, "styles": styles, "bands": results.get("INTERVAL_MIN") and int(
        results["MAX_TIME_MIN"] // results["INTERVAL_MIN"]) + 1, "shot": shot}


def streams_result():
    """gpugeo:streamnetwork and gpugeo:subbasins on the shipped DEM's directions, their outputs loaded as
    the dialog loads them: each layer's renderer (the lines' width by order), and the map they make."""
    filled = processing.run("gpugeo:filldepressions", {"INPUT": DEM, "DEVICE": 1, "OUTPUT": "TEMPORARY_OUTPUT"})
    directions = processing.run("gpugeo:flowdirection", {"INPUT": filled["OUTPUT"], "DEVICE": 1,
                                                         "OUTPUT": "TEMPORARY_OUTPUT"})["OUTPUT"]
    streams = processing.runAndLoadResults("gpugeo:streamnetwork", {
        "INPUT": filled["OUTPUT"], "DIRECTIONS": directions, "THRESHOLD": 0.5, "DEVICE": 1,
        "OUTPUT": "TEMPORARY_OUTPUT", "OUTPUT_ORDER": "TEMPORARY_OUTPUT", "OUTPUT_LINES": "TEMPORARY_OUTPUT"})
    processing.runAndLoadResults("gpugeo:subbasins", {"INPUT": directions, "STREAMS": streams["OUTPUT"], "DEVICE": 1,
                                                      "OUTPUT": "TEMPORARY_OUTPUT",
                                                      "OUTPUT_POLYGONS": "TEMPORARY_OUTPUT"})
    settle(0.5)
    project = QgsProject.instance()
    styles = {}
    for title in ("Stream segments", "Strahler order", "Stream lines", "Subbasins", "Subbasin polygons"):
        layer = project.mapLayersByName(title)[0]
        renderer = layer.renderer()
        style = {"renderer": renderer.type()}
        if title == "Stream lines":
            width = renderer.symbol().dataDefinedWidth()
            style["width"] = width.expressionString() if width else None
        if title == "Subbasin polygons":
            style["fill"] = renderer.symbol().symbolLayer(0).properties().get("style")
        styles[title] = style
    shot = None
    if SHOTS:
        settings = QgsMapSettings()
        names = ("Stream lines", "Subbasin polygons", "Strahler order")
        layers = [project.mapLayersByName(name)[0] for name in names]
        settings.setLayers(layers)
        settings.setDestinationCrs(layers[0].crs())
        settings.setExtent(layers[2].extent())
        settings.setOutputSize(QSize(1000, 860))
        settings.setBackgroundColor(QColor(255, 255, 255))
        job = QgsMapRendererSequentialJob(settings)
        job.start()
        job.waitForFinished()
        path = os.path.join(SHOTS, "streams_result.png")
        shot = path if job.renderedImage().save(path) else None
    return {"styles": styles, "shot": shot}


def breach_result():
    """gpugeo:breachdepressions on the shipped DEM, its change raster loaded as the dialog loads it: its
    renderer and the ramp's range (symmetric about 0: lowered red, raised blue)."""
    processing.runAndLoadResults("gpugeo:breachdepressions", {"INPUT": DEM, "DEVICE": 1, "OUTPUT": "TEMPORARY_OUTPUT",
                                                              "OUTPUT_CHANGE": "TEMPORARY_OUTPUT"})
    settle(0.5)
    layer = QgsProject.instance().mapLayersByName("Change (breached − input)")[0]
    renderer = layer.renderer()
    shader = renderer.shader().rasterShaderFunction() if renderer.type() == "singlebandpseudocolor" else None
    return {"renderer": renderer.type(),
            "range": [shader.minimumValue(), shader.maximumValue()] if shader else None}


def check():
    result = {"active": "gpugeo" in qgis.utils.active_plugins, "provider": provider_name(),
              "toolbox": algorithms_shown(QgsProcessingToolboxProxyModel.FilterToolbox),
              "modeler": algorithms_shown(QgsProcessingToolboxProxyModel.FilterModeler)}
    qgis.utils.unloadPlugin("gpugeo")
    result["provider_after_unload"] = provider_name()
    qgis.utils.loadPlugin("gpugeo")
    qgis.utils.startPlugin("gpugeo")
    result["provider_after_reload"] = provider_name()
    if SHOTS:
        try:
            result["dialogs"] = dialogs()
            result["isochrones"] = isochrones_result()
            result["streams"] = streams_result()
            result["breach"] = breach_result()
        except Exception as error:  # reported in the JSON, so the test says what broke
            result["error"] = repr(error)
    with open(os.environ["GPUGEO_DESKTOP_RESULT"], "w") as out:
        json.dump(result, out)
    QgsProject.instance().removeAllMapLayers()
    os._exit(0)


QTimer.singleShot(1000, check)
