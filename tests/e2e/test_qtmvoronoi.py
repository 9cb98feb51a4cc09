#!/usr/bin/python3
"""End-to-end tests of gpugeo:qtmvoronoi through qgis_process, on a real point set shipped by Debian:
the time-zone cities of tzdata's zone1970.tab (about 310 places, EPSG:4326).

usage: test_qtmvoronoi.py [unittest arguments, e.g. QtmVoronoiTest.test_zones]
"""
import math
import os
import re
import unittest

import numpy as np
from osgeo import gdal, ogr, osr

from test_qgis_process import QgisProcessBase, read_raster

R_KM = 6371.0088
ZONES = "/usr/share/zoneinfo/zone1970.tab"


def zone_cities():
    """(lon, lat, zone name) of every line of zone1970.tab."""
    def degrees(text, width):
        sign = -1.0 if text[0] == "-" else 1.0
        digits = text[1:]
        d, m = int(digits[:width]), int(digits[width:width + 2])
        s = int(digits[width + 2:width + 4]) if len(digits) > width + 2 else 0
        return sign * (d + m / 60.0 + s / 3600.0)
    cities = []
    with open(ZONES) as f:
        for line in f:
            if line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            m = re.match(r"([+-]\d+)([+-]\d+)$", fields[1])
            cities.append((degrees(m.group(2), 3), degrees(m.group(1), 2), fields[2]))
    return cities


def write_lonlat(path, points):
    dataset = ogr.GetDriverByName("GPKG").CreateDataSource(path)
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(4326)
    layer = dataset.CreateLayer("sites", srs, ogr.wkbPoint)
    layer.CreateField(ogr.FieldDefn("name", ogr.OFTString))
    for lon, lat, name in points:
        feature = ogr.Feature(layer.GetLayerDefn())
        feature.SetField("name", name)
        feature.SetGeometry(ogr.CreateGeometryFromWkt(f"POINT ({lon!r} {lat!r})"))
        layer.CreateFeature(feature)
    dataset = None


def unit(lon, lat):
    lon, lat = np.radians(lon), np.radians(lat)
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)


def angle(a, b):
    return np.arctan2(np.linalg.norm(np.cross(a, b), axis=-1), np.sum(a * b, axis=-1))


