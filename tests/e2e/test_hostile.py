#!/usr/bin/python3
"""Hostile input through qgis_process: corrupt and truncated files, unicode and unwritable paths, an
output over an input, two outputs on one file, NaN, infinite and huge parameters, extreme coordinates
and cell sizes, overlapping meshes. Every case checks the exit status (a refusal is a non-zero status,
not a crash), the message, that no input file changed (sha256 before and after; the input folders gain
no file but QGIS's own raster statistics, <raster>.aux.xml) and, on a refusal, that the case's output
folder is as it was (no output, no GeoPackage -wal/-shm/-journal left). The inputs are small, so each
qgis_process call is mostly QGIS starting; independent calls run two at a time.

usage: test_hostile.py [unittest arguments, e.g. HostileInputTest.test_output_over_input]
"""
import concurrent.futures
import hashlib
import json
import os
import random
import shutil
import struct
import subprocess
import unittest

import numpy as np
from osgeo import gdal, ogr, osr

from test_meshcontours import grid_mesh, wave
from test_qgis_process import ALGORITHMS, QGIS_PROCESS, QgisProcessBase, write_points

gdal.UseExceptions()
ogr.UseExceptions()
POOL = 2  # qgis_process calls at a time (CI machines have two cores)
UNICODE_FOLDER = "Höhenmodell_標高_ß mit Leerzeichen"
# The small DEM: 12 x 10 cells of 30 m in UTM 33N, its top-left corner at (500000, 4000000).
DEM_ORIGIN = (500000.0, 4000000.0)
MESH_LEVELS = {"DATASET_GROUPS": 0, "DATASET_TIME": "2021-01-01", "CONTOUR_LEVEL_LIST": "1,2"}
NAN = float("nan")


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def folder_state(folder, ignore_aux=False):
    """{relative path: sha256, or "-> target" for a link, or "dir"} of everything under `folder`."""
    state = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, folder)
            if ignore_aux and name.endswith(".aux.xml"):
                continue
            if os.path.islink(path):
                state[relative] = "-> " + os.readlink(path)
            elif os.path.isdir(path):
                state[relative] = "dir"
            else:
                state[relative] = sha256(path)
    return state


