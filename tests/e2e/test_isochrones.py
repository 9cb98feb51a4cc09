#!/usr/bin/python3
"""End-to-end tests of gpugeo:isochrones through qgis_process on a real DEM shipped with the project:
tests/data/jacksboro_srtm3.tif (SRTM-3 as cut in matplotlib's jacksboro_fault_dem.npz; Int16, 403 x 344
cells of 3 arc-seconds, EPSG:4326). The automatic outlet with the slope model: the bands tile
the watershed (their areas add up to the watershed's, their union is the watershed polygon by GEOS),
travel time grows from every cell's receiver to the cell (the FLOWDIR and TRAVEL_TIME rasters read with
GDAL), the time-area table adds up to the watershed. A snapped outlet with the constant model: the
snapped cell is the highest accumulation within the snap distance and every time is the walk down the
cell's path. The hydrograph against a direct sum over the cells and the excess steps, in memory,
tiled and under MPI. Help and bad input through the command line.

usage: test_isochrones.py [unittest arguments, e.g. IsochronesTest.test_isochrones_automatic_outlet]
"""
import json
import math
import os
import shutil
import unittest

import numpy as np
from osgeo import gdal, ogr

from test_dem import DX, DY, ESRI, GEOTRANSFORM, JACKSBORO, cell_sizes, jacksboro, write_geotiff
from test_qgis_process import QgisProcessBase, read_raster, write_points

gdal.UseExceptions()
ogr.UseExceptions()


def receivers(codes):
    """Per cell (flat index): the cell its ESRI code points to, -1 off the grid or on nodata; and the
    direction index 0..7 (E, SE, S ... NE), -1 on nodata."""
    h, w = codes.shape
    valid = codes != 255
    index = np.where(valid, np.searchsorted(ESRI, np.where(valid, codes, 1)), -1)
    y, x = np.indices((h, w))
    ny, nx = y + np.take(DY, index), x + np.take(DX, index)
    inside = valid & (ny >= 0) & (ny < h) & (nx >= 0) & (nx < w)
    recv = np.where(inside, ny * w + nx, -1).ravel()
    recv[recv >= 0] = np.where(valid.ravel()[recv[recv >= 0]], recv[recv >= 0], -1)
    return recv, index.ravel()


def path_sums(recv, step, outlet):
    """Per cell: the sum of `step` along its path down to the outlet, the outlet's step included (NaN
    for cells whose path misses the outlet), by pointer jumping."""
    n = recv.size
    pointer = np.where(recv >= 0, recv, n).astype(np.int64)
    pointer[outlet] = n  # the walk ends after the outlet's own step
    pointer = np.append(pointer, n)
    total = np.append(step.astype(np.float64), 0.0)
    for _ in range(40):
        if np.all(pointer == n):
            break
        total = total + total[pointer]
        total[n] = 0.0
        pointer = pointer[pointer]
    # The cells reaching the outlet: label every cell by its path's last cell.
    last = np.where(recv >= 0, recv, np.arange(n))
    last[outlet] = outlet
    for _ in range(40):
        following = last[last]
        if np.array_equal(following, last):
            break
        last = following
    return np.where(last == outlet, total[:n], np.nan)


def features(path):
    dataset = ogr.Open(path)
    layer = dataset.GetLayer(0)
    out = []
    for feature in layer:
        geometry = feature.GetGeometryRef()
        out.append((feature.items(), geometry.Clone() if geometry is not None else None))
    return out


