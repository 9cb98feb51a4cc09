#!/usr/bin/python3
"""Writes the five models of the end-to-end tests, laid out for the graphical modeler (inputs on the
left, the algorithms in a column, each output beside its algorithm) and valid there (every mandatory
parameter of every step has a source):

- voronoi_pixel_counts.model3: gpugeo:voronoiraster into QGIS's native:rasterlayeruniquevaluesreport;
- dbscan_clustered_points.model3: gpugeo:dbscan into QGIS's native:extractbyexpression;
- dem_flow_accumulation.model3: gpugeo:filldepressions, gpugeo:flowdirection, gpugeo:flowaccumulation;
- dem_stream_network.model3: gpugeo:filldepressions, gpugeo:flowdirection, gpugeo:flowaccumulation,
  gpugeo:streamnetwork, gpugeo:subbasins and gpugeo:watersheds (a hydrologist's chain: channels,
  their subbasins and the watersheds of gauges);
- tin_mesh_contours.model3: QGIS's native:tinmeshcreation (a UGRID TIN from points' Z) into
  gpugeo:meshcontours (group 0 of the TIN is its vertex Z).

Run with Debian's python3 (PyQGIS); the model files are committed, this script documents how they were
made. It registers QGIS's native algorithms and gpugeo's provider (the library given) so that each
step's parameters are known: a mandatory parameter the script leaves without a source gets its
default as a fixed value, as the modeler's dialog would.

usage: make_models.py PROVIDER_LIBRARY OUTPUT_FOLDER
"""
import ctypes
import os
import sys

from qgis.analysis import QgsNativeAlgorithms
from qgis.core import (QgsApplication, QgsProcessing, QgsProcessingModelAlgorithm, QgsProcessingModelChildAlgorithm,
                       QgsProcessingModelChildParameterSource, QgsProcessingModelOutput, QgsProcessingModelParameter,
                       QgsProcessingParameterDefinition, QgsProcessingParameterFeatureSource,
                       QgsProcessingParameterNumber, QgsProcessingParameterRasterLayer, QgsProcessingParameterString)
from qgis.PyQt.QtCore import QPointF

INPUT_X, STEP_X, OUTPUT_X = 120.0, 420.0, 720.0


def static(value):
    return [QgsProcessingModelChildParameterSource.fromStaticValue(value)]


def from_input(name):
    return [QgsProcessingModelChildParameterSource.fromModelParameter(name)]


def from_step(child, output):
    return [QgsProcessingModelChildParameterSource.fromChildOutput(child, output)]


def add_inputs(model, definitions):
    for row, definition in enumerate(definitions):
        component = QgsProcessingModelParameter(definition.name())
        component.setPosition(QPointF(INPUT_X, 60.0 + 90.0 * row))
        model.addModelParameter(definition, component)


def add_step(model, row, algorithm_id, child_id, description, sources, outputs=()):
    """A step at `row` of the column; `outputs` are (name, child output, description) of the model."""
    child = QgsProcessingModelChildAlgorithm(algorithm_id)
    child.setChildId(child_id)
    child.setDescription(description)
    child.setPosition(QPointF(STEP_X, 100.0 + 150.0 * row))
    for name, source in sources.items():
        child.addParameterSources(name, source)
    algorithm = QgsApplication.processingRegistry().algorithmById(algorithm_id)
    if algorithm is None:
        sys.exit(f"make_models.py: {algorithm_id} is not registered")
    for definition in algorithm.parameterDefinitions():
        optional = definition.flags() & QgsProcessingParameterDefinition.FlagOptional
        if definition.isDestination() or optional or definition.name() in sources:
            continue
        child.addParameterSources(definition.name(), static(definition.defaultValue()))
    model_outputs = {}
    for index, (name, child_output, text) in enumerate(outputs):
        output = QgsProcessingModelOutput(name, text)
        output.setChildOutputName(child_output)
        output.setChildId(child_id)
        output.setPosition(QPointF(OUTPUT_X, 100.0 + 150.0 * row + 50.0 * index))
        model_outputs[name] = output
    child.setModelOutputs(model_outputs)
    model.addChildAlgorithm(child)


def voronoi_pixel_counts():
    model = QgsProcessingModelAlgorithm("Voronoi pixel counts", "gpugeo tests", "gpugeo_tests")
    model.setHelpContent({"ALG_DESC": "Voronoi raster of the sites, then the number of pixels of each region."})
    add_inputs(model, [QgsProcessingParameterFeatureSource("sites", "Sites", [QgsProcessing.TypeVectorPoint]),
                       QgsProcessingParameterNumber("pixel_size", "Pixel size", QgsProcessingParameterNumber.Double,
                                                    10.0)])
    add_step(model, 0, "gpugeo:voronoiraster", "voronoi", "Voronoi raster",
             {"INPUT": from_input("sites"), "PIXEL_SIZE": from_input("pixel_size"), "DEVICE": static(0),
              "OUTPUT": static("TEMPORARY_OUTPUT")})
    add_step(model, 1, "native:rasterlayeruniquevaluesreport", "counts", "Pixels per region",
             {"INPUT": from_step("voronoi", "OUTPUT"), "BAND": static(1)},
             [("pixel_counts", "OUTPUT_TABLE", "Pixel counts")])
    return model


