#!/usr/bin/python3
"""gpugeo:hand against SAGA's "Overland Flow Distance to Channel Network" (ta_channels 4, D8) on this
machine, on the same filled DEM and channels, in one run:

  ours     gpugeo:hand through qgis_process (DEVICE=1, the CPU), heights and distances written; a whole
           process. Its floor beside it: gdal:translate of the same DEM through qgis_process (QGIS's
           start-up, a raster read and written).
  saga     saga_cmd ta_channels 4 -METHOD 0 (D8) with its vertical and horizontal distances (SAGA's
           HAND and path length), a whole process; it takes the DEM and derives its own D8 directions.

The DEM: bench_dem_tiled_cpu.py's terrain at --size², filled with its flats raised by
gpugeo:filldepressions (FLATS=1); the channels where at least --stream-cells cells drain through
gpugeo:flowdirection's and gpugeo:flowaccumulation's (nodata elsewhere, as SAGA takes a channel grid).
SAGA's D8 differs from ours in two documented ways (its tool's source, ChannelNetwork_Distance.cpp): an
edge cell never drains off the raster, and ties go to the first neighbour clockwise from north. So
that both follow the same paths, ours is given SAGA's rule's directions (steepest descent, dz over the
cell size or its diagonal, strictly positive, ties to the first from north; computed here with numpy).
None of this preparation is timed; SAGA's run includes its own D8 (a small part of it). Then, on the
cells where both give a value: how many heights agree within 1 mm and distances within 1e-5 relative
(SAGA sums a path's steps into its float32 output grid, one rounding a step; ours are exact sums
rounded once).

usage: bench_hand_saga.py [PLUGIN_DIR] [--size N] [--stream-cells C] [--work DIR] [--limit FACTOR]

--limit 5 stops SAGA at 5 times our time (the issue's bar shown without waiting for SAGA). Rasters are
read and written by strips of rows, so that a 20,000² DEM fits this machine's memory.
"""
import argparse
import os
import re
import sys
import tempfile

import numpy as np
from osgeo import gdal

from bench_dem_grass import QGIS_PROCESS, timed
from bench_watersheds_grass import prepare_directions

gdal.UseExceptions()


STRIP = 2048  # rows at a time: a 20,000² DEM in bounded memory


def read(path, first=0, rows=None):
    """Rows [first, first + rows) of the first band as float64, nodata as NaN, with the geotransform and
    projection."""
    dataset = gdal.Open(path)  # held while its band is read
    band = dataset.GetRasterBand(1)
    rows = dataset.RasterYSize - first if rows is None else rows
    values = band.ReadAsArray(0, first, dataset.RasterXSize, rows).astype(np.float64)
    nodata = band.GetNoDataValue()
    if nodata is not None:
        values[values == nodata] = np.nan
    return values, dataset.GetGeoTransform(), dataset.GetProjection()


def row_strips(height):
    """(first row, rows, rows of halo above, rows of halo below) of every strip of STRIP rows."""
    for first in range(0, height, STRIP):
        rows = min(STRIP, height - first)
        yield first, rows, min(first, 1), min(1, height - first - rows)


def create(path, like, kind, nodata):
    """A tiled GeoTIFF on `like`'s grid."""
    source = gdal.Open(like)
    out = gdal.GetDriverByName("GTiff").Create(path, source.RasterXSize, source.RasterYSize, 1, kind,
                                               ["TILED=YES", "BIGTIFF=IF_SAFER"])
    out.SetGeoTransform(source.GetGeoTransform())
    out.SetProjection(source.GetProjection())
    out.GetRasterBand(1).SetNoDataValue(nodata)
    return out


