#!/usr/bin/python3
"""End-to-end tests of gpugeo:spherevoronoi through qgis_process: the time-zone cities of tzdata's
zone1970.tab against SciPy's SphericalVoronoi (an independent implementation) and brute-force
nearest sites; sites on the antimeridian and the poles; the degenerate sets (one place, two and
three sites); bad input.

usage: test_spherevoronoi.py [unittest arguments, e.g. SphereVoronoiTest.test_zones]
"""
import json
import math
import os
import struct
import unittest

import numpy as np
from osgeo import ogr, osr
from scipy.spatial import SphericalVoronoi

from test_qgis_process import QgisProcessBase
from test_qtmvoronoi import R_KM, angle, unit, write_lonlat, zone_cities

SPHERE_KM2 = 4 * math.pi * R_KM ** 2


def write_layer(path, epsg, geometry_type, geometries, names=None):
    """A GeoPackage layer of `geometries` (OGR geometries or None), with a text field "name"."""
    dataset = ogr.GetDriverByName("GPKG").CreateDataSource(path)
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(epsg)
    layer = dataset.CreateLayer("sites", srs, geometry_type)
    layer.CreateField(ogr.FieldDefn("name", ogr.OFTString))
    for i, geometry in enumerate(geometries):
        feature = ogr.Feature(layer.GetLayerDefn())
        if names:
            feature.SetField("name", names[i])
        if geometry is not None:
            feature.SetGeometry(geometry)
        layer.CreateFeature(feature)


