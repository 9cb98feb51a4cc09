"""Run inside the QGIS desktop (qgis --code desktop_check.py, under Xvfb) by test_qgis_process.py:
records whether the plugin started through initGui(), whether its provider and algorithms are in
the processing registry, in the Processing toolbox's model and in the graphical modeler's, and
whether unloading the plugin removes the provider (and loading it again restores it). Writes
JSON to $GPUGEO_DESKTOP_RESULT, then quits.
"""
import json
import os

import qgis.utils
from qgis.core import QgsApplication
from qgis.gui import QgsProcessingToolboxProxyModel
from qgis.PyQt.QtCore import QModelIndex, QTimer


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


def check():
    result = {"active": "gpugeo" in qgis.utils.active_plugins, "provider": provider_name(),
              "toolbox": algorithms_shown(QgsProcessingToolboxProxyModel.FilterToolbox),
              "modeler": algorithms_shown(QgsProcessingToolboxProxyModel.FilterModeler)}
    qgis.utils.unloadPlugin("gpugeo")
    result["provider_after_unload"] = provider_name()
    qgis.utils.loadPlugin("gpugeo")
    qgis.utils.startPlugin("gpugeo")
    result["provider_after_reload"] = provider_name()
    with open(os.environ["GPUGEO_DESKTOP_RESULT"], "w") as out:
        json.dump(result, out)
    os._exit(0)


QTimer.singleShot(1000, check)