class QtmVoronoiTest(QgisProcessBase):
    def run_qtm(self, parameters):
        return self.qgis(["run", "gpugeo:qtmvoronoi", "--"] + [f"{k}={v}" for k, v in parameters.items()])

    def read_regions(self, path):
        dataset = ogr.Open(path)
        layer = dataset.GetLayer(0)
        regions = [(f.GetField("site_id"), f.GetField("area_km2"), f.GetField("qtm_cells"),
                    f.GetGeometryRef().Clone()) for f in layer]
        return regions

    def test_zones(self):
        cities = zone_cities()
        self.assertGreater(len(cities), 300)
        source = self.path("zones.gpkg")
        write_lonlat(source, cities)
        rc, out = self.run_qtm({"INPUT": source, "LEVEL": 10, "PIXEL_SIZE": 1.0, "DEVICE": 1,
                                "OUTPUT_REGIONS": self.path("regions.gpkg"), "OUTPUT_RASTER": self.path("zones.tif")})
        self.assertEqual(rc, 0, out)
        self.assertTrue(any(line.startswith("Stage times: read") for line in out["log"]["info"]), out["log"])
        regions = self.read_regions(self.path("regions.gpkg"))
        self.assertEqual(len(regions), len(cities))
        total = 0.0
        union = ogr.Geometry(ogr.wkbMultiPolygon)
        planar = 0.0
        for site_id, area, cells, geometry in regions:
            lon, lat, name = cities[site_id - 1]
            self.assertTrue(geometry.IsValid(), f"region of {name} is not valid")
            site = ogr.CreateGeometryFromWkt(f"POINT ({lon!r} {lat!r})")
            self.assertTrue(geometry.Intersects(site), f"region of {name} does not contain it")
            self.assertGreater(cells, 0)
            total += area
            planar += geometry.Area()
            for i in range(geometry.GetGeometryCount()):
                union.AddGeometry(geometry.GetGeometryRef(i))
        # areas sum to the sphere's; in lon/lat the regions tile the 360 x 180 rectangle without overlap
        self.assertAlmostEqual(total / (4 * math.pi * R_KM ** 2), 1.0, delta=1e-9)
        self.assertAlmostEqual(planar, 64800.0, delta=1e-6)
        self.assertAlmostEqual(union.UnionCascaded().Area(), 64800.0, delta=1e-6)

        # The raster's labels against the regions: a pixel centre lies in the region of its label, or
        # within a cell's size of the border (the regions are made of cells, the raster of pixel centres).
        data, transform, nodata, _, _ = read_raster(self.path("zones.tif"))
        self.assertEqual(data.shape, (180, 360))
        self.assertEqual(transform, (-180.0, 1.0, 0.0, 90.0, 0.0, -1.0))
        sites = unit(np.array([c[0] for c in cities]), np.array([c[1] for c in cities]))
        rng = np.random.default_rng(3)
        geometries = {site_id: geometry for site_id, _, _, geometry in regions}
        cell = math.radians(90.0 / 1024) * 2
        for r, c in zip(rng.integers(0, 180, 400), rng.integers(0, 360, 400)):
            lon, lat = -179.5 + c, 89.5 - r
            label = int(data[r, c])
            p = unit(np.array(lon), np.array(lat))
            d = angle(p[None, :], sites)
            self.assertLessEqual(d[label - 1], d.min() + 1e-12, f"pixel {c},{r}: label {label} is not the nearest")
            point = ogr.CreateGeometryFromWkt(f"POINT ({lon} {lat})")
            owner = [s for s, g in geometries.items() if g.Intersects(point)]
            if label not in owner:
                second = min(d[s - 1] for s in owner)
                self.assertLess(second - d[label - 1], cell, f"pixel {c},{r}: label {label}, regions {owner}")

    def test_cells(self):
        points = [(10.0, 50.0, "a"), (-120.0, -30.0, "b"), (179.9, 0.5, "c"), (0.0, 90.0, "pole")]
        source = self.path("few.gpkg")
        write_lonlat(source, points)
        rc, out = self.run_qtm({"INPUT": source, "LEVEL": 4, "DEVICE": 1, "OUTPUT_CELLS": self.path("cells.gpkg")})
        self.assertEqual(rc, 0, out)
        dataset = ogr.Open(self.path("cells.gpkg"))
        layer = dataset.GetLayer(0)
        self.assertEqual(layer.GetFeatureCount(), 8 * 4 ** 4)
        sites = unit(np.array([p[0] for p in points]), np.array([p[1] for p in points]))
        area = 0.0
        for f in layer:
            address = f.GetField("address")
            self.assertRegex(address, r"^[0-7][0-3]{4}$")
            ring = f.GetGeometryRef().GetGeometryRef(0)
            corners = {(round(ring.GetX(i), 9), round(ring.GetY(i), 9)) for i in range(ring.GetPointCount())}
            # the pole cell's two pole points are one corner
            corners = {(0.0 if abs(y) == 90 else x, y) for x, y in corners}
            self.assertEqual(len(corners), 3, address)
            v = unit(np.array([x for x, _ in corners]), np.array([y for _, y in corners])).sum(axis=0)
            centre = v / np.linalg.norm(v)
            d = angle(centre[None, :], sites)
            self.assertLessEqual(d[f.GetField("site_id") - 1], d.min() + 1e-12, address)
            self.assertAlmostEqual(f.GetField("dist_km"), d.min() * R_KM, delta=1e-3, msg=address)
            area += f.GetGeometryRef().Area()
        self.assertAlmostEqual(area, 64800.0, delta=1e-9)

    def test_qtm_bad_input(self):
        source = self.path("one.gpkg")
        write_lonlat(source, [(5.0, 5.0, "x")])
        rc, out = self.run_qtm({"INPUT": source, "LEVEL": 11, "OUTPUT_CELLS": self.path("c.gpkg")})
        self.assertNotEqual(rc, 0)
        self.assertIn("limited to level 10", str(out))
        rc, out = self.run_qtm({"INPUT": source, "LEVEL": 14, "OUTPUT_REGIONS": self.path("r.gpkg")})
        self.assertNotEqual(rc, 0)
        bad = self.path("bad.gpkg")
        write_lonlat(bad, [(5.0, 5.0, "ok"), (5.0, 95.0, "north of the pole")])
        rc, out = self.run_qtm({"INPUT": bad, "LEVEL": 3, "OUTPUT_REGIONS": self.path("r.gpkg")})
        self.assertNotEqual(rc, 0)
        self.assertIn("1 of 2 points", str(out))
        empty = self.path("empty.gpkg")
        write_lonlat(empty, [])
        rc, out = self.run_qtm({"INPUT": empty, "LEVEL": 3, "OUTPUT_REGIONS": self.path("r.gpkg")})
        self.assertNotEqual(rc, 0)
        self.assertIn("no point", str(out))
        same = self.path("same.gpkg")
        write_lonlat(same, [(12.0, -33.0, "s")] * 5)
        rc, out = self.run_qtm({"INPUT": same, "LEVEL": 6, "OUTPUT_REGIONS": self.path("one.gpkg")})
        self.assertEqual(rc, 0, out)
        regions = self.read_regions(self.path("one.gpkg"))
        self.assertEqual(len(regions), 1)
        self.assertEqual(regions[0][0], 1)
        self.assertAlmostEqual(regions[0][1], 4 * math.pi * R_KM ** 2, delta=1e-6)
        self.assertTrue(regions[0][3].IsValid())


if __name__ == "__main__":
    unittest.main()