def crash_frames(text):
    """The backtrace lines ("#0 ...") gdb printed after the program died of a signal, or None if it
    did not."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if "received signal SIG" in line), None)
    if start is None:
        return None
    return [line for line in lines[start:] if line.startswith("#")]


def write_dem(path, pixel=30.0, origin=DEM_ORIGIN, epsg=32633, width=12, height=10):
    """A Float32 DEM, north-up, sloping down to the north-west with bumps (it drains off the top edge)."""
    y, x = np.mgrid[0:height, 0:width]
    values = (100 + 2.0 * x + 3.0 * y + 5 * np.sin(x * 1.3) * np.cos(y * 0.7)).astype(np.float32)
    dataset = gdal.GetDriverByName("GTiff").Create(path, width, height, 1, gdal.GDT_Float32)
    dataset.SetGeoTransform((origin[0], pixel, 0.0, origin[1], 0.0, -pixel))
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(epsg)
    dataset.SetProjection(srs.ExportToWkt())
    dataset.GetRasterBand(1).WriteArray(values)
    dataset = None


def write_directions(path, pixel=30.0, width=12, height=10):
    """ESRI flow directions (Byte, nodata 255): every cell drains east, off the grid at the last column."""
    dataset = gdal.GetDriverByName("GTiff").Create(path, width, height, 1, gdal.GDT_Byte)
    dataset.SetGeoTransform((DEM_ORIGIN[0], pixel, 0.0, DEM_ORIGIN[1], 0.0, -pixel))
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(32633)
    dataset.SetProjection(srs.ExportToWkt())
    band = dataset.GetRasterBand(1)
    band.SetNoDataValue(255)
    band.WriteArray(np.ones((height, width), np.uint8))
    dataset = None


def write_raw_points(path, points, epsg):
    """Points written as raw WKB, so that NaN coordinates go in as they are. (GDAL then fails to write
    the NaN extent into gpkg_contents as it closes the file: quietly, without exceptions.)"""
    ogr.DontUseExceptions()
    gdal.PushErrorHandler("CPLQuietErrorHandler")
    dataset = ogr.GetDriverByName("GPKG").CreateDataSource(path)
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(epsg)
    layer = dataset.CreateLayer("sites", srs, ogr.wkbPoint)
    for x, y in points:
        feature = ogr.Feature(layer.GetLayerDefn())
        feature.SetGeometry(ogr.CreateGeometryFromWkb(struct.pack("<BIdd", 1, 1, x, y)))
        layer.CreateFeature(feature)
    dataset = None
    gdal.PopErrorHandler()
    ogr.UseExceptions()


def write_raw_lines(path, lines, epsg, polygons=False):
    """Lines (or single-ring polygons) written as raw WKB, NaN coordinates as they are; an empty list
    is an empty geometry, None no geometry."""
    ogr.DontUseExceptions()
    gdal.PushErrorHandler("CPLQuietErrorHandler")
    dataset = ogr.GetDriverByName("GPKG").CreateDataSource(path)
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(epsg)
    layer = dataset.CreateLayer("features", srs, ogr.wkbPolygon if polygons else ogr.wkbLineString)
    for points in lines:
        feature = ogr.Feature(layer.GetLayerDefn())
        if points is not None:
            coordinates = b"".join(struct.pack("<dd", x, y) for x, y in points)
            if polygons:
                wkb = struct.pack("<BII", 1, 3, 1 if points else 0) + (struct.pack("<I", len(points)) + coordinates
                                                                       if points else b"")
            else:
                wkb = struct.pack("<BII", 1, 2, len(points)) + coordinates
            feature.SetGeometry(ogr.CreateGeometryFromWkb(wkb))
        layer.CreateFeature(feature)
    dataset = None
    gdal.PopErrorHandler()
    ogr.UseExceptions()


def write_2dm(path, nodes, triangles):
    with open(path, "w") as f:
        f.write("MESH2D\n")
        for i, (x, y, z) in enumerate(nodes):
            f.write(f"ND {i + 1} {x!r} {y!r} {z!r}\n")
        for i, (a, b, c) in enumerate(triangles):
            f.write(f"E3T {i + 1} {a} {b} {c} 1\n")


def polygons(path):
    """[(min_value, max_value, area, valid)] of a contour polygon layer."""
    dataset = ogr.Open(path)
    rows = [(f.GetField("min_value"), f.GetField("max_value"), f.GetGeometryRef().GetArea(),
             f.GetGeometryRef().IsValid()) for f in dataset.GetLayer(0)]
    dataset = None
    return rows


class HostileInputTest(QgisProcessBase):
    def setUp(self):
        super().setUp()
        self.inputs = self.path("in")
        self.outputs = self.path("out")
        os.makedirs(self.inputs)
        os.makedirs(self.outputs)
        self.dem = self.input("dem.tif")
        write_dem(self.dem)
        self.directions = self.input("directions.tif")
        write_directions(self.directions)
        self.points = self.input("points.gpkg")  # 20 points in a 200 m x 170 m patch of UTM 33N
        write_points(self.points, [(500000.0 + i * 37 % 200, 4000000.0 + i * 53 % 170) for i in range(20)])
        self.lonlat = self.input("lonlat.gpkg")  # 20 points over the globe
        write_points(self.lonlat, [(i * 17.0 % 360 - 180, i * 7.0 % 160 - 80) for i in range(20)], epsg=4326)
        self.mesh = self.input("mesh.2dm")  # 5 x 5 nodes, quads and triangles
        grid_mesh(self.mesh, 4, wave)
        self.cases = []

    def input(self, name):
        return os.path.join(self.inputs, name)

    def out(self, case, name):
        """A path in the case's own output folder (made here), so that what a run leaves is seen."""
        folder = os.path.join(self.outputs, case)
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, name)

    # --- Cases: each a qgis_process run and what it must give.

    def refused(self, name, algorithm, parameters, *words, env=None, crash_in=None):
        """A run that must fail: a non-zero exit status (not a signal), each of `words` (a tuple: one of
        its texts) in its output, its output folder as it was. With `crash_in` (library file names) the
        run is made under gdb, so that a crash says where it happened: one whose backtrace passes
        through one of those libraries and through none of ours is QGIS's (upstream) and the case is
        skipped, saying so and showing the frames; a crash anywhere else fails."""
        self.cases.append({"name": name, "algorithm": algorithm, "parameters": parameters, "words": words,
                           "ok": False, "env": env, "check": None, "crash_in": crash_in})

    def succeeds(self, name, algorithm, parameters, *words, check=None, env=None):
        """A run that must succeed (exit 0) with each of `words` in its output; check(results, log) then."""
        self.cases.append({"name": name, "algorithm": algorithm, "parameters": parameters, "words": words,
                           "ok": True, "env": env, "check": check})

    def execute(self, case):
        command = [QGIS_PROCESS, "--json", "run", case["algorithm"], "--"] + [
            f"{k}={v}" for k, v in case["parameters"].items()]
        if case.get("crash_in"):
            # gdb returns the program's own exit status, or 255 and a backtrace where it died.
            command = ["gdb", "-q", "-batch", "-nx", "-iex", "set debuginfod enabled off", "-return-child-result",
                       "-ex", "run", "-ex", "bt", "--args"] + command
        env = dict(self.env, **(case["env"] or {}))
        done = subprocess.run(command, env=env, capture_output=True, timeout=600)
        stdout = done.stdout.decode("utf-8", "replace")
        text = stdout + done.stderr.decode("utf-8", "replace")
        data = None
        start = stdout.find("{")
        if start >= 0:
            try:
                data = json.loads(stdout[start:])
            except json.JSONDecodeError:
                pass
        return done.returncode, text, data

    def run_cases(self):
        """Runs the cases gathered (two at a time), then checks each in a subTest; then that no input
        changed."""
        cases, self.cases = self.cases, []
        names = [c["name"] for c in cases]
        self.assertEqual(len(set(names)), len(names), "case names must differ")
        inputs_before = folder_state(self.inputs, ignore_aux=True)
        folders = {c["name"]: os.path.join(self.outputs, c["name"]) for c in cases}
        for folder in folders.values():
            os.makedirs(folder, exist_ok=True)
        before = {name: folder_state(folder) for name, folder in folders.items()}
        with concurrent.futures.ThreadPoolExecutor(POOL) as pool:
            results = list(pool.map(self.execute, cases))
        for case, (rc, text, data) in zip(cases, results):
            with self.subTest(case=case["name"]):
                command = f"{case['algorithm']} " + " ".join(f"{k}={v}" for k, v in case["parameters"].items())
                detail = f"{command}\n--- exit status {rc}; output:\n{text[-3000:]}"
                if case["ok"]:
                    self.assertEqual(rc, 0, detail)
                    self.assertIsNotNone(data, detail)
                else:
                    frames = crash_frames(text) if case.get("crash_in") else None
                    if frames is not None:
                        where = "\n".join(frames[:12])
                        self.assertFalse(any("gpugeo" in f for f in frames), f"crashed in our code:\n{where}\n{detail}")
                        self.assertTrue(any(lib in f for f in frames for lib in case["crash_in"]),
                                        f"crashed outside {case['crash_in']}:\n{where}\n{detail}")
                        self.skipTest(f"qgis_process died in QGIS's own {'/'.join(case['crash_in'])} before any of "
                                      f"our code ran (upstream):\n{where}")
                    self.assertFalse(rc < 0, f"crashed (signal {-rc}): {detail}")
                    self.assertNotEqual(rc, 0, f"not refused: {detail}")
                for words in case["words"]:
                    if isinstance(words, tuple):  # any one of them
                        self.assertTrue(any(w in text for w in words), f"none of {words} in: {detail}")
                    else:
                        self.assertIn(words, text, detail)
                if not case["ok"]:
                    self.assertEqual(folder_state(folders[case["name"]]), before[case["name"]],
                                     f"left in its output folder: {detail}")
                elif case["check"]:
                    case["check"](data["results"], data.get("log", {}))
        inputs_after = folder_state(self.inputs, ignore_aux=True)
        changed = sorted(k for k in set(inputs_before) | set(inputs_after) if inputs_before.get(k) != inputs_after.get(k))
        self.assertEqual(changed, [], "input files changed, appeared or went (sha256 before -> after): " + "; ".join(
            f"{k}: {inputs_before.get(k)} -> {inputs_after.get(k)}" for k in changed))
        return results

    def numeric_parameters(self, algorithms):
        """{algorithm: {name: raw definition}} of the number, distance and band parameters, from
        qgis_process help."""
        def help_of(algorithm):
            done = subprocess.run([QGIS_PROCESS, "--json", "help", algorithm], env=self.env, capture_output=True,
                                  timeout=600)
            stdout = done.stdout.decode("utf-8", "replace")
            self.assertEqual(done.returncode, 0, stdout)
            return json.loads(stdout[stdout.find("{"):])

        with concurrent.futures.ThreadPoolExecutor(POOL) as pool:
            helps = list(pool.map(help_of, algorithms))
        found = {}
        for algorithm, details in zip(algorithms, helps):
            found[algorithm] = {name: p["raw_definition"] for name, p in details["parameters"].items()
                                if p["raw_definition"]["parameter_type"] in ("number", "distance", "band")}
        return found

    # --- 1. Corrupt and truncated files.

    def test_corrupt_inputs(self):
        rng = random.Random(7)
        with open(self.dem, "rb") as f:
            dem_bytes = f.read()
        half = self.input("half.tif")
        with open(half, "wb") as f:
            f.write(dem_bytes[:len(dem_bytes) // 2])
        noise_tif = self.input("noise.tif")
        with open(noise_tif, "wb") as f:
            f.write(bytes(rng.randrange(256) for _ in range(4096)))
        noise_gpkg = self.input("noise.gpkg")
        with open(noise_gpkg, "wb") as f:
            f.write(bytes(rng.randrange(256) for _ in range(8192)))
        noise_2dm = self.input("noise.2dm")
        with open(noise_2dm, "wb") as f:
            f.write(bytes(rng.randrange(256) for _ in range(4096)))
        empty = {suffix: self.input("empty" + suffix) for suffix in (".tif", ".gpkg", ".2dm")}
        for path in empty.values():
            open(path, "wb").close()
        with open(self.mesh) as f:
            lines = f.readlines()
        nodes_only = self.input("nodes_only.2dm")  # cut at a line boundary after the last node
        with open(nodes_only, "w") as f:
            f.writelines(line for line in lines if not line.startswith("E"))
        dangling = self.input("dangling.2dm")  # a face naming a vertex the mesh does not have
        write_2dm(dangling, [(0.0, 0.0, 0.0), (10.0, 0.0, 1.0), (0.0, 10.0, 2.0)], [(1, 2, 9)])
        nan_node = self.input("nan_node.2dm")
        write_2dm(nan_node, [(NAN, 0.0, 0.0), (10.0, 0.0, 1.0), (0.0, 10.0, 2.0)], [(1, 2, 3)])
        nan_points = self.input("nan.gpkg")
        write_raw_points(nan_points, [(NAN, 5.0), (5.0, NAN), (NAN, NAN)], 32633)
        nan_lonlat = self.input("nan_lonlat.gpkg")
        write_raw_points(nan_lonlat, [(NAN, 5.0), (5.0, NAN), (NAN, NAN)], 4326)

        rasters = (("gpugeo:filldepressions", "OUTPUT"), ("gpugeo:flowdirection", "OUTPUT"),
                   ("gpugeo:flowaccumulation", "OUTPUT_CELLS"), ("gpugeo:isochrones", "TRAVEL_TIME"))
        for algorithm, output in rasters:
            short = algorithm.split(":")[1]
            self.refused(f"{short}_half", algorithm, {"INPUT": half, output: self.out(f"{short}_half", "o.tif")},
                         "Could not read rows 0 to 9 of " + half)
            for label, path in (("noise", noise_tif), ("empty", empty[".tif"])):
                self.refused(f"{short}_{label}", algorithm,
                             {"INPUT": path, output: self.out(f"{short}_{label}", "o.tif")},
                             "Could not load source layer for INPUT")
        self.refused("isochrones_manning_half", "gpugeo:isochrones",
                     {"INPUT": self.dem, "VELOCITY_MODEL": 2, "MANNING": half,
                      "TRAVEL_TIME": self.out("isochrones_manning_half", "t.tif")}, "Could not read rows 0 to 9 of " + half)
        self.refused("isochrones_manning_noise", "gpugeo:isochrones",
                     {"INPUT": self.dem, "VELOCITY_MODEL": 2, "MANNING": noise_tif,
                      "TRAVEL_TIME": self.out("isochrones_manning_noise", "t.tif")},
                     "Could not load source layer for MANNING")

        points = (("gpugeo:voronoiraster", {"OUTPUT": "o.tif", "OUTPUT_POLYGONS": "p.gpkg"}, nan_points),
                  ("gpugeo:qtmvoronoi", {"OUTPUT_REGIONS": "o.gpkg", "OUTPUT_RASTER": "r.tif"}, nan_lonlat),
                  ("gpugeo:spherevoronoi", {"OUTPUT": "o.gpkg"}, nan_lonlat),
                  ("gpugeo:voronoipolygons", {"OUTPUT": "o.gpkg"}, nan_points),
                  ("gpugeo:pointneighbours", {"OUTPUT": "o.gpkg", "OUTPUT_PAIRS": "p.gpkg", "RADIUS": 5}, nan_points),
                  ("gpugeo:dbscan", {"OUTPUT": "o.gpkg", "EPS": 5}, nan_points))
        for algorithm, outputs, nan_layer in points:
            short = algorithm.split(":")[1]
            for label, path in (("noise", noise_gpkg), ("empty", empty[".gpkg"]), ("nan", nan_layer)):
                name = f"{short}_{label}"
                parameters = {k: self.out(name, v) if isinstance(v, str) else v for k, v in outputs.items()}
                words = ("2 of 2 points have a NaN coordinate",) if label == "nan" else (
                    "Could not load source layer for INPUT",)
                self.refused(name, algorithm, dict(parameters, INPUT=path), *words)
        # Lines and polygons as Voronoi sites: a NaN vertex, only empty or missing geometries.
        nan_lines = self.input("nan_lines.gpkg")
        write_raw_lines(nan_lines, [[(0.0, 0.0), (10.0, 5.0)], [(3.0, 3.0), (NAN, 4.0)]], 32633)
        empty_lines = self.input("empty_lines.gpkg")
        write_raw_lines(empty_lines, [[], None], 32633)
        nan_polygons = self.input("nan_polygons.gpkg")
        write_raw_lines(nan_polygons, [[(0.0, 0.0), (10.0, 0.0), (NAN, 10.0), (0.0, 0.0)]], 32633, polygons=True)
        empty_polygons = self.input("empty_polygons.gpkg")
        write_raw_lines(empty_polygons, [[], None], 32633, polygons=True)
        for label, path, words in (("nan_lines", nan_lines, "has a coordinate that is not a finite number"),
                                   ("nan_polygons", nan_polygons, "has a coordinate that is not a finite number"),
                                   ("empty_lines", empty_lines, "no feature to use (1 features without geometry, "
                                                                "1 with an empty geometry)"),
                                   ("empty_polygons", empty_polygons, "no feature to use (1 features without "
                                                                      "geometry, 1 with an empty geometry)")):
            name = f"voronoiraster_{label}"
            self.refused(name, "gpugeo:voronoiraster",
                         {"INPUT": path, "PIXEL_SIZE": 1, "OUTPUT": self.out(name, "o.tif"),
                          "OUTPUT_DISTANCE": self.out(name, "d.tif")}, words)
        self.refused("isochrones_outlet_noise", "gpugeo:isochrones",
                     {"INPUT": self.dem, "OUTLET": noise_gpkg, "TRAVEL_TIME": self.out("isochrones_outlet_noise", "t.tif")},
                     "Could not load source layer for OUTLET")
        self.refused("isochrones_outlet_nan", "gpugeo:isochrones",
                     {"INPUT": self.dem, "OUTLET": nan_points, "TRAVEL_TIME": self.out("isochrones_outlet_nan", "t.tif")},
                     "The OUTLET layer has no point (", "features without a geometry, or with an empty one or a NaN "
                     "coordinate)")

        for label, path, words in (("empty", empty[".2dm"], "Incorrect parameter value for INPUT"),
                                   ("noise", noise_2dm, "Incorrect parameter value for INPUT"),
                                   ("nodes_only", nodes_only, "The mesh has no face to contour"),
                                   ("dangling", dangling, "The mesh is broken: 1 of its 1 faces name a vertex it "
                                                          "does not have")):
            name = f"meshcontours_{label}"
            self.refused(name, "gpugeo:meshcontours",
                         dict(MESH_LEVELS, INPUT=path, OUTPUT_LINES=self.out(name, "l.gpkg"),
                              OUTPUT_POLYGONS=self.out(name, "p.gpkg")), words)
        # A node without coordinates: its face is left out, with a warning; nothing to contour.
        self.succeeds("meshcontours_nan_node", "gpugeo:meshcontours",
                      dict(MESH_LEVELS, INPUT=nan_node, OUTPUT_LINES=self.out("meshcontours_nan_node", "l.gpkg"),
                           OUTPUT_POLYGONS=self.out("meshcontours_nan_node", "p.gpkg")),
                      "0 of 1 triangles used", "nothing to contour")
        self.run_cases()

    def test_truncated_mesh(self):
        """A 2DM cut in the middle of a line (as a copy or download cut short leaves it): refused, not a
        crash. (With QGIS 3.22.16 qgis_process often dies of SIGSEGV here, before any algorithm code runs:
        strtod/strtol on a field the cut line lacks, in the MDAL provider's 2DM reader, called from
        QgsProcessingParameterMeshLayer::checkValueIsAcceptable in qgis_process's own check of INPUT;
        native:exportmeshvertices dies the same way. The runs are made under gdb, so such a crash is
        told from one of ours by its backtrace, every time.)"""
        with open(self.mesh, "rb") as f:
            text = f.read()
        cases = {"half": text[:len(text) // 2],  # inside a node line: "ND 20 4.0"
                 "mid_face": text[:text.index(b"E3T 13") + len(b"E3T 13 12")]}  # inside a face line
        for label, data in cases.items():
            path = self.input(f"truncated_{label}.2dm")
            with open(path, "wb") as f:
                f.write(data)
            name = f"meshcontours_truncated_{label}"
            self.refused(name, "gpugeo:meshcontours",
                         dict(MESH_LEVELS, INPUT=path, OUTPUT_LINES=self.out(name, "l.gpkg"),
                              OUTPUT_POLYGONS=self.out(name, "p.gpkg")),
                         ("Incorrect parameter value for INPUT", "The mesh has no face to contour"),
                         crash_in=("libprovider_mdal.so",))
        self.run_cases()

    # --- 2. Unicode and unwritable paths.

    def test_unicode_paths(self):
        folder = self.input(UNICODE_FOLDER)
        os.makedirs(folder)
        dem = os.path.join(folder, "Gelände ü.tif")
        shutil.copy(self.dem, dem)
        directions = os.path.join(folder, "Fließrichtung 流向.tif")
        shutil.copy(self.directions, directions)
        points = os.path.join(folder, "Punkte 点.gpkg")
        shutil.copy(self.points, points)
        lonlat = os.path.join(folder, "Städte 市.gpkg")
        shutil.copy(self.lonlat, lonlat)
        mesh = os.path.join(folder, "Netz ß.2dm")
        shutil.copy(self.mesh, mesh)
        outlet = os.path.join(folder, "Auslass ö.gpkg")
        write_points(outlet, [(500100.0, 3999900.0)])
        segments = os.path.join(folder, "Abschnitte 区間.tif")  # one segment of one cell
        gdal.Translate(segments, self.directions, outputType=gdal.GDT_Int32, scaleParams=[[0, 255, 0, 0]],
                       noData=0)
        dataset = gdal.Open(segments, gdal.GA_Update)
        dataset.GetRasterBand(1).WriteArray(np.ones((1, 1), np.int32), 5, 5)
        del dataset
        # Outputs in a unicode folder too (each case its own, named "<case>/Ergebnis <file>").
        out_folder = UNICODE_FOLDER + " Ergebnisse"

        def out(case, name):
            return self.out(os.path.join(case, out_folder), "Ergebnis " + name)

        def exist(*paths):
            def check(results, log):
                for path in paths:
                    self.assertTrue(os.path.exists(path), path)
                    self.assertIsNotNone(gdal.OpenEx(path), path)
                for value in results.values():
                    if isinstance(value, str) and value.startswith("/"):
                        self.assertTrue(os.path.exists(value.split("|")[0]), value)
            return check

        runs = {
            "voronoiraster": ("gpugeo:voronoiraster", {"INPUT": points, "PIXEL_SIZE": 5, "OUTPUT": "Zuordnung ä.tif",
                                                       "OUTPUT_DISTANCE": "Abstand 距離.tif",
                                                       "OUTPUT_POLYGONS": "Regionen é.gpkg"}),
            "qtmvoronoi": ("gpugeo:qtmvoronoi", {"INPUT": lonlat, "LEVEL": 3, "PIXEL_SIZE": 5,
                                                 "OUTPUT_REGIONS": "Regionen ü.gpkg", "OUTPUT_RASTER": "QTM 三角.tif"}),
            "spherevoronoi": ("gpugeo:spherevoronoi", {"INPUT": lonlat, "OUTPUT": "Kugel ø.gpkg"}),
            "voronoipolygons": ("gpugeo:voronoipolygons", {"INPUT": points, "BUFFER": 5, "OUTPUT": "Thiessen ø.gpkg"}),
            "pointneighbours": ("gpugeo:pointneighbours", {"INPUT": points, "RADIUS": 50, "OUTPUT": "Nachbarn ñ.gpkg",
                                                           "OUTPUT_PAIRS": "Paare 対.gpkg"}),
            "dbscan": ("gpugeo:dbscan", {"INPUT": points, "EPS": 50, "MIN_SIZE": 2, "OUTPUT": "Cluster ç.gpkg"}),
            "meshcontours": ("gpugeo:meshcontours", dict(MESH_LEVELS, INPUT=mesh, OUTPUT_LINES="Linien ł.gpkg",
                                                         OUTPUT_POLYGONS="Flächen 面.gpkg")),
            "filldepressions": ("gpugeo:filldepressions", {"INPUT": dem, "OUTPUT": "gefüllt 填.tif"}),
            "breachdepressions": ("gpugeo:breachdepressions", {"INPUT": dem, "OUTPUT": "durchbrochen ü.tif",
                                                               "OUTPUT_CHANGE": "Änderung 変化.tif"}),
            "flowdirection": ("gpugeo:flowdirection", {"INPUT": dem, "OUTPUT": "Richtung ř.tif"}),
            "flowaccumulation": ("gpugeo:flowaccumulation", {"INPUT": directions, "OUTPUT_CELLS": "Zellen ż.tif",
                                                             "OUTPUT_AREA": "Fläche 面積.tif"}),
            "isochrones": ("gpugeo:isochrones", {"INPUT": dem, "OUTLET": outlet, "TRAVEL_TIME": "Zeit 時間.tif",
                                                 "WATERSHED": "Einzugsgebiet ö.gpkg", "ISOCHRONES": "Isochronen ü.gpkg",
                                                 "TIME_AREA": "Zeit-Fläche ä.gpkg"}),
            "watersheds": ("gpugeo:watersheds", {"INPUT": directions, "OUTLETS": outlet, "SNAP_DISTANCE": 500,
                                                 "OUTPUT": "Einzugsgebiete ü.tif", "OUTPUT_POLYGONS": "Gebiete 流域.gpkg"}),
            "snappourpoints": ("gpugeo:snappourpoints", {"INPUT": outlet, "ACCUMULATION": dem, "SNAP_DISTANCE": 500,
                                                         "OUTPUT": "Auslässe ä.gpkg"}),
            "hand": ("gpugeo:hand", {"INPUT": dem, "DIRECTIONS": directions, "STREAMS": directions,
                                     "OUTPUT": "Höhe ü.tif", "OUTPUT_DISTANCE": "Entfernung 距離.tif"}),
            "streamnetwork": ("gpugeo:streamnetwork", {"INPUT": dem, "DIRECTIONS": directions, "THRESHOLD": 3,
                                                       "THRESHOLD_UNITS": 2, "OUTPUT": "Abschnitte ü.tif",
                                                       "OUTPUT_ORDER": "Ordnung 次数.tif",
                                                       "OUTPUT_LINES": "Flüsse 河川.gpkg"}),
            "subbasins": ("gpugeo:subbasins", {"INPUT": directions, "STREAMS": segments, "OUTPUT": "Teilgebiete ü.tif",
                                               "OUTPUT_POLYGONS": "Teilgebiete 子流域.gpkg"}),
        }
        self.assertEqual(sorted("gpugeo:" + name for name in runs), ALGORITHMS)
        inputs = ("INPUT", "OUTLET", "OUTLETS", "ACCUMULATION", "DIRECTIONS", "STREAMS")
        for name, (algorithm, parameters) in runs.items():
            written = []
            for key, value in parameters.items():
                if isinstance(value, str) and value.endswith((".tif", ".gpkg")) and key not in inputs:
                    parameters[key] = out(name, value)
                    written.append(parameters[key])
            self.succeeds(name, algorithm, parameters, check=exist(*written))
        # Under the C locale too (qgis_process then reads its arguments as UTF-8 all the same).
        filled_c = out("filldepressions_c_locale", "gefüllt.tif")
        self.succeeds("filldepressions_c_locale", "gpugeo:filldepressions", {"INPUT": dem, "OUTPUT": filled_c},
                      check=exist(filled_c), env={"LC_ALL": "C", "LANG": "C"})
        # A refusal names the unicode path as it is.
        self.refused("filldepressions_over_input", "gpugeo:filldepressions", {"INPUT": dem, "OUTPUT": dem},
                     f"both are {dem}. Choose another output file; nothing was written.")
        self.refused("meshcontours_missing", "gpugeo:meshcontours",
                     dict(MESH_LEVELS, INPUT=os.path.join(folder, "fehlt ß.2dm"),
                          OUTPUT_LINES=out("meshcontours_missing", "l.gpkg"),
                          OUTPUT_POLYGONS=out("meshcontours_missing", "p.gpkg")), "INPUT")
        self.run_cases()

    def test_unwritable_outputs(self):
        """An output that cannot be written: a read-only folder (0o555) for a normal user; as root, for
        whom permission bits do not count, a path under /proc and a path whose parent "folder" is a file.
        The run fails naming the path, and its other outputs (writable) are not left behind."""
        blocked = {}
        if os.geteuid() != 0:
            read_only = self.path("read-only")
            os.makedirs(read_only)
            os.chmod(read_only, 0o555)
            self.addCleanup(lambda: os.path.isdir(read_only) and os.chmod(read_only, 0o755))
            blocked["read_only"] = (read_only, "Permission denied")
        elif os.path.isdir("/proc/self"):
            blocked["proc"] = (f"/proc/gpugeo-hostile-{os.getpid()}", "No such file or directory")
        not_a_folder = self.input("not-a-folder")
        with open(not_a_folder, "w") as f:
            f.write("a file where a folder should be\n")
        blocked["file_parent"] = (not_a_folder, "Not a directory")
        self.assertTrue(blocked)

        for label, (folder, reason) in blocked.items():
            def bad(name):
                return os.path.join(folder, name)

            cases = [
                ("filldepressions", "gpugeo:filldepressions", {"INPUT": self.dem}, "OUTPUT", "f.tif", {}),
            ("breachdepressions_change", "gpugeo:breachdepressions", {"INPUT": self.dem}, "OUTPUT_CHANGE", "c.tif",
             {"OUTPUT": "b.tif"}),
                ("flowdirection", "gpugeo:flowdirection", {"INPUT": self.dem}, "OUTPUT", "d.tif", {}),
                ("flowaccumulation_area", "gpugeo:flowaccumulation", {"INPUT": self.directions}, "OUTPUT_AREA", "a.tif",
                 {"OUTPUT_CELLS": "c.tif"}),
                ("flowaccumulation_cells", "gpugeo:flowaccumulation", {"INPUT": self.directions}, "OUTPUT_CELLS",
                 "c.tif", {"OUTPUT_AREA": "a.tif"}),
                ("isochrones_table", "gpugeo:isochrones", {"INPUT": self.dem}, "TIME_AREA", "t.gpkg",
                 {"TRAVEL_TIME": "t.tif", "FILLED": "f.tif", "FLOWDIR": "d.tif", "ACCUMULATION": "a.tif",
                  "WATERSHED": "w.gpkg", "ISOCHRONES": "i.gpkg"}),
                ("isochrones_time", "gpugeo:isochrones", {"INPUT": self.dem}, "TRAVEL_TIME", "t.tif",
                 {"FILLED": "f.tif", "WATERSHED": "w.gpkg", "TIME_AREA": "t.gpkg"}),
                ("voronoiraster_polygons", "gpugeo:voronoiraster", {"INPUT": self.points, "PIXEL_SIZE": 5},
                 "OUTPUT_POLYGONS", "p.gpkg", {"OUTPUT": "v.tif", "OUTPUT_DISTANCE": "d.tif"}),
                ("voronoiraster_distance", "gpugeo:voronoiraster", {"INPUT": self.points, "PIXEL_SIZE": 5},
                 "OUTPUT_DISTANCE", "d.tif", {"OUTPUT": "v.tif", "OUTPUT_POLYGONS": "p.gpkg"}),
                ("qtmvoronoi_raster", "gpugeo:qtmvoronoi", {"INPUT": self.lonlat, "LEVEL": 3, "PIXEL_SIZE": 5},
                 "OUTPUT_RASTER", "r.tif", {"OUTPUT_REGIONS": "z.gpkg", "OUTPUT_CELLS": "c.gpkg"}),
                ("spherevoronoi", "gpugeo:spherevoronoi", {"INPUT": self.lonlat}, "OUTPUT", "s.gpkg", {}),
                ("pointneighbours_pairs", "gpugeo:pointneighbours", {"INPUT": self.points, "RADIUS": 50},
                 "OUTPUT_PAIRS", "p.gpkg", {"OUTPUT": "n.gpkg"}),
                ("dbscan", "gpugeo:dbscan", {"INPUT": self.points, "EPS": 50}, "OUTPUT", "c.gpkg", {}),
                ("meshcontours_lines", "gpugeo:meshcontours", dict(MESH_LEVELS, INPUT=self.mesh), "OUTPUT_LINES",
                 "l.gpkg", {"OUTPUT_POLYGONS": "p.gpkg"}),
                ("meshcontours_polygons", "gpugeo:meshcontours", dict(MESH_LEVELS, INPUT=self.mesh), "OUTPUT_POLYGONS",
                 "p.gpkg", {"OUTPUT_LINES": "l.gpkg"}),
            ]
            for short, algorithm, parameters, key, file, others in cases:
                name = f"{label}_{short}"
                parameters = dict(parameters, **{k: self.out(name, v) for k, v in others.items()})
                parameters[key] = bad(f"{name}-{file}")
                # GDAL's reason for a GeoTIFF; SQLite's for a GeoPackage
                self.refused(name, algorithm, parameters, "Could not create", parameters[key],
                             reason if file.endswith(".tif") else "unable to open database file")
        self.run_cases()

    # --- 3. An output over an input.

    def test_output_over_input(self):
        links = {}
        for path in (self.dem, self.directions, self.points, self.lonlat, self.mesh):
            links[path] = self.input("link to " + os.path.basename(path))
            os.symlink(path, links[path])
        hard = self.input("hard link to dem.tif")
        os.link(self.dem, hard)
        manning = self.input("manning.tif")
        shutil.copy(self.dem, manning)
        streams = self.input("streams.tif")
        shutil.copy(self.directions, streams)
        streams_link = self.input("link to streams.tif")
        os.symlink(streams, streams_link)
        over = "would be written over"
        cases = [
            # (name, algorithm, parameters, output, input): every algorithm, the file itself and a link to it
            ("voronoiraster", "gpugeo:voronoiraster", {"INPUT": self.points}, "OUTPUT", "INPUT", self.points),
            ("voronoiraster_link", "gpugeo:voronoiraster", {"INPUT": self.points}, "OUTPUT_POLYGONS", "INPUT",
             links[self.points]),
            ("qtmvoronoi", "gpugeo:qtmvoronoi", {"INPUT": self.lonlat}, "OUTPUT_REGIONS", "INPUT", self.lonlat),
            ("qtmvoronoi_link", "gpugeo:qtmvoronoi", {"INPUT": self.lonlat}, "OUTPUT_CELLS", "INPUT",
             links[self.lonlat]),
            ("spherevoronoi", "gpugeo:spherevoronoi", {"INPUT": self.lonlat}, "OUTPUT", "INPUT", self.lonlat),
            ("voronoipolygons", "gpugeo:voronoipolygons", {"INPUT": self.points}, "OUTPUT", "INPUT", self.points),
            ("spherevoronoi_link", "gpugeo:spherevoronoi", {"INPUT": self.lonlat}, "OUTPUT", "INPUT",
             links[self.lonlat]),
            ("pointneighbours", "gpugeo:pointneighbours", {"INPUT": self.points, "RADIUS": 50}, "OUTPUT", "INPUT",
             self.points),
            ("pointneighbours_link", "gpugeo:pointneighbours", {"INPUT": self.points, "RADIUS": 50}, "OUTPUT_PAIRS",
             "INPUT", links[self.points]),
            ("dbscan", "gpugeo:dbscan", {"INPUT": self.points}, "OUTPUT", "INPUT", self.points),
            ("dbscan_link", "gpugeo:dbscan", {"INPUT": self.points}, "OUTPUT", "INPUT", links[self.points]),
            # the input's own layer, named
            ("dbscan_same_layer", "gpugeo:dbscan", {"INPUT": self.points + "|layername=sites"}, "OUTPUT", "INPUT",
             f"ogr:dbname='{self.points}' table=\"sites\" (geom)"),
            ("meshcontours", "gpugeo:meshcontours", dict(MESH_LEVELS, INPUT=self.mesh), "OUTPUT_LINES", "INPUT",
             self.mesh),
            ("meshcontours_link", "gpugeo:meshcontours", dict(MESH_LEVELS, INPUT=self.mesh), "OUTPUT_POLYGONS",
             "INPUT", links[self.mesh]),
            ("filldepressions", "gpugeo:filldepressions", {"INPUT": self.dem}, "OUTPUT", "INPUT", self.dem),
            ("filldepressions_link", "gpugeo:filldepressions", {"INPUT": self.dem}, "OUTPUT", "INPUT",
             links[self.dem]),
            ("filldepressions_hard_link", "gpugeo:filldepressions", {"INPUT": self.dem}, "OUTPUT", "INPUT", hard),
            ("filldepressions_spelling", "gpugeo:filldepressions", {"INPUT": self.dem}, "OUTPUT", "INPUT",
             os.path.join(self.inputs, "no such folder", "..", "dem.tif")),
            ("filldepressions_input_link", "gpugeo:filldepressions", {"INPUT": links[self.dem]}, "OUTPUT", "INPUT",
             self.dem),
            ("flowdirection", "gpugeo:flowdirection", {"INPUT": self.dem}, "OUTPUT", "INPUT", self.dem),
            ("breachdepressions", "gpugeo:breachdepressions", {"INPUT": self.dem}, "OUTPUT", "INPUT", self.dem),
            ("breachdepressions_link", "gpugeo:breachdepressions",
             {"INPUT": self.dem, "OUTPUT": self.out("breachdepressions_link", "b.tif")}, "OUTPUT_CHANGE", "INPUT",
             links[self.dem]),
            ("flowdirection_link", "gpugeo:flowdirection", {"INPUT": self.dem}, "OUTPUT", "INPUT", links[self.dem]),
            ("flowaccumulation", "gpugeo:flowaccumulation", {"INPUT": self.directions}, "OUTPUT_CELLS", "INPUT",
             self.directions),
            ("flowaccumulation_link", "gpugeo:flowaccumulation", {"INPUT": self.directions}, "OUTPUT_AREA", "INPUT",
             links[self.directions]),
            ("isochrones", "gpugeo:isochrones", {"INPUT": self.dem}, "TRAVEL_TIME", "INPUT", self.dem),
            ("watersheds", "gpugeo:watersheds", {"INPUT": self.directions, "OUTLETS": self.points}, "OUTPUT", "INPUT",
             self.directions),
            ("watersheds_outlets", "gpugeo:watersheds", {"INPUT": self.directions, "OUTLETS": self.points},
             "OUTPUT_POLYGONS", "OUTLETS", self.points),
            ("snappourpoints", "gpugeo:snappourpoints", {"INPUT": self.points, "ACCUMULATION": self.dem}, "OUTPUT",
             "INPUT", self.points),
            ("hand", "gpugeo:hand", {"INPUT": self.dem, "DIRECTIONS": self.directions, "STREAMS": self.directions},
             "OUTPUT", "INPUT", self.dem),
            ("streamnetwork", "gpugeo:streamnetwork", {"INPUT": self.dem, "DIRECTIONS": self.directions},
             "OUTPUT_LINES", "DIRECTIONS", self.directions),
            ("streamnetwork_link", "gpugeo:streamnetwork", {"INPUT": self.dem, "DIRECTIONS": self.directions},
             "OUTPUT_ORDER", "INPUT", links[self.dem]),
            ("subbasins", "gpugeo:subbasins", {"INPUT": self.directions, "STREAMS": streams}, "OUTPUT_POLYGONS",
             "INPUT", self.directions),
            ("subbasins_streams_link", "gpugeo:subbasins", {"INPUT": self.directions, "STREAMS": streams_link},
             "OUTPUT", "STREAMS", streams),
            ("hand_streams_link", "gpugeo:hand", {"INPUT": self.dem, "DIRECTIONS": self.directions,
                                                  "STREAMS": streams_link}, "OUTPUT_DISTANCE", "STREAMS", streams),
            ("isochrones_link", "gpugeo:isochrones", {"INPUT": self.dem}, "FILLED", "INPUT", links[self.dem]),
            ("isochrones_outlet", "gpugeo:isochrones", {"INPUT": self.dem, "OUTLET": self.points}, "WATERSHED",
             "OUTLET", self.points),
            ("isochrones_manning", "gpugeo:isochrones", {"INPUT": self.dem, "VELOCITY_MODEL": 2, "MANNING": manning},
             "ACCUMULATION", "MANNING", manning),
        ]
        covered = set()
        for name, algorithm, parameters, output, source, path in cases:
            parameters = dict(parameters, **{output: path})
            if algorithm == "gpugeo:flowaccumulation" and output != "OUTPUT_CELLS":
                parameters["OUTPUT_CELLS"] = self.out(name, "cells.tif")
            if algorithm == "gpugeo:isochrones" and output != "TRAVEL_TIME":
                parameters["TRAVEL_TIME"] = self.out(name, "time.tif")
            if algorithm == "gpugeo:watersheds" and output != "OUTPUT":
                parameters["OUTPUT"] = self.out(name, "w.tif")
            if algorithm == "gpugeo:hand" and output != "OUTPUT":
                parameters["OUTPUT"] = self.out(name, "h.tif")
            if algorithm in ("gpugeo:streamnetwork", "gpugeo:subbasins") and output != "OUTPUT":
                parameters["OUTPUT"] = self.out(name, "s.tif")
            if algorithm == "gpugeo:meshcontours":
                other = "OUTPUT_POLYGONS" if output == "OUTPUT_LINES" else "OUTPUT_LINES"
                parameters[other] = self.out(name, "other.gpkg")
            if algorithm == "gpugeo:voronoiraster" and output != "OUTPUT":
                parameters["OUTPUT"] = self.out(name, "v.tif")
            if algorithm == "gpugeo:pointneighbours" and output != "OUTPUT":
                parameters["OUTPUT"] = self.out(name, "n.gpkg")
            if algorithm == "gpugeo:qtmvoronoi" and output != "OUTPUT_REGIONS":
                parameters["OUTPUT_REGIONS"] = self.out(name, "r.gpkg")
            self.refused(name, algorithm, parameters, f"{output} (", f"{over} {source} (",
                         "an input of this run", "nothing was written")
            covered.add(algorithm)
        self.assertEqual(sorted(covered), ALGORITHMS)
        self.run_cases()
        # Another layer of the input's GeoPackage is not the input: allowed, the input's layer kept. (On a
        # copy outside the input folder, which the run changes.)
        copy = os.path.join(self.path("other"), "points.gpkg")
        os.makedirs(os.path.dirname(copy))
        shutil.copy(self.points, copy)
        rc, text, data = self.execute({"algorithm": "gpugeo:dbscan", "env": None, "parameters": {
            "INPUT": copy + "|layername=sites", "EPS": 50, "OUTPUT": f"ogr:dbname='{copy}' table=\"clusters\" (geom)"}})
        self.assertEqual(rc, 0, text)
        dataset = ogr.Open(copy)
        self.assertEqual(sorted(dataset.GetLayer(i).GetName() for i in range(dataset.GetLayerCount())),
                         ["clusters", "sites"])
        self.assertEqual(dataset.GetLayerByName("sites").GetFeatureCount(), 20)
        self.assertEqual(dataset.GetLayerByName("clusters").GetFeatureCount(), 20)
        dataset = None

    # --- 4. Two outputs on one file.

    def test_shared_outputs(self):
        def both(first, second):
            return f"{first} (", f"and {second} (", "are both set to", "give each output its own file"

        one = self.out("voronoiraster", "one.tif")
        self.refused("voronoiraster", "gpugeo:voronoiraster",
                     {"INPUT": self.points, "PIXEL_SIZE": 5, "OUTPUT": one, "OUTPUT_DISTANCE": one},
                     *both("OUTPUT", "OUTPUT_DISTANCE"))
        one = self.out("flowaccumulation", "one.tif")
        self.refused("flowaccumulation", "gpugeo:flowaccumulation",
                     {"INPUT": self.directions, "OUTPUT_CELLS": one, "OUTPUT_AREA": one},
                     *both("OUTPUT_CELLS", "OUTPUT_AREA"))
        one = self.out("isochrones", "one.gpkg")
        self.refused("isochrones", "gpugeo:isochrones",
                     {"INPUT": self.dem, "TRAVEL_TIME": self.out("isochrones", "t.tif"), "WATERSHED": one,
                      "ISOCHRONES": one, "TIME_AREA": one}, *both("WATERSHED", "ISOCHRONES"))
        one = self.out("isochrones_rasters", "one.tif")
        self.refused("isochrones_rasters", "gpugeo:isochrones",
                     {"INPUT": self.dem, "TRAVEL_TIME": one, "FILLED": one}, *both("TRAVEL_TIME", "FILLED"))
        one = self.out("qtmvoronoi", "one.gpkg")
        self.refused("qtmvoronoi", "gpugeo:qtmvoronoi",
                     {"INPUT": self.lonlat, "OUTPUT_REGIONS": one, "OUTPUT_CELLS": one},
                     *both("OUTPUT_REGIONS", "OUTPUT_CELLS"))
        one = self.out("pointneighbours", "one.gpkg")
        self.refused("pointneighbours", "gpugeo:pointneighbours",
                     {"INPUT": self.points, "RADIUS": 50, "OUTPUT": one, "OUTPUT_PAIRS": one},
                     *both("OUTPUT", "OUTPUT_PAIRS"))
        one = self.out("meshcontours", "one.gpkg")
        self.refused("meshcontours", "gpugeo:meshcontours",
                     dict(MESH_LEVELS, INPUT=self.mesh, OUTPUT_LINES=one, OUTPUT_POLYGONS=one),
                     *both("OUTPUT_LINES", "OUTPUT_POLYGONS"))
        # One GeoPackage, the same table named twice.
        one = self.out("isochrones_same_table", "one.gpkg")
        table = f"ogr:dbname='{one}' table=\"bands\" (geom)"
        self.refused("isochrones_same_table", "gpugeo:isochrones",
                     {"INPUT": self.dem, "TRAVEL_TIME": self.out("isochrones_same_table", "t.tif"), "WATERSHED": table,
                      "ISOCHRONES": table}, *both("WATERSHED", "ISOCHRONES"))
        # A link to the other output's file, existing or still to be written.
        existing = self.out("voronoiraster_link_existing", "allocation.tif")
        write_dem(existing)
        link = self.out("voronoiraster_link_existing", "link.tif")
        os.symlink(existing, link)
        self.refused("voronoiraster_link_existing", "gpugeo:voronoiraster",
                     {"INPUT": self.points, "PIXEL_SIZE": 5, "OUTPUT": existing, "OUTPUT_DISTANCE": link},
                     *both("OUTPUT", "OUTPUT_DISTANCE"))
        target = self.out("voronoiraster_link_new", "allocation.tif")
        link = self.out("voronoiraster_link_new", "link.tif")
        os.symlink(target, link)  # dangling until the run writes OUTPUT
        self.refused("voronoiraster_link_new", "gpugeo:voronoiraster",
                     {"INPUT": self.points, "PIXEL_SIZE": 5, "OUTPUT": target, "OUTPUT_DISTANCE": link},
                     *both("OUTPUT", "OUTPUT_DISTANCE"))

        # Accepted: one GeoPackage, a table of its own for each sink.
        shared = self.out("isochrones_tables", "isochrones.gpkg")

        def three_layers(results, log):
            for key, table in (("WATERSHED", "watershed"), ("ISOCHRONES", "isochrones"), ("TIME_AREA", "time_area")):
                self.assertEqual(results[key], f"{shared}|layername={table}")
            dataset = ogr.Open(shared)
            counts = {dataset.GetLayer(i).GetName(): dataset.GetLayer(i).GetFeatureCount()
                      for i in range(dataset.GetLayerCount())}
            dataset = None
            self.assertEqual(sorted(counts), ["isochrones", "time_area", "watershed"])
            self.assertEqual(counts["watershed"], 1)
            self.assertGreater(counts["isochrones"], 0)
            self.assertGreater(counts["time_area"], 0)
            for sidecar in ("-wal", "-shm", "-journal"):
                self.assertFalse(os.path.exists(shared + sidecar), sidecar)

        self.succeeds("isochrones_tables", "gpugeo:isochrones",
                      {"INPUT": self.dem, "TRAVEL_TIME": self.out("isochrones_tables", "t.tif"),
                       "WATERSHED": f"ogr:dbname='{shared}' table=\"watershed\" (geom)",
                       "ISOCHRONES": f"ogr:dbname='{shared}' table=\"isochrones\" (geom)",
                       "TIME_AREA": f"ogr:dbname='{shared}' table=\"time_area\""}, check=three_layers)
        self.run_cases()

    # --- 5. NaN, infinite and huge parameters.

    def sweep(self, algorithms):
        """Every numeric parameter of `algorithms` given a non-finite value (nan, inf and -inf in turn,
        parameter by parameter, so that each algorithm with three or more meets all three: one check
        refuses them all, and a qgis_process run costs seconds); 1e308 where above its maximum; 1e12
        where it is a whole number: each refused naming the parameter, its description and the value."""
        base = {
            "gpugeo:voronoiraster": ({"INPUT": self.points}, {"OUTPUT": "o.tif"}),
            "gpugeo:qtmvoronoi": ({"INPUT": self.lonlat}, {"OUTPUT_REGIONS": "o.gpkg"}),
            "gpugeo:spherevoronoi": ({"INPUT": self.lonlat}, {"OUTPUT": "o.gpkg"}),
            "gpugeo:voronoipolygons": ({"INPUT": self.points}, {"OUTPUT": "o.gpkg"}),
            "gpugeo:pointneighbours": ({"INPUT": self.points, "RADIUS": 5}, {"OUTPUT": "o.gpkg"}),
            "gpugeo:dbscan": ({"INPUT": self.points}, {"OUTPUT": "o.gpkg"}),
            "gpugeo:meshcontours": (dict(MESH_LEVELS, INPUT=self.mesh), {"OUTPUT_LINES": "l.gpkg",
                                                                         "OUTPUT_POLYGONS": "p.gpkg"}),
            "gpugeo:filldepressions": ({"INPUT": self.dem}, {"OUTPUT": "o.tif"}),
            "gpugeo:breachdepressions": ({"INPUT": self.dem}, {"OUTPUT": "o.tif"}),
            "gpugeo:flowdirection": ({"INPUT": self.dem}, {"OUTPUT": "o.tif"}),
            "gpugeo:flowaccumulation": ({"INPUT": self.directions}, {"OUTPUT_CELLS": "o.tif"}),
            "gpugeo:isochrones": ({"INPUT": self.dem}, {"TRAVEL_TIME": "o.tif", "WATERSHED": "w.gpkg"}),
            "gpugeo:watersheds": ({"INPUT": self.directions, "OUTLETS": self.points}, {"OUTPUT": "o.tif"}),
            "gpugeo:snappourpoints": ({"INPUT": self.points, "ACCUMULATION": self.dem}, {"OUTPUT": "o.gpkg"}),
            "gpugeo:hand": ({"INPUT": self.dem, "DIRECTIONS": self.directions, "STREAMS": self.directions},
                            {"OUTPUT": "o.tif"}),
            "gpugeo:streamnetwork": ({"INPUT": self.dem, "DIRECTIONS": self.directions}, {"OUTPUT": "o.tif"}),
            "gpugeo:subbasins": ({"INPUT": self.directions, "STREAMS": self.directions}, {"OUTPUT": "o.tif"}),
        }
        shown = {"nan": "nan", "inf": "inf", "-inf": "-inf", "1e308": "1e+308", "1e12": "1e+12"}
        count = 0
        for algorithm, parameters in self.numeric_parameters(algorithms).items():
            self.assertTrue(parameters or algorithm == "gpugeo:spherevoronoi", algorithm)
            for index, (name, definition) in enumerate(parameters.items()):
                values = [("nan", "inf", "-inf")[index % 3]]
                if definition.get("max", float("inf")) < 1e308:
                    values.append("1e308")
                if definition["parameter_type"] == "band" or definition.get("data_type") == 0:
                    values.append("1e12")
                for value in values:
                    case = f"{algorithm.split(':')[1]}_{name}_{value}"
                    given, outputs = base[algorithm]
                    parameters = dict(given, **{k: self.out(case, v) for k, v in outputs.items()})
                    parameters[name] = value
                    self.refused(case, algorithm, parameters,
                                 f"{name} ({definition['description']}) must be ", f"; got {shown[value]}.")
                    count += 1
        return count

    def test_nonfinite_parameters_isochrones(self):
        self.assertGreater(self.sweep(["gpugeo:isochrones"]), 30)
        self.run_cases()

    def test_nonfinite_parameters(self):
        others = [a for a in ALGORITHMS if a != "gpugeo:isochrones"]
        self.assertGreater(self.sweep(others), 60)
        for case, value, shown in (("nan_xmin", "nan,1,2,3", "got nan, 1, 2, 3."),
                                   ("inf_xmax", "0,inf,0,1", "got 0, inf, 0, 1."),
                                   ("infinite_width", "-1e308,1e308,0,1", "got -1e+308, 1e+308, 0, 1.")):
            case = "voronoiraster_EXTENT_" + case
            self.refused(case, "gpugeo:voronoiraster",
                         {"INPUT": self.points, "EXTENT": value, "OUTPUT": self.out(case, "o.tif")},
                         "EXTENT (Extent) must be four finite numbers", shown)
        self.refused("meshcontours_CRS_OUTPUT", "gpugeo:meshcontours",
                     dict(MESH_LEVELS, INPUT=self.mesh, CRS_OUTPUT="EPSG:999999",
                          OUTPUT_LINES=self.out("meshcontours_CRS_OUTPUT", "l.gpkg"),
                          OUTPUT_POLYGONS=self.out("meshcontours_CRS_OUTPUT", "p.gpkg")),
                     'CRS_OUTPUT (Output coordinate system): "EPSG:999999" is not a coordinate reference system')
        for levels, shown in (("nan,1", "Invalid level nan"), ("1,inf", "Invalid level inf"),
                              ("-inf,1", "Invalid level -inf")):
            case = "meshcontours_levels_" + levels.replace(",", "_").replace("-", "minus")
            self.refused(case, "gpugeo:meshcontours",
                         dict(MESH_LEVELS, INPUT=self.mesh, CONTOUR_LEVEL_LIST=levels,
                              OUTPUT_LINES=self.out(case, "l.gpkg"), OUTPUT_POLYGONS=self.out(case, "p.gpkg")),
                         shown, "levels must be finite numbers")
        self.run_cases()

    def test_huge_parameters(self):
        """Extreme values inside the parameters' ranges: a result, or a refusal that says why."""
        outlet = self.input("outlet.gpkg")
        write_points(outlet, [(500100.0, 3999900.0)])  # column 3, row 3 of the DEM
        self.refused("voronoiraster_tiny_pixel", "gpugeo:voronoiraster",
                     {"INPUT": self.points, "PIXEL_SIZE": "1e-308", "OUTPUT": self.out("voronoiraster_tiny_pixel", "o.tif")},
                     "more than the limits of 2^31 pixels")

        def one_pixel(results, log):
            dataset = gdal.Open(results["OUTPUT"])
            self.assertEqual((dataset.RasterXSize, dataset.RasterYSize), (1, 1))
            dataset = None

        self.succeeds("voronoiraster_huge_pixel", "gpugeo:voronoiraster",
                      {"INPUT": self.points, "PIXEL_SIZE": "1e308", "OUTPUT": self.out("voronoiraster_huge_pixel", "o.tif")},
                      check=one_pixel)

        def all_pairs(results, log):
            dataset = ogr.Open(results["OUTPUT"])
            self.assertEqual([f.GetField("NB_COUNT") for f in dataset.GetLayer(0)], [19] * 20)
            dataset = None

        self.succeeds("pointneighbours_huge_radius", "gpugeo:pointneighbours",
                      {"INPUT": self.points, "RADIUS": "1e308", "K": 0, "MAX_PAIRS": 2147483647,
                       "OUTPUT": self.out("pointneighbours_huge_radius", "o.gpkg")}, check=all_pairs)
        self.succeeds("dbscan_huge_eps", "gpugeo:dbscan",
                      {"INPUT": self.points, "EPS": "1e308", "MIN_SIZE": 2,
                       "OUTPUT": self.out("dbscan_huge_eps", "o.gpkg")},
                      check=lambda results, log: self.assertEqual(results["NUM_CLUSTERS"], 1))
        self.refused("isochrones_tiny_interval", "gpugeo:isochrones",
                     {"INPUT": self.dem, "INTERVAL": "1e-308", "TRAVEL_TIME": self.out("isochrones_tiny_interval", "t.tif"),
                      "TIME_AREA": self.out("isochrones_tiny_interval", "a.gpkg")},
                     "more than the limit of 10000: choose a larger interval")
        self.succeeds("isochrones_huge_interval", "gpugeo:isochrones",
                      {"INPUT": self.dem, "INTERVAL": "1e308", "TRAVEL_TIME": self.out("isochrones_huge_interval", "t.tif")},
                      check=lambda results, log: self.assertEqual(results["INTERVAL_MIN"], 1e308))
        # A speed so small that the travel times overflow: refused, naming SPEED (not "-nan bands").
        case = "isochrones_tiny_speed"
        self.refused(case, "gpugeo:isochrones",
                     {"INPUT": self.dem, "VELOCITY_MODEL": 0, "SPEED": "1e-308", "TRAVEL_TIME": self.out(case, "t.tif"),
                      "TIME_AREA": self.out(case, "a.gpkg")}, "SPEED")
        # Any snap distance reaches the cell a modest one reaches (the DEM is 360 m wide).
        snapped = "snapped within {} m to the cell of highest accumulation, column 3, row 0"
        for distance, shown in (("1e6", "1000000"), ("1e308", "1e+308")):
            case = f"isochrones_snap_{distance}"
            self.succeeds(case, "gpugeo:isochrones",
                          {"INPUT": self.dem, "OUTLET": outlet, "SNAP_DISTANCE": distance,
                           "TRAVEL_TIME": self.out(case, "t.tif")}, snapped.format(shown))
        self.refused("meshcontours_tiny_increment", "gpugeo:meshcontours",
                     {"INPUT": self.mesh, "DATASET_GROUPS": 0, "DATASET_TIME": "2021-01-01", "MINIMUM": 0,
                      "MAXIMUM": 10, "INCREMENT": "1e-308",
                      "OUTPUT_LINES": self.out("meshcontours_tiny_increment", "l.gpkg"),
                      "OUTPUT_POLYGONS": self.out("meshcontours_tiny_increment", "p.gpkg")},
                     "at most 10000 are allowed")

        def one_band(results, log):
            rows = polygons(results["OUTPUT_POLYGONS"])
            self.assertEqual(len(rows), 1)
            self.assertEqual(rows[0][:2], (-1e308, 1e308))
            self.assertAlmostEqual(rows[0][2], 16.0)  # the whole 4 x 4 mesh
            self.assertTrue(rows[0][3])

        self.succeeds("meshcontours_huge_levels", "gpugeo:meshcontours",
                      dict(MESH_LEVELS, INPUT=self.mesh, CONTOUR_LEVEL_LIST="-1e308,1e308",
                           OUTPUT_LINES=self.out("meshcontours_huge_levels", "l.gpkg"),
                           OUTPUT_POLYGONS=self.out("meshcontours_huge_levels", "p.gpkg")), check=one_band)
        self.run_cases()

    # --- 6. Extreme coordinates.

    def test_extreme_coordinates(self):
        huge = self.input("huge.gpkg")
        write_points(huge, [(1e308, 1e308), (-1e308, -1e308), (0.0, 0.0)])
        far_east = self.input("far_east.gpkg")
        write_points(far_east, [(1e15, 10.0), (20.0, 30.0), (-40.0, -20.0)], epsg=4326)
        far_north = self.input("far_north.gpkg")
        write_points(far_north, [(10.0, 1e15), (20.0, 30.0), (-40.0, -20.0)], epsg=4326)
        spread = "the points' x coordinates run from -1e+308 to 1e+308, farther apart than the 1e+150"
        self.refused("pointneighbours", "gpugeo:pointneighbours",
                     {"INPUT": huge, "RADIUS": 5, "OUTPUT": self.out("pointneighbours", "o.gpkg"),
                      "OUTPUT_PAIRS": self.out("pointneighbours", "p.gpkg")}, spread)
        self.refused("dbscan", "gpugeo:dbscan", {"INPUT": huge, "EPS": 5, "OUTPUT": self.out("dbscan", "o.gpkg")},
                     spread)
        for algorithm, key in (("gpugeo:qtmvoronoi", "OUTPUT_REGIONS"), ("gpugeo:spherevoronoi", "OUTPUT")):
            for label, path in (("longitude", far_east), ("latitude", far_north)):
                case = f"{algorithm.split(':')[1]}_{label}"
                self.refused(case, algorithm, {"INPUT": path, key: self.out(case, "o.gpkg")},
                             "1 of 3 points have a NaN or infinite coordinate, a latitude outside -90..90 or a "
                             "longitude outside -720..720 degrees")
        self.refused("voronoiraster", "gpugeo:voronoiraster",
                     {"INPUT": huge, "OUTPUT": self.out("voronoiraster", "o.tif"),
                      "OUTPUT_POLYGONS": self.out("voronoiraster", "p.gpkg")},
                     "The extent (-1e+308, -1e+308 : 1e+308, 1e+308) is too wide for a raster")
        self.refused("voronoiraster_pixel", "gpugeo:voronoiraster",
                     {"INPUT": huge, "PIXEL_SIZE": "1e300", "OUTPUT": self.out("voronoiraster_pixel", "o.tif")},
                     "is too wide for a raster")
        huge_lines = self.input("huge_lines.gpkg")
        write_raw_lines(huge_lines, [[(0.0, 0.0), (1e300, 5.0)], [(1.0, 1.0), (2.0, 2.0)]], 32633)
        # A line 1e300 long: the default pixel (a thousandth of the extent) makes it a 1000 x 1 raster.
        self.succeeds("voronoiraster_lines", "gpugeo:voronoiraster",
                      {"INPUT": huge_lines, "OUTPUT": self.out("voronoiraster_lines", "o.tif")},
                      "Raster: 1000 x 1 pixels of 1e+297")
        self.refused("voronoiraster_lines_extent", "gpugeo:voronoiraster",
                     {"INPUT": huge_lines, "EXTENT": "0,10,0,10 [EPSG:32633]", "PIXEL_SIZE": 1,
                      "OUTPUT": self.out("voronoiraster_lines_extent", "o.tif")},
                     "lies more than 1e15 pixels from the grid")
        self.refused("isochrones_outlet", "gpugeo:isochrones",
                     {"INPUT": self.dem, "OUTLET": huge, "TRAVEL_TIME": self.out("isochrones_outlet", "t.tif")},
                     "lies outside the DEM")
        self.run_cases()

    # --- 7. Extreme cell sizes.

    def test_extreme_cell_sizes(self):
        sizes = {"tiny": (1e-300, "1e-300 x 1e-300 m"), "huge": (5e6, "5e+06 x 5e+06 m")}
        for label, (pixel, shown) in sizes.items():
            dem = self.input(f"{label}.tif")
            write_dem(dem, pixel=pixel, origin=(0.0, 0.0) if pixel > 1 else DEM_ORIGIN)
            directions = self.input(f"{label}_directions.tif")
            write_directions(directions, pixel=pixel)
            words = f"the cells of row 0 are {shown}: cell sizes must lie between 1 mm and 1,000 km"
            for algorithm, source, outputs in (("gpugeo:filldepressions", dem, {"OUTPUT": "o.tif"}),
                                               ("gpugeo:flowdirection", dem, {"OUTPUT": "o.tif"}),
                                               ("gpugeo:flowaccumulation", directions,
                                                {"OUTPUT_CELLS": "c.tif", "OUTPUT_AREA": "a.tif"}),
                                               ("gpugeo:isochrones", dem,
                                                {"TRAVEL_TIME": "t.tif", "WATERSHED": "w.gpkg"})):
                case = f"{algorithm.split(':')[1]}_{label}"
                self.refused(case, algorithm, dict({k: self.out(case, v) for k, v in outputs.items()}, INPUT=source),
                             words)
        self.run_cases()

    # --- 8. Overlapping meshes.

    def test_overlapping_mesh(self):
        square = [(0.0, 0.0), (10.0, 0.0), (10.0, 10.0), (0.0, 10.0)]
        triangles = [(1, 2, 3), (1, 3, 4), (5, 6, 7), (5, 7, 8)]
        parameters = {"INCREMENT": 5, "MINIMUM": 0, "MAXIMUM": 25, "DATASET_GROUPS": 0, "DATASET_TIME": "2021-01-01"}

        def valid(areas):
            def check(results, log):
                rows = polygons(results["OUTPUT_POLYGONS"])
                self.assertTrue(all(row[3] for row in rows), rows)
                self.assertEqual([(row[0], row[1]) for row in rows], [(5.0 * i, 5.0 * i + 5) for i in range(len(areas))])
                for row, area in zip(rows, areas):
                    self.assertAlmostEqual(row[2], area, delta=1e-9)
            return check

        # The square shifted by (5, 5) with the same corner values: z = x + y on the first square and
        # x + y - 10 on the second, so that a band's pieces on the two do not overlap.
        shifted = self.input("shifted.2dm")
        write_2dm(shifted, [(x, y, z) for (x, y), z in zip(square, (0, 10, 20, 10))] +
                  [(x + 5, y + 5, z) for (x, y), z in zip(square, (0, 10, 20, 10))], triangles)
        self.succeeds("shifted", "gpugeo:meshcontours",
                      dict(parameters, INPUT=shifted, OUTPUT_LINES=self.out("shifted", "l.gpkg"),
                           OUTPUT_POLYGONS=self.out("shifted", "p.gpkg")), "Wrote 3 line features and 4 polygon",
                      check=valid([25.0, 75.0, 75.0, 25.0]))
        # The same surface z = x + y on both squares: on their overlap [5, 10]^2 both give the same bands,
        # so a band joined along the mesh's edges overlaps itself; made again as a union, with a warning.
        overlapping = self.input("overlapping.2dm")
        write_2dm(overlapping, [(x, y, x + y) for x, y in square] + [(x + 5, y + 5, x + y + 10) for x, y in square],
                  triangles)
        self.succeeds("overlapping", "gpugeo:meshcontours",
                      dict(parameters, INPUT=overlapping, OUTPUT_LINES=self.out("overlapping", "l.gpkg"),
                           OUTPUT_POLYGONS=self.out("overlapping", "p.gpkg")),
                      "were not valid polygons when joined along the mesh's edges",
                      check=valid([12.5, 37.5, 37.5, 37.5, 37.5]))
        self.run_cases()


if __name__ == "__main__":
    unittest.main()
