#!/usr/bin/python3
"""End-to-end tests of gpugeo:voronoiraster with lines and polygons as sites, through qgis_process:
the labels and distances against a NumPy brute force over every segment (exact distances, not to
rasterized pixels), against gdal:rasterize + gdal:proximity on the same grid (within half a pixel's
diagonal of the exact transform of the burned pixels), polygons inside and boundary modes with holes and multiparts, curves, empty geometries.

usage: test_voronoiraster_features.py [unittest arguments, e.g. FeatureAllocationTest.test_lines]
"""
import unittest

import numpy as np
from osgeo import gdal, ogr, osr

from test_qgis_process import NODATA, QgisProcessBase, read_raster

gdal.UseExceptions()
ogr.UseExceptions()


def write_layer(path, geometry_type, wkts, epsg=32633):
    """A GeoPackage layer of the given WKT geometries (None: no geometry) with an integer field `val`."""
    dataset = ogr.GetDriverByName("GPKG").CreateDataSource(path)
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(epsg)
    layer = dataset.CreateLayer("features", srs, geometry_type)
    layer.CreateField(ogr.FieldDefn("val", ogr.OFTInteger))
    for i, wkt in enumerate(wkts):
        feature = ogr.Feature(layer.GetLayerDefn())
        feature.SetField("val", 100 + i)
        if wkt is not None:
            feature.SetGeometry(ogr.CreateGeometryFromWkt(wkt))
        layer.CreateFeature(feature)
    dataset = None


def segment_distances(px, py, ax, ay, bx, by):
    """Distance from points (px, py) (arrays) to segment a-b, exactly in float64."""
    dx, dy = bx - ax, by - ay
    dd = dx * dx + dy * dy
    t = np.zeros_like(px) if dd == 0 else np.clip(((px - ax) * dx + (py - ay) * dy) / dd, 0.0, 1.0)
    return np.hypot(ax + t * dx - px, ay + t * dy - py)


def inside_even_odd(px, py, ring):
    """Whether each point lies inside the ring (crossings of the horizontal line to the left)."""
    inside = np.zeros(px.shape, dtype=bool)
    for (ax, ay), (bx, by) in zip(ring[:-1], ring[1:]):
        if ay == by:
            continue
        crosses = (np.minimum(ay, by) <= py) & (py < np.maximum(ay, by))
        x = ax + (py - ay) * (bx - ax) / (by - ay)
        inside ^= crosses & (x < px)
    return inside


def brute_force(features, origin_x, origin_y, pixel, width, height, polygons=False, boundary=False):
    """Labels (0-based feature) and distances in CRS units: every pixel centre against every segment;
    for polygons ([parts of [rings]]) inside = 0 unless boundary."""
    cols, rows = np.meshgrid(np.arange(width) + 0.5, np.arange(height) + 0.5)
    px, py = origin_x + cols * pixel, origin_y - rows * pixel
    best = np.full(px.shape, np.inf)
    label = np.full(px.shape, -1, dtype=np.int64)
    for f, paths in enumerate(features):
        d = np.full(px.shape, np.inf)
        for path in (p for part in paths for p in part) if polygons else paths:
            for a, b in zip(path[:-1], path[1:]):
                d = np.minimum(d, segment_distances(px, py, a[0], a[1], b[0], b[1]))
        if polygons and not boundary:
            for part in paths:
                inside = np.zeros(px.shape, dtype=bool)
                for ring in part:
                    inside ^= inside_even_odd(px, py, ring)
                d[inside] = 0.0
        closer = d < best
        best[closer] = d[closer]
        label[closer] = f
    return label, best


def wkt_line(path):
    return "LINESTRING (" + ", ".join(f"{x!r} {y!r}" for x, y in path) + ")"


