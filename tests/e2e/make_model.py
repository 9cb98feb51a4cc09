#!/usr/bin/python3
"""Writes voronoi_pixel_counts.model3: a model that chains gpugeo:voronoiraster into QGIS's own
native:rasterlayeruniquevaluesreport (pixels per Voronoi region). Run with Debian's python3 (PyQGIS);
the model file is committed, this script documents how it was made.

usage: make_model.py OUTPUT.model3
"""
import sys

from qgis.core import (QgsApplication, QgsProcessingModelAlgorithm, QgsProcessingModelChildAlgorithm,
                       QgsProcessingModelChildParameterSource, QgsProcessingModelOutput,
                       QgsProcessingModelParameter, QgsProcessingParameterFeatureSource,
                       QgsProcessingParameterNumber, QgsProcessing)

app = QgsApplication([], False)
app.initQgis()

model = QgsProcessingModelAlgorithm("Voronoi pixel counts", "gpugeo tests", "gpugeo_tests")
model.setHelpContent({"ALG_DESC": "Voronoi raster of the sites, then the number of pixels of each region."})

sites = QgsProcessingParameterFeatureSource("sites", "Sites", [QgsProcessing.TypeVectorPoint])
model.addModelParameter(sites, QgsProcessingModelParameter("sites"))
pixel = QgsProcessingParameterNumber("pixel_size", "Pixel size", QgsProcessingParameterNumber.Double, 10.0)
model.addModelParameter(pixel, QgsProcessingModelParameter("pixel_size"))

voronoi = QgsProcessingModelChildAlgorithm("gpugeo:voronoiraster")
voronoi.setChildId("voronoi")
voronoi.setDescription("Voronoi raster")
voronoi.addParameterSources("INPUT", [QgsProcessingModelChildParameterSource.fromModelParameter("sites")])
voronoi.addParameterSources("PIXEL_SIZE", [QgsProcessingModelChildParameterSource.fromModelParameter("pixel_size")])
voronoi.addParameterSources("DEVICE", [QgsProcessingModelChildParameterSource.fromStaticValue(0)])
voronoi.addParameterSources("OUTPUT", [QgsProcessingModelChildParameterSource.fromStaticValue("TEMPORARY_OUTPUT")])
model.addChildAlgorithm(voronoi)

counts = QgsProcessingModelChildAlgorithm("native:rasterlayeruniquevaluesreport")
counts.setChildId("counts")
counts.setDescription("Pixels per region")
counts.addParameterSources("INPUT", [QgsProcessingModelChildParameterSource.fromChildOutput("voronoi", "OUTPUT")])
counts.addParameterSources("BAND", [QgsProcessingModelChildParameterSource.fromStaticValue(1)])
table = QgsProcessingModelOutput("pixel_counts", "Pixel counts")
table.setChildOutputName("OUTPUT_TABLE")
table.setChildId("counts")
counts.setModelOutputs({"pixel_counts": table})
model.addChildAlgorithm(counts)

model.updateDestinationParameters()
if not model.toFile(sys.argv[1]):
    sys.exit("could not write " + sys.argv[1])
app.exitQgis()
