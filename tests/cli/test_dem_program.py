#!/usr/bin/env python3
"""gpugeo_dem, the DEM tools' command-line program, alone and under mpiexec (Open MPI).

Every tool run alone and with 1, 2, 3 and 4 ranks (--oversubscribe, on this machine's cores) on a
DEM whose depressions, flats, nodata and flow paths cross many tiles of 37 x 37 cells: every output
(rasters, the isochrones' vector files and table, the results file) the same bytes as the run alone.
A rank killed mid-run ends the job within seconds with an error naming the rank and its tiles,
leaving no output and no scratch folder. Usage errors exit with 2, failed runs with 1. The isochrones'
hydrograph against a direct sum over the travel-time raster's cells and the excess series' steps.

Run: test_dem_program.py --program PATH [--ranks 1,2,3,4]   (default: $GPUGEO_DEM_TEST_RANKS, else 1,2,3,4)
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
from osgeo import gdal, ogr, osr

gdal.UseExceptions()

MPIEXEC = shutil.which("mpiexec")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
FAILURES = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        FAILURES.append(what)


def make_dem(path, w=301, h=223, seed=5):
    """Terrain with pits (noise), plateaus (rounded to 0.5 m) that become flats, a nodata blob and a
    long valley, in UTM 33N."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    z = 200 + 0.3 * x + 0.2 * y + 15 * np.sin(x / 17.0) * np.cos(y / 23.0) + rng.normal(0, 2, (h, w))
    z -= 25 * np.exp(-((y - h / 2) ** 2) / 200.0)  # a valley across every column of tiles
    z = np.round(z * 2) / 2
    z[50:60, 80:95] = -9999
    ds = gdal.GetDriverByName("GTiff").Create(path, w, h, 1, gdal.GDT_Float32, ["TILED=YES"])
    ds.SetGeoTransform([500000, 30, 0, 4600000, 0, -30])
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(32633)
    ds.SetProjection(srs.ExportToWkt())
    band = ds.GetRasterBand(1)
    band.SetNoDataValue(-9999)
    band.WriteArray(z.astype(np.float32))
    ds = None


def run(program, args, ranks=0, check_rc=True):
    command = ([MPIEXEC, "-n", str(ranks), "--oversubscribe"] if ranks else []) + [program] + args[:1] + ["--quiet"] + args[1:]
    result = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=600)
    if check_rc and result.returncode != 0:
        print(result.stdout, result.stderr)
    return result


def raster_bytes(path):
    ds = gdal.Open(path)
    band = ds.GetRasterBand(1)
    return (ds.GetGeoTransform(), str(band.GetNoDataValue()), band.DataType, band.ReadAsArray().tobytes())


def vector_rows(path):
    ds = ogr.Open(path)
    layer = ds.GetLayer(0)
    rows = []
    for feature in layer:
        geometry = feature.GetGeometryRef()
        rows.append((tuple(feature.items().items()), geometry.ExportToWkb() if geometry else None))
    return rows


def tool_runs(folder, dem, suffix):
    f = lambda name: os.path.join(folder, os.path.splitext(name)[0] + suffix + os.path.splitext(name)[1])
    return [
        ["filldepressions", "--dem", dem, "--flats", "resolve", "--output", f("filled.tif")],
        ["filldepressions", "--dem", dem, "--flats", "epsilon", "--output", f("epsilon.tif")],
        ["flowdirection", "--dem", os.path.join(folder, "filled.tif"), "--output", f("dir.tif")],
        ["flowaccumulation", "--directions", os.path.join(folder, "dir.tif"), "--units", "km2",
         "--cells", f("cells.tif"), "--area", f("area.tif")],
        ["isochrones", "--dem", dem, "--velocity-model", "slope", "--interval", "20", "--travel-time", f("time.tif"),
         "--watershed", f("shed.gpkg"), "--isochrones", f("bands.gpkg"), "--time-area", f("table.csv"),
         "--filled", f("ifilled.tif"), "--flowdir", f("idir.tif"), "--accumulation", f("iacc.tif"),
         "--results", f("results.bin"), "--hydrograph", f("hydro.csv"), "--excess-series", "0,12.5,40,7.25"],
        ["isochrones", "--dem", dem, "--outlet", "504000,4596700", "--snap-distance", "200", "--velocity-model",
         "constant", "--travel-time", f("time2.tif"), "--isochrones", f("bands2.gpkg")],
    ]


