#!/usr/bin/python3
"""End-to-end tests of gpugeo:meshcontours through qgis_process: the same 2DM meshes through QGIS's own
native:meshcontours and through gpugeo:meshcontours, compared feature by feature (attributes, length
per level, area per band, validity, parts); a model chaining native:tinmeshcreation into
gpugeo:meshcontours; bad input.

usage: test_meshcontours.py [unittest arguments, e.g. MeshContoursTest.test_meshcontours_like_qgis]
"""
import math
import os
import time
import unittest

from osgeo import ogr, osr

from test_qgis_process import HERE, QgisProcessBase

ogr.UseExceptions()


def grid_mesh(path, n, f, step=1.0, x0=0.0, y0=0.0, face_value=None):
    """A 2DM of (n + 1)^2 nodes, z = f(i, j): quads (some clockwise), every third cell two triangles;
    with face_value(i, j), a face value column (the group "Bed Elevation (Face)")."""
    with open(path, "w") as out:
        out.write("MESH2D\n")
        for j in range(n + 1):
            for i in range(n + 1):
                out.write(f"ND {j * (n + 1) + i + 1} {x0 + i * step!r} {y0 + j * step!r} {f(i, j)!r}\n")
        face = 0

        def write(card, nodes, i, j):
            nonlocal face
            face += 1
            value = f" {face_value(i, j)!r}" if face_value else ""
            out.write(f"{card} {face} {' '.join(str(v + 1) for v in nodes)} 1{value}\n")

        for j in range(n):
            for i in range(n):
                a, b, c, d = j * (n + 1) + i, j * (n + 1) + i + 1, (j + 1) * (n + 1) + i + 1, (j + 1) * (n + 1) + i
                if (i + j) % 3 == 0:
                    write("E3T", (a, b, c), i, j)
                    write("E3T", (a, c, d), i, j)
                elif (i * 7 + j) % 5 == 0:
                    write("E4Q", (a, d, c, b), i, j)
                else:
                    write("E4Q", (a, b, c, d), i, j)


def wave(i, j):
    return 10.0 * math.sin(i / 4.3) * math.cos(j / 6.1) + 0.07 * i


def read_features(path):
    """[(attributes, geometry wkb, parts, valid)] in order, the layer's geometry type and field types."""
    dataset = ogr.Open(path)
    layer = dataset.GetLayer(0)
    definition = layer.GetLayerDefn()
    fields = [(definition.GetFieldDefn(i).GetName(), definition.GetFieldDefn(i).GetTypeName())
              for i in range(definition.GetFieldCount())]
    polygons = ogr.GT_Flatten(layer.GetGeomType()) in (ogr.wkbPolygon, ogr.wkbMultiPolygon)
    rows = []
    for feature in layer:
        geometry = feature.GetGeometryRef()
        rows.append({"attributes": [feature.GetField(name) for name, _ in fields],
                     "length": None if polygons else geometry.Length(), "area": geometry.GetArea() if polygons else None,
                     "parts": geometry.GetGeometryCount() if geometry.GetGeometryType() in (
                         ogr.wkbMultiLineString25D, ogr.wkbMultiPolygon25D, ogr.wkbMultiLineString,
                         ogr.wkbMultiPolygon) else 1,
                     "valid": geometry.IsValid()})
    srs = layer.GetSpatialRef()
    return rows, layer.GetGeomType(), fields, (srs.GetAuthorityCode(None) if srs else None)


