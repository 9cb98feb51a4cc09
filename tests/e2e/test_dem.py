#!/usr/bin/python3
"""End-to-end tests of gpugeo:filldepressions, gpugeo:flowdirection and gpugeo:flowaccumulation through
qgis_process, on a real DEM shipped with the project: tests/data/jacksboro_srtm3.tif (SRTM-3 as cut in
matplotlib's jacksboro_fault_dem.npz; Int16, 403 x 344 cells of 3 arc-seconds, north-up, EPSG:4326). The filled
DEM against a Priority-Flood written here (bit for bit); the directions against the D8 rule with the
ellipsoid's cell sizes; the accumulation against its own balance (every cell's count is itself plus
its donors', every cell reaches an outlet, the largest count is the largest basin); a model chaining
the three; the chain under MPI (MPI_PROCESSES=2) against the in-process run; help and bad input.

usage: test_dem.py [unittest arguments, e.g. DemTest.test_dem_chain]
"""
import heapq
import json
import math
import os
import shutil
import unittest

import numpy as np
from osgeo import gdal, osr

from test_qgis_process import HERE, QgisProcessBase, read_raster

gdal.UseExceptions()
JACKSBORO = os.path.join(HERE, "..", "data", "jacksboro_srtm3.tif")
# The npz's bounds are the cell edges of an SRTM-3 grid (its "ymin" is the northern edge): row 0 is north.
GEOTRANSFORM = (-84.41375, 1.0 / 1200.0, 0.0, 36.73291666666667, 0.0, -1.0 / 1200.0)
ESRI = [1, 2, 4, 8, 16, 32, 64, 128]
DX = [1, 1, 0, -1, -1, -1, 0, 1]  # E, SE, S, SW, W, NW, N, NE; row 0 at the top
DY = [0, 1, 1, 1, 0, -1, -1, -1]
WGS84_A, WGS84_B = 6378137.0, 6356752.314245179


def write_geotiff(path, values, data_type, geotransform=GEOTRANSFORM, epsg=4326, nodata=None):
    dataset = gdal.GetDriverByName("GTiff").Create(path, values.shape[1], values.shape[0], 1, data_type)
    dataset.SetGeoTransform(geotransform)
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(epsg)
    dataset.SetProjection(srs.ExportToWkt())
    band = dataset.GetRasterBand(1)
    if nodata is not None:
        band.SetNoDataValue(nodata)
    band.WriteArray(values)
    dataset = None


def jacksboro():
    dataset = gdal.Open(JACKSBORO)
    elevation = dataset.GetRasterBand(1).ReadAsArray()
    assert elevation.shape == (344, 403) and elevation.dtype == np.int16
    assert all(math.isclose(a, b, abs_tol=1e-12) for a, b in zip(dataset.GetGeoTransform(), GEOTRANSFORM))
    return elevation


def vector_rows(path):
    """Every feature's attributes and geometry (WKB) of a vector file."""
    from osgeo import ogr
    dataset = ogr.Open(path)  # held while its layer is read
    layer = dataset.GetLayer(0)
    rows = []
    for feature in layer:
        geometry = feature.GetGeometryRef()
        rows.append((tuple(feature.items().items()), geometry.ExportToWkb() if geometry else None))
    return rows


def priority_flood(z):
    """Barnes et al. (2014), Algorithm 1, seeded from the edge cells (border, or next to NaN)."""
    h, w = z.shape
    out = z.astype(np.float32).copy()
    valid = ~np.isnan(out)
    invalid = np.pad(~valid, 1, constant_values=True)
    next_to_invalid = np.zeros((h, w), bool)
    for dx, dy in zip(DX, DY):
        next_to_invalid |= invalid[1 + dy:1 + dy + h, 1 + dx:1 + dx + w]
    closed = ~valid
    heap = []
    for y, x in zip(*np.nonzero(valid & next_to_invalid)):
        heap.append((float(out[y, x]), int(y) * w + int(x)))
        closed[y, x] = True
    heapq.heapify(heap)
    while heap:
        level, c = heapq.heappop(heap)
        y, x = divmod(c, w)
        for dx, dy in zip(DX, DY):
            ny, nx = y + dy, x + dx
            if 0 <= ny < h and 0 <= nx < w and not closed[ny, nx]:
                closed[ny, nx] = True
                out[ny, nx] = max(out[ny, nx], np.float32(level))
                heapq.heappush(heap, (float(out[ny, nx]), ny * w + nx))
    return out


