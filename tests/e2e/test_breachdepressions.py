#!/usr/bin/python3
"""End-to-end tests of gpugeo:breachdepressions through qgis_process on the shipped DEM
(tests/data/jacksboro_srtm3.tif, with a block of nodata). The channels (breach.h's steps 1 to 4) are
cut again here in Python from the definition; the rest (the fill and the flats) is gpugeo:filldepressions
with FLATS=1 on that cut, so the breached DEM must equal it bit for bit. Also: the change raster, the
counts and volumes, every cell draining, the tiled run the same bits, the limits, bad limits refused.

usage: test_breachdepressions.py [unittest arguments, e.g. BreachTest.test_breach_reference]
"""
import heapq
import json
import os
import unittest

import numpy as np
from osgeo import gdal

from test_dem import JACKSBORO, cell_sizes, write_geotiff
from test_qgis_process import QgisProcessBase, read_raster

gdal.UseExceptions()

DX = [1, 1, 0, -1, -1, -1, 0, 1]
DY = [0, 1, 1, 1, 0, -1, -1, -1]


def neighbours(z):
    """The eight neighbours' values of every cell (NaN off the grid), as an 8 x h x w array."""
    p = np.pad(z, 1, constant_values=np.nan)
    h, w = z.shape
    return np.stack([p[1 + dy:1 + dy + h, 1 + dx:1 + dx + w] for dx, dy in zip(DX, DY)])


def edge_cells(z):
    return ~np.isnan(z) & np.isnan(neighbours(z)).any(axis=0)


def lower_by_steps(x, steps):
    x = np.float32(x)
    for _ in range(steps):
        x = np.nextafter(x, np.float32(-np.inf), dtype=np.float32)
    return x


def cut_channels(z, max_length, max_depth):
    """breach.h's steps 1 to 4 on float32 elevations (NaN nodata): the cut DEM and the counts."""
    h, w = z.shape
    edge = edge_cells(z)
    with np.errstate(invalid="ignore"):
        lowest = np.nanmin(np.where(np.isnan(neighbours(z)), np.inf, neighbours(z)), axis=0)
        pit = ~np.isnan(z) & ~edge & (z < lowest)
    raised = np.where(pit, lowest, z).astype(np.float32)
    raised[raised == 0] = np.float32(0.0)
    r = raised.ravel().tolist()
    e = edge.ravel().tolist()
    nan = [v != v for v in r]

    def around(c):
        x, y = c % w, c // w
        for dx, dy in zip(DX, DY):
            nx, ny = x + dx, y + dy
            if 0 <= nx < w and 0 <= ny < h:
                yield ny * w + nx

    # The bottoms: sets of equal elevation, no edge cell, no lower neighbour.
    seen = [False] * (w * h)
    bottoms = []
    for start in range(w * h):
        if seen[start] or nan[start]:
            continue
        level, cells, bottom = r[start], [start], True
        seen[start] = True
        i = 0
        while i < len(cells):
            c = cells[i]
            i += 1
            bottom = bottom and not e[c]
            for n in around(c):
                if r[n] < level:
                    bottom = False
                elif r[n] == level and not seen[n]:
                    seen[n] = True
                    cells.append(n)
        if bottom:
            bottoms.append((level, cells))

    # Each bottom's channel: the least-cost path of at most max_length cells (then the fewest cells, the
    # lowest end cell, the lowest cell it came from), by Dijkstra's search over (cell, steps); merged by
    # the minimum.
    cut = list(r)
    breached = 0
    for level, cells in bottoms:
        fewest = {c: 0 for c in cells}
        states = [(0.0, 0, c, -1, -1) for c in cells]  # cost, steps, cell, from, parent state
        heap = [(0.0, 0, c, -1, k) for k, c in enumerate(cells)]
        heapq.heapify(heap)
        while heap:
            cost, steps, cell, _, k = heapq.heappop(heap)
            if steps > 0:
                if fewest.get(cell, max_length + 1) <= steps:
                    continue
                fewest[cell] = steps
                if e[cell] or r[cell] < level:
                    path = []
                    while states[k][1] > 0:
                        path.append(states[k][2])
                        k = states[k][4]
                    path.reverse()
                    for i, c in enumerate(path):
                        cut[c] = min(cut[c], float(lower_by_steps(level, i + 1)))
                    breached += 1
                    break
            if steps >= max_length:
                continue
            for x in around(cell):
                if nan[x] or fewest.get(x, max_length + 1) <= steps + 1:
                    continue
                above = float(r[x]) - float(level)
                if not above <= max_depth:
                    continue
                states.append((cost + max(0.0, above), steps + 1, x, cell, k))
                heapq.heappush(heap, (cost + max(0.0, above), steps + 1, x, cell, len(states) - 1))
    cut = np.array(cut, dtype=np.float32).reshape(h, w)
    return cut, {"pits": int(pit.sum()), "bottoms": len(bottoms), "breached": breached}