class MeshContoursTest(QgisProcessBase):
    def run_alg(self, algorithm, parameters):
        return self.qgis(["run", algorithm, "--"] + [f"{k}={v}" for k, v in parameters.items()])

    def run_both(self, mesh, parameters, tag):
        """Runs native:meshcontours and gpugeo:meshcontours (GeoPackage outputs); returns their outputs and
        wall times."""
        results = {}
        for algorithm in ("native:meshcontours", "gpugeo:meshcontours"):
            name = f"{tag}_{algorithm.split(':')[0]}"
            lines, polygons = self.path(name + "_lines.gpkg"), self.path(name + "_polygons.gpkg")
            arguments = dict(parameters, INPUT=mesh, OUTPUT_LINES=lines, OUTPUT_POLYGONS=polygons)
            if algorithm.startswith("gpugeo"):
                arguments["DEVICE"] = 1
            start = time.monotonic()
            rc, out = self.run_alg(algorithm, arguments)
            elapsed = time.monotonic() - start
            self.assertEqual(rc, 0, out)
            results[algorithm] = (read_features(lines), read_features(polygons), elapsed, out)
        return results["native:meshcontours"], results["gpugeo:meshcontours"]

    def compare(self, qgis, ours, features_both_have=None):
        """Ours against QGIS's: multi layers, the same fields, features, attributes, length per level and area
        per band, no more parts, valid polygons; only the first `features_both_have` levels when given (and
        the bands between them). Returns the line parts of both."""
        (q_lines, _, q_line_fields, _), (q_polygons, _, q_polygon_fields, _) = qgis[0], qgis[1]
        (g_lines, g_line_type, g_line_fields, _), (g_polygons, g_polygon_type, g_polygon_fields, _) = ours[0], ours[1]
        self.assertEqual(g_line_type, ogr.wkbMultiLineString25D)
        self.assertEqual(g_polygon_type, ogr.wkbMultiPolygon25D)
        self.assertEqual(g_line_fields, q_line_fields)
        self.assertEqual(g_polygon_fields, q_polygon_fields)
        self.assertEqual([name for name, _ in g_line_fields], ["group", "time", "value"])
        self.assertEqual([name for name, _ in g_polygon_fields], ["group", "time", "min_value", "max_value"])
        line_count = polygon_count = features_both_have
        if features_both_have is None:
            self.assertEqual(len(g_lines), len(q_lines))
            self.assertEqual(len(g_polygons), len(q_polygons))
        else:
            polygon_count -= 1
        for q, g in list(zip(q_lines, g_lines))[:line_count]:
            self.assertEqual(g["attributes"], q["attributes"])
            self.assertAlmostEqual(g["length"], q["length"], delta=1e-9 * q["length"])
            self.assertLessEqual(g["parts"], q["parts"], g["attributes"])
        for q, g in list(zip(q_polygons, g_polygons))[:polygon_count]:
            self.assertEqual(g["attributes"], q["attributes"])
            self.assertAlmostEqual(g["area"], q["area"], delta=1e-9 * q["area"])
        for g in g_polygons:
            self.assertTrue(g["valid"], g["attributes"])
        return sum(g["parts"] for g in g_lines), sum(q["parts"] for q in q_lines)

    def test_meshcontours_like_qgis(self):
        mesh = self.path("wave.2dm")
        grid_mesh(mesh, 60, wave, 10.0, 500000.0, 4000000.0, face_value=lambda i, j: 3.0 * math.sin(i / 3.7) + j / 7.9)
        common = {"DATASET_TIME": "2021-01-01T00:00:00"}
        # group 0 (node z) and group 1 (face values averaged to the nodes), levels off the node values
        for group, levels in ((0, "-7.3,-3.1,0.123,2.7,5.55,8.01"), (1, "-1.1,1.3,3.7,6.1,8.3")):
            qgis, ours = self.run_both(mesh, dict(common, DATASET_GROUPS=group, CONTOUR_LEVEL_LIST=levels), f"g{group}")
            ours_parts, qgis_parts = self.compare(qgis, ours)
            self.assertLess(ours_parts, qgis_parts)
            self.assertEqual(ours[0][0][0]["attributes"][:2],
                             ["Bed Elevation" if group == 0 else "Bed Elevation (Face)", "0 d 00:00:00"])
            print(f"group {group}: line parts ours {ours_parts}, QGIS's {qgis_parts}; "
                  f"qgis_process native:meshcontours {qgis[2]:.2f} s, gpugeo:meshcontours {ours[2]:.2f} s")
        # MINIMUM/MAXIMUM/INCREMENT: ours also has the level at MAXIMUM (and the band below it)
        qgis, ours = self.run_both(mesh, dict(common, DATASET_GROUPS=0, MINIMUM=-8.25, MAXIMUM=7.75, INCREMENT=2),
                                   "range")
        self.assertEqual([f["attributes"][2] for f in qgis[0][0]], [-8.25 + 2 * i for i in range(8)])
        self.assertEqual([f["attributes"][2] for f in ours[0][0]], [-8.25 + 2 * i for i in range(9)])
        self.assertEqual(len(ours[1][0]), len(qgis[1][0]) + 1)
        self.compare(qgis, ours, features_both_have=8)
        # no CRS in a 2DM: none in either output
        self.assertIsNone(ours[0][3])

    def test_meshcontours_model(self):
        points = self.path("points.gpkg")
        dataset = ogr.GetDriverByName("GPKG").CreateDataSource(points)
        srs = osr.SpatialReference()
        srs.ImportFromEPSG(32633)
        layer = dataset.CreateLayer("points", srs, ogr.wkbPoint25D)
        for k in range(400):
            # a jittered lattice: a well-shaped TIN; z a hill of height 50 at the centre
            i, j = k % 20, k // 20
            x = 500000.0 + 50.0 * i + 13.0 * math.sin(k * 1.7)
            y = 5000000.0 + 50.0 * j + 13.0 * math.cos(k * 2.3)
            z = 50.0 * math.exp(-((x - 500475.0) ** 2 + (y - 5000475.0) ** 2) / 300.0 ** 2)
            feature = ogr.Feature(layer.GetLayerDefn())
            feature.SetGeometry(ogr.CreateGeometryFromWkt(f"POINT Z ({x!r} {y!r} {z!r})"))
            layer.CreateFeature(feature)
        dataset = None
        lines, polygons = self.path("model_lines.gpkg"), self.path("model_polygons.gpkg")
        rc, out = self.qgis(["run", os.path.join(HERE, "tin_mesh_contours.model3"), "--", f"points={points}",
                             "levels=10.5,25.5,40.5", f"contours:lines={lines}", f"contours:polygons={polygons}"])
        self.assertEqual(rc, 0, out)
        self.assertTrue(any("Model processed OK" in line for line in out["log"]["info"]), out["log"])
        line_rows, line_type, _, line_crs = read_features(lines)
        polygon_rows, polygon_type, _, polygon_crs = read_features(polygons)
        self.assertEqual(line_type, ogr.wkbMultiLineString25D)
        self.assertEqual(polygon_type, ogr.wkbMultiPolygon25D)
        # the CRS came through the UGRID mesh
        self.assertEqual((line_crs, polygon_crs), ("32633", "32633"))
        # a hill: each level one closed ring around the top, each band one annulus
        self.assertEqual([r["attributes"][2] for r in line_rows], [10.5, 25.5, 40.5])
        self.assertEqual([r["parts"] for r in line_rows], [1, 1, 1])
        self.assertEqual([r["attributes"][2:] for r in polygon_rows], [[10.5, 25.5], [25.5, 40.5]])
        self.assertTrue(all(r["valid"] for r in polygon_rows))
        self.assertEqual(line_rows[0]["attributes"][:2], ["Bed Elevation", "0 d 00:00:00"])
        # the rings shrink towards the top: a circle's perimeter r * 2 pi, r = 300 sqrt(ln(50 / level))
        for row in line_rows:
            radius = 300.0 * math.sqrt(math.log(50.0 / row["attributes"][2]))
            self.assertAlmostEqual(row["length"], 2 * math.pi * radius, delta=0.1 * 2 * math.pi * radius)

    def test_meshcontours_bad_input(self):
        mesh = self.path("small.2dm")
        grid_mesh(mesh, 4, wave)
        lines, polygons = self.path("bad_lines.gpkg"), self.path("bad_polygons.gpkg")
        base = {"INPUT": mesh, "DATASET_GROUPS": 0, "DATASET_TIME": "2021-01-01", "OUTPUT_LINES": lines,
                "OUTPUT_POLYGONS": polygons}
        for parameters, text, qgis_too in (
                ({"DATASET_GROUPS": 3, "CONTOUR_LEVEL_LIST": "1.5"}, "The mesh has no dataset group 3 (it has 1: 0)",
                 False),
                ({"MINIMUM": 0, "MAXIMUM": 4, "INCREMENT": 0}, "Invalid interval value, must be greater than zero", True),
                ({"MINIMUM": 4, "MAXIMUM": 0, "INCREMENT": 1}, "minimum must be lesser than maximum", True),
                ({"MINIMUM": 0, "MAXIMUM": 1, "INCREMENT": 2}, "difference between minimum and maximum must be", True),
                ({"CONTOUR_LEVEL_LIST": "3,2"}, "must be different numbers and in increasing order", True),
                ({"CONTOUR_LEVEL_LIST": "1;2"}, "must be numbers separated with comma", True),
                ({"MINIMUM": 0, "MAXIMUM": 1e6, "INCREMENT": 1}, "at most 10000 are allowed", False),
                ({"CONTOUR_LEVEL_LIST": "1.5", "DEVICE": 2}, "DEVICE=GPU", False)):
            if parameters.get("DEVICE") == 2 and os.path.exists("/dev/nvidia0"):
                continue
            for algorithm in ("gpugeo:meshcontours",) + (("native:meshcontours",) if qgis_too else ()):
                rc, out = self.run_alg(algorithm, dict(base, **parameters))
                self.assertNotEqual(rc, 0, (algorithm, parameters))
                self.assertIn(text, str(out), (algorithm, parameters))
                self.assertFalse(os.path.exists(lines), (algorithm, parameters))
                self.assertFalse(os.path.exists(polygons), (algorithm, parameters))


if __name__ == "__main__":
    unittest.main()
