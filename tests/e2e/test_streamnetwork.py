#!/usr/bin/python3
"""End-to-end tests of gpugeo:streamnetwork through qgis_process on the shipped DEM
(tests/data/jacksboro_srtm3.tif), filled by gpugeo:filldepressions, its directions from
gpugeo:flowdirection and its upstream cells and areas from gpugeo:flowaccumulation. The network is
rebuilt here cell by cell in numpy and plain Python (stream cells by the threshold, inflows, segment
starts numbered in row order, each segment walked down, orders by a recursion over the segments), and
every output checked against it: the segment and order rasters cell for cell, each line's vertices (the
cells' centres), id, downstream id, orders, cells, upstream cells and area, length (a float64 sum of the
steps) and drop. The threshold by area gives the stream cells whose area reaches it; tile by tile gives
the same bits and the same lines; a threshold above every area gives empty outputs and a warning;
directions on another grid are refused. gpugeo:subbasins on the network's segments: every cell's label
against a walk to its first stream cell, one valid polygon per segment with its cells and area, tile by
tile the same; segments that are not chains, ids that are not whole numbers refused; no segment, empty.
The shipped dem_stream_network.model3 (fill, directions, accumulation, stream network, subbasins,
watersheds of a gauge) gives what the steps run one by one give.

usage: test_streamnetwork.py [unittest arguments, e.g. StreamNetworkTest.test_streamnetwork_reference]
"""
import os
import unittest

import numpy as np
from osgeo import gdal, ogr

from test_dem import GEOTRANSFORM, HERE, JACKSBORO, cell_sizes, write_geotiff
from test_isochrones import receivers
from test_qgis_process import QgisProcessBase, read_raster

gdal.UseExceptions()
ogr.UseExceptions()

THRESHOLD_CELLS = 40


def reference_network(recv, index, cells, z, widths, heights, w, threshold):
    """The network as streams.h defines it: per cell its segment (0 off the streams) and per segment
    (a dict by id) its cells in order, downstream id, orders, length, drop, upstream cells."""
    n = recv.size
    stream = cells.ravel() >= threshold
    down_cell = np.where(stream & (recv >= 0), recv, -1)
    down_cell = np.where(down_cell >= 0, np.where(stream[np.maximum(down_cell, 0)], down_cell, -1), -1)
    inflow = np.bincount(down_cell[down_cell >= 0], minlength=n)
    starts = np.flatnonzero(stream & (inflow != 1))
    segment = np.zeros(n, np.int64)
    segment[starts] = np.arange(1, starts.size + 1)
    rows = np.arange(n) // w
    step = np.where(index % 2 == 1, np.hypot(widths[rows], heights[rows]),
                    np.where(index % 4 == 2, heights[rows], widths[rows]))
    segments = {}
    for k, first in enumerate(starts, start=1):
        line, c, length = [int(first)], int(first), 0.0
        while True:
            d = int(down_cell[c])
            if d < 0:
                down, end = 0, c
                break
            length += step[c]
            if inflow[d] != 1:
                down, end = int(segment[d]), d
                break
            segment[d] = k
            line.append(d)
            c = d
        segments[k] = {"cells": line, "down": down, "length": length,
                       "drop": float(z[first]) - float(z[end]), "up_cells": int(cells.ravel()[line[-1]])}
    # Orders over the segments, upstream first.
    ups = {k: [] for k in segments}
    for k, s in segments.items():
        if s["down"]:
            ups[s["down"]].append(k)

    def order(k):
        s = segments[k]
        if "strahler" in s:
            return
        for u in ups[k]:
            order(u)
        if not ups[k]:
            s["strahler"], s["shreve"] = 1, 1
        else:
            top = max(segments[u]["strahler"] for u in ups[k])
            s["strahler"] = top + (sum(segments[u]["strahler"] == top for u in ups[k]) >= 2)
            s["shreve"] = sum(segments[u]["shreve"] for u in ups[k])

    import sys
    sys.setrecursionlimit(100000)
    for k in segments:
        order(k)
    return segment, segments


