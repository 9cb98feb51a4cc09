#!/usr/bin/python3
"""End-to-end tests of gpugeo:hand through qgis_process on the shipped DEM (tests/data/jacksboro_srtm3.tif):
filled by gpugeo:filldepressions, its directions and upstream areas from gpugeo:flowdirection and
gpugeo:flowaccumulation, streams where the area passes 1 km² (a block of them made nodata, which is no
stream). Every cell's height and distance against a walk down its path in float64 (the heights exactly,
the distances to float32's rounding); tile by tile the same bits; no stream cell (nodata outputs and a
warning); a stream raster on another grid refused.

usage: test_hand.py [unittest arguments, e.g. HandTest.test_hand_walks]
"""
import json
import os
import unittest

import numpy as np
from osgeo import gdal

from test_dem import GEOTRANSFORM, JACKSBORO, cell_sizes, write_geotiff
from test_isochrones import receivers
from test_qgis_process import QgisProcessBase, read_raster

gdal.UseExceptions()

NODATA = -9999.0


def walk_to_streams(recv, index, stream, z, widths, heights, w):
    """Per cell: the height above and the distance (float64) to the first stream cell down its path,
    NaN where the path ends without one; all paths walked together, one step a round."""
    n = recv.size
    rows = np.arange(n) // w
    step = np.where(index % 2 == 1, np.hypot(widths[rows], heights[rows]),
                    np.where(index % 4 == 2, heights[rows], widths[rows]))
    valid = ~np.isnan(z) & (index >= 0)
    current = np.where(valid, np.arange(n), -1)
    length = np.zeros(n)
    height = np.full(n, np.nan)
    distance = np.full(n, np.nan)
    for _ in range(n):
        on = current >= 0
        if not on.any():
            break
        c = np.maximum(current, 0)
        found = on & stream[c]
        height[found] = z[found].astype(np.float64) - z[c[found]].astype(np.float64)
        distance[found] = length[found]
        walking = on & ~found
        length[walking] += step[c[walking]]
        after = recv[c]
        after = np.where(walking & (after >= 0), after, -1)
        current = np.where(after >= 0, np.where(valid[np.maximum(after, 0)], after, -1), -1)
    return height, distance


class HandTest(QgisProcessBase):
    def setUp(self):
        super().setUp()
        self.filled, self.directions = self.path("filled.tif"), self.path("dir.tif")
        area = self.path("area.tif")
        for alg, parameters in (("gpugeo:filldepressions", {"INPUT": JACKSBORO, "FLATS": 1, "OUTPUT": self.filled}),
                                ("gpugeo:flowdirection", {"INPUT": self.filled, "OUTPUT": self.directions}),
                                ("gpugeo:flowaccumulation", {"INPUT": self.directions, "OUTPUT_CELLS": self.path("c.tif"),
                                                             "OUTPUT_AREA": area})):
            rc, out = self.run_alg(alg, parameters)
            self.assertEqual(rc, 0, out)
        streams = (read_raster(area)[0] > 1e6).astype(np.uint8)
        streams[150:165, 150:165] = 255  # nodata: no stream
        self.streams = self.path("streams.tif")
        write_geotiff(self.streams, streams, gdal.GDT_Byte, nodata=255)
        self.stream_mask = (streams == 1).ravel()

    def run_alg(self, alg, parameters):
        return self.qgis(["run", alg, "--"] + [f"{k}={v}" for k, v in parameters.items()])

    def run_hand(self, prefix, **extra):
        paths = {"OUTPUT": self.path(prefix + "_hand.tif"), "OUTPUT_DISTANCE": self.path(prefix + "_dist.tif")}
        rc, out = self.run_alg("gpugeo:hand", dict(paths, INPUT=self.filled, DIRECTIONS=self.directions,
                                                   STREAMS=self.streams, **extra))
        self.assertEqual(rc, 0, out)
        return paths, out

    def test_hand_walks(self):
        paths, out = self.run_hand("mem")
        hand, gt, nodata, _, data_type = read_raster(paths["OUTPUT"])
        dist = read_raster(paths["OUTPUT_DISTANCE"])[0]
        self.assertEqual(data_type, gdal.GDT_Float32)
        self.assertEqual(nodata, NODATA)
        self.assertTrue(all(abs(a - b) < 1e-12 for a, b in zip(gt, GEOTRANSFORM)))
        z = read_raster(self.filled)[0].astype(np.float32).ravel()
        z_nodata = read_raster(self.filled)[2]
        if z_nodata is not None:
            z[z == np.float32(z_nodata)] = np.nan
        codes = read_raster(self.directions)[0]
        recv, index = receivers(codes)
        h, w = codes.shape
        widths, heights = cell_sizes(h)
        want_h, want_d = walk_to_streams(recv, index, self.stream_mask, z, widths, heights, w)
        got_h, got_d = hand.ravel().astype(np.float64), dist.ravel().astype(np.float64)
        reached = ~np.isnan(want_h)
        self.assertGreater(reached.sum(), 0.5 * reached.size)
        np.testing.assert_array_equal(got_h[~reached], NODATA)
        np.testing.assert_array_equal(got_d[~reached], NODATA)
        np.testing.assert_array_equal(got_h[reached], want_h[reached].astype(np.float32).astype(np.float64))
        np.testing.assert_allclose(got_d[reached], want_d[reached], rtol=2e-7, atol=0)
        np.testing.assert_array_equal(got_h[self.stream_mask], 0)
        results = out["results"]
        self.assertEqual(results["STREAM_CELLS"], int(self.stream_mask[~np.isnan(z)].sum()))
        self.assertEqual(results["DRAINED_CELLS"], int(reached.sum()))
        self.assertEqual(results["DRAINED_CELLS"] + results["UNDRAINED_CELLS"], int((~np.isnan(z) & (codes.ravel() != 255)).sum()))

        # Tile by tile: the same bits.
        tiled, out = self.run_hand("tiled", TILED="true", MEMORY_BUDGET=1)
        self.assertTrue(any(line.startswith("Tile by tile") for line in out["log"]["info"]), out["log"])
        for key in ("OUTPUT", "OUTPUT_DISTANCE"):
            a, b = read_raster(paths[key])[0], read_raster(tiled[key])[0]
            self.assertEqual(a.tobytes(), b.tobytes(), key)
        self.assertEqual(out["results"]["DRAINED_CELLS"], results["DRAINED_CELLS"])

    def test_hand_no_stream(self):
        none = self.path("none.tif")
        write_geotiff(none, np.zeros((344, 403), np.uint8), gdal.GDT_Byte)
        self.streams = none
        paths, out = self.run_hand("none")
        self.assertTrue(any("no stream cell" in line for line in out["log"]["warning"]), out["log"])
        self.assertTrue((read_raster(paths["OUTPUT"])[0] == NODATA).all())
        self.assertEqual(out["results"]["STREAM_CELLS"], 0)
        self.assertEqual(out["results"]["DRAINED_CELLS"], 0)

    def test_hand_bad_input(self):
        other = self.path("other.tif")
        write_geotiff(other, np.ones((300, 403), np.uint8), gdal.GDT_Byte)
        target = self.path("bad.tif")
        rc, out = self.run_alg("gpugeo:hand", {"INPUT": self.filled, "DIRECTIONS": self.directions, "STREAMS": other,
                                               "OUTPUT": target})
        text = out if isinstance(out, str) else json.dumps(out)
        self.assertNotEqual(rc, 0, text)
        self.assertIn("The STREAMS raster must have the DEM's grid", text)
        self.assertFalse(os.path.exists(target))


if __name__ == "__main__":
    unittest.main()
