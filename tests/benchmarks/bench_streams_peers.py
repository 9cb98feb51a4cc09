#!/usr/bin/python3
"""gpugeo:streamnetwork against SAGA's "Channel Network and Drainage Basins" (ta_channels 5) and GRASS
r.stream.extract, and gpugeo:subbasins against GRASS r.watershed, on this machine, each peer on its own D8
directions, in one run per DEM:

  ours     gpugeo:streamnetwork through qgis_process (DEVICE=1, the CPU), given the peer's own directions
           (converted to ESRI codes) and a threshold in cells; the segment ids and Strahler orders
           written, and the lines where the peer's lines are the same segments (SAGA at THRESHOLD 1,
           GRASS); a whole process. Its floor beside it: gdal:translate of the same DEM through
           qgis_process (QGIS's start-up, a raster read and written).
  saga     saga_cmd ta_channels 5 (its own D8, the Strahler order of every cell, channels where the order
           reaches THRESHOLD, their junctions, lines and basins, which it always writes), a whole process.
  grass    r.stream.extract d8cut=0 (streams where at least --stream-cells cells drain through, on its own
           A* directions; its stream raster, vector and directions), a whole process (grass --exec) in a
           GRASS database; the import and export are timed apart and not counted.
  watershed r.watershed -s threshold=--stream-cells (D8 on its own A* directions; its drainage, stream and
           basin rasters), a whole process (grass --exec) in a GRASS database, the import and export timed
           apart and not counted; against it ours as the chain a user runs on its directions: gpugeo:streamnetwork
           (THRESHOLD=--stream-cells cells, the lines written) and gpugeo:subbasins on its segments (the
           polygons written), two whole processes, beside them QGIS's floor twice; then the same two
           writing only what r.watershed writes (the segments' and subbasins' rasters: no lines, orders
           or polygons), like for like.

Neither peer takes directions, so ours is given theirs; what each compares and why:

SAGA (D8_Flow_Analysis.cpp): a cell drains to its steepest lower neighbour (dz over the cell size or
its diagonal, strictly positive, ties to the first from north clockwise), a border cell never (SAGA
8.5 leaves the whole border without a direction, which makes every border cell an outlet); the order
of a cell is 1 without inflow, else the highest order flowing in, plus one where two or more bring
it: Strahler on the network of all cells. THRESHOLD is the order at which a channel begins. Its
DIRECTION and ORDER grids are written as SAGA grids (.sdat), which keep what GeoTIFF loses: the
direction nodata (-1) and the orders below THRESHOLD (stored as order + 1 - THRESHOLD, at or under
0), so that one run gives the whole Strahler grid. Ours is run on those directions with THRESHOLD=1
cell (every valid cell a stream cell): our order must equal SAGA's in every cell, and our cells of
order >= THRESHOLD must be SAGA's channels. SAGA's channel lines run from a node (spring, junction:
a channel cell two or more channel cells flow into, outlet) to the next node, the next node included;
each line less its last vertex, and every outlet given to the one line ending there (else its own),
is a segment in our sense of the channel cells. With THRESHOLD 1 (run where the DEM has at most
--saga-full-cells cells: at 2511² SAGA then writes millions of lines and basins, minutes and
gigabytes) they are ours exactly; with a higher THRESHOLD ours are cut at every junction of the full
network and each of our segments of order >= THRESHOLD must lie inside one of SAGA's.

GRASS (raster/r.stream.extract: load.c, do_astar.c, streams.c, thin.c, close.c): no direction input;
it orders the cells by an A* (least-cost, priority-flood) search from the border over the elevations
(rounded to integers; floats are first multiplied by 1000, which would flatten the filled DEM's
raised flats, so it is given the elevations as integers in micrometres or the finest unit that fits),
and d8cut=0 makes its accumulation single-flow along those A* directions, each cell counting itself.
A stream starts at a cell whose accumulation is >= threshold (">="), that has no such upstream
neighbour, no stream neighbour and is not flat; it runs down the lower (or equal) neighbour of largest
accumulation, and every cell's direction is reset that way; streams are then thinned (a cell cut
where a stream turns a corner, the cell above pointed past it). The direction output (1 = NE ... 8 = E
counter-clockwise, negative where it leaves the region) is the one after all that, so a plain D8
accumulation of it is not what chose the streams. Cells on the edge (and beside nodata) pass no flow
on in its accumulation although their direction may point inward: they are given no direction (ESRI
0) here. Ours is run on those directions with THRESHOLD=--stream-cells cells (ours counts cells as
r.stream.extract does, and compares with ">=" too): the stream cells, and the segments (the stream
raster's ids: a new id at a start and below each confluence, as ours) as partitions of the cells
(the same sets of cells, whatever the ids). A second, untimed GRASS run is given as its accumulation
input the plain D8 upstream cells on the first run's directions: what then still differs is GRASS's
start rule, its thinning and its directions moving again to the new accumulation. r.stream.extract
gives no orders (the r.stream.order addon is not installed here) and its vector only ids, a start or
intermediate type and a network id. A numpy plain D8 on the same directions tells GRASS's departures
from a plain accumulation from any of ours: ours must equal it.

GRASS r.watershed (raster/r.watershed/ram, the in-memory version run without -m: init_vars.c, do_astar.c,
do_cum.c, find_pour.c, def_basin.c, split_str.c, no_stream.c, over_cells.c, close_maps2.c): its
elevations are integers as r.stream.extract's (floats multiplied by 1000 and rounded), so it is given the
same integer DEM. Every cell on the region's edge starts with a direction off it (-2 north on the first
row, else -4 west on the first column, -6 south on the last row, -8 east on the last column) and in the
A* queue; the search takes the lowest cell (ties: the earliest queued), points every neighbour not yet
queued at it, and points an edge cell still queued with its direction off the region at it too. With -s,
do_cum.c accumulates cells (each itself included; negative where possibly an underestimate, the absolute
value used) down those directions, upstream first, except that a cell on the edge (a neighbour off the
region or null) passes nothing on ("do not distribute flow along edges"); a cell is a stream cell
("swale") where its accumulation reaches threshold (">="), and so is every cell below a stream cell that
is not on the edge; a stream cell on the edge is turned to point off the region (negative, at its first
neighbour off it). So drainage (1 = NE ... 8 = E counter-clockwise) is negative exactly where a cell
drains off the region, and a positive direction points at a cell of the region: the edge cells that are
no stream cells keep theirs (along the edge or inward); 0 only for the depressions of its depression
input (none here). find_pour.c takes every stream cell whose direction is <= 0 as an outlet, and
def_basin.c walks up the stream from it, labelling each stream cell and every cell that flows into it
and is no stream cell, with all of that cell's upstream cells by the directions (over_cells.c); at a
stream cell two or more stream cells flow into (split_str.c) the cell and its other inflows keep the
basin, and each stream cell flowing in starts a new one (ids in steps of 2, even); at a stream head
(no_stream.c) the cells above it take its id too. close_maps2.c writes the stream map as the stream cells
with their basin's id and the basin map as every labelled cell, null elsewhere: the cells whose path
leaves the region (or ends in a depression) before meeting a stream cell. A basin is therefore exactly a
subbasin in our sense: a segment (a chain from a head, or from a confluence, down to the cell above the
next confluence or to an outlet: one id, one exit) and every cell whose D8 path, by the drainage written,
meets that segment first. Ours is given drainage as ESRI codes, a negative direction as its absolute
value, pointing off the grid (ESRI 0 would make the outlet no stream cell and take it, and all that
flows into it directly, out of its basin), and the stream map as STREAMS: ours must equal the basin map
as a partition of the cells, the same ids too (ours keeps STREAMS' ids), and equal a numpy walk of every
cell down the directions to its first stream cell, which on GRASS's stream map must give the basin map
too. Each stream id is first checked to be one chain with one exit (else counted, and ours not run on
it). A second, untimed GRASS run writes the accumulation, which the plain D8 upstream cells of the
drainage, edge cells passing nothing on, must equal in absolute value, and their cells >= threshold the
stream cells, cut as GRASS's segments. Ours' own chain (streamnetwork on the drainage, edge cells passing
their flow on as the directions say) is compared with GRASS's stream map and basins: it can only add
stream cells, where the flow of edge cells brings a cell to the threshold, and with them segments whose
subbasins GRASS leaves null.

The DEMs: bench_dem_tiled_cpu.py's terrain at --size² and the shipped tests/data/jacksboro_srtm3.tif
(SRTM, EPSG:4326), each filled with its flats raised by gpugeo:filldepressions (FLATS=1) and given
to all peers; none of the preparation is timed. Without gpugeo:streamnetwork (gpugeo:subbasins) in
the plugin only the peers run (and are checked against the numpy reference).

usage: bench_streams_peers.py [PLUGIN_DIR] [--size N] [--stream-cells C] [--saga-threshold S]
                              [--saga-full-cells N] [--skip-jacksboro] [--work DIR]
                              [--timings-only [--limit FACTOR]]

--timings-only (for 20,000², where the numpy checks above do not fit this machine's memory): the same
runs timed only, ours on our own directions of the filled DEM, ours first and each peer stopped at
--limit times ours (the issue's bar shown without waiting for the peer).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from osgeo import gdal, ogr

from bench_dem_grass import QGIS_PROCESS, grass, timed
from bench_watersheds_grass import ESRI_TO_GRASS, prepare_directions

gdal.UseExceptions()
ogr.UseExceptions()
JACKSBORO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "jacksboro_srtm3.tif")
STEPS = {1: (0, 1), 2: (1, 1), 4: (1, 0), 8: (1, -1), 16: (0, -1), 32: (-1, -1), 64: (-1, 0), 128: (-1, 1)}
SAGA_TO_ESRI = {0: 64, 1: 128, 2: 1, 3: 2, 4: 4, 5: 8, 6: 16, 7: 32}  # SAGA: 0 = N, clockwise
GRASS_TO_ESRI = {g: esri for esri, g in ESRI_TO_GRASS.items()}


def read_band(path):
    """The first band as an array and its nodata value, with the geotransform and projection."""
    dataset = gdal.Open(path)  # held while its band is read
    band = dataset.GetRasterBand(1)
    return band.ReadAsArray(), band.GetNoDataValue(), dataset.GetGeoTransform(), dataset.GetProjection()


def write_codes(path, codes, gt, projection):
    out = gdal.GetDriverByName("GTiff").Create(path, codes.shape[1], codes.shape[0], 1, gdal.GDT_Byte, ["TILED=YES"])
    out.SetGeoTransform(gt)
    out.SetProjection(projection)
    out.GetRasterBand(1).SetNoDataValue(255)
    out.GetRasterBand(1).WriteArray(codes)
    out = None


def edge_cells(valid):
    """Valid cells with a neighbour outside the raster or nodata."""
    padded = np.pad(valid, 1, constant_values=False)
    h, w = valid.shape
    edge = np.zeros_like(valid)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            edge |= ~padded[1 + dy:1 + dy + h, 1 + dx:1 + dx + w]
    return edge & valid


def downstream(codes):
    """Per cell of ESRI codes (255 nodata, 0 no direction), flattened: the index of the cell it drains to, -1
    where it has no direction or drains off the raster or onto nodata."""
    h, w = codes.shape
    n = h * w
    flat = codes.ravel()
    valid = flat != 255
    down = np.full(n, -1, np.int64)
    rows, cols = np.divmod(np.arange(n, dtype=np.int64), w)
    for code, (dy, dx) in STEPS.items():
        at = np.flatnonzero(flat == code)
        ty, tx = rows[at] + dy, cols[at] + dx
        inside = (ty >= 0) & (ty < h) & (tx >= 0) & (tx < w)
        at, target = at[inside], ty[inside] * w + tx[inside]
        keep = valid[target]
        down[at[keep]] = target[keep]
    return down


def reference_network(codes, threshold):
    """Plain D8 on ESRI codes (255 nodata, 0 no direction), in numpy: per cell its upstream cells (itself
    included), and for the stream cells (at least `threshold` of them) the Strahler order and the segment
    (labelled by its first cell's index + 1; 0 elsewhere). Cells are taken in waves, each wave the cells
    whose upstream cells are all done."""
    h, w = codes.shape
    n = h * w
    valid = codes.ravel() != 255
    down = downstream(codes)
    cells = valid.astype(np.int64)
    pending = np.bincount(down[down >= 0], minlength=n)
    waves = []
    wave = np.flatnonzero(valid & (pending == 0))
    while wave.size:
        waves.append(wave)
        target = down[wave]
        has = target >= 0
        unique, inverse = np.unique(target[has], return_inverse=True)
        cells[unique] += np.bincount(inverse, weights=cells[wave[has]]).astype(np.int64)
        pending[unique] -= np.bincount(inverse)
        wave = unique[pending[unique] == 0]
    if sum(len(wave) for wave in waves) != int(valid.sum()):
        sys.exit("the directions hold a loop")
    stream = valid & (cells >= threshold)
    into = np.where(stream, down, -1)
    inflows = np.bincount(into[into >= 0], minlength=n)
    order = np.zeros(n, np.int32)
    label = np.zeros(n, np.int64)
    top, count, label_in = np.zeros(n, np.int32), np.zeros(n, np.int32), np.zeros(n, np.int64)
    for wave in waves:
        wave = wave[stream[wave]]
        if not wave.size:
            continue
        order[wave] = np.where(inflows[wave] == 0, 1, top[wave] + (count[wave] > 1))
        label[wave] = np.where(inflows[wave] == 1, label_in[wave], wave + 1)
        target = into[wave]
        has = target >= 0
        target, o = target[has], order[wave[has]]
        unique, inverse = np.unique(target, return_inverse=True)
        before = top[unique].copy()
        np.maximum.at(top, target, o)
        equal = np.bincount(inverse, weights=(o == top[target]), minlength=unique.size).astype(np.int32)
        count[unique] = np.where(top[unique] > before, equal, count[unique] + equal)
        label_in[target] = label[wave[has]]
    return cells.reshape(h, w), order.reshape(h, w), label.reshape(h, w)


def same_segments(a, b):
    """Two segmentations as label rasters (0: no segment): (segments of a, segments of b, a's equal to one
    of b's, b's inside one of a's), whatever the ids."""
    in_a, in_b = a != 0, b != 0
    ids_a, size_a = np.unique(a[in_a], return_counts=True)
    ids_b, size_b = np.unique(b[in_b], return_counts=True)
    both = in_a & in_b
    pair, cells = np.unique(np.searchsorted(ids_a, a[both]) * len(ids_b) + np.searchsorted(ids_b, b[both]),
                            return_counts=True)
    pa, pb = pair // len(ids_b), pair % len(ids_b)
    equal = (cells == size_a[pa]) & (cells == size_b[pb])
    pairs_of_b = np.bincount(pb, minlength=len(ids_b))
    inside = (pairs_of_b[pb] == 1) & (cells == size_b[pb])
    return len(ids_a), len(ids_b), int(equal.sum()), int(inside.sum())


def reference_subbasins(codes, ids):
    """Every cell walked down ESRI codes to its first stream cell (ids >= 1 with a direction), in numpy: that
    cell's id, 0 where the path leaves the raster, ends without a direction or on nodata first. Pointer
    jumping: each cell's target is itself on a stream cell, else the cell below (or an end), doubled until
    no target moves."""
    flat = codes.ravel()
    labels = ids.ravel()
    n = flat.size
    stream = (labels >= 1) & (flat != 0) & (flat != 255)
    down = downstream(codes)
    target = np.where(stream, np.arange(n, dtype=np.int64), np.where(down >= 0, down, n))
    target = np.append(target, n)  # n: the end of every path that meets no stream cell
    while True:
        jumped = target[target]
        if np.array_equal(jumped, target):
            break
        target = jumped
    return np.append(np.where(stream, labels, 0), 0)[target[:n]].reshape(codes.shape)


def not_chains(codes, ids):
    """The ids (>= 1, on cells with a direction) that are not one chain of cells down the directions leaving
    their cells at one place: an id with more than one exit (a cell whose next cell is not of the id) or a
    cell two of its own cells flow into."""
    flat = codes.ravel()
    labels = ids.ravel()
    stream = (labels >= 1) & (flat != 0) & (flat != 255)
    down = downstream(codes)
    at = np.flatnonzero(stream)
    below = down[at]
    inside = below >= 0
    inside[inside] = stream[below[inside]] & (labels[below[inside]] == labels[at[inside]])
    exits = np.bincount(labels[at[~inside]], minlength=int(labels.max()) + 1)
    joined = np.bincount(below[inside], minlength=flat.size)
    bad = set(np.flatnonzero(exits[1:] != 1) + 1) & set(np.unique(labels[at]))
    bad |= set(np.unique(labels[np.flatnonzero(joined > 1)]))
    return sorted(int(i) for i in bad)


def agreeing_cells(a, b):
    """The cells where two label rasters (0: none) agree as partitions: a cell agrees where its label in b is
    the one its label in a shares most cells with and the other way round (0 taken as a label)."""
    ids_a, in_a = np.unique(a.ravel(), return_inverse=True)
    ids_b, in_b = np.unique(b.ravel(), return_inverse=True)
    pair, cells = np.unique(in_a.astype(np.int64) * len(ids_b) + in_b, return_counts=True)
    pa, pb = pair // len(ids_b), pair % len(ids_b)
    mutual = np.ones(len(pair), bool)
    for mine, other, count in ((pa, pb, len(ids_a)), (pb, pa, len(ids_b))):
        order = np.lexsort((cells, mine))
        last = np.append(mine[order][1:] != mine[order][:-1], True)  # each label's largest overlap
        best = np.full(count, -1, np.int64)
        best[mine[order][last]] = other[order][last]
        mutual &= best[mine] == other
    return int(cells[mutual].sum())


def saga_segments(lines, gt, codes, channels):
    """SAGA's channel lines as segments of its channel cells (label raster, the number of lines, the cells on
    no line that have a direction): each line less its last vertex (the next node); each outlet (a
    channel cell without a direction) the label of the one line ending there, else its own; a chain of
    channel cells with directions on no line (SAGA 8.5 numbers its nodes in 16 bits: a node numbered
    65536 reads as no node and starts no line) one label down to the next cell on a line."""
    h, w = codes.shape
    labels = np.zeros(h * w, np.int64)
    ending = {}
    dataset = ogr.Open(lines)
    layer = dataset.GetLayer(0)
    count = 0
    for count, feature in enumerate(layer, start=1):
        xy = np.array(feature.GetGeometryRef().GetPoints())[:, :2]
        c = np.rint((xy[:, 0] - gt[0]) / gt[1] - 0.5).astype(np.int64)
        r = np.rint((xy[:, 1] - gt[3]) / gt[5] - 0.5).astype(np.int64)
        labels[r[:-1] * w + c[:-1]] = count
        ending.setdefault(int(r[-1] * w + c[-1]), []).append(count)
    layer = None
    dataset = None
    flat = codes.ravel()
    loose = [int(c) for c in np.flatnonzero(channels.ravel() & (labels == 0))]

    def below(c):
        dy, dx = STEPS.get(int(flat[c]), (0, 0))
        r, x = divmod(c, w)
        return (r + dy) * w + x + dx if (dy or dx) and 0 <= r + dy < h and 0 <= x + dx < w else None

    fresh = count
    on_no_line = [c for c in loose if below(c) is not None]
    fed = {below(c) for c in on_no_line}
    for c in on_no_line:
        if c in fed:
            continue
        fresh += 1
        while c is not None and labels[c] == 0 and below(c) is not None:
            labels[c] = fresh
            c = below(c)
        if c is not None and labels[c] == 0:
            ending.setdefault(c, []).append(fresh)
    for c in loose:
        if labels[c] == 0:
            into = ending.get(c, [])
            if len(into) == 1:
                labels[c] = into[0]
            else:
                fresh += 1
                labels[c] = fresh
    return labels.reshape(h, w), count, len(on_no_line)


def run_ours(env, dem, directions, threshold, prefix, lines, order=True):
    """gpugeo:streamnetwork on ESRI directions, the threshold in cells: (seconds, peak MB, stage line,
    segment ids, orders (None without `order`))."""
    extra = ([f"OUTPUT_LINES={prefix}_lines.gpkg"] if lines else []) + \
            ([f"OUTPUT_ORDER={prefix}_order.tif"] if order else [])
    s, p, _, log = timed([QGIS_PROCESS, "run", "gpugeo:streamnetwork", "--", "DEVICE=1", f"INPUT={dem}", "BAND=1",
                          f"DIRECTIONS={directions}", "ENCODING=0", f"THRESHOLD={threshold}", "THRESHOLD_UNITS=2",
                          f"OUTPUT={prefix}_ids.tif"] + extra, env=env)
    stages = re.search(r"Stage times: [^\n]*", log)
    ids, nodata, _, _ = read_band(f"{prefix}_ids.tif")
    ids = np.where(ids == nodata, 0, ids).astype(np.int64) if nodata is not None else ids.astype(np.int64)
    orders = None
    if order:
        orders, nodata, _, _ = read_band(f"{prefix}_order.tif")
        orders = (np.where(orders == nodata, 0, orders).astype(np.int32) if nodata is not None
                  else orders.astype(np.int32))
    return s, p, stages.group(0) if stages else "", ids, orders


def read_labels(path):
    """The first band as whole numbers, nodata as 0."""
    values, nodata, _, _ = read_band(path)
    return np.where(values == nodata, 0, values).astype(np.int64) if nodata is not None else values.astype(np.int64)


def run_subbasins(env, directions, streams, prefix, polygons=True):
    """gpugeo:subbasins on ESRI directions and a raster of segment ids, the polygons written (unless not
    `polygons`): (seconds, peak MB, stage line, subbasin labels, polygons, the sum of their cells; None, None
    without polygons)."""
    extra = [f"OUTPUT_POLYGONS={prefix}_subbasins.gpkg"] if polygons else []
    s, p, _, log = timed([QGIS_PROCESS, "run", "gpugeo:subbasins", "--", "DEVICE=1", f"INPUT={directions}", "BAND=1",
                          "ENCODING=0", f"STREAMS={streams}", f"OUTPUT={prefix}_subbasins.tif"] + extra, env=env)
    stages = re.search(r"Stage times: [^\n]*", log)
    if not polygons:
        return s, p, stages.group(0) if stages else "", read_labels(f"{prefix}_subbasins.tif"), None, None
    dataset = ogr.Open(f"{prefix}_subbasins.gpkg")
    layer = dataset.GetLayer(0)
    polygons = layer.GetFeatureCount()
    cells = sum(int(feature.GetField("cells")) for feature in layer)
    layer = None
    dataset = None
    return s, p, stages.group(0) if stages else "", read_labels(f"{prefix}_subbasins.tif"), polygons, cells


def ratio(peer, name, ours, floor):
    above = (f"{peer / (ours - floor):.1f}x above QGIS's floor" if ours - floor > 0.1 * floor else
             "ours runs within QGIS's floor")
    return f"ratio {name} / ours: {peer / ours:.2f}x end to end ({above})"


def compare_saga(a, env, dem, work, tag, ours_available, full, floor):
    """SAGA ta_channels 5 at THRESHOLD s (and at 1 when `full`) against the numpy reference and ours."""
    version = timed(["saga_cmd", "--version"])[3]
    version = version.split("SAGA Version:")[1].split()[0] if "SAGA Version:" in version else "?"
    _, _, gt, projection = read_band(dem)
    for s in ([1] if full else []) + ([a.saga_threshold] if a.saga_threshold != 1 or not full else []):
        prefix = os.path.join(work, f"saga_t{s}")
        sec, peak, _, _ = timed(["saga_cmd", "-f=q", "ta_channels", "5", "-DEM", dem, "-THRESHOLD", str(s),
                                 "-DIRECTION", f"{prefix}_dir.sdat", "-ORDER", f"{prefix}_order.sdat",
                                 "-SEGMENTS", f"{prefix}_lines.shp", "-BASINS", f"{prefix}_basins.shp"])
        raw, _, _, _ = read_band(f"{prefix}_dir.sdat")
        z, z_nodata, _, _ = read_band(dem)
        valid = ~np.isnan(z) if z_nodata is None else (z != z_nodata) & ~np.isnan(z)
        codes = np.zeros(raw.shape, np.uint8)
        for k, esri in SAGA_TO_ESRI.items():
            codes[raw == k] = esri
        codes[~valid] = 255
        directions = f"{prefix}_dir_esri.tif"
        write_codes(directions, codes, gt, projection)
        stored, _, _, _ = read_band(f"{prefix}_order.sdat")
        order_saga = np.where(valid, stored.astype(np.int32) + s - 1, 0)
        channels = valid & (stored >= 1)
        lines_saga, n_lines, on_no_line = saga_segments(f"{prefix}_lines.shp", gt, codes, channels)
        print(f"[{tag}] SAGA {version} ta_channels 5 THRESHOLD={s}: {sec:.2f} s, peak {peak:.0f} MB; "
              f"{int(channels.sum())} channel cells, {n_lines} lines, highest order {order_saga.max()}, "
              f"{int((raw == 255).sum())} cells without a direction, {on_no_line} channel cells with a direction "
              f"on no line")
        _, order_ref, label_ref = reference_network(codes, 1)
        same = valid & (order_ref == order_saga)
        print(f"[{tag}]   numpy D8 reference on SAGA's directions: orders equal to SAGA's in {int(same.sum())} "
              f"of {int(valid.sum())} cells")
        n_s, n_r, equal, inside = same_segments(lines_saga, np.where(order_ref >= s, label_ref, 0))
        print(f"[{tag}]   segments: SAGA {n_s}, reference (order >= {s}) {n_r}; equal {equal}, reference's "
              f"inside one of SAGA's {inside}")
        if not ours_available:
            continue
        sec_o, peak_o, stages, ids, order = run_ours(env, dem, directions, 1, os.path.join(work, f"ours_saga_t{s}"),
                                                     lines=s == 1)
        print(f"[{tag}]   ours on SAGA's directions, THRESHOLD=1 cell{' with lines' if s == 1 else ''}: "
              f"{sec_o:.2f} s, peak {peak_o:.0f} MB; {stages}")
        same = valid & (order == order_saga)
        ours_channels = valid & (order >= s)
        n_s, n_o, equal, inside = same_segments(lines_saga, np.where(ours_channels, ids, 0))
        n_all, _, same_ref, _ = same_segments(ids, label_ref)
        print(f"[{tag}]   orders equal to SAGA's: {int(same.sum())} of {int(valid.sum())} cells; channels (order "
              f">= {s}): ours {int(ours_channels.sum())}, SAGA {int(channels.sum())}, both "
              f"{int((ours_channels & channels).sum())}")
        print(f"[{tag}]   segments: SAGA {n_s}, ours (order >= {s}) {n_o}; equal {equal}, ours inside one of SAGA's "
              f"{inside}; ours all {n_all}, equal to the reference's {same_ref}")
        print(f"[{tag}]   {ratio(sec, 'SAGA', sec_o, floor)}")


def grass_codes(path, valid):
    """r.stream.extract's directions as ESRI codes: 0 where it gives none, leaves the region (negative) or
    for a cell on the edge (it passes no flow on from those)."""
    raw, _, _, _ = read_band(path)
    codes = np.zeros(raw.shape, np.uint8)
    for g, esri in GRASS_TO_ESRI.items():
        codes[raw == g] = esri
    codes[edge_cells(valid)] = 0
    codes[~valid] = 255
    return codes


def grass_elevations(dem, work, name):
    """A GRASS database `name` in `work` holding the DEM as integers (map dem, the region set to it), in
    micrometres or the finest unit that fits: (database, import seconds, scale, valid cells, geotransform,
    projection)."""
    z, z_nodata, gt, projection = read_band(dem)
    valid = ~np.isnan(z) if z_nodata is None else (z != z_nodata) & ~np.isnan(z)
    z = z.astype(np.float64)
    scale = 10.0 ** min(6, np.floor(np.log10(2e9 / max(1.0, np.abs(z[valid]).max()))))
    integers = os.path.join(work, "grass_dem.tif")
    out = gdal.GetDriverByName("GTiff").Create(integers, z.shape[1], z.shape[0], 1, gdal.GDT_Int32, ["TILED=YES"])
    out.SetGeoTransform(gt)
    out.SetProjection(projection)
    out.GetRasterBand(1).SetNoDataValue(-2147483648)
    out.GetRasterBand(1).WriteArray(np.where(valid, np.rint(z * scale), -2147483648).astype(np.int32))
    out = None
    database = os.path.join(work, name)
    shutil.rmtree(database, ignore_errors=True)
    os.makedirs(database)
    subprocess.run(["grass", "-c", integers, "-e", os.path.join(database, "loc")], check=True, capture_output=True)
    s_import, _, _, _ = grass(database, ["r.in.gdal", f"input={integers}", "output=dem", "--overwrite"])
    grass(database, ["g.region", "raster=dem"])
    return database, s_import, scale, valid, gt, projection


def compare_grass(a, env, dem, work, tag, ours_available, floor):
    """r.stream.extract d8cut=0 against the numpy reference and ours on its directions; then again with the
    reference's accumulation of those directions as its accumulation input."""
    database, s_import, scale, valid, gt, projection = grass_elevations(dem, work, "grassdb")
    edge = edge_cells(valid)
    accumulation = first = None
    for run in ("own", "given"):
        extra = ["d8cut=0"] if run == "own" else ["accumulation=acc"]
        if run == "given":  # the reference's upstream cells on the first run's directions
            out = gdal.GetDriverByName("GTiff").Create(f"{work}/grass_acc.tif", valid.shape[1], valid.shape[0], 1,
                                                       gdal.GDT_Float64, ["TILED=YES"])
            out.SetGeoTransform(gt)
            out.SetProjection(projection)
            out.GetRasterBand(1).WriteArray(np.where(valid, accumulation, np.nan))
            out = None
            s_import += grass(database, ["r.in.gdal", f"input={work}/grass_acc.tif", "output=acc", "--overwrite"])[0]
        sec, peak, _, _ = grass(database, ["r.stream.extract", "elevation=dem", f"threshold={a.stream_cells}",
                                           "memory=2000", "stream_raster=streams", "stream_vector=streams",
                                           "direction=sdir", "--overwrite"] + extra)
        s_export = 0.0
        for name, kind in (("sdir", "Int16"), ("streams", "Int32")):
            s_export += grass(database, ["r.out.gdal", "-c", f"input={name}", f"output={work}/grass_{run}_{name}.tif",
                                         f"type={kind}", "createopt=TILED=YES", "--overwrite"])[0]
        info = grass(database, ["v.info", "-t", "map=streams"])[3]
        vector_lines = int(re.search(r"^lines=(\d+)", info, re.M).group(1))
        codes = grass_codes(f"{work}/grass_{run}_sdir.tif", valid)
        directions = f"{work}/grass_{run}_dir_esri.tif"
        write_codes(directions, codes, gt, projection)
        ids_grass, ids_nodata, _, _ = read_band(f"{work}/grass_{run}_streams.tif")
        ids_grass = np.where(ids_grass == ids_nodata, 0, ids_grass).astype(np.int64) if ids_nodata is not None else \
            ids_grass.astype(np.int64)
        streams = ids_grass != 0
        given = accumulation
        accumulation, _, label_ref = reference_network(codes, a.stream_cells)
        plain = label_ref != 0
        if run == "own":
            print(f"[{tag}] GRASS r.stream.extract threshold={a.stream_cells} d8cut=0 (elevations in units of "
                  f"{1 / scale:g}): {sec:.2f} s, peak {peak:.0f} MB (import {s_import:.1f} s, export {s_export:.1f} s, "
                  f"not counted); {int(streams.sum())} stream cells, {len(np.unique(ids_grass[streams]))} segment ids, "
                  f"{vector_lines} vector lines")
        else:
            print(f"[{tag}] GRASS again, given as accumulation the reference's upstream cells on the first run's "
                  f"directions: {sec:.2f} s; {int(streams.sum())} stream cells, {vector_lines} vector lines")
        n_g, n_r, equal, _ = same_segments(ids_grass, label_ref)
        print(f"[{tag}]   numpy D8 reference on these directions: {int(plain.sum())} stream cells, both "
              f"{int((plain & streams).sum())}; only GRASS's {int((streams & ~plain).sum())} (on the edge "
              f"{int((streams & ~plain & edge).sum())}), only the reference's {int((plain & ~streams).sum())}; "
              f"segments: GRASS {n_g}, reference {n_r}, equal {equal}")
        if run == "given":
            only_grass, only_plain = streams & ~plain, plain & ~streams
            print(f"[{tag}]   of these, as the given accumulation has it (its directions moved in "
                  f"{int(((codes != first) & valid).sum())} cells): only GRASS's and given >= threshold "
                  f"{int((only_grass & (given >= a.stream_cells)).sum())} of {int(only_grass.sum())}, only the "
                  f"reference's and given < threshold {int((only_plain & (given < a.stream_cells)).sum())} of "
                  f"{int(only_plain.sum())}")
        first = codes
        if not ours_available:
            continue
        sec_o, peak_o, stages, ids, _ = run_ours(env, dem, directions, a.stream_cells,
                                                 os.path.join(work, f"ours_grass_{run}"), lines=True)
        ours = ids != 0
        n_g, n_o, equal, _ = same_segments(ids_grass, ids)
        _, _, same_ref, _ = same_segments(ids, label_ref)
        print(f"[{tag}]   ours on these directions, THRESHOLD={a.stream_cells} cells with lines: {sec_o:.2f} s, "
              f"peak {peak_o:.0f} MB; {stages}")
        print(f"[{tag}]   stream cells: ours {int(ours.sum())}, GRASS {int(streams.sum())}, both "
              f"{int((ours & streams).sum())}, ours = the reference's: {bool(np.array_equal(ours, plain))}; segments: "
              f"GRASS {n_g}, ours {n_o}, equal {equal}; ours equal to the reference's {same_ref} of {n_o}")
        if run == "own":
            print(f"[{tag}]   {ratio(sec, 'GRASS', sec_o, floor)}")


def compare_watershed(a, env, dem, work, tag, ours_available, subbasins_available, floor):
    """r.watershed -s against the numpy references and ours: gpugeo:subbasins on its drainage and stream map
    (the partition), then gpugeo:streamnetwork and gpugeo:subbasins on its drainage (the time)."""
    database, s_import, scale, valid, gt, projection = grass_elevations(dem, work, "grassdb_watershed")
    t = a.stream_cells
    sec, peak, _, _ = grass(database, ["r.watershed", "-s", "elevation=dem", f"threshold={t}", "drainage=wdir",
                                       "stream=wstreams", "basin=wbasins", "--overwrite"])
    s_accumulation = grass(database, ["r.watershed", "-s", "elevation=dem", f"threshold={t}", "accumulation=wacc",
                                      "--overwrite"])[0]
    s_export = 0.0
    for name, kind in (("wdir", "Int16"), ("wstreams", "Int32"), ("wbasins", "Int32"), ("wacc", "Float64")):
        s_export += grass(database, ["r.out.gdal", "-c", f"input={name}", f"output={work}/grass_{name}.tif",
                                     f"type={kind}", "createopt=TILED=YES", "--overwrite"])[0]
    raw, _, _, _ = read_band(f"{work}/grass_wdir.tif")
    codes = np.zeros(raw.shape, np.uint8)
    for g, esri in GRASS_TO_ESRI.items():
        codes[np.abs(raw) == g] = esri  # negative: off the region, the same way
    codes[~valid] = 255
    directions = f"{work}/grass_wdir_esri.tif"
    write_codes(directions, codes, gt, projection)
    leaving = (downstream(codes) == -1).reshape(codes.shape) & valid & (codes != 0)
    stored, stored_nodata, _, _ = read_band(f"{work}/grass_wstreams.tif")
    zero_ids = int((valid & (stored == 0) & (stored != stored_nodata)).sum())
    streams = read_labels(f"{work}/grass_wstreams.tif")
    basins = read_labels(f"{work}/grass_wbasins.tif")
    accumulation, _, _, _ = read_band(f"{work}/grass_wacc.tif")
    on_stream = streams != 0
    print(f"[{tag}] GRASS r.watershed -s threshold={t} (elevations in units of {1 / scale:g}): {sec:.2f} s, peak "
          f"{peak:.0f} MB (import {s_import:.1f} s, export {s_export:.1f} s, the accumulation run "
          f"{s_accumulation:.1f} s, not counted); {int(on_stream.sum())} stream cells, "
          f"{len(np.unique(streams[on_stream]))} stream ids, {len(np.unique(basins[basins != 0]))} basins, "
          f"{int((valid & (basins == 0)).sum())} cells in none")
    edge = edge_cells(valid)
    print(f"[{tag}]   drainage: {int((valid & (raw < 0)).sum())} cells negative (off the region), {int(leaving.sum())} "
          f"pointing off the grid (on the edge {int((leaving & edge).sum())}), "
          f"{int((valid & (raw == 0)).sum())} without a direction; stream cells with id 0: {zero_ids}")
    cells, _, label_ref = reference_network(np.where(edge, np.uint8(0), codes), t)  # edge cells pass nothing on
    plain = label_ref != 0
    n_g, n_r, equal, _ = same_segments(streams, label_ref)
    print(f"[{tag}]   numpy D8 reference on its drainage, edge cells passing nothing on: upstream cells = "
          f"|accumulation| in "
          f"{int((valid & (np.abs(accumulation) == cells)).sum())} of {int(valid.sum())} cells (negative "
          f"{int((valid & (accumulation < 0)).sum())}); stream cells (>= {t}) {int(plain.sum())}, GRASS's "
          f"{int(on_stream.sum())}, both {int((plain & on_stream).sum())}; segments: GRASS {n_g}, reference {n_r}, "
          f"equal {equal}")
    bad = not_chains(codes, streams)
    walked = reference_subbasins(codes, streams)
    n_b, n_w, equal, _ = same_segments(basins, walked)
    print(f"[{tag}]   stream ids not one chain with one exit: {len(bad)}{' ' + str(bad[:10]) if bad else ''}; the "
          f"numpy walk to the first stream cell on GRASS's stream map: = the basin map in "
          f"{int((walked == basins).sum())} of {walked.size} cells; basins GRASS {n_b}, walk {n_w}, equal {equal}")
    if subbasins_available and not bad:
        sec_b, peak_b, stages, ours, polygons, polygon_cells = run_subbasins(
            env, directions, f"{work}/grass_wstreams.tif", os.path.join(work, "ours_watershed"))
        n_b, n_o, equal, _ = same_segments(basins, ours)
        labelled = ours != 0
        print(f"[{tag}]   ours (subbasins) on its drainage and stream map, polygons written: {sec_b:.2f} s, peak "
              f"{peak_b:.0f} MB; {stages}")
        print(f"[{tag}]   ours = the numpy walk: {bool(np.array_equal(ours, walked))}; = GRASS's basin map in "
              f"{int((ours == basins).sum())} of {ours.size} cells (ids too), as partitions in "
              f"{agreeing_cells(ours, basins)}; basins: GRASS {n_b}, ours {n_o}, equal as sets {equal}; only "
              f"GRASS's {int((~labelled & (basins != 0)).sum())}, only ours {int((labelled & (basins == 0)).sum())} "
              f"cells; polygons {polygons}, their cells {polygon_cells} of {int(labelled.sum())} labelled")
    elif bad:
        print(f"[{tag}]   ours is not run on GRASS's stream map: it refuses an id that is not one chain")
    if not (ours_available and subbasins_available):
        return
    prefix = os.path.join(work, "ours_chain")
    sec_o, peak_o, stages, ids, _ = run_ours(env, dem, directions, t, prefix, lines=True)
    sec_s, peak_s, stages_s, ours, polygons, polygon_cells = run_subbasins(env, directions, f"{prefix}_ids.tif", prefix)
    n_g, n_o, equal, _ = same_segments(streams, ids)
    n_b, n_c, equal_b, _ = same_segments(basins, ours)
    print(f"[{tag}]   ours' chain on its drainage: streamnetwork THRESHOLD={t} cells with lines {sec_o:.2f} s, peak "
          f"{peak_o:.0f} MB; {stages}")
    print(f"[{tag}]     then subbasins on its segments, polygons written: {sec_s:.2f} s, peak {peak_s:.0f} MB; "
          f"{stages_s}")
    print(f"[{tag}]     stream cells: ours {int((ids != 0).sum())}, GRASS {int(on_stream.sum())}, both "
          f"{int(((ids != 0) & on_stream).sum())}; segments: GRASS {n_g}, ours {n_o}, equal {equal}; subbasins: "
          f"GRASS {n_b}, ours {n_c}, equal as sets {equal_b}, cells agreeing {agreeing_cells(ours, basins)} of "
          f"{ours.size}; polygons {polygons}, their cells {polygon_cells} of {int((ours != 0).sum())}")
    print(f"[{tag}]   {ratio(sec, 'r.watershed', sec_o + sec_s, 2 * floor)}, ours {sec_o + sec_s:.2f} s in two "
          f"processes, QGIS's floor {floor:.2f} s each")
    # Like for like: the rasters r.watershed writes (its stream map, its basins), no lines, orders or polygons.
    prefix = os.path.join(work, "ours_rasters")
    sec_o, peak_o, stages, ids_r, _ = run_ours(env, dem, directions, t, prefix, lines=False, order=False)
    sec_s, peak_s, stages_s, ours_r, _, _ = run_subbasins(env, directions, f"{prefix}_ids.tif", prefix,
                                                          polygons=False)
    print(f"[{tag}]   ours' chain writing only the rasters r.watershed writes (stream segments, subbasins): "
          f"streamnetwork {sec_o:.2f} s, peak {peak_o:.0f} MB; {stages}")
    print(f"[{tag}]     then subbasins {sec_s:.2f} s, peak {peak_s:.0f} MB; {stages_s}")
    print(f"[{tag}]     the same segments and subbasins as with lines and polygons: "
          f"{bool(np.array_equal(ids_r, ids) and np.array_equal(ours_r, ours))}")
    print(f"[{tag}]   {ratio(sec, 'r.watershed', sec_o + sec_s, 2 * floor)} writing the same rasters, ours "
          f"{sec_o + sec_s:.2f} s in two processes")


def timed_ours(env, algorithm, parameters):
    """Our algorithm through qgis_process on the CPU: (seconds, peak MB, stage line)."""
    s, p, _, log = timed([QGIS_PROCESS, "run", f"gpugeo:{algorithm}", "--", "DEVICE=1"] + parameters, env=env)
    stages = re.search(r"Stage times: [^\n]*", log)
    return s, p, stages.group(0) if stages else ""


def peer_line(tag, name, seconds, peak, finished, ours, floor):
    if finished:
        return f"[{tag}] {name}: {seconds:.2f} s, peak {peak:.0f} MB; {ratio(seconds, 'peer', ours, floor)}"
    return f"[{tag}] {name}: did not finish in {seconds:.1f} s (stopped): ours at least {seconds / ours:.2f}x faster"


def compare_timings(a, env, dem, directions, work, tag, floor):
    """Times only, for DEMs whose numpy checks do not fit this machine's memory (--timings-only; the checks
    ran at 10,000²): ours on our own directions of the same filled DEM (the peers' directions differ from
    ours only at ties and edges, which changes no work), each peer run after ours and stopped at --limit
    times ours (the bar shown without waiting for the peer)."""
    limit = (lambda ours: a.limit * ours) if a.limit else (lambda ours: None)
    peers = set(a.peers.split(","))
    if "saga" in peers:
        compare_timings_saga(a, env, dem, directions, work, tag, floor, limit)
    if "extract" in peers:
        compare_timings_extract(a, env, dem, directions, work, tag, floor, limit)
    if "watershed" in peers:
        compare_timings_watershed(a, env, dem, directions, work, tag, floor, limit)


def compare_timings_saga(a, env, dem, directions, work, tag, floor, limit):
    """Ours (the whole network, or --stream-cells where that fails or with --skip-whole) against SAGA
    ta_channels 5."""
    prefix = os.path.join(work, "ours_all")
    s_all = None
    for threshold in ([] if a.skip_whole else [1]) + [a.stream_cells]:
        try:
            s_all, p_all, stages = timed_ours(env, "streamnetwork", [
                f"INPUT={dem}", "BAND=1", f"DIRECTIONS={directions}", "ENCODING=0", f"THRESHOLD={threshold}",
                "THRESHOLD_UNITS=2", f"OUTPUT={prefix}_ids.tif", f"OUTPUT_ORDER={prefix}_order.tif"])
        except SystemExit as failure:  # e.g. stopped by the kernel for memory: said, and the next threshold
            print(f"[{tag}] ours at THRESHOLD={threshold} cell(s) FAILED: {str(failure)[-1500:]}")
            continue
        print(f"[{tag}] ours, THRESHOLD={threshold} cell(s) (segment and order rasters"
              f"{', the whole network' if threshold == 1 else ''}): {s_all:.2f} s, peak {p_all:.0f} MB; {stages}")
        break
    saga = os.path.join(work, f"saga_t{a.saga_threshold}")
    sec, peak, done, _ = timed(["saga_cmd", "-f=q", "ta_channels", "5", "-DEM", dem, "-THRESHOLD",
                                str(a.saga_threshold), "-DIRECTION", f"{saga}_dir.sdat", "-ORDER",
                                f"{saga}_order.sdat", "-SEGMENTS", f"{saga}_lines.shp", "-BASINS",
                                f"{saga}_basins.shp"], timeout=limit(s_all))
    print(peer_line(tag, f"SAGA ta_channels 5 THRESHOLD={a.saga_threshold}", sec, peak, done, s_all, floor))


def compare_timings_extract(a, env, dem, directions, work, tag, floor, limit):
    """Ours at --stream-cells with lines against GRASS r.stream.extract."""
    database, s_import, scale, _, _, _ = grass_elevations(dem, work, "grassdb")
    prefix = os.path.join(work, "ours_lines")
    s_lines, p_lines, stages = timed_ours(env, "streamnetwork", [
        f"INPUT={dem}", "BAND=1", f"DIRECTIONS={directions}", "ENCODING=0", f"THRESHOLD={a.stream_cells}",
        "THRESHOLD_UNITS=2", f"OUTPUT={prefix}_ids.tif", f"OUTPUT_ORDER={prefix}_order.tif",
        f"OUTPUT_LINES={prefix}_lines.gpkg"])
    print(f"[{tag}] ours, THRESHOLD={a.stream_cells} cells with lines: {s_lines:.2f} s, peak {p_lines:.0f} MB; "
          f"{stages}")
    sec, peak, done, _ = grass(database, ["r.stream.extract", "elevation=dem", f"threshold={a.stream_cells}",
                                          "memory=2000", "stream_raster=streams", "stream_vector=streams",
                                          "direction=sdir", "--overwrite", "d8cut=0"], timeout=limit(s_lines))
    print(peer_line(tag, f"GRASS r.stream.extract threshold={a.stream_cells} (import {s_import:.1f} s not counted; "
                         f"elevations in units of {1 / scale:g})", sec, peak, done, s_lines, floor))


def compare_timings_watershed(a, env, dem, directions, work, tag, floor, limit):
    """Our chain (streamnetwork then subbasins, rasters only, then with lines and polygons) against GRASS
    r.watershed -s."""
    database = grass_elevations(dem, work, "grassdb")[0]
    chain = {}
    runs = (("rasters", [], []),
            ("lines and polygons", [f"OUTPUT_LINES={work}/chain_lines.gpkg"], [f"OUTPUT_POLYGONS={work}/chain_subbasins.gpkg"]))
    for outputs, extra_streams, extra_basins in runs[:1 if a.chain_rasters_only else 2]:
        s_n, p_n, stages_n = timed_ours(env, "streamnetwork", [
            f"INPUT={dem}", "BAND=1", f"DIRECTIONS={directions}", "ENCODING=0", f"THRESHOLD={a.stream_cells}",
            "THRESHOLD_UNITS=2", f"OUTPUT={work}/chain_ids.tif"] + extra_streams)
        s_b, p_b, stages_b = timed_ours(env, "subbasins", [
            f"INPUT={directions}", "BAND=1", "ENCODING=0", f"STREAMS={work}/chain_ids.tif",
            f"OUTPUT={work}/chain_subbasins.tif"] + extra_basins)
        chain[outputs] = s_n + s_b
        print(f"[{tag}] ours' chain writing {outputs}: streamnetwork {s_n:.2f} s, peak {p_n:.0f} MB; {stages_n}")
        print(f"[{tag}]   then subbasins {s_b:.2f} s, peak {p_b:.0f} MB; {stages_b}")
    sec, peak, done, _ = grass(database, ["r.watershed", "-s", "elevation=dem", f"threshold={a.stream_cells}",
                                          "drainage=wdir", "stream=wstreams", "basin=wbasins", "--overwrite"],
                               timeout=limit(chain["rasters"]))
    for outputs, ours in chain.items():
        print(peer_line(tag, f"GRASS r.watershed -s threshold={a.stream_cells} against ours writing {outputs}",
                        sec, peak, done, ours, 2 * floor))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("plugin", nargs="?", default=os.environ.get("GPUGEO_PLUGIN_DIR"))
    parser.add_argument("--size", type=int, default=2511)
    parser.add_argument("--stream-cells", type=int, default=1000)
    parser.add_argument("--saga-threshold", type=int, default=5)
    parser.add_argument("--saga-full-cells", type=int, default=1_000_000,
                        help="also run SAGA with THRESHOLD=1 on DEMs of at most this many cells")
    parser.add_argument("--skip-jacksboro", action="store_true")
    parser.add_argument("--work")
    parser.add_argument("--timings-only", action="store_true",
                        help="times only (no numpy checks: they do not fit 20,000²), ours on our own directions")
    parser.add_argument("--limit", type=float, help="with --timings-only, stop each peer at this many times ours")
    parser.add_argument("--skip-whole", action="store_true",
                        help="with --timings-only, against SAGA ours at --stream-cells only (not every cell a stream)")
    parser.add_argument("--peers", default="saga,extract,watershed",
                        help="with --timings-only, which comparisons to run: saga, extract, watershed")
    parser.add_argument("--chain-rasters-only", action="store_true",
                        help="with --timings-only, against r.watershed only our chain writing rasters (not also "
                             "with lines and polygons)")
    a = parser.parse_args()
    plugin = a.plugin
    if plugin and not os.path.exists(os.path.join(plugin, "metadata.txt")) and \
            os.path.exists(os.path.join(plugin, "gpugeo", "metadata.txt")):
        plugin = os.path.join(plugin, "gpugeo")  # the stage folder rather than the plugin in it
    work = a.work or tempfile.mkdtemp(prefix="gg_streams_")
    env, filled, directions, _ = prepare_directions(plugin, a.size, work)
    if a.timings_only:
        folder = os.path.join(work, "terrain")
        os.makedirs(folder, exist_ok=True)
        floor, _, _, _ = timed([QGIS_PROCESS, "run", "gdal:translate", "--", f"INPUT={filled}",
                                f"OUTPUT={folder}/copy.tif"], env=env)
        print(f"[terrain] DEM {a.size} x {a.size}, filled (flats raised); QGIS's floor (gdal:translate of the "
              f"DEM): {floor:.2f} s")
        compare_timings(a, env, filled, directions, folder, "terrain", floor)
        return
    listing = subprocess.run([QGIS_PROCESS, "list"], env=env, capture_output=True, text=True).stdout
    ours_available = "gpugeo:streamnetwork" in listing
    if not ours_available:
        print("gpugeo:streamnetwork is not in this plugin: the peers only")
    subbasins_available = "gpugeo:subbasins" in listing
    if not subbasins_available:
        print("gpugeo:subbasins is not in this plugin: r.watershed only")
    dems = [("terrain", filled, os.path.join(work, "terrain"))]
    if not a.skip_jacksboro:
        folder = os.path.join(work, "jacksboro")
        os.makedirs(folder, exist_ok=True)
        shutil.copy(JACKSBORO, os.path.join(folder, "srtm.tif"))
        timed([QGIS_PROCESS, "run", "gpugeo:filldepressions", "--", "DEVICE=1", f"INPUT={folder}/srtm.tif", "FLATS=1",
               f"OUTPUT={folder}/filled.tif"], env=env)
        dems.append(("jacksboro", f"{folder}/filled.tif", folder))
    for tag, dem, folder in dems:
        os.makedirs(folder, exist_ok=True)
        z, _, _, _ = read_band(dem)
        print(f"[{tag}] DEM {z.shape[1]} x {z.shape[0]}, filled (flats raised)")
        floor, _, _, _ = timed([QGIS_PROCESS, "run", "gdal:translate", "--", f"INPUT={dem}",
                                f"OUTPUT={folder}/copy.tif"], env=env)
        print(f"[{tag}] QGIS's floor (gdal:translate of the DEM): {floor:.2f} s")
        compare_saga(a, env, dem, folder, tag, ours_available, z.size <= a.saga_full_cells, floor)
        compare_grass(a, env, dem, folder, tag, ours_available, floor)
        compare_watershed(a, env, dem, folder, tag, ours_available, subbasins_available, floor)


if __name__ == "__main__":
    sys.exit(main())
