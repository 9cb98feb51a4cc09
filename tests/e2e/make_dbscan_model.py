#!/usr/bin/python3
"""Writes dbscan_clustered_points.model3: a model that chains gpugeo:dbscan into QGIS's own
native:extractbyexpression (the points in a cluster). Run with Debian's python3 (PyQGIS); the model
file is committed, this script documents how it was made.

usage: make_dbscan_model.py OUTPUT.model3
"""
import sys

from qgis.core import (QgsApplication, QgsProcessing, QgsProcessingModelAlgorithm,
                       QgsProcessingModelChildAlgorithm, QgsProcessingModelChildParameterSource,
                       QgsProcessingModelOutput, QgsProcessingModelParameter,
                       QgsProcessingParameterFeatureSource, QgsProcessingParameterNumber)

app = QgsApplication([], False)
app.initQgis()

model = QgsProcessingModelAlgorithm("DBSCAN clustered points", "gpugeo tests", "gpugeo_tests")
model.setHelpContent({"ALG_DESC": "DBSCAN on the GPU, then the points that are in a cluster."})
model.addModelParameter(QgsProcessingParameterFeatureSource("points", "Points", [QgsProcessing.TypeVectorPoint]),
                        QgsProcessingModelParameter("points"))
model.addModelParameter(QgsProcessingParameterNumber("eps", "Distance", QgsProcessingParameterNumber.Double, 100.0),
                        QgsProcessingModelParameter("eps"))
model.addModelParameter(QgsProcessingParameterNumber("min_size", "Minimum cluster size",
                                                     QgsProcessingParameterNumber.Integer, 5),
                        QgsProcessingModelParameter("min_size"))

dbscan = QgsProcessingModelChildAlgorithm("gpugeo:dbscan")
dbscan.setChildId("dbscan")
dbscan.setDescription("DBSCAN clustering (GPU)")
dbscan.addParameterSources("INPUT", [QgsProcessingModelChildParameterSource.fromModelParameter("points")])
dbscan.addParameterSources("EPS", [QgsProcessingModelChildParameterSource.fromModelParameter("eps")])
dbscan.addParameterSources("MIN_SIZE", [QgsProcessingModelChildParameterSource.fromModelParameter("min_size")])
dbscan.addParameterSources("DEVICE", [QgsProcessingModelChildParameterSource.fromStaticValue(0)])
dbscan.addParameterSources("OUTPUT", [QgsProcessingModelChildParameterSource.fromStaticValue("TEMPORARY_OUTPUT")])
model.addChildAlgorithm(dbscan)

extract = QgsProcessingModelChildAlgorithm("native:extractbyexpression")
extract.setChildId("extract")
extract.setDescription("Points in a cluster")
extract.addParameterSources("INPUT", [QgsProcessingModelChildParameterSource.fromChildOutput("dbscan", "OUTPUT")])
extract.addParameterSources("EXPRESSION",
                            [QgsProcessingModelChildParameterSource.fromStaticValue('"CLUSTER_ID" IS NOT NULL')])
clustered = QgsProcessingModelOutput("clustered", "Clustered points")
clustered.setChildOutputName("OUTPUT")
clustered.setChildId("extract")
extract.setModelOutputs({"clustered": clustered})
model.addChildAlgorithm(extract)

model.updateDestinationParameters()
if not model.toFile(sys.argv[1]):
    sys.exit("could not write " + sys.argv[1])
app.exitQgis()
