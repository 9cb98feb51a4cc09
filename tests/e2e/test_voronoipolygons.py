#!/usr/bin/python3
"""End-to-end tests of gpugeo:voronoipolygons through qgis_process, as a drop-in for
qgis:voronoipolygons: the same parameters on the same layers give the same polygons (symmetric
difference within 1e-9 of each area) with the same attributes; FlatGeobuf and GeoPackage outputs;
the tolerance and COPY_ATTRIBUTES of later QGIS versions; a multipoint layer.

usage: test_voronoipolygons.py [unittest arguments, e.g. VoronoiPolygonsTest.test_like_qgis]
"""
import unittest

import numpy as np
from osgeo import ogr

from test_qgis_process import QgisProcessBase, write_points

ogr.UseExceptions()


def polygons_by_val(path):
    """{val: geometry} and the layer's field names."""
    dataset = ogr.Open(path)
    layer = dataset.GetLayer(0)
    definition = layer.GetLayerDefn()
    names = [definition.GetFieldDefn(i).GetName() for i in range(definition.GetFieldCount())]
    found = {}
    for feature in layer:
        key = feature.GetField("val") if "val" in names else feature.GetField("id")
        found[key] = feature.GetGeometryRef().Clone()
    return found, names


class VoronoiPolygonsTest(QgisProcessBase):
    def run_alg(self, algorithm, parameters):
        rc, out = self.qgis(["run", algorithm, "--"] + [f"{k}={v}" for k, v in parameters.items()])
        self.assertEqual(rc, 0, out)
        return out

    def test_like_qgis(self):
        rng = np.random.default_rng(5)
        xy = rng.uniform(0, 5000, (400, 2)) + np.array([500000.0, 4000000.0])
        points = [tuple(p) for p in xy] + [tuple(xy[3])]  # the last repeats point 3
        source = self.path("points.gpkg")
        write_points(source, points)
        for buffer, extension in ((0, "fgb"), (12.5, "gpkg")):
            ours_path, theirs_path = self.path(f"ours_{buffer}.{extension}"), self.path(f"theirs_{buffer}.{extension}")
            self.run_alg("gpugeo:voronoipolygons", {"INPUT": source, "BUFFER": buffer, "OUTPUT": ours_path})
            self.run_alg("qgis:voronoipolygons", {"INPUT": source, "BUFFER": buffer, "OUTPUT": theirs_path})
            ours, ours_fields = polygons_by_val(ours_path)
            theirs, theirs_fields = polygons_by_val(theirs_path)
            self.assertEqual(ours_fields, theirs_fields)
            self.assertEqual(sorted(ours), sorted(theirs))
            self.assertNotIn(400, ours)  # the repeat keeps no polygon, as in QGIS
            for val, geometry in ours.items():
                self.assertTrue(geometry.IsValid(), val)
                difference = geometry.SymDifference(theirs[val]).GetArea()
                self.assertLessEqual(difference, 1e-9 * theirs[val].GetArea(), val)

    def test_tolerance_attributes_and_multipoints(self):
        source = self.path("multi.gpkg")
        write_points(source, [(0.0, 0.0), (10.0, 0.0), (10.0, 10.0), (10.004, 10.0)],
                     extra=[("MULTIPOINT ((3 7),(6 2))", 77)])
        out_path = self.path("plain.fgb")
        self.run_alg("gpugeo:voronoipolygons", {"INPUT": source, "TOLERANCE": 0.01, "COPY_ATTRIBUTES": "false",
                                                "BUFFER": 10, "OUTPUT": out_path})
        polygons, fields = polygons_by_val(out_path)
        self.assertEqual(fields, ["id"])
        # Sites in reading order: 4 points, then the multipoint's 2 parts; point 3 merged into 2.
        self.assertEqual(sorted(polygons), [0, 1, 2, 4, 5])
        # The layer's extent (the merged point included: 0..10.004 by 0..10) grown by 10 % on each side.
        total = sum(g.GetArea() for g in polygons.values())
        want = (10.004 * 1.2) * (10.0 * 1.2)
        self.assertAlmostEqual(total, want, delta=1e-9 * want)


if __name__ == "__main__":
    unittest.main()