def dbscan_clustered_points():
    model = QgsProcessingModelAlgorithm("DBSCAN clustered points", "gpugeo tests", "gpugeo_tests")
    model.setHelpContent({"ALG_DESC": "DBSCAN on the GPU, then the points that are in a cluster."})
    add_inputs(model, [QgsProcessingParameterFeatureSource("points", "Points", [QgsProcessing.TypeVectorPoint]),
                       QgsProcessingParameterNumber("eps", "Distance", QgsProcessingParameterNumber.Double, 100.0),
                       QgsProcessingParameterNumber("min_size", "Minimum cluster size",
                                                    QgsProcessingParameterNumber.Integer, 5)])
    add_step(model, 0, "gpugeo:dbscan", "dbscan", "DBSCAN clustering (GPU)",
             {"INPUT": from_input("points"), "EPS": from_input("eps"), "MIN_SIZE": from_input("min_size"),
              "DEVICE": static(0), "OUTPUT": static("TEMPORARY_OUTPUT")})
    add_step(model, 1, "native:extractbyexpression", "extract", "Points in a cluster",
             {"INPUT": from_step("dbscan", "OUTPUT"), "EXPRESSION": static('"CLUSTER_ID" IS NOT NULL')},
             [("clustered", "OUTPUT", "Clustered points")])
    return model


def dem_flow_accumulation():
    model = QgsProcessingModelAlgorithm("DEM flow accumulation", "gpugeo tests", "gpugeo_tests")
    model.setHelpContent({"ALG_DESC": "Fills the DEM's depressions, computes D8 flow directions with the flats "
                                      "drained, and accumulates the flow: upstream cells and upstream area in km²."})
    add_inputs(model, [QgsProcessingParameterRasterLayer("dem", "DEM")])
    add_step(model, 0, "gpugeo:filldepressions", "fill", "Fill depressions (GPU)",
             {"INPUT": from_input("dem"), "BAND": static(1), "FLATS": static(0), "DEVICE": static(0),
              "OUTPUT": static("TEMPORARY_OUTPUT")})
    add_step(model, 1, "gpugeo:flowdirection", "directions", "Flow direction (GPU)",
             {"INPUT": from_step("fill", "OUTPUT"), "BAND": static(1), "RESOLVE_FLATS": static(True),
              "ENCODING": static(0), "DEVICE": static(0), "OUTPUT": static("TEMPORARY_OUTPUT")})
    add_step(model, 2, "gpugeo:flowaccumulation", "accumulation", "Flow accumulation (GPU)",
             {"INPUT": from_step("directions", "OUTPUT"), "BAND": static(1), "ENCODING": static(0),
              "UNITS": static(1), "DEVICE": static(0)},
             [("cells", "OUTPUT_CELLS", "Upstream cells"), ("area", "OUTPUT_AREA", "Upstream area (km²)")])
    return model


