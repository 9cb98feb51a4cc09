#!/usr/bin/python3
"""End-to-end tests of gpugeo:pointneighbours and gpugeo:dbscan through qgis_process: DBSCAN against
QGIS's own native:dbscanclustering on real data (tzdata's time-zone cities) and on clustered points;
a model chaining gpugeo:dbscan into a QGIS native algorithm; neighbours against a NumPy brute force
in a projected and a geographic CRS; bad input.

usage: test_neighbours.py [unittest arguments, e.g. NeighboursTest.test_dbscan_like_qgis]
"""
import json
import math
import os
import struct
import unittest

import numpy as np
from osgeo import ogr, osr

from test_qgis_process import HERE, QgisProcessBase
from test_qtmvoronoi import R_KM, write_lonlat, zone_cities


def write_projected(path, xy, epsg=32633, multipoint_extra=()):
    """Points (with an integer field "val") in `epsg`; `multipoint_extra` adds multipoint wkts."""
    dataset = ogr.GetDriverByName("GPKG").CreateDataSource(path)
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(epsg)
    layer = dataset.CreateLayer("sites", srs, ogr.wkbMultiPoint if multipoint_extra else ogr.wkbPoint)
    layer.CreateField(ogr.FieldDefn("val", ogr.OFTInteger))
    for i, (x, y) in enumerate(xy):
        feature = ogr.Feature(layer.GetLayerDefn())
        feature.SetField("val", i)
        wkt = f"MULTIPOINT (({x!r} {y!r}))" if multipoint_extra else f"POINT ({x!r} {y!r})"
        feature.SetGeometry(ogr.CreateGeometryFromWkt(wkt))
        layer.CreateFeature(feature)
    for wkt in multipoint_extra:
        feature = ogr.Feature(layer.GetLayerDefn())
        feature.SetField("val", -1)
        feature.SetGeometry(ogr.CreateGeometryFromWkt(wkt))
        layer.CreateFeature(feature)
    dataset = None


def read_layer(path, fields):
    dataset = ogr.Open(path)
    layer = dataset.GetLayer(0)
    rows = [[f.GetFID()] + [f.GetField(name) for name in fields] for f in layer]
    definition = layer.GetLayerDefn()
    names = [definition.GetFieldDefn(i).GetName() for i in range(definition.GetFieldCount())]
    return rows, names