def outputs_of(args):
    return [args[i + 1] for i in range(len(args) - 1) if args[i] in (
            "--output", "--cells", "--area", "--travel-time", "--watershed", "--isochrones", "--time-area",
            "--filled", "--flowdir", "--accumulation", "--results", "--hydrograph")]


def same_file(a, b):
    if a.endswith(".tif"):
        return raster_bytes(a) == raster_bytes(b)
    if a.endswith(".gpkg"):
        return vector_rows(a) == vector_rows(b)
    with open(a, "rb") as x, open(b, "rb") as y:
        return x.read() == y.read()


def test_ranks(program, folder, ranks):
    dem = os.path.join(folder, "dem.tif")
    make_dem(dem)
    common = ["--tile", "37", "--threads", "1"]
    alone = tool_runs(folder, dem, "")
    for args in alone:
        result = run(program, args + common)
        check(result.returncode == 0, "alone: " + " ".join(args[:5]))
    for n in ranks:
        for args, single in zip(tool_runs(folder, dem, "_%d" % n), alone):
            result = run(program, args + common, ranks=n)
            check(result.returncode == 0, "%d ranks: %s exits 0" % (n, " ".join(args[:5])))
            for mine, theirs in zip(outputs_of(args), outputs_of(single)):
                check(os.path.exists(mine) and same_file(theirs, mine),
                      "%d ranks: %s equals the run alone" % (n, os.path.basename(mine)))
    leftovers = [n for n in os.listdir(folder) if n.startswith("gpugeo-scratch")]
    check(not leftovers, "no scratch folder left behind")


def rank_pids(name):
    """The pids of the job's processes running `name`, by their MPI rank."""
    pids = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if name.encode() not in f.read():
                    continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                for item in f.read().split(b"\0"):
                    if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                        pids[int(item.split(b"=")[1])] = int(pid)
        except OSError:
            pass
    return pids