def dem_stream_network():
    model = QgsProcessingModelAlgorithm("DEM stream network", "gpugeo tests", "gpugeo_tests")
    model.setHelpContent({"ALG_DESC": "Fills the DEM's depressions, computes D8 flow directions with the flats "
                                      "drained and accumulates the flow; extracts the stream network where the "
                                      "upstream area reaches the threshold, its subbasins, and the watersheds of "
                                      "the outlets snapped to the largest upstream area nearby."})
    add_inputs(model, [QgsProcessingParameterRasterLayer("dem", "DEM"),
                       QgsProcessingParameterNumber("threshold", "Stream threshold (upstream area, km²)",
                                                    QgsProcessingParameterNumber.Double, 1.0, False, 0.0),
                       QgsProcessingParameterFeatureSource("outlets", "Outlets (gauges)",
                                                           [QgsProcessing.TypeVectorPoint]),
                       QgsProcessingParameterNumber("snap", "Snap distance (m)", QgsProcessingParameterNumber.Double,
                                                    200.0, False, 0.0)])
    add_step(model, 0, "gpugeo:filldepressions", "fill", "Fill depressions (GPU)",
             {"INPUT": from_input("dem"), "BAND": static(1), "FLATS": static(0), "DEVICE": static(0),
              "OUTPUT": static("TEMPORARY_OUTPUT")})
    add_step(model, 1, "gpugeo:flowdirection", "directions", "Flow direction (GPU)",
             {"INPUT": from_step("fill", "OUTPUT"), "BAND": static(1), "RESOLVE_FLATS": static(True),
              "ENCODING": static(0), "DEVICE": static(0), "OUTPUT": static("TEMPORARY_OUTPUT")})
    add_step(model, 2, "gpugeo:flowaccumulation", "accumulation", "Flow accumulation (GPU)",
             {"INPUT": from_step("directions", "OUTPUT"), "BAND": static(1), "ENCODING": static(0),
              "UNITS": static(1), "DEVICE": static(0)},
             [("area", "OUTPUT_AREA", "Upstream area (km²)")])
    add_step(model, 3, "gpugeo:streamnetwork", "streams", "Stream network (GPU)",
             {"INPUT": from_step("fill", "OUTPUT"), "BAND": static(1), "DIRECTIONS": from_step("directions", "OUTPUT"),
              "ENCODING": static(0), "THRESHOLD": from_input("threshold"), "THRESHOLD_UNITS": static(0),
              "DEVICE": static(0)},
             [("segments", "OUTPUT", "Stream segments"), ("lines", "OUTPUT_LINES", "Stream lines")])
    add_step(model, 4, "gpugeo:subbasins", "subbasins", "Subbasins (GPU)",
             {"INPUT": from_step("directions", "OUTPUT"), "BAND": static(1), "ENCODING": static(0),
              "STREAMS": from_step("streams", "OUTPUT"), "DEVICE": static(0)},
             [("subbasins", "OUTPUT", "Subbasins"), ("subbasin_polygons", "OUTPUT_POLYGONS", "Subbasin polygons")])
    add_step(model, 5, "gpugeo:watersheds", "watersheds", "Watersheds (GPU)",
             {"INPUT": from_step("directions", "OUTPUT"), "BAND": static(1), "ENCODING": static(0),
              "OUTLETS": from_input("outlets"), "SNAP_DISTANCE": from_input("snap"), "DEVICE": static(0)},
             [("watersheds", "OUTPUT_POLYGONS", "Watersheds")])
    return model


def tin_mesh_contours():
    model = QgsProcessingModelAlgorithm("TIN mesh contours", "gpugeo tests", "gpugeo_tests")
    model.setHelpContent({"ALG_DESC": "A TIN mesh from points with Z, then its contour lines and polygons on the GPU."})
    add_inputs(model, [QgsProcessingParameterFeatureSource("points", "Points with Z", [QgsProcessing.TypeVectorPoint]),
                       QgsProcessingParameterString("levels", "Contour levels (comma separated)", "10,20,30")])
    add_step(model, 0, "native:tinmeshcreation", "tin", "TIN mesh creation",
             {"SOURCE_DATA": [QgsProcessingModelChildParameterSource.fromExpression(
                 "array(map('source', @points, 'type', 0, 'attributeIndex', -1))")],
              "MESH_FORMAT": static(3), "CRS_OUTPUT": from_input("points"),
              "OUTPUT_MESH": static("TEMPORARY_OUTPUT")})
    add_step(model, 1, "gpugeo:meshcontours", "contours", "Mesh contours (GPU)",
             {"INPUT": from_step("tin", "OUTPUT_MESH"), "DATASET_GROUPS": static([0]),
              "DATASET_TIME": static({"type": "static"}), "CONTOUR_LEVEL_LIST": from_input("levels"),
              "DEVICE": static(0)},
             [("lines", "OUTPUT_LINES", "Contour lines"), ("polygons", "OUTPUT_POLYGONS", "Contour polygons")])
    return model


def main(library, folder):
    app = QgsApplication([], False)
    app.initQgis()
    QgsApplication.processingRegistry().addProvider(QgsNativeAlgorithms())
    provider = ctypes.CDLL(library)
    provider.gpugeo_register_provider.restype = ctypes.c_int
    if not provider.gpugeo_register_provider():
        sys.exit("make_models.py: could not register the gpugeo provider")
    for name, make in (("voronoi_pixel_counts", voronoi_pixel_counts),
                       ("dbscan_clustered_points", dbscan_clustered_points),
                       ("dem_flow_accumulation", dem_flow_accumulation), ("dem_stream_network", dem_stream_network),
                       ("tin_mesh_contours", tin_mesh_contours)):
        model = make()
        model.updateDestinationParameters()
        valid, issues = model.validate()
        if not valid:
            sys.exit(f"make_models.py: {name} is not valid: {issues}")
        path = os.path.join(folder, name + ".model3")
        if not model.toFile(path):
            sys.exit("make_models.py: could not write " + path)
    provider.gpugeo_unregister_provider()
    app.exitQgis()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
