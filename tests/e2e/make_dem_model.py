#!/usr/bin/python3
"""Writes dem_flow_accumulation.model3: a model that chains gpugeo:filldepressions, gpugeo:flowdirection
(flats resolved, ESRI codes) and gpugeo:flowaccumulation (cells and km²) on one DEM. Run with Debian's
python3 (PyQGIS); the model file is committed, this script documents how it was made.

usage: make_dem_model.py OUTPUT.model3
"""
import sys

from qgis.core import (QgsApplication, QgsProcessingModelAlgorithm, QgsProcessingModelChildAlgorithm,
                       QgsProcessingModelChildParameterSource, QgsProcessingModelOutput,
                       QgsProcessingModelParameter, QgsProcessingParameterRasterLayer)

app = QgsApplication([], False)
app.initQgis()

model = QgsProcessingModelAlgorithm("DEM flow accumulation", "gpugeo tests", "gpugeo_tests")
model.setHelpContent({"ALG_DESC": "Fills the DEM's depressions, computes D8 flow directions with the flats drained, "
                                  "and accumulates the flow: upstream cells and upstream area in km²."})
model.addModelParameter(QgsProcessingParameterRasterLayer("dem", "DEM"), QgsProcessingModelParameter("dem"))


def static(value):
    return [QgsProcessingModelChildParameterSource.fromStaticValue(value)]


fill = QgsProcessingModelChildAlgorithm("gpugeo:filldepressions")
fill.setChildId("fill")
fill.setDescription("Fill depressions (GPU)")
fill.addParameterSources("INPUT", [QgsProcessingModelChildParameterSource.fromModelParameter("dem")])
fill.addParameterSources("BAND", static(1))
fill.addParameterSources("DEVICE", static(0))
fill.addParameterSources("OUTPUT", static("TEMPORARY_OUTPUT"))
model.addChildAlgorithm(fill)

directions = QgsProcessingModelChildAlgorithm("gpugeo:flowdirection")
directions.setChildId("directions")
directions.setDescription("Flow direction (GPU)")
directions.addParameterSources("INPUT", [QgsProcessingModelChildParameterSource.fromChildOutput("fill", "OUTPUT")])
directions.addParameterSources("BAND", static(1))
directions.addParameterSources("RESOLVE_FLATS", static(True))
directions.addParameterSources("ENCODING", static(0))
directions.addParameterSources("DEVICE", static(0))
directions.addParameterSources("OUTPUT", static("TEMPORARY_OUTPUT"))
model.addChildAlgorithm(directions)

accumulation = QgsProcessingModelChildAlgorithm("gpugeo:flowaccumulation")
accumulation.setChildId("accumulation")
accumulation.setDescription("Flow accumulation (GPU)")
accumulation.addParameterSources("INPUT", [QgsProcessingModelChildParameterSource.fromChildOutput("directions", "OUTPUT")])
accumulation.addParameterSources("BAND", static(1))
accumulation.addParameterSources("ENCODING", static(0))
accumulation.addParameterSources("UNITS", static(1))
accumulation.addParameterSources("DEVICE", static(0))
outputs = {}
for name, child_output, description in (("cells", "OUTPUT_CELLS", "Upstream cells"),
                                        ("area", "OUTPUT_AREA", "Upstream area (km²)")):
    output = QgsProcessingModelOutput(name, description)
    output.setChildOutputName(child_output)
    output.setChildId("accumulation")
    outputs[name] = output
accumulation.setModelOutputs(outputs)
model.addChildAlgorithm(accumulation)

model.updateDestinationParameters()
if not model.toFile(sys.argv[1]):
    sys.exit("could not write " + sys.argv[1])
app.exitQgis()