def test_killed_rank(program, folder):
    dem = os.path.join(folder, "big.tif")
    make_dem(dem, 1500, 1500, seed=9)
    out = os.path.join(folder, "killed.tif")
    marker = "killed-rank-test-%d" % os.getpid()
    command = [MPIEXEC, "-n", "3", "--oversubscribe", program, "filldepressions", "--dem", dem, "--flats", "resolve",
               "--output", out, "--tile", "24", "--threads", "1", "--machine-readable", "--scratch", folder]
    job = subprocess.Popen(command + ["--band", "1"], env=dict(ENV, GPUGEO_TEST_MARKER=marker),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    # Wait until the fill is under way, then kill rank 1.
    lines = []
    for line in job.stdout:
        lines.append(line)
        if line.startswith("@progress") and float(line.split()[1]) > 30:
            break
    pids = rank_pids("filldepressions")
    check(1 in pids, "the job's rank 1 is found")
    killed_at = time.time()
    if 1 in pids:
        os.kill(pids[1], signal.SIGKILL)
    try:
        rest, _ = job.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        job.kill()
        rest, _ = job.communicate()
    ended = time.time() - killed_at
    text = "".join(lines) + rest
    check(job.returncode != 0, "the job fails (exit %s)" % job.returncode)
    check(ended < 20, "it ends %.1f s after the kill" % ended)
    check("rank 1" in text, "its messages name rank 1")
    check("tile" in text, "and the tiles rank 1 held")
    check(not os.path.exists(out), "no output is left")
    check(not [n for n in os.listdir(folder) if n.startswith("gpugeo-scratch")], "no scratch folder is left")
    if FAILURES:
        print(text, os.listdir(folder))


def test_hydrograph(folder):
    """The run alone's hydro.csv (interval 20 minutes, 30 m cells) against the direct sum: the excess
    of step j on a cell of band k = floor(t / 20) reaches the outlet in step j + k."""
    excess = [0.0, 12.5, 40.0, 7.25]
    ds = gdal.Open(os.path.join(folder, "time.tif"))
    t = ds.GetRasterBand(1).ReadAsArray().ravel()
    band = np.floor(t[t != -1] / 20.0).astype(np.int64)
    expected = np.zeros(int(band.max()) + len(excess))
    for j, i in enumerate(excess):
        np.add.at(expected, band + j, 900.0 * i / 3.6e6)
    rows = [dict(items) for items, _ in vector_rows(os.path.join(folder, "hydro.csv"))]
    check(len(rows) == len(expected), "hydrograph: one row per step (%d)" % len(expected))
    got = np.array([float(r["discharge_m3s"]) for r in rows])
    check(len(got) == len(expected) and np.allclose(got, expected, rtol=1e-12, atol=0),
          "hydrograph: the discharge is the direct sum over cells and steps")
    check([float(r["t_max"]) for r in rows] == [20.0 * (k + 1) for k in range(len(rows))], "hydrograph: the steps")


def test_usage(program, folder):
    check(run(program, ["--help"]).returncode == 0, "--help exits 0")
    check(run(program, ["filldepressions", "--help"]).returncode == 0, "a tool's --help exits 0")
    bad = run(program, ["filldepressions", "--dem"], check_rc=False)
    check(bad.returncode == 2 and "needs a value" in bad.stderr, "a missing value is a usage error (2)")
    bad = run(program, ["nosuchtool"], check_rc=False)
    check(bad.returncode == 2 and "unknown tool" in bad.stderr, "an unknown tool is a usage error (2)")
    bad = run(program, ["filldepressions", "--dem", "x.tif", "--output", "y.tif", "--flats", "some"], check_rc=False)
    check(bad.returncode == 2 and "one of none, resolve, epsilon" in bad.stderr, "a bad choice is a usage error (2)")
    missing = run(program, ["filldepressions", "--dem", os.path.join(folder, "none.tif"),
                            "--output", os.path.join(folder, "o.tif")], check_rc=False)
    check(missing.returncode == 1 and "none.tif" in missing.stderr, "a missing DEM fails (1) naming it")
    missing = run(program, ["filldepressions", "--dem", os.path.join(folder, "none.tif"),
                            "--output", os.path.join(folder, "o.tif")], ranks=2, check_rc=False)
    check(missing.returncode != 0 and "none.tif" in missing.stderr + missing.stdout, "and so under mpiexec")
    bad = run(program, ["isochrones", "--dem", "x.tif", "--travel-time", "t.tif", "--hydrograph", "h.csv",
                        "--excess-series", "1,2"], check_rc=False)
    check(bad.returncode == 2 and "set --interval" in bad.stderr, "an excess series without --interval (2)")
    bad = run(program, ["isochrones", "--dem", "x.tif", "--travel-time", "t.tif", "--interval", "5",
                        "--excess-series", "1,-2"], check_rc=False)
    check(bad.returncode == 2 and "'-2'" in bad.stderr, "a negative excess (2)")
    dem = os.path.join(folder, "usage_dem.tif")
    make_dem(dem)
    out = os.path.join(folder, "usage_fill.tif")
    bad = run(program, ["filldepressions", "--dem", dem, "--output", out, "--creation-options", "COMPRESS=NOPE"],
              check_rc=False)
    check(bad.returncode == 1 and "COMPRESS" in bad.stderr and not os.path.exists(out),
          "creation options GDAL does not take fail (1), nothing written")
    good = run(program, ["filldepressions", "--dem", dem, "--output", out, "--cog", "--creation-options", "COMPRESS=LZW"])
    structure = gdal.Info(out, format="json")["metadata"].get("IMAGE_STRUCTURE", {}) if good.returncode == 0 else {}
    check(structure.get("COMPRESSION") == "LZW" and structure.get("LAYOUT") == "COG",
          "--cog --creation-options COMPRESS=LZW: an LZW COG (%s)" % structure)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--program", required=True)
    # GPUGEO_DEM_TEST_RANKS: the rank counts when --ranks is not given (tests/sanitizers.sh runs 1,3:
    # under AddressSanitizer's slow unwinder every run takes minutes, and one rank and an uneven
    # three show what two and four would)
    parser.add_argument("--ranks", default=os.environ.get("GPUGEO_DEM_TEST_RANKS", "1,2,3,4"))
    args = parser.parse_args()
    if not MPIEXEC:
        print("mpiexec not found: skipped")
        return 77
    with tempfile.TemporaryDirectory() as folder:
        test_usage(args.program, folder)
        test_ranks(args.program, folder, [int(n) for n in args.ranks.split(",")])
        test_hydrograph(folder)
    with tempfile.TemporaryDirectory() as folder:
        test_killed_rank(args.program, folder)
    print("%d failures" % len(FAILURES))
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