def cell_sizes(rows, geotransform=GEOTRANSFORM):
    """Per row, the cell's width and height in metres on WGS 84 at the row centre's latitude (the help's
    formula: N cos(phi) dlon and M dlat)."""
    e2 = 1.0 - WGS84_B * WGS84_B / (WGS84_A * WGS84_A)
    widths, heights = [], []
    for y in range(rows):
        phi = math.radians(geotransform[3] + (y + 0.5) * geotransform[5])
        w = 1.0 - e2 * math.sin(phi) ** 2
        widths.append(WGS84_A / math.sqrt(w) * math.cos(phi) * math.radians(geotransform[1]))
        heights.append(WGS84_A * (1.0 - e2) / w ** 1.5 * math.radians(-geotransform[5]))
    return np.array(widths), np.array(heights)


def receivers(codes):
    """Per cell, the flat index of the cell its ESRI code points to, -1 off the grid."""
    h, w = codes.shape
    index = np.searchsorted(ESRI, codes)
    y, x = np.indices((h, w))
    ny, nx = y + np.take(DY, index), x + np.take(DX, index)
    inside = (ny >= 0) & (ny < h) & (nx >= 0) & (nx < w)
    return np.where(inside, ny * w + nx, -1).ravel(), index


class DemTest(QgisProcessBase):
    def setUp(self):
        self.assertTrue(os.path.exists(JACKSBORO), f"{JACKSBORO} is missing (tests/data/make_jacksboro.py makes it)")
        super().setUp()
        self.dem = JACKSBORO

    def run_alg(self, algorithm, parameters):
        return self.qgis(["run", algorithm, "--"] + [f"{k}={v}" for k, v in parameters.items()])

    def run_chain(self, prefix):
        """The three algorithms one after the other (DEVICE=Auto); the paths of their outputs."""
        paths = {name: self.path(f"{prefix}_{name}.tif") for name in ("filled", "directions", "cells", "area")}
        rc, out = self.run_alg("gpugeo:filldepressions", {"INPUT": self.dem, "OUTPUT": paths["filled"]})
        self.assertEqual(rc, 0, out)
        self.assertTrue(any(line.startswith("Stage times: read") and "fill" in line for line in out["log"]["info"]),
                        out["log"])
        rc, out = self.run_alg("gpugeo:flowdirection", {"INPUT": paths["filled"], "OUTPUT": paths["directions"]})
        self.assertEqual(rc, 0, out)
        self.assertTrue(any("flats" in line and "directions" in line for line in out["log"]["info"]), out["log"])
        rc, out = self.run_alg("gpugeo:flowaccumulation", {"INPUT": paths["directions"], "UNITS": 1,
                                                           "OUTPUT_CELLS": paths["cells"], "OUTPUT_AREA": paths["area"]})
        self.assertEqual(rc, 0, out)
        self.assertEqual(out["results"], {"OUTPUT_CELLS": paths["cells"], "OUTPUT_AREA": paths["area"]})
        return paths, out

    def test_dem_chain(self):
        paths, accumulation_run = self.run_chain("chain")
        z = jacksboro()
        h, w = z.shape

        # --- Filled: Priority-Flood's surface bit for bit, in the input's grid; 6,373 cells raised
        # (the count SAGA's Fill Sinks (Wang & Liu) with MINSLOPE 0 gives on this DEM too).
        filled, transform, nodata, projection, data_type = read_raster(paths["filled"])
        self.assertEqual(data_type, gdal.GDT_Float32)
        self.assertEqual(transform, GEOTRANSFORM)
        srs = osr.SpatialReference(wkt=projection)
        srs.AutoIdentifyEPSG()
        self.assertEqual(srs.GetAuthorityCode(None), "4326")
        self.assertTrue(nodata is None or math.isnan(nodata))
        expected = priority_flood(z.astype(np.float32))
        np.testing.assert_array_equal(filled.view(np.uint32), expected.view(np.uint32))
        self.assertTrue(np.all(filled >= z))
        self.assertEqual(int(np.count_nonzero(filled > z)), 6373)

        # --- Directions: ESRI codes only (a filled DEM with its flats resolved has no pit) ...
        codes, transform, nodata, _, data_type = read_raster(paths["directions"])
        self.assertEqual(data_type, gdal.GDT_Byte)
        self.assertEqual(transform, GEOTRANSFORM)
        self.assertEqual(nodata, 255)
        self.assertTrue(set(np.unique(codes)) <= set(ESRI), np.unique(codes))
        recv, index = receivers(codes)
        zf = filled.astype(np.float64)
        widths, heights = cell_sizes(h)
        diagonal = np.sqrt(widths * widths + heights * heights)
        padded = np.pad(zf, 1, constant_values=np.nan)
        drops = np.stack([(zf - padded[1 + dy:1 + dy + h, 1 + dx:1 + dx + w]) /
                          (widths if d in (0, 4) else heights if d in (2, 6) else diagonal)[:, None]
                          for d, (dx, dy) in enumerate(zip(DX, DY))])
        best = np.nanmax(drops, axis=0)
        chosen = np.take_along_axis(drops, index[None], axis=0)[0]
        lower = best > 0
        # ... the steepest drop by true distances; equal drops to the first in E, SE, S ... NE. (The
        # cell sizes here may differ from the plugin's in the last bit: where two different drops lie
        # within 1e-9 of each other either may win.)
        near = drops >= (best * (1 - 1e-9))[None]
        inexact = np.any(near & (drops != best[None]), axis=0)
        first_best = np.argmax(drops == best[None], axis=0)
        exact = lower & ~inexact
        np.testing.assert_array_equal(index[exact], first_best[exact])
        self.assertTrue(np.all(np.take_along_axis(near, index[None], axis=0)[0][lower & inexact]))
        self.assertTrue(np.all(chosen[lower] > 0))
        # Cells without a lower neighbour: on the border they drain out of the grid (to their first
        # neighbour off it), inside they are flat cells draining to a neighbour of their elevation.
        border = np.zeros((h, w), bool)
        border[0, :] = border[-1, :] = border[:, 0] = border[:, -1] = True
        first_off = np.argmax(np.isnan(drops), axis=0)
        np.testing.assert_array_equal(index[~lower & border], first_off[~lower & border])
        flat = ~lower & ~border
        self.assertGreater(int(flat.sum()), 1000)  # the filled depressions
        np.testing.assert_array_equal(chosen[flat], 0.0)
        self.assertTrue(np.all(recv[flat.ravel()] >= 0))

        # --- Accumulation: every cell counts itself and its donors; every cell reaches an outlet.
        cells, transform, nodata, _, data_type = read_raster(paths["cells"])
        self.assertEqual(data_type, gdal.GDT_Int32)
        self.assertEqual(transform, GEOTRANSFORM)
        self.assertEqual(nodata, -1)
        cells = cells.ravel().astype(np.int64)
        donors = recv >= 0
        inflow = np.bincount(recv[donors], weights=cells[donors], minlength=h * w).astype(np.int64)
        np.testing.assert_array_equal(cells, 1 + inflow)
        outlets = ~donors
        self.assertEqual(int(cells[outlets].sum()), h * w)
        # The largest count is the largest basin: cells labelled by the outlet they reach (pointer
        # jumping; loops would never settle).
        terminal = np.where(donors, recv, np.arange(h * w))
        for _ in range(64):
            following = terminal[terminal]
            if np.array_equal(following, terminal):
                break
            terminal = following
        self.assertTrue(np.all(outlets[terminal]))
        basins = np.bincount(terminal, minlength=h * w)
        self.assertEqual(int(cells.max()), int(basins.max()))
        # Its outlet: the west edge at row 127, where the notes' SAGA D8 (square 90 m cells) leaves too.
        self.assertEqual(divmod(int(np.argmax(cells)), w), (127, 0))
        self.assertTrue(any(f": {int(cells.max())} cells," in line for line in accumulation_run["log"]["info"]),
                        accumulation_run["log"])

        # Upstream area in km²: the cell's own area plus its donors', to the fixed point's rounding.
        area, transform, nodata, _, data_type = read_raster(paths["area"])
        self.assertEqual(data_type, gdal.GDT_Float64)
        self.assertEqual(nodata, -1)
        area = area.ravel()
        own = np.repeat(widths * heights * 1e-6, w)
        inflow = np.bincount(recv[donors], weights=area[donors], minlength=h * w)
        np.testing.assert_allclose(area, own + inflow, rtol=1e-9)
        self.assertAlmostEqual(float(area[outlets].sum()), float(own.sum()), delta=1e-9 * float(own.sum()))
        self.assertAlmostEqual(float(area.max()), 301.9, delta=0.1)  # 43,753 cells of about 0.0069 km²

    def test_dem_model(self):
        paths, _ = self.run_chain("direct")
        cells, area = self.path("model_cells.tif"), self.path("model_area.tif")
        rc, out = self.qgis(["run", os.path.join(HERE, "dem_flow_accumulation.model3"), "--", f"dem={self.dem}",
                             f"accumulation:cells={cells}", f"accumulation:area={area}"])
        self.assertEqual(rc, 0, out)
        self.assertTrue(any("Model processed OK" in line for line in out["log"]["info"]), out["log"])
        np.testing.assert_array_equal(read_raster(cells)[0], read_raster(paths["cells"])[0])
        np.testing.assert_array_equal(read_raster(area)[0], read_raster(paths["area"])[0])

    def test_dem_mpi(self):
        """The chain with MPI_PROCESSES=2 (gpugeo_dem under mpiexec, from the installed plugin's bin/):
        every raster the in-process tiled run's, bit for bit; the isochrones' layers feature for
        feature, their travel times within 1e-12 relative."""
        if not shutil.which("mpiexec"):
            self.skipTest("mpiexec is not installed")
        tiled = {"TILED": "true", "MEMORY_BUDGET": 3, "DEVICE": 1}
        mpi = {"MPI_PROCESSES": 2, "MEMORY_BUDGET": 3, "DEVICE": 1}
        rasters = {}
        for how, extra in (("local", tiled), ("mpi", mpi)):
            paths = {name: self.path(f"{how}_{name}.tif") for name in ("filled", "directions", "cells", "area")}
            rc, out = self.run_alg("gpugeo:filldepressions", {"INPUT": self.dem, "FLATS": 1, "OUTPUT": paths["filled"], **extra})
            self.assertEqual(rc, 0, out)
            if how == "mpi":
                self.assertTrue(any("Running 2 processes under MPI" in line for line in out["log"]["info"]), out["log"])
            rc, out = self.run_alg("gpugeo:flowdirection", {"INPUT": paths["filled"], "OUTPUT": paths["directions"], **extra})
            self.assertEqual(rc, 0, out)
            rc, out = self.run_alg("gpugeo:flowaccumulation", {"INPUT": paths["directions"], "UNITS": 1,
                                                               "OUTPUT_CELLS": paths["cells"],
                                                               "OUTPUT_AREA": paths["area"], **extra})
            self.assertEqual(rc, 0, out)
            rasters[how] = paths
            iso = {name: self.path(f"{how}_iso_{name}") for name in ("time.tif", "watershed.gpkg", "bands.gpkg", "table.gpkg")}
            rc, out = self.run_alg("gpugeo:isochrones", {"INPUT": self.dem, "INTERVAL": 30, "TRAVEL_TIME": iso["time.tif"],
                                                         "WATERSHED": iso["watershed.gpkg"], "ISOCHRONES": iso["bands.gpkg"],
                                                         "TIME_AREA": iso["table.gpkg"], **extra})
            self.assertEqual(rc, 0, out)
            rasters[how + "_iso"] = iso
        for name in ("filled", "directions", "cells", "area"):
            a, b = read_raster(rasters["local"][name]), read_raster(rasters["mpi"][name])
            np.testing.assert_array_equal(a[0], b[0], err_msg=name)
        t1, t2 = read_raster(rasters["local_iso"]["time.tif"])[0], read_raster(rasters["mpi_iso"]["time.tif"])[0]
        np.testing.assert_allclose(t2, t1, rtol=1e-12, atol=0)
        for name in ("watershed.gpkg", "bands.gpkg", "table.gpkg"):
            self.assertEqual(vector_rows(rasters["mpi_iso"][name]), vector_rows(rasters["local_iso"][name]), name)

    def test_dem_help(self):
        for algorithm, words in (("gpugeo:filldepressions", ("INPUT:", "BAND:", "OUTPUT:", "0: Auto", "Priority-Flood",
                                                             "bit for bit", "Barnes (2016)",
                                                             "from the CRS's ellipsoid at each row's latitude")),
                                 ("gpugeo:flowdirection", ("RESOLVE_FLATS:", "ENCODING:", "0: ESRI", "1: 0 to 7",
                                                           "E, SE, S, SW, W, NW, N, NE", "Barnes, Lehman")),
                                 ("gpugeo:flowaccumulation", ("ENCODING:", "UNITS:", "OUTPUT_CELLS:", "OUTPUT_AREA:",
                                                              "Jenson"))):
            rc, out = self.qgis(["help", algorithm], parse_json=False)
            self.assertEqual(rc, 0, out)
            for text in words:
                self.assertIn(text, out, (algorithm, text))

    def test_dem_bad_input(self):
        z = jacksboro()
        empty = self.path("empty.tif")
        write_geotiff(empty, np.full(z.shape, -32768, np.int16), gdal.GDT_Int16, nodata=-32768)
        rotated = self.path("rotated.tif")
        write_geotiff(rotated, z, gdal.GDT_Int16, geotransform=(GEOTRANSFORM[0], GEOTRANSFORM[1], 1e-5, GEOTRANSFORM[3],
                                                                 1e-5, GEOTRANSFORM[5]))
        cases = [
            ("gpugeo:filldepressions", {"INPUT": empty}, "has no valid cell"),
            ("gpugeo:flowdirection", {"INPUT": empty}, "has no valid cell"),
            ("gpugeo:filldepressions", {"INPUT": self.dem, "BAND": 2}, "there is no band 2"),
            ("gpugeo:flowdirection", {"INPUT": rotated}, "rotated or sheared"),
            ("gpugeo:flowaccumulation", {"INPUT": self.dem}, "not flow directions in the ESRI encoding"),
        ]
        for algorithm, parameters, words in cases:
            output = self.path("bad.tif")
            key = "OUTPUT_CELLS" if algorithm == "gpugeo:flowaccumulation" else "OUTPUT"
            rc, out = self.run_alg(algorithm, dict(parameters, **{key: output}))
            text = out if isinstance(out, str) else json.dumps(out)
            self.assertNotEqual(rc, 0, f"{algorithm} {parameters}: {text}")
            self.assertIn(words, text, (algorithm, parameters))
            self.assertFalse(os.path.exists(output), (algorithm, parameters))
        # DEVICE=GPU: without a usable GPU a clear error naming why; with one, a result.
        output = self.path("gpu.tif")
        rc, out = self.run_alg("gpugeo:filldepressions", {"INPUT": self.dem, "DEVICE": 2, "OUTPUT": output})
        text = out if isinstance(out, str) else json.dumps(out)
        if rc == 0:
            self.assertTrue(any(line.startswith("Backend: GPU") for line in out["log"]["info"]), text)
        else:
            self.assertIn("DEVICE=GPU", text)
            self.assertIn("no GPU can be used", text)
            self.assertFalse(os.path.exists(output))


if __name__ == "__main__":
    unittest.main()
