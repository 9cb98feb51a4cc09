#!/usr/bin/python3
"""Writes tin_mesh_contours.model3: a model that chains QGIS's own native:tinmeshcreation (a TIN from a
point layer with Z) into gpugeo:meshcontours. Run with Debian's python3 (PyQGIS); the model file is
committed, this script documents how it was made.

The 3.22 command line cannot give native:tinmeshcreation its SOURCE_DATA (a list of maps); inside a
model it is an expression over the model's point layer input, array(map('source', @points, ...)),
attributeIndex -1 taking the points' Z. The mesh is written as UGRID (MESH_FORMAT 3), which keeps the
CRS (a 2DM has none), in the points' CRS (CRS_OUTPUT: the layer, whose CRS a CRS parameter takes);
group 0 of the TIN is its vertex Z ("Bed Elevation").

usage: make_meshcontours_model.py OUTPUT.model3
"""
import sys

from qgis.core import (QgsApplication, QgsProcessing, QgsProcessingModelAlgorithm,
                       QgsProcessingModelChildAlgorithm, QgsProcessingModelChildParameterSource,
                       QgsProcessingModelOutput, QgsProcessingModelParameter,
                       QgsProcessingParameterFeatureSource, QgsProcessingParameterString)

app = QgsApplication([], False)
app.initQgis()

model = QgsProcessingModelAlgorithm("TIN mesh contours", "gpugeo tests", "gpugeo_tests")
model.setHelpContent({"ALG_DESC": "A TIN mesh from points with Z, then its contour lines and polygons on the GPU."})
model.addModelParameter(QgsProcessingParameterFeatureSource("points", "Points with Z", [QgsProcessing.TypeVectorPoint]),
                        QgsProcessingModelParameter("points"))
model.addModelParameter(QgsProcessingParameterString("levels", "Contour levels (comma separated)", "10,20,30"),
                        QgsProcessingModelParameter("levels"))

tin = QgsProcessingModelChildAlgorithm("native:tinmeshcreation")
tin.setChildId("tin")
tin.setDescription("TIN mesh creation")
tin.addParameterSources("SOURCE_DATA", [QgsProcessingModelChildParameterSource.fromExpression(
    "array(map('source', @points, 'type', 0, 'attributeIndex', -1))")])
tin.addParameterSources("MESH_FORMAT", [QgsProcessingModelChildParameterSource.fromStaticValue(3)])
tin.addParameterSources("CRS_OUTPUT", [QgsProcessingModelChildParameterSource.fromModelParameter("points")])
tin.addParameterSources("OUTPUT_MESH", [QgsProcessingModelChildParameterSource.fromStaticValue("TEMPORARY_OUTPUT")])
model.addChildAlgorithm(tin)

contours = QgsProcessingModelChildAlgorithm("gpugeo:meshcontours")
contours.setChildId("contours")
contours.setDescription("Export contours (GPU)")
contours.addParameterSources("INPUT", [QgsProcessingModelChildParameterSource.fromChildOutput("tin", "OUTPUT_MESH")])
contours.addParameterSources("DATASET_GROUPS", [QgsProcessingModelChildParameterSource.fromStaticValue([0])])
contours.addParameterSources("DATASET_TIME", [QgsProcessingModelChildParameterSource.fromStaticValue({"type": "static"})])
contours.addParameterSources("CONTOUR_LEVEL_LIST", [QgsProcessingModelChildParameterSource.fromModelParameter("levels")])
contours.addParameterSources("DEVICE", [QgsProcessingModelChildParameterSource.fromStaticValue(0)])
outputs = {}
for name, child_output, description in (("lines", "OUTPUT_LINES", "Contour lines"),
                                        ("polygons", "OUTPUT_POLYGONS", "Contour polygons")):
    output = QgsProcessingModelOutput(name, description)
    output.setChildOutputName(child_output)
    output.setChildId("contours")
    outputs[name] = output
contours.setModelOutputs(outputs)
model.addChildAlgorithm(contours)

model.updateDestinationParameters()
if not model.toFile(sys.argv[1]):
    sys.exit("could not write " + sys.argv[1])
app.exitQgis()
