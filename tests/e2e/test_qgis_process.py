#!/usr/bin/python3
"""End-to-end tests: the installed plugin in a throwaway QGIS profile, driven through qgis_process.

Needs Debian's python3 (GDAL and NumPy bindings) and GPUGEO_PLUGIN_DIR, the plugin folder that
`cmake --install` laid out. Each test makes its own profile, so a user's profile is never touched.

usage: test_qgis_process.py [unittest arguments, e.g. QgisProcessTest.test_run_json]
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
from osgeo import gdal, ogr, osr

gdal.UseExceptions()
QGIS_PROCESS = os.environ.get("QGIS_PROCESS", "/usr/bin/qgis_process.bin")
PLUGIN_DIR = os.environ.get("GPUGEO_PLUGIN_DIR", "")
HERE = os.path.dirname(os.path.abspath(__file__))
NODATA = -2147483648
# Every algorithm of the provider, sorted. gpugeo:spherevoronoi and gpugeo:voronoipolygons need CGAL
# at build time; CI installs it.
ALGORITHMS = ["gpugeo:breachdepressions", "gpugeo:dbscan", "gpugeo:filldepressions", "gpugeo:flowaccumulation", "gpugeo:flowdirection",
              "gpugeo:hand", "gpugeo:isochrones", "gpugeo:meshcontours", "gpugeo:pointneighbours", "gpugeo:qtmvoronoi",
              "gpugeo:snappourpoints", "gpugeo:spherevoronoi", "gpugeo:streamnetwork", "gpugeo:subbasins", "gpugeo:voronoipolygons",
              "gpugeo:voronoiraster", "gpugeo:watersheds"]


def write_points(path, points, epsg=32633, field_values=None, extra=()):
    """A GeoPackage point layer with an integer field `val`. `extra` adds (multipoint wkt or None, val)
    features after the points; with extras the layer is a MultiPoint layer."""
    driver = ogr.GetDriverByName("GPKG")
    dataset = driver.CreateDataSource(path)
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(epsg)
    layer = dataset.CreateLayer("sites", srs, ogr.wkbMultiPoint if extra else ogr.wkbPoint)
    layer.CreateField(ogr.FieldDefn("val", ogr.OFTInteger))
    for i, (x, y) in enumerate(points):
        feature = ogr.Feature(layer.GetLayerDefn())
        feature.SetField("val", int(field_values[i]) if field_values is not None else i)
        wkt = f"MULTIPOINT (({x!r} {y!r}))" if extra else f"POINT ({x!r} {y!r})"
        feature.SetGeometry(ogr.CreateGeometryFromWkt(wkt))
        layer.CreateFeature(feature)
    for wkt, value in extra:
        feature = ogr.Feature(layer.GetLayerDefn())
        if value is not None:
            feature.SetField("val", value)
        if wkt:
            feature.SetGeometry(ogr.CreateGeometryFromWkt(wkt))
        layer.CreateFeature(feature)
    dataset = None


def brute_force(xs, ys, origin_x, origin_y, pixel, width, height):
    """The contract of native/voronoi/voronoi_raster.h, in NumPy float64: labels (input index) and
    float32 distances; ties to the lowest index (argmin takes the first)."""
    u = (np.asarray(xs) - origin_x) / pixel
    v = (origin_y - np.asarray(ys)) / pixel
    labels = np.empty((height, width), dtype=np.int64)
    distances = np.empty((height, width), dtype=np.float32)
    cols = np.arange(width, dtype=np.float64) + 0.5
    for r in range(height):
        dx = cols[:, None] - u[None, :]
        dy = (r + 0.5) - v[None, :]
        e = dx * dx + dy * dy
        best = np.argmin(e, axis=1)
        labels[r] = best
        distances[r] = (np.sqrt(e[np.arange(width), best]) * pixel).astype(np.float32)
    return labels, distances


def read_raster(path):
    dataset = gdal.Open(path)
    band = dataset.GetRasterBand(1)
    return band.ReadAsArray(), dataset.GetGeoTransform(), band.GetNoDataValue(), dataset.GetProjection(), band.DataType


class QgisProcessBase(unittest.TestCase):
    """A throwaway profile with the plugin enabled, and qgis_process to run in it. No tests of its own,
    so that the other e2e files can derive from it."""

    def setUp(self):
        self.assertTrue(os.path.isdir(PLUGIN_DIR), f"GPUGEO_PLUGIN_DIR={PLUGIN_DIR!r} is not the installed plugin folder")
        self.tmp = tempfile.mkdtemp(prefix="gpugeo-e2e-")
        self.profile = os.path.join(self.tmp, "profile")
        plugins = os.path.join(self.profile, "profiles", "default", "python", "plugins")
        os.makedirs(plugins)
        shutil.copytree(PLUGIN_DIR, os.path.join(plugins, "gpugeo"))
        self.env = dict(os.environ, QT_QPA_PLATFORM="offscreen", QGIS_CUSTOM_CONFIG_PATH=self.profile,
                        XDG_RUNTIME_DIR=self.tmp)
        rc, out = self.qgis(["plugins", "enable", "gpugeo"], parse_json=False)
        self.assertEqual(rc, 0, out)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def qgis(self, arguments, parse_json=True):
        command = [QGIS_PROCESS] + (["--json"] if parse_json else []) + arguments
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=600)
        if not parse_json:
            return done.returncode, done.stdout + done.stderr
        start = done.stdout.find("{")
        try:
            return done.returncode, json.loads(done.stdout[start:]) if start >= 0 else done.stdout + done.stderr
        except json.JSONDecodeError:
            return done.returncode, done.stdout + done.stderr


class QgisProcessTest(QgisProcessBase):
    def run_voronoi(self, parameters):
        return self.qgis(["run", "gpugeo:voronoiraster", "--"] + [f"{k}={v}" for k, v in parameters.items()])

    def test_provider_listed(self):
        rc, out = self.qgis(["list"], parse_json=False)
        self.assertEqual(rc, 0, out)
        self.assertIn("GPU Geoprocessing", out)
        self.assertIn("gpugeo:voronoiraster", out)
        for algorithm in ALGORITHMS:
            self.assertIn(algorithm, out)

    def test_help(self):
        rc, out = self.qgis(["help", "gpugeo:voronoiraster"], parse_json=False)
        self.assertEqual(rc, 0, out)
        for words in ("INPUT:", "FIELD:", "EXTENT:", "PIXEL_SIZE:", "OUTPUT_DISTANCE:", "OUTPUT_POLYGONS:",
                      "0: Auto", "1: CPU", "2: GPU", "near"):
            self.assertIn(words, out)
        # Every algorithm's Help button: its section of help/index.html in the installed plugin, which
        # holds its help text and every parameter.
        import urllib.parse
        names = []
        for algorithm in ALGORITHMS:
            rc, out = self.qgis(["help", algorithm])
            self.assertEqual(rc, 0, out)
            details = out["algorithm_details"]
            url = urllib.parse.urlparse(details["help_url"] or "")
            self.assertEqual(url.scheme, "file", details)
            index = urllib.parse.unquote(url.path)
            self.assertTrue(index.endswith("/python/plugins/gpugeo/help/index.html"), index)
            with open(index, encoding="utf-8") as f:
                page = f.read()
            self.assertEqual(url.fragment, algorithm.replace(":", "-"))
            section = page[page.index(f'id="{url.fragment}"'):]
            section = section[:section.find("<section>") if "<section>" in section else len(section)]
            for name in out["parameters"]:
                self.assertIn(f"<code>{name}</code>", section, (algorithm, name))
            names.append(details["name"])
        # Display names apart from QGIS's own (no "DBSCAN clustering" or "Export contours" twice in
        # search and the modeler) and short enough for the toolbox's default width.
        self.assertEqual(len(set(names)), len(names))
        for name in names:
            self.assertNotIn(name, ("DBSCAN clustering", "Export contours", "Voronoi polygons", "Fill sinks"))
            self.assertLessEqual(len(name), 28, name)

    def test_run_json(self):
        rng = np.random.default_rng(5)
        xs = 612000.0 + rng.uniform(0, 3000, 400)
        ys = 5140000.0 + rng.uniform(0, 2000, 400)
        xs[10], ys[10] = xs[3], ys[3]  # a duplicate: its pixels go to site 3, the lower index
        values = 7 * np.arange(400) - 900
        source = self.path("sites.gpkg")
        write_points(source, list(zip(xs, ys)), field_values=values,
                     extra=[(None, 1), ("MULTIPOINT ((612100.5 5140100.25),(614900 5141900))", 5000), ("MULTIPOINT EMPTY", 2)])
        rc, out = self.run_voronoi({"INPUT": source, "FIELD": "val", "EXTENT": "611990,615010,5139995,5142005 [EPSG:32633]",
                                    "PIXEL_SIZE": 12.5, "DEVICE": 1, "OUTPUT": self.path("alloc.tif"),
                                    "OUTPUT_DISTANCE": self.path("dist.tif"), "OUTPUT_POLYGONS": self.path("regions.gpkg")})
        self.assertEqual(rc, 0, out)
        self.assertEqual(out["results"]["OUTPUT"], self.path("alloc.tif"))
        self.assertEqual(out["results"]["OUTPUT_DISTANCE"], self.path("dist.tif"))
        log = out["log"]
        self.assertTrue(any(line.startswith("Backend: CPU") for line in log["info"]), log)
        self.assertTrue(any(line.startswith("Stage times: read") for line in log["info"]), log)
        self.assertTrue(any("Skipped 1 features without geometry and 1 with an empty geometry" in w for w in log["warning"]), log)

        labels, transform, nodata, projection, data_type = read_raster(self.path("alloc.tif"))
        distances, _, _, _, distance_type = read_raster(self.path("dist.tif"))
        self.assertEqual(data_type, gdal.GDT_Int32)
        self.assertEqual(distance_type, gdal.GDT_Float32)
        self.assertEqual(nodata, NODATA)
        self.assertEqual(labels.shape, (161, 242))
        self.assertEqual(transform, (611990.0, 12.5, 0.0, 5142005.0, 0.0, -12.5))
        srs = osr.SpatialReference(wkt=projection)
        srs.AutoIdentifyEPSG()
        self.assertEqual(srs.GetAuthorityCode(None), "32633")

        all_x = np.concatenate([xs, [612100.5, 614900.0]])
        all_y = np.concatenate([ys, [5140100.25, 5141900.0]])
        all_values = np.concatenate([values, [5000, 5000]])
        expected_site, expected_distance = brute_force(all_x, all_y, 611990.0, 5142005.0, 12.5, 242, 161)
        np.testing.assert_array_equal(labels, all_values[expected_site])
        np.testing.assert_array_equal(distances, expected_distance)
        self.assertFalse(np.any(expected_site == 10))

        regions = ogr.Open(self.path("regions.gpkg"))
        layer = regions.GetLayer(0)
        counts = np.bincount(expected_site.ravel(), minlength=len(all_x))
        self.assertEqual(layer.GetFeatureCount(), int(np.count_nonzero(counts)))
        for feature in layer:
            site = feature.GetField("site_id") - 1
            self.assertEqual(feature.GetField("val"), int(all_values[site]))
            self.assertAlmostEqual(feature.GetGeometryRef().GetArea(), counts[site] * 12.5 * 12.5, delta=1e-6)
            self.assertTrue(feature.GetGeometryRef().IsValid())

    def test_model_chain(self):
        rng = np.random.default_rng(9)
        xs = rng.uniform(1000, 5000, 150)
        ys = rng.uniform(2000, 4000, 150)
        source = self.path("model_sites.gpkg")
        write_points(source, list(zip(xs, ys)))
        table = self.path("counts.csv")
        rc, out = self.qgis(["run", os.path.join(HERE, "voronoi_pixel_counts.model3"), "--", f"sites={source}",
                             "pixel_size=20", f"counts:pixel_counts={table}"])
        self.assertEqual(rc, 0, out)
        self.assertTrue(any("Model processed OK" in line for line in out["log"]["info"]), out["log"])
        # The model's raster covers the points' extent from its top-left corner, in whole pixels.
        width = int(np.ceil((xs.max() - xs.min()) / 20))
        height = int(np.ceil((ys.max() - ys.min()) / 20))
        expected, _ = brute_force(xs, ys, xs.min(), ys.max(), 20.0, width, height)
        expected_counts = np.bincount(expected.ravel(), minlength=150)
        got = {}
        with open(table) as f:
            next(f)
            for line in f:
                value, count, _ = line.strip().split(",")
                got[int(float(value))] = int(count.strip('"'))
        self.assertEqual(got, {i + 1: int(c) for i, c in enumerate(expected_counts) if c})

    def test_bad_input(self):
        empty = self.path("empty.gpkg")
        write_points(empty, [])
        two = self.path("two.gpkg")
        write_points(two, [(0.0, 0.0), (10.0, 10.0)])
        lines = self.path("lines.gpkg")
        dataset = ogr.GetDriverByName("GPKG").CreateDataSource(lines)
        layer = dataset.CreateLayer("lines", None, ogr.wkbLineString)
        feature = ogr.Feature(layer.GetLayerDefn())
        feature.SetGeometry(ogr.CreateGeometryFromWkt("LINESTRING EMPTY"))
        layer.CreateFeature(feature)
        dataset = None
        cases = [
            ({"INPUT": empty}, "no point to use"),
            ({"INPUT": two, "PIXEL_SIZE": 0}, "PIXEL_SIZE (Pixel size) must be a number greater than 0; got 0."),
            ({"INPUT": two, "PIXEL_SIZE": 0.0001}, "limits of 2^31"),
            ({"INPUT": lines}, "no feature to use (0 features without geometry, 1 with an empty geometry)"),
        ]
        for parameters, words in cases:
            output = self.path("bad.tif")
            rc, out = self.run_voronoi(dict(parameters, DEVICE=1, OUTPUT=output))
            text = out if isinstance(out, str) else json.dumps(out)
            self.assertNotEqual(rc, 0, f"{parameters}: {text}")
            self.assertIn(words, text, parameters)
            self.assertFalse(os.path.exists(output), parameters)

    def test_plugin_zip(self):
        """The zip for the plugin manager: extracted into a profile (what "Install from ZIP" does), the
        plugin loads and its algorithm runs."""
        archive = os.environ.get("GPUGEO_PLUGIN_ZIP", "")
        self.assertTrue(os.path.isfile(archive), f"GPUGEO_PLUGIN_ZIP={archive!r} is not the plugin zip")
        import zipfile
        with zipfile.ZipFile(archive) as z:
            names = set(z.namelist())
            for needed in ("gpugeo/metadata.txt", "gpugeo/__init__.py", "gpugeo/gpugeo_plugin.py",
                           "gpugeo/icons/gpugeo.svg", "gpugeo/lib/libgpugeo_provider.so", "gpugeo/lib/libgpugeo_native.so"):
                self.assertIn(needed, names)
            plugins = os.path.join(self.profile, "profiles", "default", "python", "plugins")
            shutil.rmtree(os.path.join(plugins, "gpugeo"))
            z.extractall(plugins)  # as Python's zipfile in the plugin manager: file modes are not restored
        two = self.path("two.gpkg")
        write_points(two, [(0.0, 0.0), (10.0, 10.0)])
        rc, out = self.run_voronoi({"INPUT": two, "DEVICE": 1, "OUTPUT": self.path("zip.tif")})
        self.assertEqual(rc, 0, out)
        labels = read_raster(self.path("zip.tif"))[0]
        self.assertEqual(set(np.unique(labels)), {1, 2})

    def test_desktop(self):
        """The QGIS desktop, under Xvfb: the plugin starts through initGui(), its algorithm shows in the
        Processing toolbox and in the graphical modeler, and unload() takes the provider away. Each
        algorithm's dialog opens, with a Help button, and is photographed into the build folder
        ($GPUGEO_SCREENSHOT_DIR); gpugeo:isochrones run from the desktop on the shipped DEM loads the
        watershed's outline above its bands (a colour each) above the travel times; gpugeo:streamnetwork
        and gpugeo:subbasins load styled layers."""
        if not shutil.which("xvfb-run") or not os.path.exists("/usr/bin/qgis"):
            self.skipTest("needs xvfb-run and the qgis desktop")
        result_path = self.path("desktop.json")
        shots = os.environ.get("GPUGEO_SCREENSHOT_DIR") or self.path("screenshots")
        env = dict(self.env, GPUGEO_DESKTOP_RESULT=result_path, GPUGEO_SCREENSHOT_DIR=shots,
                   GPUGEO_DESKTOP_DEM=os.path.join(HERE, "..", "data", "jacksboro_srtm3.tif"))
        env.pop("QT_QPA_PLATFORM")
        done = subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1600x1600x24", "/usr/bin/qgis", "--nologo",
                               "--noversioncheck", "--code", os.path.join(HERE, "desktop_check.py")], env=env,
                              capture_output=True, text=True, timeout=300)
        self.assertTrue(os.path.exists(result_path), done.stdout + done.stderr)
        with open(result_path) as f:
            result = json.load(f)
        self.assertNotIn("error", result)
        dialogs, isochrones, streams = result.pop("dialogs"), result.pop("isochrones"), result.pop("streams")
        breach = result.pop("breach")
        result["toolbox"] = sorted(result["toolbox"])
        result["modeler"] = sorted(result["modeler"])
        self.assertEqual(result, {"active": True, "provider": "GPU Geoprocessing",
                                  "toolbox": ALGORITHMS, "modeler": ALGORITHMS,
                                  "provider_after_unload": None, "provider_after_reload": "GPU Geoprocessing"})
        self.assertEqual(sorted(dialogs), ALGORITHMS)
        for algorithm, dialog in dialogs.items():
            self.assertTrue(dialog["help_button"], algorithm)
            self.assertEqual(len(dialog["shots"]), 2 if algorithm == "gpugeo:isochrones" else 1, algorithm)
            for shot in dialog["shots"]:
                self.assertGreater(os.path.getsize(shot), 10000, shot)
        self.assertEqual(isochrones["order"], ["WATERSHED", "ISOCHRONES", "TRAVEL_TIME"])
        styles = isochrones["styles"]
        self.assertEqual(styles["WATERSHED"], {"renderer": "singleSymbol", "fill": "no"})
        self.assertEqual(styles["ISOCHRONES"]["renderer"], "graduatedSymbol")
        self.assertEqual(styles["ISOCHRONES"]["field"], "band")
        self.assertEqual(styles["ISOCHRONES"]["ranges"], isochrones["bands"])
        self.assertEqual(styles["ISOCHRONES"]["colours"], isochrones["bands"])
        self.assertEqual(styles["TRAVEL_TIME"], {"renderer": "singlebandpseudocolor"})
        self.assertGreater(os.path.getsize(isochrones["shot"]), 20000)
        # The stream network and its subbasins (fewer than 1,025 segments): segments a colour each, orders a ramp, lines wider by
        # order, the subbasins' polygons as outlines over their labels.
        self.maxDiff = None
        self.assertEqual(streams["styles"], {
            "Stream segments": {"renderer": "paletted"},
            "Strahler order": {"renderer": "singlebandpseudocolor"},
            "Stream lines": {"renderer": "singleSymbol", "width": '0.2 + 0.3 * (coalesce("strahler", 1) - 1)'},
            "Subbasins": {"renderer": "paletted"},
            "Subbasin polygons": {"renderer": "singleSymbol", "fill": "no"}})
        self.assertGreater(os.path.getsize(streams["shot"]), 20000)
        # The breach's change: a ramp symmetric about 0 over the largest change (the shipped DEM's deepest cut).
        self.assertEqual(breach["renderer"], "singlebandpseudocolor")
        low, high = breach["range"]
        self.assertEqual(low, -high)
        self.assertGreater(high, 10)

    def test_gpu_requested(self):
        """DEVICE=GPU: on a machine without a usable GPU, a clear error naming why; with one, a result."""
        two = self.path("two.gpkg")
        write_points(two, [(0.0, 0.0), (10.0, 10.0)])
        rc, out = self.run_voronoi({"INPUT": two, "DEVICE": 2, "OUTPUT": self.path("gpu.tif")})
        text = out if isinstance(out, str) else json.dumps(out)
        if rc == 0:
            self.assertTrue(any(line.startswith("Backend: GPU") for line in out["log"]["info"]), text)
        else:
            self.assertIn("DEVICE=GPU", text)
            self.assertIn("no GPU can be used", text)
            self.assertFalse(os.path.exists(self.path("gpu.tif")))
            # In the text output too, the reason is given once (it used to come three times).
            rc, text = self.qgis(["run", "gpugeo:voronoiraster", "--", f"INPUT={two}", "DEVICE=2",
                                  f"OUTPUT={self.path('gpu.tif')}"], parse_json=False)
            self.assertNotEqual(rc, 0)
            self.assertEqual(text.count("no GPU can be used"), 1, text)

    def test_log_lines(self):
        """qgis_process's text output: no log line glued to the progress ticks ("0...10...20.DEM: band"),
        and every run's progress reaches 100 ("100 - done.")."""
        import re
        dem = os.path.join(HERE, "..", "data", "jacksboro_srtm3.tif")
        two = self.path("two.gpkg")
        write_points(two, [(0.0, 0.0), (10.0, 10.0), (3.0, 7.0)])
        runs = [["gpugeo:filldepressions", f"INPUT={dem}", "DEVICE=1", f"OUTPUT={self.path('f.tif')}"],
                ["gpugeo:isochrones", f"INPUT={dem}", "DEVICE=1", f"TRAVEL_TIME={self.path('t.tif')}"],
                ["gpugeo:voronoiraster", f"INPUT={two}", "DEVICE=1", "PIXEL_SIZE=0.5", f"OUTPUT={self.path('v.tif')}"],
                ["gpugeo:dbscan", f"INPUT={two}", "EPS=20", "MIN_SIZE=2", "DEVICE=1", f"OUTPUT={self.path('d.gpkg')}"]]
        for arguments in runs:
            rc, text = self.qgis(["run", arguments[0], "--"] + arguments[1:], parse_json=False)
            self.assertEqual(rc, 0, text)
            for line in text.splitlines():
                self.assertIsNone(re.match(r"^[0-9.]*[0-9][0-9.]*[A-Za-z]", line), f"{arguments[0]}: {line!r}")
            self.assertIn("100 - done.", text, arguments[0])


if __name__ == "__main__":
    unittest.main()