def clustered_points(n, seed):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(0, 10000, (12, 2))
    xy = np.concatenate([centres[rng.integers(0, 12, n * 4 // 5)] + rng.normal(0, 120, (n * 4 // 5, 2)),
                         rng.uniform(0, 10000, (n - n * 4 // 5, 2))])
    return xy + np.array([500000.0, 4000000.0])


def core_flags(xy, eps, min_size):
    d2 = ((xy[:, None, :] - xy[None, :, :]) ** 2).sum(axis=2)
    return (d2 <= eps * eps).sum(axis=1) >= min_size


class NeighboursTest(QgisProcessBase):
    def run_alg(self, algorithm, parameters):
        return self.qgis(["run", algorithm, "--"] + [f"{k}={v}" for k, v in parameters.items()])

    def compare_dbscan(self, source, xy, eps, min_size):
        for star in (False, True):
            results = {}
            for algorithm in ("native:dbscanclustering", "gpugeo:dbscan"):
                out_path = self.path(f"{algorithm.replace(':', '_')}_{star}.gpkg")
                parameters = {"INPUT": source, "EPS": eps, "MIN_SIZE": min_size, "DBSCAN*": star, "OUTPUT": out_path}
                if algorithm == "gpugeo:dbscan":
                    parameters["DEVICE"] = 1
                rc, out = self.run_alg(algorithm, parameters)
                self.assertEqual(rc, 0, out)
                rows, names = read_layer(out_path, ["CLUSTER_ID", "CLUSTER_SIZE"])
                results[algorithm] = (rows, names, out["results"]["NUM_CLUSTERS"])
            (qrows, qnames, qcount), (grows, gnames, gcount) = results["native:dbscanclustering"], results["gpugeo:dbscan"]
            self.assertEqual(qnames, gnames)
            self.assertEqual(gcount, qcount)
            self.assertEqual([r[0] for r in qrows], [r[0] for r in grows])  # the same features, in order
            core = core_flags(xy, eps, min_size)
            # Core points: the same cluster ids (QGIS numbers a cluster by its first core point).
            for i, (q, g, c) in enumerate(zip(qrows, grows, core)):
                if c:
                    self.assertIsNotNone(g[1])
                    self.assertEqual(q[1], g[1], f"core feature {i}")
            # Noise is noise in both; with DBSCAN* (core points only) every value is the same.
            for q, g in zip(qrows, grows):
                self.assertEqual(q[1] is None, g[1] is None, (q, g))
            if star:
                self.assertEqual(qrows, grows)
            else:
                # Border points join the cluster of their lowest-index core neighbour.
                d2 = ((xy[:, None, :] - xy[None, :, :]) ** 2).sum(axis=2)
                for i, g in enumerate(grows):
                    if not core[i] and g[1] is not None:
                        j = np.flatnonzero(core & (d2[i] <= eps * eps))[0]
                        self.assertEqual(g[1], grows[j][1], i)

    def test_dbscan_like_qgis(self):
        cities = zone_cities()
        source = self.path("zones.gpkg")
        write_lonlat(source, cities)
        self.compare_dbscan(source, np.array([(c[0], c[1]) for c in cities]), 6.0, 3)
        xy = clustered_points(1500, 4)
        projected = self.path("clustered.gpkg")
        write_projected(projected, xy)
        self.compare_dbscan(projected, xy, 60.0, 5)

    def test_dbscan_model(self):
        xy = clustered_points(800, 5)
        source = self.path("model_points.gpkg")
        write_projected(source, xy)
        clustered = self.path("clustered_only.gpkg")
        rc, out = self.qgis(["run", os.path.join(HERE, "dbscan_clustered_points.model3"), "--", f"points={source}",
                             "eps=80", "min_size=6", f"extract:clustered={clustered}"])
        self.assertEqual(rc, 0, out)
        self.assertTrue(any("Model processed OK" in line for line in out["log"]["info"]), out["log"])
        # The clustered points: core points, and border points (within eps of a core point).
        core = core_flags(xy, 80.0, 6)
        d2 = ((xy[:, None, :] - xy[None, :, :]) ** 2).sum(axis=2)
        expected = int((core | ((d2 <= 6400.0) & core[None, :]).any(axis=1)).sum())
        dataset = ogr.Open(clustered)
        self.assertEqual(dataset.GetLayer(0).GetFeatureCount(), expected)

    def brute_neighbours(self, xyz, radius, k):
        d = np.sqrt(((xyz[:, None, :] - xyz[None, :, :]) ** 2).sum(axis=2))
        np.fill_diagonal(d, np.inf)
        n = len(xyz)
        counts, nearest, mean = [], [], []
        for i in range(n):
            order = np.lexsort((np.arange(n), d[i]))
            within = [j for j in order if d[i, j] <= radius] if radius > 0 else list(order[:-1])
            chosen = within[:k] if k > 0 else within
            counts.append(len(chosen))
            nearest.append((order[0], d[i, order[0]]))
            mean.append(np.mean(d[i, chosen]) if chosen else None)
        return counts, nearest, mean, d

    def check_neighbours(self, source, xyz, fids, radius, k, tolerance):
        out_path, pairs_path = self.path("nb.gpkg"), self.path("pairs.gpkg")
        rc, out = self.run_alg("gpugeo:pointneighbours", {"INPUT": source, "RADIUS": radius, "K": k, "DEVICE": 1,
                                                          "OUTPUT": out_path, "OUTPUT_PAIRS": pairs_path})
        self.assertEqual(rc, 0, out)
        counts, nearest, mean, d = self.brute_neighbours(xyz, radius, k)
        rows, names = read_layer(out_path, ["NB_COUNT", "NN_FID", "NN_DIST", "MEAN_DIST"])
        self.assertEqual(names[-4:], ["NB_COUNT", "NN_FID", "NN_DIST", "MEAN_DIST"])
        self.assertEqual(len(rows), len(xyz))
        for i, row in enumerate(rows):
            self.assertEqual(row[1], counts[i], i)
            self.assertEqual(row[2], fids[nearest[i][0]], i)
            self.assertAlmostEqual(row[3], nearest[i][1], delta=tolerance)
            if mean[i] is None:
                self.assertIsNone(row[4])
            else:
                self.assertAlmostEqual(row[4], mean[i], delta=tolerance)
        # Pairs: each once, FID_A <= FID_B, the distance right.
        prow, _ = read_layer(pairs_path, ["FID_A", "FID_B", "DISTANCE"])
        index = {f: i for i, f in enumerate(fids)}
        got = set()
        for _, a, b, dist in prow:
            self.assertLessEqual(a, b)
            self.assertAlmostEqual(dist, d[index[a], index[b]], delta=tolerance)
            got.add((index[a], index[b]))
        self.assertEqual(len(got), len(prow))
        n = len(xyz)
        if k == 0:
            want = {(i, j) for i in range(n) for j in range(i + 1, n) if d[i, j] <= radius}
        else:
            want = set()
            for i in range(n):
                order = np.lexsort((np.arange(n), d[i]))
                chosen = [j for j in order[:-1] if radius == 0 or d[i, j] <= radius][:k]
                want |= {(min(i, j), max(i, j)) for j in chosen}
        self.assertEqual(got, want)

    def test_pointneighbours_projected(self):
        rng = np.random.default_rng(6)
        lattice = [(500000.0 + 10 * i, 4000000.0 + 10 * j) for i in range(12) for j in range(12)]  # ties at the radius
        xy = np.array(lattice + [tuple(p) for p in rng.uniform([500000, 4000000], [500120, 4000120], (150, 2))])
        source = self.path("projected.gpkg")
        write_projected(source, xy)
        fids = list(range(1, len(xy) + 1))
        self.check_neighbours(source, xy, fids, 10.0, 0, 1e-9)
        self.check_neighbours(source, xy, fids, 15.0, 3, 1e-9)
        self.check_neighbours(source, xy, fids, 0.0, 2, 1e-9)

    def test_pointneighbours_geographic(self):
        cities = zone_cities()
        source = self.path("zones.gpkg")
        write_lonlat(source, cities)
        lon = np.radians([c[0] for c in cities])
        lat = np.radians([c[1] for c in cities])
        r = R_KM * 1000.0
        xyz = np.stack([r * np.cos(lat) * np.cos(lon), r * np.cos(lat) * np.sin(lon), r * np.sin(lat)], axis=1)
        self.check_neighbours(source, xyz, list(range(1, len(cities) + 1)), 500000.0, 0, 1e-6)

    def test_pointneighbours_lines_and_parts(self):
        source = self.path("parts.gpkg")
        write_projected(source, [(0.0, 0.0), (3.0, 0.0)], multipoint_extra=["MULTIPOINT ((0 4),(3 4))"])
        lines = self.path("lines.gpkg")
        rc, out = self.run_alg("gpugeo:pointneighbours", {"INPUT": source, "RADIUS": 4.0, "PAIRS_AS_LINES": True,
                                                          "OUTPUT": self.path("o.gpkg"), "OUTPUT_PAIRS": lines})
        self.assertEqual(rc, 0, out)
        dataset = ogr.Open(lines)
        layer = dataset.GetLayer(0)
        self.assertEqual(layer.GetGeomType(), ogr.wkbLineString)
        pairs = sorted((f.GetField("FID_A"), f.GetField("PART_A"), f.GetField("FID_B"), f.GetField("PART_B"),
                        round(f.GetField("DISTANCE"), 9), round(f.GetGeometryRef().Length(), 9)) for f in layer)
        # (0,0)-(3,0), (0,0)-(0,4), (3,0)-(3,4), and the two parts of feature 3, 3 apart
        self.assertEqual(pairs, [(1, 0, 2, 0, 3.0, 3.0), (1, 0, 3, 0, 4.0, 4.0), (2, 0, 3, 1, 4.0, 4.0),
                                 (3, 0, 3, 1, 3.0, 3.0)])
        dataset = ogr.Open(self.path("o.gpkg"))
        self.assertEqual(dataset.GetLayer(0).GetFeatureCount(), 4)

    def test_neighbours_bad_input(self):
        source = self.path("two.gpkg")
        write_projected(source, [(0.0, 0.0), (1.0, 1.0)] * 20)
        for parameters, text in (({"RADIUS": 0, "K": 0}, "radius greater than zero"),
                                 ({"RADIUS": 5, "K": -1}, "K"),
                                 ({"RADIUS": 5, "MAX_PAIRS": 10, "OUTPUT_PAIRS": self.path("p.gpkg")}, "more than the maximum")):
            rc, out = self.run_alg("gpugeo:pointneighbours", dict(parameters, INPUT=source, OUTPUT=self.path("o.gpkg")))
            self.assertNotEqual(rc, 0, parameters)
            self.assertIn(text, str(out), parameters)
            self.assertFalse(os.path.exists(self.path("p.gpkg")), parameters)
        empty = self.path("empty.gpkg")
        write_projected(empty, [])
        rc, out = self.run_alg("gpugeo:pointneighbours", {"INPUT": empty, "RADIUS": 5, "OUTPUT": self.path("o.gpkg")})
        self.assertNotEqual(rc, 0)
        self.assertIn("no point", str(out))
        # DBSCAN as QGIS's: an empty result with a warning, not an error.
        rc, out = self.run_alg("gpugeo:dbscan", {"INPUT": empty, "EPS": 5, "OUTPUT": self.path("o.gpkg")})
        self.assertEqual(rc, 0, out)
        self.assertEqual(out["results"]["NUM_CLUSTERS"], 0)
        self.assertIn("no point to use", str(out["log"]))
        nan = self.path("nan.gpkg")
        dataset = ogr.GetDriverByName("GPKG").CreateDataSource(nan)
        srs = osr.SpatialReference()
        srs.ImportFromEPSG(32633)
        layer = dataset.CreateLayer("sites", srs, ogr.wkbPoint)
        for x, y in ((5.0, 5.0), (float("nan"), 5.0), (6.0, 6.0)):
            feature = ogr.Feature(layer.GetLayerDefn())
            feature.SetGeometry(ogr.CreateGeometryFromWkb(struct.pack("<BIdd", 1, 1, x, y)))
            layer.CreateFeature(feature)
        dataset = None
        for algorithm, parameters in (("gpugeo:pointneighbours", {"RADIUS": 5}), ("gpugeo:dbscan", {"EPS": 5})):
            rc, out = self.run_alg(algorithm, dict(parameters, INPUT=nan, OUTPUT=self.path("o.gpkg")))
            self.assertNotEqual(rc, 0, algorithm)
            self.assertIn("1 of 3 points have a NaN coordinate", str(out), algorithm)


if __name__ == "__main__":
    unittest.main()
