#!/usr/bin/python3
"""End-to-end tests of gpugeo:watersheds through qgis_process on the shipped DEM
(tests/data/jacksboro_srtm3.tif), its directions from gpugeo:filldepressions and gpugeo:flowdirection.
Outlets nested along one channel, one in another basin and one repeated: every cell's label is the
first outlet its path meets (a walk down the FLOWDIR raster); each outlet's own and total areas from
the cells' areas; the downstream outlets; the nested polygons' union is the outermost outlet's whole
watershed (GEOS). Outlets in another CRS snapped to the largest upstream area within the distance.
In memory and tile by tile: the same raster and polygons. Bad input: outlets off the raster or on
nodata, named. gpugeo:snappourpoints against the largest area within the distance, and consistent with
the watersheds' own snapping.

usage: test_watersheds.py [unittest arguments, e.g. WatershedsTest.test_watersheds_nested]
"""
import json
import os
import unittest

import numpy as np
from osgeo import gdal, ogr, osr

from test_dem import GEOTRANSFORM, JACKSBORO, cell_sizes, write_geotiff
from test_isochrones import features, receivers
from test_qgis_process import QgisProcessBase, read_raster, write_points

gdal.UseExceptions()
ogr.UseExceptions()


def first_outlets(recv, outlet_cells, n):
    """Per cell: 1 + the index of the first outlet its path meets (the first listed where outlets share a
    cell), 0 for none; and per outlet, a mask of the cells whose path passes through it. All paths are
    walked together, one step a round."""
    at = np.full(n, -1, np.int64)
    for k in reversed(range(len(outlet_cells))):
        at[outlet_cells[k]] = k
    label = np.zeros(n, np.int64)
    through = [np.zeros(n, bool) for _ in outlet_cells]
    current = np.arange(n)
    for _ in range(n):
        on = current >= 0
        here = np.where(on, at[np.maximum(current, 0)], -1)
        first = (label == 0) & (here >= 0)
        label[first] = here[first] + 1
        for k, c in enumerate(outlet_cells):
            through[k] |= current == c
        current = np.where(on, recv[np.maximum(current, 0)], -1)
        if not (current >= 0).any():
            break
    return label, through