class BreachTest(QgisProcessBase):
    def setUp(self):
        super().setUp()
        z = read_raster(JACKSBORO)[0].astype(np.float32)
        z[40:52, 300:330] = np.nan  # a block of nodata: edge cells around it
        self.z = z
        self.dem = self.path("dem.tif")
        write_geotiff(self.dem, np.where(np.isnan(z), -9999, z).astype(np.float32), gdal.GDT_Float32, nodata=-9999)

    def run_alg(self, alg, parameters):
        return self.qgis(["run", alg, "--"] + [f"{k}={v}" for k, v in parameters.items()])

    def run_breach(self, prefix, **extra):
        paths = {"OUTPUT": self.path(prefix + "_breached.tif"), "OUTPUT_CHANGE": self.path(prefix + "_change.tif")}
        rc, out = self.run_alg("gpugeo:breachdepressions", dict(paths, INPUT=self.dem, **extra))
        self.assertEqual(rc, 0, out)
        breached = read_raster(paths["OUTPUT"])[0].astype(np.float32)
        breached[breached == -9999] = np.nan
        return breached, read_raster(paths["OUTPUT_CHANGE"])[0], out["results"]

    def reference(self, max_length, max_depth):
        """Our cut in Python, finished by gpugeo:filldepressions (FLATS=1)."""
        cut, counts = cut_channels(self.z, max_length, max_depth)
        cut_path, finished = self.path("cut.tif"), self.path("cut_filled.tif")
        write_geotiff(cut_path, cut, gdal.GDT_Float32, nodata=float("nan"))
        rc, out = self.run_alg("gpugeo:filldepressions", {"INPUT": cut_path, "FLATS": 1, "OUTPUT": finished})
        self.assertEqual(rc, 0, out)
        return read_raster(finished)[0].astype(np.float32), counts

    def check_run(self, breached, change, results, max_length, max_depth):
        expected, counts = self.reference(max_length, max_depth)
        np.testing.assert_array_equal(np.isnan(breached), np.isnan(self.z))
        self.assertTrue(np.array_equal(breached.view(np.uint32)[~np.isnan(breached)],
                                       expected.view(np.uint32)[~np.isnan(expected)]))
        self.assertEqual(results["PITS_RAISED"], counts["pits"])
        self.assertEqual(results["DEPRESSIONS"], counts["bottoms"])
        self.assertEqual(results["BREACHED"], counts["breached"])
        # The change, the counts and the volumes against the input.
        valid = ~np.isnan(self.z)
        diff = (breached.astype(np.float64) - self.z.astype(np.float64))
        np.testing.assert_array_equal(np.isnan(change), ~valid)
        np.testing.assert_array_equal(change[valid], diff[valid].astype(np.float32))
        self.assertEqual(results["LOWERED_CELLS"], int((diff[valid] < 0).sum()))
        self.assertEqual(results["RAISED_CELLS"], int((diff[valid] > 0).sum()))
        widths, heights = cell_sizes(self.z.shape[0])
        area = (widths * heights)[:, None]
        removed = float(np.nansum(np.where(diff < 0, -diff * area, 0)))
        added = float(np.nansum(np.where(diff > 0, diff * area, 0)))
        self.assertAlmostEqual(results["VOLUME_REMOVED"], removed, delta=1e-9 * max(removed, 1))
        self.assertAlmostEqual(results["VOLUME_ADDED"], added, delta=1e-9 * max(added, 1))
        # Every valid cell that is not an edge cell has a lower neighbour: it drains with plain D8.
        with np.errstate(invalid="ignore"):
            drains = (neighbours(breached) < breached).any(axis=0)
        self.assertTrue(np.all(drains | edge_cells(breached) | ~valid))
        return counts

    def test_breach_reference(self):
        breached, change, results = self.run_breach("mem")
        counts = self.check_run(breached, change, results, 50, float("inf"))
        self.assertGreater(counts["breached"], 100)
        # Fewer cells changed than by the fill (with its flats raised) on this DEM.
        filled = self.path("filled.tif")
        rc, out = self.run_alg("gpugeo:filldepressions", {"INPUT": self.dem, "FLATS": 1, "OUTPUT": filled})
        self.assertEqual(rc, 0, out)
        by_fill = int((read_raster(filled)[0] != np.where(np.isnan(self.z), -9999, self.z)).sum())
        self.assertLess(results["LOWERED_CELLS"] + results["RAISED_CELLS"], by_fill)
        # Tile by tile: the same bits.
        tiled, tiled_change, tiled_results = self.run_breach("tiled", TILED="true", MEMORY_BUDGET=16)
        self.assertTrue(np.array_equal(np.nan_to_num(tiled, nan=-1).view(np.uint32),
                                       np.nan_to_num(breached, nan=-1).view(np.uint32)))
        np.testing.assert_array_equal(tiled_change, change)
        for key in ("PITS_RAISED", "DEPRESSIONS", "BREACHED", "LOWERED_CELLS", "RAISED_CELLS"):
            self.assertEqual(tiled_results[key], results[key], key)

    def test_breach_limits(self):
        breached, change, results = self.run_breach("short", MAX_LENGTH=3, MAX_DEPTH=2.5)
        counts = self.check_run(breached, change, results, 3, 2.5)
        self.assertGreater(counts["bottoms"] - counts["breached"], 0)

    def test_breach_bad_input(self):
        target = self.path("bad.tif")
        for extra, message in (({"MAX_LENGTH": 0}, "MAX_LENGTH"), ({"MAX_DEPTH": -1}, "MAX_DEPTH")):
            rc, out = self.run_alg("gpugeo:breachdepressions", dict(INPUT=self.dem, OUTPUT=target, **extra))
            text = out if isinstance(out, str) else json.dumps(out)
            self.assertNotEqual(rc, 0, text)
            self.assertIn(message, text)
            self.assertFalse(os.path.exists(target))


if __name__ == "__main__":
    unittest.main()
