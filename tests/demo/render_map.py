#!/usr/bin/python3
"""Renders the demo's result to a PNG with PyQGIS (no display needed): the Voronoi allocation
raster in random colours, the region outlines, the countries of QGIS's bundled world map and the
sites.

usage: render_map.py ALLOCATION.tif REGIONS.gpkg SITES.gpkg OUTPUT.png
"""
import os
import sys

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from qgis.core import (QgsApplication, QgsCoordinateReferenceSystem, QgsFillSymbol, QgsLimitedRandomColorRamp,
                       QgsMapRendererParallelJob, QgsMapSettings, QgsMarkerSymbol, QgsPalettedRasterRenderer,
                       QgsRasterLayer, QgsVectorLayer)
from qgis.PyQt.QtCore import QSize
from qgis.PyQt.QtGui import QColor

WORLD = "/usr/share/qgis/resources/data/world_map.gpkg|layername=countries"


def main(allocation, regions, sites, output):
    app = QgsApplication([], False)
    app.initQgis()

    raster = QgsRasterLayer(allocation, "allocation")
    values = sorted({int(v) for v in QgsVectorLayer(sites, "s", "ogr").uniqueValues(
        QgsVectorLayer(sites, "s", "ogr").fields().lookupField("zone_id"))})
    colors = QgsLimitedRandomColorRamp.randomColors(len(values), 359, 0, 120, 60, 255, 200)
    raster.setRenderer(QgsPalettedRasterRenderer(raster.dataProvider(), 1, [
        QgsPalettedRasterRenderer.Class(v, c) for v, c in zip(values, colors)]))

    outlines = QgsVectorLayer(regions, "regions", "ogr")
    outlines.renderer().setSymbol(QgsFillSymbol.createSimple(
        {"style": "no", "outline_color": "255,255,255,200", "outline_width": "0.15"}))
    countries = QgsVectorLayer(WORLD, "countries", "ogr")
    countries.renderer().setSymbol(QgsFillSymbol.createSimple(
        {"style": "no", "outline_color": "30,30,30,200", "outline_width": "0.25"}))
    points = QgsVectorLayer(sites, "sites", "ogr")
    points.renderer().setSymbol(QgsMarkerSymbol.createSimple(
        {"name": "circle", "color": "20,20,20", "outline_color": "255,255,255", "size": "1.2", "outline_width": "0.2"}))

    settings = QgsMapSettings()
    settings.setLayers([points, countries, outlines, raster])
    settings.setDestinationCrs(raster.crs())
    settings.setExtent(raster.extent())
    settings.setOutputSize(QSize(1600, 780))
    settings.setBackgroundColor(QColor(255, 255, 255))
    job = QgsMapRendererParallelJob(settings)
    job.start()
    job.waitForFinished()
    if not job.renderedImage().save(output):
        sys.exit(f"could not write {output}")
    print(f"map -> {output}")
    # Layers must go before the application; PyQGIS would otherwise crash at exit.
    del job, settings, raster, outlines, countries, points
    app.exitQgis()


if __name__ == "__main__":
    main(*sys.argv[1:5])