class WatershedsTest(QgisProcessBase):
    def setUp(self):
        super().setUp()
        self.directions = self.path("dir.tif")
        filled, area = self.path("filled.tif"), self.path("area.tif")
        for alg, parameters in (("gpugeo:filldepressions", {"INPUT": JACKSBORO, "FLATS": 1, "OUTPUT": filled}),
                                ("gpugeo:flowdirection", {"INPUT": filled, "OUTPUT": self.directions}),
                                ("gpugeo:flowaccumulation", {"INPUT": self.directions, "OUTPUT_CELLS": self.path("c.tif"),
                                                             "OUTPUT_AREA": area})):
            rc, out = self.run_alg(alg, parameters)
            self.assertEqual(rc, 0, out)
        self.codes = read_raster(self.directions)[0]
        self.area = read_raster(area)[0].ravel()  # m²
        self.cells = read_raster(self.path("c.tif"))[0].ravel()
        self.h, self.w = self.codes.shape
        self.recv, _ = receivers(self.codes)
        widths, heights = cell_sizes(self.h)
        self.cell_area = np.repeat(widths * heights, self.w)

    def run_alg(self, alg, parameters):
        return self.qgis(["run", alg, "--"] + [f"{k}={v}" for k, v in parameters.items()])

    def centre(self, cell):
        return (GEOTRANSFORM[0] + (cell % self.w + 0.5) * GEOTRANSFORM[1],
                GEOTRANSFORM[3] + (cell // self.w + 0.5) * GEOTRANSFORM[5])

    def nested_cells(self):
        """A channel cell (5,000 to 8,000 cells upstream), the cells 40 and 120 steps up its largest
        tributary, and the outlet of the largest basin."""
        big = int(np.argmax(np.where((self.cells > 5000) & (self.cells < 8000), self.cells, -1)))
        chain = [big]
        for _ in range(120):  # up: the upstream neighbour of largest area
            c = chain[-1]
            ups = [n for n in np.flatnonzero(self.recv == c)]
            if not ups:
                break
            chain.append(max(ups, key=lambda n: self.area[n]))
        cells = [chain[0], chain[min(40, len(chain) - 1)], chain[-1]]
        other = int(np.argmax(np.where(np.isin(np.arange(self.h * self.w), cells), -1, self.area)))
        return cells + [other]

    def check_polygons(self, path, cells, label):
        rows = features(path)
        self.assertEqual(len(rows), len(cells))
        for k, (item, geometry) in enumerate(rows):
            own = label == k + 1
            self.assertEqual(item["outlet"], k + 1)
            self.assertEqual(item["val"], k)  # the outlet's own attribute
            self.assertEqual(item["cells"], int(own.sum()))
            expected = float(self.cell_area[own].sum()) * 1e-6
            self.assertAlmostEqual(item["area_km2"], expected, delta=1e-9 * max(expected, 1e-9))
            if item["cells"] == 0:
                self.assertTrue(geometry is None or geometry.IsEmpty(), k)
                continue
            self.assertTrue(geometry.IsValid(), k)
        return rows

    def test_watersheds_nested(self):
        cells = self.nested_cells()
        cells = cells + [cells[1]]  # the second outlet again: it takes nothing
        outlets = self.path("outlets.gpkg")
        write_points(outlets, [self.centre(c) for c in cells], epsg=4326)
        paths = {"OUTPUT": self.path("sheds.tif"), "OUTPUT_POLYGONS": self.path("sheds.gpkg")}
        rc, out = self.run_alg("gpugeo:watersheds", dict(paths, INPUT=self.directions, OUTLETS=outlets, SNAP_DISTANCE=0))
        self.assertEqual(rc, 0, out)
        labels, _, nodata, _, data_type = read_raster(paths["OUTPUT"])
        self.assertEqual(data_type, gdal.GDT_Int32)
        self.assertEqual(nodata, 0)
        expected, through = first_outlets(self.recv, cells, self.h * self.w)
        np.testing.assert_array_equal(labels.ravel(), expected)
        rows = self.check_polygons(paths["OUTPUT_POLYGONS"], cells, labels.ravel())
        # Totals: the cells whose path passes through the outlet (r.water.outlet's watershed), and the
        # downstream outlets: 2 into 1 into nothing; 3 into 2.
        for k in range(4):
            total = float(self.cell_area[through[k]].sum()) * 1e-6
            self.assertAlmostEqual(rows[k][0]["total_km2"], total, delta=1e-9 * total)
        self.assertEqual([rows[k][0]["down"] for k in range(4)], [None, 1, 2, None])
        self.assertEqual(rows[4][0]["cells"], 0)
        # The nested polygons' union is the outermost outlet's whole watershed.
        union = ogr.Geometry(ogr.wkbMultiPolygon)
        for k in range(3):
            geometry = rows[k][1]
            for i in range(geometry.GetGeometryCount()):
                union.AddGeometry(geometry.GetGeometryRef(i))
        union = union.UnionCascaded()
        whole = through[0]
        self.assertEqual(int(whole.sum()), rows[0][0]["cells"] + rows[1][0]["cells"] + rows[2][0]["cells"])
        cell_deg2 = GEOTRANSFORM[1] * -GEOTRANSFORM[5]
        self.assertAlmostEqual(union.GetArea(), whole.sum() * cell_deg2, delta=1e-9 * whole.sum() * cell_deg2)
        self.assertEqual(out["results"]["OUTLETS_COUNT"], 5)

        # Tile by tile: the same raster and polygons.
        tiled = {"OUTPUT": self.path("tiled.tif"), "OUTPUT_POLYGONS": self.path("tiled.gpkg")}
        rc, out = self.run_alg("gpugeo:watersheds", dict(tiled, INPUT=self.directions, OUTLETS=outlets, SNAP_DISTANCE=0,
                                                         TILED="true", MEMORY_BUDGET=1))
        self.assertEqual(rc, 0, out)
        self.assertTrue(any(line.startswith("Tile by tile") for line in out["log"]["info"]), out["log"])
        np.testing.assert_array_equal(read_raster(tiled["OUTPUT"])[0], labels)
        mine = features(tiled["OUTPUT_POLYGONS"])
        for (a, ga), (b, gb) in zip(rows, mine):
            self.assertEqual(a, b)
            if a["cells"] > 0:
                self.assertTrue(ga.Equals(gb))

    def test_watersheds_snapped_other_crs(self):
        """Points 2 cells off a channel, given in UTM 16N, snapped within 300 m to the largest upstream
        area (ties to the first in row order)."""
        cells = self.nested_cells()[:2]
        to_utm = osr.CoordinateTransformation(self.srs(4326), self.srs(32616))
        points, expected_cells = [], []
        widths, heights = cell_sizes(self.h)
        yy, xx = np.indices((self.h, self.w))
        for c in cells:
            x0, y0 = c % self.w + 2, c // self.w
            lon, lat = self.centre(y0 * self.w + x0)
            e, n, _ = to_utm.TransformPoint(lat, lon)
            points.append((e, n))
            near = ((xx - x0) * widths[y0]) ** 2 + ((yy - y0) * heights[y0]) ** 2 <= 300.0 ** 2
            expected_cells.append(int(np.argmax(np.where(near.ravel() & (self.codes.ravel() != 255), self.area, -1))))
        outlets = self.path("utm.gpkg")
        write_points(outlets, points, epsg=32616)
        paths = {"OUTPUT": self.path("snap.tif"), "OUTPUT_POLYGONS": self.path("snap.gpkg")}
        rc, out = self.run_alg("gpugeo:watersheds", dict(paths, INPUT=self.directions, OUTLETS=outlets, SNAP_DISTANCE=300))
        self.assertEqual(rc, 0, out)
        labels = read_raster(paths["OUTPUT"])[0].ravel()
        expected, _ = first_outlets(self.recv, expected_cells, self.h * self.w)
        np.testing.assert_array_equal(labels, expected)
        rows = features(paths["OUTPUT_POLYGONS"])
        for (item, _), c in zip(rows, expected_cells):
            self.assertGreater(item["snap_m"], 0.0)
            self.assertLess(item["snap_m"], 300.0)

    def test_snappourpoints(self):
        """gpugeo:snappourpoints on the upstream area: each point at the centre of the cell of largest area
        within 300 m (the reference's), its attributes kept; gpugeo:watersheds on the snapped points with
        no snapping writes what it writes on the points snapped by itself. Points off the raster and on
        nodata named."""
        cells = self.nested_cells()[:2]
        points, expected_cells = [], []
        widths, heights = cell_sizes(self.h)
        yy, xx = np.indices((self.h, self.w))
        for c in cells:
            x0, y0 = c % self.w + 2, c // self.w
            points.append(self.centre(y0 * self.w + x0))
            near = ((xx - x0) * widths[y0]) ** 2 + ((yy - y0) * heights[y0]) ** 2 <= 300.0 ** 2
            expected_cells.append(int(np.argmax(np.where(near.ravel() & (self.codes.ravel() != 255), self.area, -1))))
        given = self.path("given.gpkg")
        write_points(given, points, epsg=4326, field_values=[7, 9])
        snapped = self.path("snapped.gpkg")
        rc, out = self.run_alg("gpugeo:snappourpoints", {"INPUT": given, "ACCUMULATION": self.path("area.tif"),
                                                         "SNAP_DISTANCE": 300, "OUTPUT": snapped})
        self.assertEqual(rc, 0, out)
        rows = features(snapped)
        self.assertEqual([item["val"] for item, _ in rows], [7, 9])
        for (item, geometry), c in zip(rows, expected_cells):
            self.assertEqual((item["column"], item["row"]), (c % self.w, c // self.w))
            self.assertEqual(item["upstream"], float(self.area[c]))
            x, y = self.centre(c)
            self.assertAlmostEqual(geometry.GetX(), x, delta=1e-12)
            self.assertAlmostEqual(geometry.GetY(), y, delta=1e-12)
        self.assertEqual(out["results"]["MOVED"], sum(1 for (item, _) in rows if item["snap_m"] > 0))
        a, b = self.path("a.tif"), self.path("b.tif")
        rc, _ = self.run_alg("gpugeo:watersheds", {"INPUT": self.directions, "OUTLETS": given, "SNAP_DISTANCE": 300,
                                                   "OUTPUT": a})
        self.assertEqual(rc, 0)
        rc, _ = self.run_alg("gpugeo:watersheds", {"INPUT": self.directions, "OUTLETS": snapped, "SNAP_DISTANCE": 0,
                                                   "OUTPUT": b})
        self.assertEqual(rc, 0)
        np.testing.assert_array_equal(read_raster(a)[0], read_raster(b)[0])

        far = self.path("far.gpkg")
        write_points(far, [(10.0, 50.0)], epsg=4326)
        holes = self.area.reshape(self.h, self.w).copy()
        holes[100:110, 100:110] = -1
        with_holes = self.path("area_holes.tif")
        write_geotiff(with_holes, holes, gdal.GDT_Float64, nodata=-1)
        on_nodata = self.path("on_nodata.gpkg")
        write_points(on_nodata, [self.centre(105 * self.w + 105)], epsg=4326)
        for parameters, words in (
                ({"INPUT": far, "ACCUMULATION": self.path("area.tif")}, "1 point(s) of INPUT lie outside"),
                ({"INPUT": on_nodata, "ACCUMULATION": with_holes, "SNAP_DISTANCE": 100},
                 "1 pour point(s) lie on nodata with no valid cell within SNAP_DISTANCE (100 m): INPUT feature 1")):
            target = self.path("bad_snapped.gpkg")
            rc, out = self.run_alg("gpugeo:snappourpoints", dict(parameters, OUTPUT=target))
            text = out if isinstance(out, str) else json.dumps(out)
            self.assertNotEqual(rc, 0, text)
            self.assertIn(words, text)
            self.assertFalse(os.path.exists(target))

    def srs(self, epsg):
        s = osr.SpatialReference()
        s.ImportFromEPSG(epsg)
        return s

    def test_watersheds_bad_input(self):
        far = self.path("far.gpkg")
        write_points(far, [(10.0, 50.0), self.centre(1000)], epsg=4326)
        holes = self.codes.copy()
        holes[100:110, 100:110] = 255
        with_holes = self.path("holes.tif")
        write_geotiff(with_holes, holes, gdal.GDT_Byte, nodata=255)
        on_nodata = self.path("on_nodata.gpkg")
        write_points(on_nodata, [self.centre(105 * self.w + 105)], epsg=4326)
        empty = self.path("empty.gpkg")
        write_points(empty, [], epsg=4326)
        cases = [
            ({"INPUT": self.directions, "OUTLETS": far}, "1 point(s) of OUTLETS lie outside the flow direction raster"),
            ({"INPUT": with_holes, "OUTLETS": on_nodata, "SNAP_DISTANCE": 0}, "lie on nodata cells"),
            ({"INPUT": with_holes, "OUTLETS": on_nodata, "SNAP_DISTANCE": 100}, "no valid cell within SNAP_DISTANCE"),
            ({"INPUT": self.directions, "OUTLETS": empty}, "has no point"),
            ({"INPUT": self.directions, "OUTLETS": on_nodata, "SNAP_DISTANCE": -1}, "SNAP_DISTANCE"),
        ]
        for parameters, words in cases:
            paths = {"OUTPUT": self.path("bad.tif"), "OUTPUT_POLYGONS": self.path("bad.gpkg")}
            rc, out = self.run_alg("gpugeo:watersheds", dict(paths, **parameters))
            text = out if isinstance(out, str) else json.dumps(out)
            self.assertNotEqual(rc, 0, f"{parameters}: {text}")
            self.assertIn(words, text, parameters)
            for path in paths.values():
                self.assertFalse(os.path.exists(path), (parameters, path))
        # The nodata outlet with the snapping reaching valid cells: fine.
        rc, out = self.run_alg("gpugeo:watersheds", {"INPUT": with_holes, "OUTLETS": on_nodata, "SNAP_DISTANCE": 1000,
                                                     "OUTPUT": self.path("ok.tif")})
        self.assertEqual(rc, 0, out)


if __name__ == "__main__":
    unittest.main()
