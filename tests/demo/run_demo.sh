#!/usr/bin/env bash
# The main job on real data, on a fresh Debian 12 machine: installs what is missing, builds,
# installs the plugin into a throwaway QGIS profile and, through qgis_process, turns the 312
# time-zone reference cities of tzdata into a Voronoi raster, its distance raster and its region
# polygons on the Equal Earth projection, then renders a PNG of the result.
# Output: $GPUGEO_DEMO_DIR (default build/demo).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${GPUGEO_BUILD_DIR:-$ROOT/build}
OUT=${GPUGEO_DEMO_DIR:-$BUILD/demo}
"$ROOT/tests/setup.sh"

mkdir -p "$OUT"
rm -rf "$OUT/plugin" "$OUT/profile"
cmake --install "$BUILD" --prefix "$OUT/plugin" > /dev/null
RUNTIME=$(mktemp -d)
trap 'rm -rf "$RUNTIME"' EXIT
export QGIS_CUSTOM_CONFIG_PATH="$OUT/profile" QT_QPA_PLATFORM=offscreen XDG_RUNTIME_DIR="$RUNTIME"
mkdir -p "$QGIS_CUSTOM_CONFIG_PATH/profiles/default/python/plugins"
cp -r "$OUT/plugin/gpugeo" "$QGIS_CUSTOM_CONFIG_PATH/profiles/default/python/plugins/"
QGIS_PROCESS=/usr/bin/qgis_process.bin
LOG="$OUT/demo.log"
: > "$LOG"
# Runs a step with its output in the log; on failure shows the log's end and stops.
step() {
  if ! "$@" >> "$LOG" 2>&1; then
    echo "Failed: $*" >&2
    tail -20 "$LOG" >&2
    exit 1
  fi
}
step $QGIS_PROCESS plugins enable gpugeo

step /usr/bin/python3 "$ROOT/tests/demo/tz_cities.py" /usr/share/zoneinfo/zone1970.tab "$OUT/tz_cities.geojson"
step $QGIS_PROCESS run native:reprojectlayer -- INPUT="$OUT/tz_cities.geojson" TARGET_CRS=EPSG:8857 \
  OUTPUT="$OUT/tz_cities.gpkg"
# The whole Equal Earth world, in 10 km pixels.
step $QGIS_PROCESS run gpugeo:voronoiraster -- INPUT="$OUT/tz_cities.gpkg" FIELD=zone_id \
  EXTENT="-17243960,17243960,-8392930,8392930 [EPSG:8857]" PIXEL_SIZE=10000 \
  OUTPUT="$OUT/tz_voronoi.tif" OUTPUT_DISTANCE="$OUT/tz_distance.tif" OUTPUT_POLYGONS="$OUT/tz_regions.gpkg"
sed -n '/^Backend\|^Raster\|^Stage\|sites from/p' "$LOG"
step /usr/bin/python3 "$ROOT/tests/demo/render_map.py" "$OUT/tz_voronoi.tif" "$OUT/tz_regions.gpkg" \
  "$OUT/tz_cities.gpkg" "$OUT/tz_voronoi.png"
echo "Results in $OUT: tz_voronoi.tif, tz_distance.tif, tz_regions.gpkg and the map tz_voronoi.png (log: demo.log)"