class IsochronesTest(QgisProcessBase):
    def setUp(self):
        self.assertTrue(os.path.exists(JACKSBORO), f"{JACKSBORO} is missing (tests/data/make_jacksboro.py makes it)")
        super().setUp()
        self.dem = JACKSBORO

    def run_alg(self, parameters):
        return self.qgis(["run", "gpugeo:isochrones", "--"] + [f"{k}={v}" for k, v in parameters.items()])

    def outputs(self, prefix):
        return {"TRAVEL_TIME": self.path(f"{prefix}_time.tif"), "WATERSHED": self.path(f"{prefix}_watershed.gpkg"),
                "ISOCHRONES": self.path(f"{prefix}_isochrones.gpkg"), "TIME_AREA": self.path(f"{prefix}_table.gpkg"),
                "FILLED": self.path(f"{prefix}_filled.tif"), "FLOWDIR": self.path(f"{prefix}_dir.tif"),
                "ACCUMULATION": self.path(f"{prefix}_acc.tif")}

    def check_tiling(self, paths, times, interval):
        """The bands against the times; their areas and polygons against the watershed's; the table."""
        h, w = times.shape
        widths, heights = cell_sizes(h)
        cell_area = np.repeat(widths * heights, w).reshape(h, w)
        inside = times != -1
        band_of = np.where(inside, np.floor(times / interval).astype(np.int64) + 1, 0)
        bands = int(band_of.max())
        cells = np.bincount(band_of[inside], minlength=bands + 1)
        areas = np.bincount(band_of[inside], weights=cell_area[inside], minlength=bands + 1) * 1e-6
        watershed_km2 = float(cell_area[inside].sum()) * 1e-6

        [(shed, shed_geometry)] = features(paths["WATERSHED"])
        self.assertTrue(shed_geometry.IsValid())
        self.assertAlmostEqual(shed["area_km2"], watershed_km2, delta=1e-9 * watershed_km2)
        self.assertEqual(shed["cells"], int(inside.sum()))
        self.assertEqual(shed["t_max"], float(times[inside].max()))

        isochrones = features(paths["ISOCHRONES"])
        self.assertEqual(len(isochrones), int(np.count_nonzero(cells[1:])))
        union = ogr.Geometry(ogr.wkbMultiPolygon)
        total = 0.0
        for item, geometry in isochrones:
            band = item["band"]
            self.assertTrue(geometry.IsValid(), band)
            self.assertEqual(item["t_min"], (band - 1) * interval)
            self.assertEqual(item["t_max"], band * interval)
            self.assertEqual(item["cells"], int(cells[band]), band)
            self.assertAlmostEqual(item["area_km2"], float(areas[band]), delta=1e-9 * float(areas[band]))
            total += item["area_km2"]
            for i in range(geometry.GetGeometryCount()):
                union.AddGeometry(geometry.GetGeometryRef(i))
        # The bands' areas add up to the watershed's; their union is the watershed polygon.
        self.assertAlmostEqual(total, shed["area_km2"], delta=1e-9 * shed["area_km2"])
        union = union.UnionCascaded()
        self.assertLess(union.SymDifference(shed_geometry).GetArea(), 1e-9 * shed_geometry.GetArea())
        self.assertAlmostEqual(union.GetArea(), shed_geometry.GetArea(), delta=1e-9 * shed_geometry.GetArea())

        table = features(paths["TIME_AREA"])
        self.assertEqual(len(table), bands)
        self.assertTrue(all(geometry is None for _, geometry in table))
        self.assertEqual([item["band"] for item, _ in table], list(range(1, bands + 1)))
        self.assertEqual([item["cells"] for item, _ in table], [int(c) for c in cells[1:]])
        shares = [item["cumulative_share"] for item, _ in table]
        self.assertTrue(all(a <= b for a, b in zip(shares, shares[1:])))
        self.assertEqual(shares[-1], 1.0)
        table_km2 = sum(item["area_km2"] for item, _ in table)
        self.assertAlmostEqual(table_km2, shed["area_km2"], delta=1e-9 * shed["area_km2"])
        return bands

    def test_isochrones_automatic_outlet(self):
        paths = self.outputs("auto")
        rc, out = self.run_alg(dict(paths, INPUT=self.dem, INTERVAL=120))
        self.assertEqual(rc, 0, out)
        for name, value in paths.items():
            self.assertEqual(out["results"][name].split("|")[0], value, name)
        info = "\n".join(out["log"]["info"])
        self.assertIn("Outlet (automatic): where the largest basin drains out of the grid, column 0, row 127", info)
        self.assertIn("Stage times: read", info)
        self.assertIn("travel time", info)

        times, transform, nodata, _, data_type = read_raster(paths["TRAVEL_TIME"])
        self.assertEqual(data_type, gdal.GDT_Float64)
        self.assertEqual(transform, GEOTRANSFORM)
        self.assertEqual(nodata, -1)
        codes = read_raster(paths["FLOWDIR"])[0]
        accumulation = read_raster(paths["ACCUMULATION"])[0].ravel()
        h, w = times.shape
        recv, _ = receivers(codes)
        t = times.ravel()
        inside = t != -1
        outlet = 127 * w + 0
        self.assertTrue(inside[outlet])
        self.assertEqual(int(inside.sum()), int(accumulation[outlet]))  # the whole largest basin
        self.assertAlmostEqual(out["results"]["OUTLET_X"], GEOTRANSFORM[0] + 0.5 * GEOTRANSFORM[1], delta=1e-9)
        self.assertAlmostEqual(out["results"]["OUTLET_Y"], GEOTRANSFORM[3] + 127.5 * GEOTRANSFORM[5], delta=1e-9)
        # Travel time grows upstream: every watershed cell but the outlet drains to a watershed cell
        # of shorter time; the outlet is the shortest (its own step).
        others = np.flatnonzero(inside)
        others = others[others != outlet]
        self.assertTrue(np.all(recv[others] >= 0))
        self.assertTrue(np.all(inside[recv[others]]))
        self.assertTrue(np.all(t[others] > t[recv[others]]))
        self.assertEqual(float(t[inside].min()), float(t[outlet]))
        self.assertGreater(float(t[outlet]), 0.0)
        bands = self.check_tiling(paths, times, 120.0)
        self.assertGreater(bands, 5)
        self.assertAlmostEqual(out["results"]["WATERSHED_AREA_KM2"], 301.9, delta=0.1)

    def test_isochrones_snapped_outlet(self):
        # A point two cells east of a channel cell (about 150 m), snapped within 300 m; the constant model.
        z = jacksboro()
        h, w = z.shape
        paths = self.outputs("auto")
        rc, out = self.run_alg({"INPUT": self.dem, "TRAVEL_TIME": paths["TRAVEL_TIME"],
                                "ACCUMULATION": paths["ACCUMULATION"]})
        self.assertEqual(rc, 0, out)
        accumulation = read_raster(paths["ACCUMULATION"])[0]
        channel = np.argwhere((accumulation > 5000) & (accumulation < 8000))
        y0, x0 = (int(v) for v in channel[len(channel) // 2])
        x0 = min(x0, w - 3)
        lon = GEOTRANSFORM[0] + (x0 + 2.5) * GEOTRANSFORM[1]
        lat = GEOTRANSFORM[3] + (y0 + 0.5) * GEOTRANSFORM[5]
        outlet_layer = self.path("outlet.gpkg")
        write_points(outlet_layer, [(lon, lat)], epsg=4326)

        # The cell of highest accumulation within 300 m of the point's cell centre (the row's cell sizes;
        # ties to the first in row order).
        widths, heights = cell_sizes(h)
        cx, cy = x0 + 2, y0
        yy, xx = np.indices((h, w))
        near = ((xx - cx) * widths[cy]) ** 2 + ((yy - cy) * heights[cy]) ** 2 <= 300.0 ** 2
        candidates = np.where(near, accumulation, -1).ravel()
        snapped = int(np.argmax(candidates))

        paths = self.outputs("snap")
        rc, out = self.run_alg(dict(paths, INPUT=self.dem, OUTLET=outlet_layer, SNAP_DISTANCE=300, VELOCITY_MODEL=0,
                                    SPEED=1.5, INTERVAL=20))
        self.assertEqual(rc, 0, out)
        info = "\n".join(out["log"]["info"])
        self.assertIn(f"falls in column {cx}, row {cy}; snapped within 300 m to the cell of highest accumulation, "
                      f"column {snapped % w}, row {snapped // w}", info)
        times = read_raster(paths["TRAVEL_TIME"])[0]
        codes = read_raster(paths["FLOWDIR"])[0]
        recv, direction = receivers(codes)
        # Every time is the walk down the cell's path: the sum of L / v of its cells, the outlet's included.
        lengths = np.stack([np.repeat(widths, w), np.repeat(np.sqrt(widths ** 2 + heights ** 2), w),
                            np.repeat(heights, w)])
        kind = np.where(direction % 2 == 1, 1, np.where(direction % 4 == 2, 2, 0))
        step = lengths[kind, np.arange(h * w)] / 1.5 / 60.0
        expected = path_sums(recv, step, snapped)
        t = times.ravel()
        inside = ~np.isnan(expected)
        np.testing.assert_array_equal(t != -1, inside)
        np.testing.assert_allclose(t[inside], expected[inside], rtol=1e-9)
        self.assertEqual(int(inside.sum()), int(accumulation.ravel()[snapped]))
        self.check_tiling(paths, times, 20.0)

    def test_isochrones_defaults(self):
        """With every default, the shipped DEM's 302 km² basin gets times of hours, not days (the old
        slope-model defaults gave 7.3 days), cut at a round automatic interval into at most 12 bands."""
        paths = self.outputs("defaults")
        rc, out = self.run_alg({"INPUT": self.dem, "TRAVEL_TIME": paths["TRAVEL_TIME"],
                                "ISOCHRONES": paths["ISOCHRONES"], "TIME_AREA": paths["TIME_AREA"]})
        self.assertEqual(rc, 0, out)
        longest, interval = out["results"]["MAX_TIME_MIN"], out["results"]["INTERVAL_MIN"]
        self.assertGreater(longest, 6 * 60)
        self.assertLess(longest, 24 * 60)
        self.assertEqual(interval, 120.0)
        self.assertIn("bands of 120 minutes (the automatic interval)", "\n".join(out["log"]["info"]))
        dataset = ogr.Open(paths["TIME_AREA"])
        rows = dataset.GetLayer(0).GetFeatureCount()
        self.assertEqual(rows, int(longest // interval) + 1)
        self.assertLessEqual(rows, 12)

    def write_excess(self, path, values):
        """A GeoPackage table without geometry, field `excess` (mm/h), one row per step."""
        dataset = ogr.GetDriverByName("GPKG").CreateDataSource(path)
        layer = dataset.CreateLayer("rain", geom_type=ogr.wkbNone)
        layer.CreateField(ogr.FieldDefn("excess", ogr.OFTReal))
        layer.CreateField(ogr.FieldDefn("label", ogr.OFTString))
        for value in values:
            feature = ogr.Feature(layer.GetLayerDefn())
            if value is not None:
                feature.SetField("excess", value)
            feature.SetField("label", "x")
            layer.CreateFeature(feature)
        dataset = None

    def test_isochrones_hydrograph(self):
        """The HYDROGRAPH table against a direct sum over the travel-time raster's cells and the excess
        series' steps (each cell's excess of step j reaching the outlet in step j + its band); a table
        series in memory, tiled and under MPI, and a constant intensity; volume; the unit hydrograph."""
        interval = 30.0
        excess = [0.0, 12.5, 40.0, 7.25, 0.0, 3.0]
        rain = self.path("rain.gpkg")
        self.write_excess(rain, excess)
        h, w = jacksboro().shape
        widths, heights = cell_sizes(h)
        cell_area = np.repeat(widths * heights, w)
        runs = {"memory": {}, "tiled": {"TILED": "true", "MEMORY_BUDGET": 3, "DEVICE": 1}}
        if shutil.which("mpiexec"):
            runs["mpi"] = {"MPI_PROCESSES": 2, "MEMORY_BUDGET": 3, "DEVICE": 1}
        tables = {}
        for how, extra in runs.items():
            paths = {"TRAVEL_TIME": self.path(f"{how}_h_time.tif"), "HYDROGRAPH": self.path(f"{how}_hydrograph.gpkg")}
            rc, out = self.run_alg(dict(paths, INPUT=self.dem, INTERVAL=interval, EXCESS_TABLE=rain,
                                        EXCESS_FIELD="excess", **extra))
            self.assertEqual(rc, 0, out)
            self.assertIn("Hydrograph (time–area method, steps of 30 min", "\n".join(out["log"]["info"]))
            t = read_raster(paths["TRAVEL_TIME"])[0].ravel()
            inside = t != -1
            band = np.floor(t[inside] / interval).astype(np.int64)
            bands = int(band.max()) + 1
            area = np.bincount(band, weights=cell_area[inside], minlength=bands)
            # The direct sum: cells by steps.
            expected = np.zeros(bands + len(excess) - 1)
            for j, i in enumerate(excess):
                np.add.at(expected, band + j, cell_area[inside] * i / 3.6e6)
            rows = [item for item, _ in features(paths["HYDROGRAPH"])]
            self.assertEqual([r["step"] for r in rows], list(range(1, len(expected) + 1)), how)
            self.assertEqual([r["t_min"] for r in rows], [k * interval for k in range(len(expected))])
            self.assertEqual([r["t_max"] for r in rows], [(k + 1) * interval for k in range(len(expected))])
            self.assertEqual([r["excess_mm_h"] for r in rows], excess + [0.0] * (bands - 1))
            q = np.array([r["discharge_m3s"] for r in rows])
            np.testing.assert_allclose(q, expected, rtol=1e-12, err_msg=how)
            unit = np.array([r["unit_m3s"] for r in rows])
            np.testing.assert_allclose(unit[:bands], area * 0.001 / (interval * 60), rtol=1e-12)
            self.assertTrue(np.all(unit[bands:] == 0))
            # Volume: the watershed's area times the excess depth.
            depth = sum(excess) / 1000.0 * interval / 60.0
            self.assertAlmostEqual(float(q.sum()) * interval * 60, float(cell_area[inside].sum()) * depth,
                                   delta=1e-9 * float(cell_area[inside].sum()) * depth)
            peak = int(np.argmax(q))
            self.assertEqual(out["results"]["PEAK_DISCHARGE_M3S"], float(q[peak]))
            self.assertEqual(out["results"]["PEAK_TIME_MIN"], (peak + 1) * interval)
            tables[how] = q
        for how in tables:
            np.testing.assert_allclose(tables[how], tables["memory"], rtol=1e-12, err_msg=how)

        # A constant 20 mm/h for 45 minutes in steps of the automatic interval (120 minutes): one part step.
        path = self.path("constant_hydrograph.gpkg")
        rc, out = self.run_alg({"INPUT": self.dem, "TRAVEL_TIME": self.path("c_time.tif"), "HYDROGRAPH": path,
                                "EXCESS_INTENSITY": 20, "EXCESS_DURATION": 45})
        self.assertEqual(rc, 0, out)
        self.assertEqual(out["results"]["INTERVAL_MIN"], 120.0)
        rows = [item for item, _ in features(path)]
        self.assertEqual(rows[0]["excess_mm_h"], 20 * 45 / 120)
        self.assertTrue(all(r["excess_mm_h"] == 0 for r in rows[1:]))
        # 15 mm of excess in the first step: 15 unit hydrographs.
        np.testing.assert_allclose([r["discharge_m3s"] for r in rows], [r["unit_m3s"] * 15 for r in rows], rtol=1e-12)

        # Bad input: a table with the automatic interval; a row without a value; a negative value.
        holes = self.path("holes.gpkg")
        self.write_excess(holes, [1.0, None, 2.0])
        negative = self.path("negative.gpkg")
        self.write_excess(negative, [1.0, 2.0, -3.0])
        for parameters, words in (
                ({"EXCESS_TABLE": rain, "EXCESS_FIELD": "excess"}, "set INTERVAL (the isochrone interval)"),
                ({"EXCESS_TABLE": rain, "INTERVAL": 30}, "EXCESS_FIELD must name the field"),
                ({"EXCESS_TABLE": holes, "EXCESS_FIELD": "excess", "INTERVAL": 30}, "row 2 (feature 2) has no rainfall"),
                ({"EXCESS_TABLE": negative, "EXCESS_FIELD": "excess", "INTERVAL": 30}, "row 3 (feature 3)")):
            target, time = self.path("bad_hydrograph.gpkg"), self.path("bad_time.tif")
            rc, out = self.run_alg(dict(parameters, INPUT=self.dem, HYDROGRAPH=target, TRAVEL_TIME=time))
            text = out if isinstance(out, str) else json.dumps(out)
            self.assertNotEqual(rc, 0, text)
            self.assertIn(words, text, parameters)
            self.assertFalse(os.path.exists(target), parameters)
            self.assertFalse(os.path.exists(time), parameters)

    def test_isochrones_help(self):
        rc, out = self.qgis(["help", "gpugeo:isochrones"], parse_json=False)
        self.assertEqual(rc, 0, out)
        for words in ("INPUT:", "MANNING:", "OUTLET:", "SNAP_DISTANCE:", "VELOCITY_MODEL:", "0: Constant speed",
                      "1: Slope-based", "2: Manning-based", "INTERVAL:", "SPEED:", "K_OVERLAND:", "CHANNEL_THRESHOLD:",
                      "N_FACTOR:", "B_FACTOR:", "MIN_SPEED:", "RAINFALL:", "CURVE_NUMBER:", "MANNING_OVERLAND:",
                      "MIXED_THRESHOLD:", "CHANNEL_THRESHOLD_MANNING:", "MANNING_MIXED:", "MANNING_CHANNEL:",
                      "SIDE_SLOPE:", "MAX_ITERATIONS:", "TRAVEL_TIME:", "WATERSHED:", "ISOCHRONES:", "TIME_AREA:",
                      "FILLED:", "FLOWDIR:", "ACCUMULATION:", "HYDROGRAPH:", "EXCESS_TABLE:",
                      "EXCESS_FIELD:", "EXCESS_INTENSITY:", "EXCESS_DURATION:", "Ross", "Olaya", "Zhao", "our reading",
                      "the outlet's own step included", "Clark"):
            self.assertIn(words, out)

    def test_isochrones_bad_input(self):
        z = jacksboro()
        empty = self.path("empty.tif")
        write_geotiff(empty, np.full(z.shape, -32768, np.int16), gdal.GDT_Int16, nodata=-32768)
        far = self.path("far.gpkg")
        write_points(far, [(10.0, 50.0)], epsg=4326)
        cases = [
            ({"INPUT": empty}, "has no valid cell"),
            ({"INPUT": self.dem, "INTERVAL": -1},
             "INTERVAL (Isochrone interval (minutes; 0: automatic)) must be a number, 0 or more; got -1."),
            ({"INPUT": self.dem, "VELOCITY_MODEL": 0, "SPEED": -1},
             "SPEED (Constant model: speed (m/s)) must be a number greater than 0; got -1."),
            ({"INPUT": self.dem, "INTERVAL": "nan"}, "INTERVAL (Isochrone interval (minutes; 0: automatic)) must be"),
            ({"INPUT": self.dem, "OUTLET": far}, "lies outside the DEM"),
            ({"INPUT": self.dem, "VELOCITY_MODEL": 2, "MANNING": empty, "BAND": 1}, None),  # same grid: fine
        ]
        for parameters, words in cases:
            paths = self.outputs("bad")
            rc, out = self.run_alg(dict(paths, **parameters))
            text = out if isinstance(out, str) else json.dumps(out)
            if words is None:
                self.assertEqual(rc, 0, text)
                for path in paths.values():
                    os.remove(path)
                continue
            self.assertNotEqual(rc, 0, f"{parameters}: {text}")
            self.assertIn(words, text, parameters)
            for path in paths.values():
                self.assertFalse(os.path.exists(path), (parameters, path))


if __name__ == "__main__":
    unittest.main()