def saga_d8(z, cell):
    """ESRI codes of SAGA's D8 rule (0: no lower neighbour in the raster): the steepest drop over the
    distance among the neighbours inside the raster, ties to the first in SAGA's order N, NE, E ... NW."""
    h, w = z.shape
    order = [(0, -1, 64), (1, -1, 128), (1, 0, 1), (1, 1, 2), (0, 1, 4), (-1, 1, 8), (-1, 0, 16), (-1, -1, 32)]
    best = np.zeros((h, w))
    codes = np.zeros((h, w), np.uint8)
    padded = np.pad(z.astype(np.float64), 1, constant_values=np.nan)
    for i, (dx, dy, esri) in enumerate(order):
        neighbour = padded[1 + dy:1 + dy + h, 1 + dx:1 + dx + w]
        with np.errstate(invalid="ignore"):
            slope = (z - neighbour) / (cell * (np.sqrt(2.0) if i % 2 else 1.0))
            steeper = slope > best
        best = np.where(steeper, slope, best)
        codes[steeper] = esri
    codes[np.isnan(z)] = 255
    return codes


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("plugin", nargs="?", default=os.environ.get("GPUGEO_PLUGIN_DIR"))
    parser.add_argument("--size", type=int, default=2511)
    parser.add_argument("--stream-cells", type=int, default=1000)
    parser.add_argument("--work")
    parser.add_argument("--limit", type=float, help="stop SAGA at this many times our time")
    a = parser.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="gg_hand_")
    env, filled, directions, cells = prepare_directions(a.plugin, a.size, work)
    gt = gdal.Open(filled).GetGeoTransform()
    channels = os.path.join(work, "channels.tif")
    saga_directions = os.path.join(work, "dir_saga_rule.tif")
    out_channels = create(channels, cells, gdal.GDT_Byte, 0)
    out_directions = create(saga_directions, filled, gdal.GDT_Byte, 255)
    channel_cells = 0
    for first, rows, above, below in row_strips(a.size):
        upstream = read(cells, first, rows)[0]
        channel_cells += int((upstream >= a.stream_cells).sum())
        out_channels.GetRasterBand(1).WriteArray((upstream >= a.stream_cells).astype(np.uint8), 0, first)
        z = read(filled, first - above, above + rows + below)[0]
        out_directions.GetRasterBand(1).WriteArray(saga_d8(z, gt[1])[above:above + rows], 0, first)
    out_channels = out_directions = None
    print(f"DEM {a.size} x {a.size}; {channel_cells} channel cells (at least {a.stream_cells} cells upstream)")

    # Ours, and QGIS's floor.
    hand, distance = os.path.join(work, "hand.tif"), os.path.join(work, "distance.tif")
    s, p, _, log = timed([QGIS_PROCESS, "run", "gpugeo:hand", "--", "DEVICE=1", f"INPUT={filled}",
                          f"DIRECTIONS={saga_directions}", f"STREAMS={channels}", f"OUTPUT={hand}",
                          f"OUTPUT_DISTANCE={distance}"], env=env)
    stages = re.search(r"Stage times: [^\n]*\(total ([0-9.]+) ms\)", log)
    core = float(stages.group(1)) / 1000.0 if stages else float("nan")
    print(f"ours, gpugeo:hand: {s:.2f} s, peak {p:.0f} MB; {stages.group(0) if stages else ''}")
    floor, _, _, _ = timed([QGIS_PROCESS, "run", "gdal:translate", "--", f"INPUT={filled}",
                            f"OUTPUT={work}/copy.tif"], env=env)
    print(f"QGIS's floor (gdal:translate of the DEM): {floor:.2f} s; ours above it: {s - floor:.2f} s")

    # SAGA; with --limit stopped at that many times our time (the bar shown without waiting for SAGA).
    version = timed(["saga_cmd", "--version"])[3]
    vertical, horizontal = os.path.join(work, "saga_vert.tif"), os.path.join(work, "saga_horz.tif")
    s_saga, p_saga, finished, _ = timed(["saga_cmd", "-f=q", "ta_channels", "4", "-ELEVATION", filled,
                                         "-CHANNELS", channels, "-METHOD", "0",
                                         "-DISTANCE", os.path.join(work, "saga_dist.tif"), "-DISTVERT", vertical,
                                         "-DISTHORZ", horizontal, "-PASSES", os.path.join(work, "saga_passes.tif")],
                                        timeout=a.limit * s if a.limit else None)
    name = f"SAGA {version.split('SAGA Version:')[1].split()[0] if 'SAGA Version:' in version else '?'} ta_channels 4"
    if not finished:
        print(f"{name} (D8): did not finish in {s_saga:.1f} s (stopped): ours at least {s_saga / s:.1f}x faster "
              f"end to end")
        return
    print(f"{name} (D8): {s_saga:.2f} s, peak {p_saga:.0f} MB")

    mine = saga = both = same_h = same_d = 0
    for first, rows, _, _ in row_strips(a.size):
        ours_h, ours_d = read(hand, first, rows)[0], read(distance, first, rows)[0]
        saga_h, saga_d = read(vertical, first, rows)[0], read(horizontal, first, rows)[0]
        valid = ~np.isnan(ours_h) & ~np.isnan(saga_h)
        mine += int((~np.isnan(ours_h)).sum())
        saga += int((~np.isnan(saga_h)).sum())
        both += int(valid.sum())
        same_h += int((valid & (np.abs(ours_h - saga_h) <= 1e-3)).sum())
        same_d += int((valid & (np.abs(ours_d - saga_d) <= 1e-5 * np.maximum(ours_d, 1.0))).sum())
    print(f"cells with a value: ours {mine}, SAGA's {saga}, both {both}; heights within 1 mm: {same_h} "
          f"({100.0 * same_h / max(1, both):.2f} %), distances within 1e-5: {same_d} "
          f"({100.0 * same_d / max(1, both):.2f} %)")
    above = (f"{s_saga / (s - floor):.1f}x above QGIS's floor" if s - floor > 0.1 * floor else
             "ours runs within QGIS's floor")
    print(f"ratio SAGA / ours: {s_saga / s:.1f}x end to end ({above}); {s_saga / core:.0f}x against our stages' "
          f"total {core:.2f} s")


if __name__ == "__main__":
    sys.exit(main())