def read_lines(path):
    dataset = ogr.Open(path)
    layer = dataset.GetLayer(0)
    lines = {}
    for feature in layer:
        lines[feature.GetField("id")] = {
            "down": feature.GetField("down_id"), "strahler": feature.GetField("strahler"),
            "shreve": feature.GetField("shreve"), "length": feature.GetField("length_m"),
            "drop": feature.GetField("drop_m"), "slope": feature.GetField("slope"),
            "up_km2": feature.GetField("up_km2"), "up_cells": feature.GetField("up_cells"),
            "cells": feature.GetField("cells"), "points": feature.GetGeometryRef().GetPoints()}
    return lines


class StreamNetworkTest(QgisProcessBase):
    def setUp(self):
        super().setUp()
        self.filled, self.directions = self.path("filled.tif"), self.path("dir.tif")
        self.cells, self.area = self.path("cells.tif"), self.path("area.tif")
        for alg, parameters in (("gpugeo:filldepressions", {"INPUT": JACKSBORO, "FLATS": 1, "OUTPUT": self.filled}),
                                ("gpugeo:flowdirection", {"INPUT": self.filled, "OUTPUT": self.directions}),
                                ("gpugeo:flowaccumulation", {"INPUT": self.directions, "OUTPUT_CELLS": self.cells,
                                                             "OUTPUT_AREA": self.area})):
            rc, out = self.run_alg(alg, parameters)
            self.assertEqual(rc, 0, out)

    def run_alg(self, alg, parameters):
        return self.qgis(["run", alg, "--"] + [f"{k}={v}" for k, v in parameters.items()])

    def run_network(self, prefix, **extra):
        paths = {"OUTPUT": self.path(prefix + "_segments.tif"), "OUTPUT_ORDER": self.path(prefix + "_order.tif"),
                 "OUTPUT_LINES": self.path(prefix + "_lines.gpkg")}
        parameters = dict(paths, INPUT=self.filled, DIRECTIONS=self.directions)
        parameters.update(extra)
        rc, out = self.run_alg("gpugeo:streamnetwork", parameters)
        self.assertEqual(rc, 0, out)
        return paths, out

    def test_streamnetwork_reference(self):
        paths, out = self.run_network("mem", THRESHOLD=THRESHOLD_CELLS, THRESHOLD_UNITS=2)
        segments, gt, nodata, _, data_type = read_raster(paths["OUTPUT"])
        self.assertEqual(data_type, gdal.GDT_Int32)
        self.assertEqual(nodata, 0)
        self.assertTrue(all(abs(a - b) < 1e-12 for a, b in zip(gt, GEOTRANSFORM)))
        codes = read_raster(self.directions)[0]
        cells = read_raster(self.cells)[0].astype(np.int64)
        cells[cells < 0] = 0
        z = read_raster(self.filled)[0].astype(np.float32).ravel()
        recv, index = receivers(codes)
        h, w = codes.shape
        widths, heights = cell_sizes(h)
        want_segment, want = reference_network(recv, index, cells, z, widths, heights, w, THRESHOLD_CELLS)
        self.assertGreater(len(want), 100)
        np.testing.assert_array_equal(segments.ravel(), want_segment)

        orders, _, order_nodata, _, order_type = read_raster(paths["OUTPUT_ORDER"])
        self.assertEqual((order_type, order_nodata), (gdal.GDT_Byte, 0))
        strahler = np.zeros(len(want) + 1, np.int64)
        for k, s in want.items():
            strahler[k] = s["strahler"]
        np.testing.assert_array_equal(orders.ravel(), strahler[want_segment])
        self.assertGreaterEqual(strahler.max(), 3)

        lines = read_lines(paths["OUTPUT_LINES"])
        self.assertEqual(sorted(lines), sorted(want))
        for k, s in want.items():
            got = lines[k]
            self.assertEqual(got["down"], s["down"] or None, k)
            self.assertEqual((got["strahler"], got["shreve"]), (s["strahler"], s["shreve"]), k)
            self.assertEqual((got["cells"], got["up_cells"]), (len(s["cells"]), s["up_cells"]), k)
            self.assertAlmostEqual(got["length"], s["length"], delta=1e-9 * max(1.0, s["length"]))
            self.assertAlmostEqual(got["drop"], s["drop"], delta=1e-9)
            if s["length"] > 0:
                self.assertAlmostEqual(got["slope"], s["drop"] / s["length"], delta=1e-12)
            vertices = s["cells"] + ([want[s["down"]]["cells"][0]] if s["down"] else [])
            if len(vertices) == 1:
                vertices = vertices * 2
            expected = [(GEOTRANSFORM[0] + (c % w + 0.5) * GEOTRANSFORM[1], GEOTRANSFORM[3] + (c // w + 0.5) * GEOTRANSFORM[5])
                        for c in vertices]
            np.testing.assert_allclose(np.array(got["points"])[:, :2], expected, rtol=0, atol=1e-9)
        area = read_raster(self.area)[0]
        for k in list(want)[:50]:
            self.assertAlmostEqual(lines[k]["up_km2"], area.ravel()[want[k]["cells"][-1]] * 1e-6, delta=1e-9)
        results = out["results"]
        self.assertEqual(results["SEGMENTS"], len(want))
        self.assertEqual(results["STREAM_CELLS"], int((want_segment > 0).sum()))
        self.assertEqual(results["OUTLETS"], sum(1 for s in want.values() if not s["down"]))
        self.assertEqual(results["MAX_STRAHLER"], int(strahler.max()))

        # Tile by tile: the same rasters and lines.
        tiled, out = self.run_network("tiled", THRESHOLD=THRESHOLD_CELLS, THRESHOLD_UNITS=2, TILED="true",
                                      MEMORY_BUDGET=2)
        self.assertTrue(any(line.startswith("Tile by tile") for line in out["log"]["info"]), out["log"])
        for key in ("OUTPUT", "OUTPUT_ORDER"):
            self.assertEqual(read_raster(paths[key])[0].tobytes(), read_raster(tiled[key])[0].tobytes(), key)
        self.assertEqual(read_lines(tiled["OUTPUT_LINES"]), lines)

    def test_streamnetwork_area(self):
        paths, out = self.run_network("km2", THRESHOLD=0.5, THRESHOLD_UNITS=0)
        area = read_raster(self.area)[0]
        segments = read_raster(paths["OUTPUT"])[0]
        # The areas are sums of 1e-6 m² units; none of the DEM's lies within a unit of the threshold.
        self.assertFalse(np.any(np.abs(area - 5e5) < 1e-3))
        np.testing.assert_array_equal(segments > 0, area >= 5e5)
        self.assertEqual(out["results"]["STREAM_CELLS"], int((area >= 5e5).sum()))

    def test_streamnetwork_no_stream(self):
        paths, out = self.run_network("none", THRESHOLD=1e6, THRESHOLD_UNITS=0)
        self.assertEqual(out["results"]["SEGMENTS"], 0)
        self.assertTrue(any("no stream" in line for line in out["log"]["warning"]), out["log"])
        segments = read_raster(paths["OUTPUT"])[0]
        self.assertFalse(segments.any())
        self.assertEqual(read_lines(paths["OUTPUT_LINES"]), {})

    def test_streamnetwork_bad_input(self):
        codes = read_raster(self.directions)[0]
        other = self.path("other.tif")
        write_geotiff(other, codes[:-3, :], gdal.GDT_Byte, nodata=255)
        rc, out = self.run_alg("gpugeo:streamnetwork", {"INPUT": self.filled, "DIRECTIONS": other,
                                                        "OUTPUT": self.path("bad.tif")})
        self.assertNotEqual(rc, 0)
        self.assertIn("DIRECTIONS", str(out))

    # --- gpugeo:subbasins on the network's segments.

    def run_subbasins(self, prefix, streams, **extra):
        paths = {"OUTPUT": self.path(prefix + "_basins.tif"), "OUTPUT_POLYGONS": self.path(prefix + "_basins.gpkg")}
        parameters = dict(paths, INPUT=self.directions, STREAMS=streams)
        parameters.update(extra)
        return paths, self.run_alg("gpugeo:subbasins", parameters)

    def test_subbasins_walks(self):
        network, out = self.run_network("net", THRESHOLD=THRESHOLD_CELLS, THRESHOLD_UNITS=2)
        segments = read_raster(network["OUTPUT"])[0].ravel().astype(np.int64)
        paths, (rc, out) = self.run_subbasins("mem", network["OUTPUT"])
        self.assertEqual(rc, 0, out)
        codes = read_raster(self.directions)[0]
        recv, _ = receivers(codes)
        # Every cell walked down to its first stream cell, all together, one step a round.
        want = np.zeros(recv.size, np.int64)
        current = np.where(codes.ravel() != 255, np.arange(recv.size), -1)
        while (current >= 0).any():
            on = current >= 0
            c = np.maximum(current, 0)
            found = on & (segments[c] > 0)
            want[found] = segments[c[found]]
            current = np.where(on & ~found, recv[c], -1)
        labels, _, nodata, _, data_type = read_raster(paths["OUTPUT"])
        self.assertEqual((data_type, nodata), (gdal.GDT_Int32, 0))
        np.testing.assert_array_equal(labels.ravel(), want)
        results = out["results"]
        self.assertEqual(results["SUBBASINS"], int(segments.max()))
        self.assertEqual(results["LABELLED_CELLS"], int((want > 0).sum()))

        # One valid polygon per segment, its cells and area (degrees here) those of its label.
        lines = read_lines(network["OUTPUT_LINES"])
        dataset = ogr.Open(paths["OUTPUT_POLYGONS"])
        features = list(dataset.GetLayer(0))
        self.assertEqual(len(features), len(lines))
        counts = np.bincount(want, minlength=len(lines) + 1)
        cell_area = GEOTRANSFORM[1] * -GEOTRANSFORM[5]
        for feature in features:
            k = feature.GetField("id")
            self.assertEqual(feature.GetField("down_id"), lines[k]["down"], k)
            self.assertEqual(feature.GetField("cells"), counts[k], k)
            geometry = feature.GetGeometryRef()
            self.assertTrue(geometry.IsValid(), k)
            self.assertAlmostEqual(geometry.GetArea(), counts[k] * cell_area, delta=1e-12)
        del dataset

        # Tile by tile: the same labels and polygons.
        tiled, (rc, out) = self.run_subbasins("tiled", network["OUTPUT"], TILED="true", MEMORY_BUDGET=1)
        self.assertEqual(rc, 0, out)
        self.assertTrue(any(line.startswith("Tile by tile") for line in out["log"]["info"]), out["log"])
        self.assertEqual(read_raster(tiled["OUTPUT"])[0].tobytes(), labels.tobytes())
        a, b = ogr.Open(paths["OUTPUT_POLYGONS"]), ogr.Open(tiled["OUTPUT_POLYGONS"])
        self.assertEqual(a.GetLayer(0).GetFeatureCount(), len(lines))
        self.assertEqual(b.GetLayer(0).GetFeatureCount(), len(lines))
        for fa, fb in zip(a.GetLayer(0), b.GetLayer(0)):
            self.assertEqual(fa.items(), fb.items())
            self.assertTrue(fa.GetGeometryRef().Equals(fb.GetGeometryRef()))

    def test_subbasins_bad_input(self):
        codes = read_raster(self.directions)[0]
        # A segment in two places: two exits.
        twice = np.zeros(codes.shape, np.int32)
        twice[10, 10] = twice[200, 200] = 5
        path = self.path("twice.tif")
        write_geotiff(path, twice, gdal.GDT_Int32, nodata=0)
        _, (rc, out) = self.run_subbasins("twice", path)
        self.assertNotEqual(rc, 0)
        self.assertIn("segment 5 leaves its cells at two places", str(out))
        # Not a whole number.
        fraction = np.zeros(codes.shape, np.float32)
        fraction[3, 4] = 2.5
        path = self.path("fraction.tif")
        write_geotiff(path, fraction, gdal.GDT_Float32)
        _, (rc, out) = self.run_subbasins("fraction", path)
        self.assertNotEqual(rc, 0)
        self.assertIn("STREAMS holds 2.5 at column 4, row 3", str(out))
        # No segment: empty outputs, a warning.
        path = self.path("none.tif")
        write_geotiff(path, np.zeros(codes.shape, np.int32), gdal.GDT_Int32)
        paths, (rc, out) = self.run_subbasins("none", path)
        self.assertEqual(rc, 0, out)
        self.assertEqual(out["results"]["SUBBASINS"], 0)
        self.assertTrue(any("no segment" in line for line in out["log"]["warning"]), out["log"])
        self.assertFalse(read_raster(paths["OUTPUT"])[0].any())

    # --- The shipped model: fill, directions, accumulation, stream network, subbasins, watersheds.

    def test_stream_model(self):
        outlets = self.path("gauge.gpkg")
        driver = ogr.GetDriverByName("GPKG")
        dataset = driver.CreateDataSource(outlets)
        srs = ogr.osr.SpatialReference()
        srs.ImportFromEPSG(4326)
        layer = dataset.CreateLayer("gauges", srs, ogr.wkbPoint)
        feature = ogr.Feature(layer.GetLayerDefn())
        x, y = GEOTRANSFORM[0] + 200.5 * GEOTRANSFORM[1], GEOTRANSFORM[3] + 170.5 * GEOTRANSFORM[5]
        feature.SetGeometry(ogr.CreateGeometryFromWkt(f"POINT ({x} {y})"))
        layer.CreateFeature(feature)
        del feature, layer, dataset
        out_paths = {"streams:segments": self.path("model_segments.tif"),
                     "streams:lines": self.path("model_lines.gpkg"),
                     "subbasins:subbasins": self.path("model_subbasins.tif"),
                     "subbasins:subbasin_polygons": self.path("model_subbasins.gpkg"),
                     "watersheds:watersheds": self.path("model_watersheds.gpkg"),
                     "accumulation:area": self.path("model_area.tif")}
        rc, out = self.qgis(["run", os.path.join(HERE, "dem_stream_network.model3"), "--", f"dem={JACKSBORO}",
                             "threshold=0.5", f"outlets={outlets}", "snap=300"] +
                            [f"{k}={v}" for k, v in out_paths.items()])
        self.assertEqual(rc, 0, out)
        self.assertTrue(any("Model processed OK" in line for line in out["log"]["info"]), out["log"])
        # The same chain step by step.
        filled, directions = self.path("m_filled.tif"), self.path("m_dir.tif")
        for alg, parameters in (("gpugeo:filldepressions", {"INPUT": JACKSBORO, "FLATS": 0, "OUTPUT": filled}),
                                ("gpugeo:flowdirection", {"INPUT": filled, "OUTPUT": directions})):
            rc, step = self.run_alg(alg, parameters)
            self.assertEqual(rc, 0, step)
        segments, lines = self.path("m_segments.tif"), self.path("m_lines.gpkg")
        rc, step = self.run_alg("gpugeo:streamnetwork", {"INPUT": filled, "DIRECTIONS": directions, "THRESHOLD": 0.5,
                                                          "OUTPUT": segments, "OUTPUT_LINES": lines})
        self.assertEqual(rc, 0, step)
        basins = self.path("m_basins.tif")
        rc, step = self.run_alg("gpugeo:subbasins", {"INPUT": directions, "STREAMS": segments, "OUTPUT": basins,
                                                      "OUTPUT_POLYGONS": self.path("m_basins.gpkg")})
        self.assertEqual(rc, 0, step)
        np.testing.assert_array_equal(read_raster(out_paths["streams:segments"])[0], read_raster(segments)[0])
        np.testing.assert_array_equal(read_raster(out_paths["subbasins:subbasins"])[0], read_raster(basins)[0])
        self.assertEqual(read_lines(out_paths["streams:lines"]), read_lines(lines))
        self.assertGreater(len(read_lines(lines)), 10)
        dataset = ogr.Open(out_paths["watersheds:watersheds"])
        self.assertEqual(dataset.GetLayer(0).GetFeatureCount(), 1)
        del dataset


if __name__ == "__main__":
    unittest.main()