class SphereVoronoiTest(QgisProcessBase):
    def run_sv(self, parameters):
        return self.qgis(["run", "gpugeo:spherevoronoi", "--"] + [f"{k}={v}" for k, v in parameters.items()])

    def regions(self, path):
        """{site_id: (area_km2, geometry, name)}"""
        dataset = ogr.Open(path)
        layer = dataset.GetLayer(0)
        self.assertEqual(layer.GetSpatialRef().GetAuthorityCode(None), "4326")
        self.assertEqual(layer.GetGeomType(), ogr.wkbMultiPolygon)
        return {f.GetField("site_id"): (f.GetField("area_km2"), f.GetGeometryRef().Clone(), f.GetField("name"))
                for f in layer}

    def check_coverage(self, regions, points):
        """Valid polygons, each holding its site; in lon/lat they tile the 360 x 180 rectangle without
        overlap; the areas sum to the sphere's within 1e-9."""
        union = ogr.Geometry(ogr.wkbMultiPolygon)
        planar = 0.0
        for site_id, (area, geometry, name) in regions.items():
            lon, lat = points[site_id - 1][:2]
            self.assertTrue(geometry.IsValid(), f"region of site {site_id} ({name}) is not valid")
            site = ogr.CreateGeometryFromWkt(f"POINT ({lon!r} {lat!r})")
            self.assertTrue(geometry.Intersects(site), f"region of site {site_id} ({name}) does not hold it")
            for i in range(geometry.GetGeometryCount()):
                ring = geometry.GetGeometryRef(i).GetGeometryRef(0)
                xs = [ring.GetX(k) for k in range(ring.GetPointCount())]
                ys = [ring.GetY(k) for k in range(ring.GetPointCount())]
                self.assertTrue(all(-180 <= x <= 180 for x in xs) and all(-90 <= y <= 90 for y in ys), site_id)
                union.AddGeometry(geometry.GetGeometryRef(i))
            planar += geometry.Area()
        total = sum(area for area, _, _ in regions.values())
        self.assertAlmostEqual(total / SPHERE_KM2, 1.0, delta=1e-9)
        self.assertAlmostEqual(planar, 64800.0, delta=1e-6)
        self.assertAlmostEqual(union.UnionCascaded().Area(), 64800.0, delta=1e-6)

    def check_nearest(self, regions, points, samples, tolerance):
        """Random places lie in the region of their nearest site, or within `tolerance` radians of a tie
        (the lon/lat polygon stands for great-circle edges)."""
        sites = unit(np.array([p[0] for p in points]), np.array([p[1] for p in points]))
        rng = np.random.default_rng(7)
        z = rng.uniform(-1, 1, samples)
        lons = rng.uniform(-180, 180, samples)
        lats = np.degrees(np.arcsin(z))
        for lon, lat in zip(lons, lats):
            d = angle(unit(np.array(lon), np.array(lat))[None, :], sites)
            point = ogr.CreateGeometryFromWkt(f"POINT ({lon!r} {lat!r})")
            owners = [s for s, (_, g, _) in regions.items() if g.Intersects(point)]
            self.assertTrue(owners, f"{lon} {lat} is in no region")
            for s in owners:
                self.assertLessEqual(d[s - 1] - d.min(), tolerance, f"{lon} {lat} in region {s}, nearest {d.argmin() + 1}")

    def test_zones(self):
        cities = zone_cities()
        source = self.path("zones.gpkg")
        write_lonlat(source, cities)
        rc, out = self.run_sv({"INPUT": source, "DENSIFY": 0.5, "OUTPUT": self.path("regions.gpkg")})
        self.assertEqual(rc, 0, out)
        self.assertTrue(any(line.startswith("Stage times: read") for line in out["log"]["info"]), out["log"])
        regions = self.regions(self.path("regions.gpkg"))
        # zone1970.tab has no two zones at one place: every site has its region
        self.assertEqual(sorted(regions), list(range(1, len(cities) + 1)))
        for site_id, (_, _, name) in regions.items():
            self.assertEqual(name, cities[site_id - 1][2])
        self.check_coverage(regions, cities)

        # Areas against SciPy's SphericalVoronoi on the same unit vectors.
        vectors = unit(np.array([c[0] for c in cities]), np.array([c[1] for c in cities]))
        reference = SphericalVoronoi(vectors, radius=1.0, threshold=1e-12)
        scipy_km2 = reference.calculate_areas() * R_KM ** 2
        ours = np.array([regions[i + 1][0] for i in range(len(cities))])
        np.testing.assert_allclose(ours, scipy_km2, rtol=1e-8, atol=1e-3)
        self.assertTrue(np.all(ours > 0))

        # Each region's rings follow great circles: their points are equidistant (to rounding) from
        # the site and the neighbour on the other side. Check instead the simpler consequence: every
        # ring point is no nearer to another site than to its own, beyond the densification error.
        step = math.radians(0.5)
        for site_id, (_, geometry, _) in regions.items():
            for i in range(geometry.GetGeometryCount()):
                ring = geometry.GetGeometryRef(i).GetGeometryRef(0)
                pts = np.array(ring.GetPoints())
                d = angle(unit(pts[:, 0], pts[:, 1])[:, None, :], vectors[None, :, :])
                own = d[:, site_id - 1]
                self.assertLessEqual(float(np.max(own - d.min(axis=1))), 1e-9, f"site {site_id}")
        # Between ring points the lon/lat polygon bows away from the great circle by at most about
        # step^2 / 4 (the help's bound): the middle of each piece against the bisector plane of the
        # site and the neighbour across it.
        worst = 0.0
        for site_id, (_, geometry, _) in regions.items():
            for i in range(geometry.GetGeometryCount()):
                pts = np.array(geometry.GetGeometryRef(i).GetGeometryRef(0).GetPoints())
                a, b = pts[:-1], pts[1:]
                along_pole = (np.abs(a[:, 1]) == 90) & (np.abs(b[:, 1]) == 90)
                along_antimeridian = (np.abs(a[:, 0]) == 180) & (a[:, 0] == b[:, 0])
                a, b = a[~along_pole & ~along_antimeridian], b[~along_pole & ~along_antimeridian]
                da, db = unit(a[:, 0], a[:, 1]) @ vectors.T, unit(b[:, 0], b[:, 1]) @ vectors.T
                da[:, site_id - 1] = db[:, site_id - 1] = -9
                across = np.argmax(da + db, axis=1)
                m = vectors[site_id - 1] - vectors[across]
                m /= np.linalg.norm(m, axis=1)[:, None]
                middle = unit((a[:, 0] + b[:, 0]) / 2, (a[:, 1] + b[:, 1]) / 2)
                worst = max(worst, float(np.max(np.arcsin(np.abs(np.sum(middle * m, axis=1))))))
        self.assertLess(worst, step * step / 4, worst)
        self.assertGreater(worst, step * step / 40, worst)  # the check sees the bow at all
        # Random places lie in their nearest site's region, but within that bow of an edge.
        self.check_nearest(regions, cities, 300, step * step / 2)

    def test_poles_and_antimeridian(self):
        points = [(0.0, 90.0, "north pole"), (123.0, -90.0, "south pole"), (180.0, 10.0, "east edge"),
                  (-180.0, -20.0, "west edge"), (179.9, 45.0, "near 180"), (-179.9, 44.0, "near -180"),
                  (0.0, 0.0, "origin"), (90.0, 0.0, "east"), (-90.0, 0.0, "west"), (45.0, 60.0, "a"),
                  (-135.0, -60.0, "b"), (10.0, 89.9, "by the pole")]
        source = self.path("poles.gpkg")
        write_lonlat(source, points)
        rc, out = self.run_sv({"INPUT": source, "DENSIFY": 1, "OUTPUT": self.path("poles_out.gpkg")})
        self.assertEqual(rc, 0, out)
        regions = self.regions(self.path("poles_out.gpkg"))
        self.assertEqual(len(regions), len(points))
        self.check_coverage(regions, points)
        self.check_nearest(regions, points, 500, math.radians(1.0) ** 2)
        # The two regions reaching over the antimeridian come in two parts, each touching lon +-180.
        for site_id in (5, 6):
            geometry = regions[site_id][1]
            self.assertEqual(geometry.GetGeometryCount(), 2, points[site_id - 1])
            xmin, xmax, _, _ = geometry.GetEnvelope()
            self.assertEqual((xmin, xmax), (-180.0, 180.0))
        # A pole's region is one polygon closed along lat +-90; the south pole's is the only one to reach it.
        south = [s for s, (_, g, _) in regions.items() if g.GetEnvelope()[2] == -90.0]
        self.assertEqual(south, [2])
        self.assertEqual(regions[2][1].GetGeometryCount(), 1)
        north = [s for s, (_, g, _) in regions.items() if g.GetEnvelope()[3] == 90.0]
        self.assertIn(1, north)
        # areas against SciPy again
        vectors = unit(np.array([p[0] for p in points]), np.array([p[1] for p in points]))
        reference = SphericalVoronoi(vectors, radius=1.0, threshold=1e-12).calculate_areas() * R_KM ** 2
        np.testing.assert_allclose([regions[i + 1][0] for i in range(len(points))], reference, rtol=1e-8)

    def test_degenerate(self):
        # All points at one place (and a multipoint repeating it): one region, the whole sphere.
        same = self.path("same.gpkg")
        write_lonlat(same, [(12.0, -33.0, "s")] * 4)
        rc, out = self.run_sv({"INPUT": same, "OUTPUT": self.path("one.gpkg")})
        self.assertEqual(rc, 0, out)
        self.assertIn("3 points lie exactly on an earlier point", json.dumps(out["log"]))
        regions = self.regions(self.path("one.gpkg"))
        self.assertEqual(list(regions), [1])
        area, geometry, _ = regions[1]
        self.assertAlmostEqual(area / SPHERE_KM2, 1.0, delta=1e-12)
        self.assertTrue(geometry.IsValid())
        self.assertAlmostEqual(geometry.Area(), 64800.0, delta=1e-9)

        # Two sites: two hemispheres.
        two = [(30.0, 10.0, "p"), (-150.0, -10.0, "antipode")]
        write_lonlat(self.path("two.gpkg"), two)
        rc, out = self.run_sv({"INPUT": self.path("two.gpkg"), "OUTPUT": self.path("two_out.gpkg")})
        self.assertEqual(rc, 0, out)
        regions = self.regions(self.path("two_out.gpkg"))
        for site_id in (1, 2):
            self.assertAlmostEqual(regions[site_id][0] / SPHERE_KM2, 0.5, delta=1e-12)
        self.check_coverage(regions, two)
        self.check_nearest(regions, two, 200, math.radians(1.0) ** 2)

        # Three sites on the equator: lunes between the poles, areas 2w for dihedral angle w.
        three = [(0.0, 0.0, "a"), (100.0, 0.0, "b"), (-120.0, 0.0, "c")]
        write_lonlat(self.path("three.gpkg"), three)
        rc, out = self.run_sv({"INPUT": self.path("three.gpkg"), "DENSIFY": 2, "OUTPUT": self.path("three_out.gpkg")})
        self.assertEqual(rc, 0, out)
        regions = self.regions(self.path("three_out.gpkg"))
        # a: from -60 to 50 (110 degrees); b: 50 to 170 (120); c: 170 to 300 (130)
        for site_id, width in ((1, 110.0), (2, 120.0), (3, 130.0)):
            self.assertAlmostEqual(regions[site_id][0] / SPHERE_KM2, width / 360.0, delta=1e-12)
        self.check_coverage(regions, three)

    def test_projected_input(self):
        """A layer in Web Mercator, with a multipoint: transformed to EPSG:4326, parts are sites."""
        path = self.path("merc.gpkg")
        features = (("MULTIPOINT ((0 0))", "origin"), ("MULTIPOINT ((1113194.9 1118890.0),(-2226389.8 0))", "two"),
                    (None, "no geometry"), ("MULTIPOINT ((15000000 -6000000))", "south"))
        write_layer(path, 3857, ogr.wkbMultiPoint, [wkt and ogr.CreateGeometryFromWkt(wkt) for wkt, _ in features],
                    [name for _, name in features])
        rc, out = self.run_sv({"INPUT": path, "OUTPUT": self.path("merc_out.gpkg")})
        self.assertEqual(rc, 0, out)
        self.assertIn("Skipped 1 features without geometry", json.dumps(out["log"]))
        regions = self.regions(self.path("merc_out.gpkg"))
        self.assertEqual(sorted(regions), [1, 2, 3, 4])
        self.assertEqual([regions[s][2] for s in (1, 2, 3, 4)], ["origin", "two", "two", "south"])
        # the spherical Mercator's inverse
        a = 6378137.0
        merc = [(0.0, 0.0), (1113194.9, 1118890.0), (-2226389.8, 0.0), (15000000.0, -6000000.0)]
        lonlat = [(math.degrees(x / a), math.degrees(math.atan(math.sinh(y / a)))) for x, y in merc]
        self.check_coverage(regions, lonlat)
        vectors = unit(np.array([p[0] for p in lonlat]), np.array([p[1] for p in lonlat]))
        reference = SphericalVoronoi(vectors, radius=1.0).calculate_areas() * R_KM ** 2
        np.testing.assert_allclose([regions[s][0] for s in (1, 2, 3, 4)], reference, rtol=1e-9)

    def test_device(self):
        """DEVICE: CPU and Auto give the same regions, feature for feature, and the log says where the
        triangulation came from; GPU on a machine without one is refused with the reason, writing
        nothing."""
        rng = np.random.default_rng(4)
        path = self.path("random.gpkg")
        lon = rng.uniform(-180.0, 180.0, 3000)
        lat = np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, 3000)))
        write_lonlat(path, [(float(x), float(y), str(i)) for i, (x, y) in enumerate(zip(lon, lat))])
        results = {}
        for device in (0, 1):
            output = self.path(f"device{device}.gpkg")
            rc, out = self.run_sv({"INPUT": path, "DEVICE": device, "OUTPUT": output})
            self.assertEqual(rc, 0, out)
            self.assertTrue(any("triangulation came from" in line for line in out["log"]["info"]), out)
            results[device] = {k: (area, geometry.ExportToWkb()) for k, (area, geometry, _) in
                               self.regions(output).items()}
        self.assertEqual(len(results[1]), 3000)
        self.assertEqual(results[0], results[1])
        rc, out = self.run_sv({"INPUT": path, "DEVICE": 2, "OUTPUT": self.path("gpu.gpkg")})
        if rc == 0:
            self.assertTrue(any("triangulation came from the Voronoi cells cut on the GPU" in line
                                for line in out["log"]["info"]), out)
        else:
            self.assertIn("no GPU can be used", json.dumps(out) if not isinstance(out, str) else out)
            self.assertFalse(os.path.exists(self.path("gpu.gpkg")))

    def test_sphere_bad_input(self):
        ok = self.path("ok.gpkg")
        write_lonlat(ok, [(5.0, 5.0, "x"), (6.0, 6.0, "y")])
        for step in (0, -1, 11):
            rc, out = self.run_sv({"INPUT": ok, "DENSIFY": step, "OUTPUT": self.path("o.gpkg")})
            self.assertNotEqual(rc, 0, step)
        bad = self.path("bad.gpkg")
        write_lonlat(bad, [(5.0, 5.0, "ok"), (5.0, 95.0, "north of the pole"), (7.0, -90.5, "south of it")])
        rc, out = self.run_sv({"INPUT": bad, "OUTPUT": self.path("o.gpkg")})
        self.assertNotEqual(rc, 0)
        self.assertIn("2 of 3 points", str(out))
        # A point with one NaN coordinate is refused with the count; POINT EMPTY (both NaN in WKB) is an
        # empty geometry, skipped (not counted among the points). WKT cannot say NaN: hence WKB.
        half_nan = self.path("nan.gpkg")
        write_layer(half_nan, 4326, ogr.wkbPoint,
                    [ogr.CreateGeometryFromWkb(struct.pack("<BIdd", 1, 1, x, y))
                     for x, y in ((5.0, 5.0), (float("nan"), 5.0), (float("nan"), float("nan")), (6.0, 7.0))])
        rc, out = self.run_sv({"INPUT": half_nan, "OUTPUT": self.path("o.gpkg")})
        self.assertNotEqual(rc, 0)
        self.assertIn("1 of 3 points have a NaN coordinate", str(out))
        empty = self.path("empty.gpkg")
        write_lonlat(empty, [])
        rc, out = self.run_sv({"INPUT": empty, "OUTPUT": self.path("o.gpkg")})
        self.assertNotEqual(rc, 0)
        self.assertIn("no point", str(out))
        lines = self.path("lines.gpkg")
        write_layer(lines, 4326, ogr.wkbLineString, [ogr.CreateGeometryFromWkt("LINESTRING (0 0, 1 1)")])
        rc, out = self.run_sv({"INPUT": lines, "OUTPUT": self.path("o.gpkg")})
        self.assertNotEqual(rc, 0)
        self.assertIn("point", str(out))


if __name__ == "__main__":
    unittest.main()