class FeatureAllocationTest(QgisProcessBase):
    def run_alg(self, algorithm, parameters):
        rc, out = self.qgis(["run", algorithm, "--"] + [f"{k}={v}" for k, v in parameters.items()])
        self.assertEqual(rc, 0, out)
        return out

    def test_lines(self):
        rng = np.random.default_rng(3)
        origin_x, origin_y, pixel, width, height = 600000.0, 5200000.0, 2.0, 150, 110
        lines = []
        for _ in range(25):
            start = rng.uniform(0, 1, 2) * [width * pixel, height * pixel]
            path = start + np.cumsum(rng.uniform(-15, 15, (rng.integers(1, 8), 2)), axis=0)
            # Inside the raster, so that gdal:proximity (which sees only burned pixels) can compare.
            path = np.clip(np.vstack([start, path]), pixel, [(width - 1) * pixel, (height - 1) * pixel])
            path = path + [origin_x, origin_y - height * pixel]
            lines.append([tuple(p) for p in path])
        source = self.path("lines.gpkg")
        write_layer(source, ogr.wkbLineString, [wkt_line(p) for p in lines] + [None, "LINESTRING EMPTY"])
        extent = f"{origin_x},{origin_x + width * pixel},{origin_y - height * pixel},{origin_y} [EPSG:32633]"
        out = self.run_alg("gpugeo:voronoiraster", {"INPUT": source, "EXTENT": extent, "PIXEL_SIZE": pixel,
                                                    "FIELD": "val", "OUTPUT": self.path("alloc.tif"),
                                                    "OUTPUT_DISTANCE": self.path("dist.tif")})
        log = out["log"] if isinstance(out, dict) else out
        self.assertIn("Skipped 1 features without geometry and 1 with an empty geometry", str(log))
        labels, transform, nodata, _, _ = read_raster(self.path("alloc.tif"))
        distance = read_raster(self.path("dist.tif"))[0]
        self.assertEqual(labels.shape, (height, width))
        self.assertEqual(transform, (origin_x, pixel, 0.0, origin_y, 0.0, -pixel))
        want_label, want_distance = brute_force([[p] for p in lines], origin_x, origin_y, pixel, width, height)
        np.testing.assert_allclose(distance, want_distance, rtol=1e-6, atol=1e-6)
        # Labels: the field's values; at near-ties (within 1e-9) either feature is right.
        near_tie = np.zeros(labels.shape, dtype=bool)
        for f, path in enumerate(lines):
            d = brute_force([[path]], origin_x, origin_y, pixel, width, height)[1]
            near_tie |= (np.abs(d - want_distance) < 1e-9) & (want_label != f)
        agree = (labels == want_label + 100) | near_tie
        self.assertTrue(agree.all(), np.argwhere(~agree)[:5])

        # gdal:proximity on the lines burned in (all touched): within half a pixel's diagonal.
        burned = self.path("burned.tif")
        self.run_alg("gdal:rasterize", {"INPUT": source, "BURN": 1, "UNITS": 1, "WIDTH": pixel, "HEIGHT": pixel,
                                        "EXTENT": extent, "INIT": 0, "DATA_TYPE": 0, "EXTRA": "-at",
                                        "OUTPUT": burned})
        self.run_alg("gdal:proximity", {"INPUT": burned, "BAND": 1, "VALUES": "1", "UNITS": 0,
                                        "DATA_TYPE": 5, "OUTPUT": self.path("proximity.tif")})
        theirs = read_raster(self.path("proximity.tif"))[0]
        # Against the exact distance transform of the burned pixels: within half a pixel's diagonal;
        # GDAL's own propagation overestimates that transform by up to about a quarter of a pixel.
        from scipy import ndimage
        exact = ndimage.distance_transform_edt(read_raster(burned)[0] == 0) * pixel
        self.assertLessEqual(float(np.max(np.abs(distance - exact))), pixel * np.sqrt(0.5) + 1e-3)
        self.assertLessEqual(float(np.max(np.abs(distance - theirs))), pixel * (np.sqrt(0.5) + 0.3))

    def test_polygons_inside_and_boundary(self):
        shell = [(0, 0), (60, 0), (60, 50), (0, 50), (0, 0)]
        hole = [(20, 15), (20, 35), (40, 35), (40, 15), (20, 15)]
        square = lambda x, y, r: [(x - r, y - r), (x + r, y - r), (x + r, y + r), (x - r, y + r), (x - r, y - r)]
        polygons = [[[shell, hole]],                                 # feature 0: a square with a hole
                    [[square(90, 20, 8)], [square(110, 70, 6)]],     # feature 1: two parts
                    [[square(95, 25, 9)]],                           # feature 2: overlaps feature 1
                    [[[(10, 70), (50, 95), (30, 60), (10, 70)]]]]    # feature 3: a triangle
        wkt = []
        for parts in polygons:
            text = ", ".join("(" + ", ".join("(" + ", ".join(f"{x} {y}" for x, y in ring) + ")" for ring in part) + ")"
                             for part in parts)
            wkt.append(f"MULTIPOLYGON ({text})")
        source = self.path("polygons.gpkg")
        write_layer(source, ogr.wkbMultiPolygon, wkt)
        origin_x, origin_y, pixel, width, height = -5.0, 100.0, 0.5, 260, 210
        extent = f"{origin_x},{origin_x + width * pixel},{origin_y - height * pixel},{origin_y} [EPSG:32633]"
        for mode, boundary in ((0, False), (1, True)):
            out_alloc, out_dist = self.path(f"alloc{mode}.tif"), self.path(f"dist{mode}.tif")
            self.run_alg("gpugeo:voronoiraster", {"INPUT": source, "EXTENT": extent, "PIXEL_SIZE": pixel,
                                                  "POLYGON_DISTANCE": mode, "OUTPUT": out_alloc,
                                                  "OUTPUT_DISTANCE": out_dist,
                                                  "OUTPUT_POLYGONS": self.path(f"regions{mode}.gpkg")})
            labels = read_raster(out_alloc)[0]
            distance = read_raster(out_dist)[0]
            want_label, want_distance = brute_force(polygons, origin_x, origin_y, pixel, width, height,
                                                    polygons=True, boundary=boundary)
            np.testing.assert_allclose(distance, want_distance, rtol=1e-6, atol=1e-6)
            clear = np.ones(labels.shape, dtype=bool)
            for f in range(len(polygons)):  # leave out near-ties between features
                d = brute_force([polygons[f]], origin_x, origin_y, pixel, width, height, polygons=True,
                                boundary=boundary)[1]
                clear &= (want_label == f) | (np.abs(d - want_distance) > 1e-9)
            np.testing.assert_array_equal(labels[clear], want_label[clear] + 1)
            regions = ogr.Open(self.path(f"regions{mode}.gpkg"))
            self.assertEqual(regions.GetLayer(0).GetFeatureCount(), 4)
            regions = None
        # Inside mode: the hole is not feature 0's at distance 0; the overlap goes to feature 1.
        labels0, dist0 = read_raster(self.path("alloc0.tif"))[0], read_raster(self.path("dist0.tif"))[0]
        at = lambda x, y: (int((origin_y - y) / pixel), int((x - origin_x) / pixel))
        self.assertEqual((labels0[at(5.1, 5.1)], dist0[at(5.1, 5.1)]), (1, 0.0))
        self.assertGreater(dist0[at(30.1, 25.1)], 4.0)
        self.assertEqual((labels0[at(90.1, 20.1)], dist0[at(90.1, 20.1)]), (2, 0.0))
        self.assertEqual((labels0[at(101.1, 30.1)], dist0[at(101.1, 30.1)]), (3, 0.0))

    def test_curves_and_empty_layers(self):
        source = self.path("curves.gpkg")
        write_layer(source, ogr.wkbCompoundCurve,
                    ["COMPOUNDCURVE (CIRCULARSTRING (0 0, 50 50, 100 0), (100 0, 100 -40))",
                     "COMPOUNDCURVE ((10 -60, 90 -60))"])
        out = self.run_alg("gpugeo:voronoiraster", {"INPUT": source, "PIXEL_SIZE": 1.0,
                                                    "OUTPUT": self.path("curves.tif"),
                                                    "OUTPUT_DISTANCE": self.path("curves_d.tif")})
        self.assertIn("1 features with curves were segmentized to within 0.1 layer units", str(out))
        distance, transform = read_raster(self.path("curves_d.tif"))[:2]
        # Near (50, 25), inside the arc's circle (centre (50, 0), radius 50), the distance is 50 - r
        # to within the segmentization's 0.1.
        row, col = int(transform[3] - 25.0), int(50.0 - transform[0])
        r = np.hypot(transform[0] + col + 0.5 - 50.0, transform[3] - row - 0.5)
        self.assertLess(abs(float(distance[row, col]) - (50.0 - r)), 0.1 + 1e-6)

        empty = self.path("empty.gpkg")
        write_layer(empty, ogr.wkbLineString, ["LINESTRING EMPTY", None])
        rc, out = self.qgis(["run", "gpugeo:voronoiraster", "--", f"INPUT={empty}", "PIXEL_SIZE=1",
                             f"OUTPUT={self.path('e.tif')}"], parse_json=False)
        self.assertNotEqual(rc, 0)
        self.assertIn("no feature to use (1 features without geometry, 1 with an empty geometry)", out)


if __name__ == "__main__":
    unittest.main()
