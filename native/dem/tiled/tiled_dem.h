// DEM hydrology past memory: dem.h's fill, D8 directions and flow accumulation, tile by tile, for
// DEMs larger than the GPU's memory and than RAM. Each tool reads its input raster window by window
// (raster_io.h) and writes its output the same way; what it keeps for the whole DEM is only each
// tile's perimeter and a small graph over the perimeters. The results are dem.h's, bit for bit,
// whatever the tile size.
//
// Fill: Barnes (2016), "Parallel Priority-Flood depression filling for trillion cell digital
// elevation models". Pass 1 floods each tile from its perimeter and its edge cells, labelling every
// cell with the perimeter cell it was reached from (edge cells with the ocean) and keeping the
// lowest spill between labels; the spills and the facing perimeter cells of neighbouring tiles make
// a graph whose minimax solution from the ocean gives each label its level. Pass 2 floods each tile
// again (the same flood: the same labels) and raises every cell to its label's level.
//
// Directions: D8 per tile with a one-cell halo (dem.h's rule needs only the 3 x 3 neighbourhood).
//
// Accumulation: Barnes (2017), "Parallel non-divergent flow accumulation for trillion cell digital
// elevation models". Pass 1 accumulates each tile on its own and links each perimeter cell to the
// cell where its flow leaves the tile; the links and the exits' local sums make a graph, summed in
// dependency order, that gives the inflow entering each perimeter cell from other tiles. Pass 2
// accumulates each tile again with those inflows added at its perimeter.
//
// Travel times (travel_time.h), the same shape: pass 1 sums, for each perimeter cell, the steps
// down its path to where the path leaves the tile (or reaches the outlet); the perimeter cells,
// linked to the cells their paths enter, make a forest whose sums give every perimeter cell its time
// to the outlet. Pass 2 sums each tile's times up from the cells its paths leave by. Bands: the
// times' band labels traced tile by tile into chains of boundary edges, joined across the tiles'
// edges into regions.h's rings (the same rings, the same polygons).
//
// With TiledOptions::backend the GPU takes the fill's floods, the flat mask's distances and components,
// the directions, the accumulation's tile sums and the travel times' paths (tile_cuda.h, dem_cuda.h);
// the graphs stay on the host. The outputs are the same bits (the travel times: within the same
// bound, their sums associated as the in-memory GPU's pointer jumping does).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/polygon_rings.h"
#include "core/run_control.h"
#include "core/stage_times.h"
#include "dem/breach.h"
#include "dem/dem.h"
#include "dem/hand.h"
#include "dem/streams.h"
#include "dem/travel_time.h"
#include "dem/tiled/raster_io.h"
#include "dem/watersheds.h"

namespace gpugeo::dem::tiled {

class Cluster;

// One entry per row: the cells' width and height in metres (dem.h's Grid).
struct RowSizes
{
  std::vector<double> cellWidth, cellHeight;
};

struct TiledOptions
{
  int64_t tileWidth = 1024, tileHeight = 1024;  // cut to the raster where larger
  int threads = 0;                              // tiles at once (0: defaultThreadCount())
  // Where the tiles' work runs: the CPU, or the GPU for the stages that have a GPU path (the fill's
  // two floods, the flat mask's visits, the directions, the accumulation's and the travel times' two
  // passes), the tiles' threads taking turns on it. Auto counts as the CPU: the caller chooses.
  Backend backend = Backend::Cpu;
  // Tiles on the GPU at once (each holds up to kGpuBytesPerTileCell a cell of the tile with its halo
  // there); the other threads read, prepare and write tiles meanwhile.
  int gpuTiles = 1;
  // Device memory beyond the gpuTiles' working memory that a stage may keep tiles in between its
  // visits (the flat mask's rounds: kFlatsKeptBytesPerTileCell a cell of a tile with its halo), so
  // that a tile visited again uploads only its ring. 0: nothing kept.
  int64_t gpuKeepBytes = 0;
  // Host memory beyond the tiles in flight that a stage may keep tiles in between its visits (the
  // raise's rounds: kRaiseKeptBytesPerTileCell a cell of a tile with its frame, the halo and the band
  // of neighbours' cells it raises), so that a tile visited again reads only its frame from the work
  // raster. In one process only (a distributed run keeps none). 0: nothing kept.
  int64_t hostKeepBytes = 0;
  // Called as each tile of a pass is done (pass from 1, tiles done of the pass's tiles), one call at a
  // time, from whichever thread finished the tile.
  std::function<void(int pass, int64_t done, int64_t tiles)> onTile;
  // A run shared by several processes (distribution.h): every rank calls the tool with the same
  // arguments; the outputs are written on rank 0 (the workers' sinks forward to it: Cluster::
  // remoteSink) and its return value and report are the run's (the workers' are not). Null: this
  // process alone.
  Cluster* cluster = nullptr;
  // The most bytes a run may hold for the whole raster besides its tiles (the stream network's fields
  // per segment, known after its first pass); a run that would pass it throws InvalidInput, naming
  // what it needs, before it allocates them. 0: no limit.
  int64_t heldBytesLimit = 0;
};

// What a tiled run did, for the log.
struct TiledReport
{
  int64_t tileWidth = 0, tileHeight = 0, tiles = 0;
  int passes = 0;            // whole reads of the input raster
  int64_t graphBytes = 0;    // the perimeters and the graph kept for the whole DEM
  int64_t tileBytes = 0;     // the working memory of one tile in flight
  StageTimes times;          // wall time of each pass and of the graph
};

// On the GPU the tiles take turns, TiledOptions::gpuTiles at a time: its memory holds that many tiles'
// work, each at most this many bytes per cell of the tile with its halo (the fill's flood with its
// spills, the largest).
constexpr int64_t kGpuBytesPerTileCell = 108;
// The device memory free now (0 without a usable GPU), for choosing the GPU's tile size.
int64_t freeGpuMemory();

// Bytes of working memory per cell of a tile in flight, for choosing the tile size from a budget.
constexpr int64_t kFillBytesPerTileCell = 24;
constexpr int64_t kDirectionsBytesPerTileCell = 5;
constexpr int64_t kAccumulationBytesPerTileCell = 27;
// The flats: elevations, flatness, two distances, the components' union-find and highest counts,
// the breadth-first queues and sources.
constexpr int64_t kFlatsBytesPerTileCell = 48;
// What the flat mask keeps of a tile on the GPU between rounds (TiledOptions::gpuKeepBytes):
// elevations, classes, the two distances and the components.
constexpr int64_t kFlatsKeptBytesPerTileCell = 17;
// The raise: the filled and the current elevations, the mask, the heap.
constexpr int64_t kRaiseBytesPerTileCell = 32;
// What the raise keeps of a tile between its rounds (TiledOptions::hostKeepBytes): the filled and
// the current elevations and the mask.
constexpr int64_t kRaiseKeptBytesPerTileCell = 12;

// Shown each finished tile of the fill: its window, the DEM's cells and the filled cells (row-major,
// window.cells() each), before they are written; called from the tiles' threads, one at a time.
using FilledTileObserver = std::function<void(const Window&, const float* dem, const float* filled)>;

// The filled DEM (dem.h's fillDepressions); returns the number of cells it raised. Throws
// InvalidInput as validateCellSizes, and for tiles so small that the DEM's perimeter cells pass 2^31.
// In a distributed run `observe` is called on the rank that fills the tile.
int64_t fillTiled(const RasterSource<float>& dem, const RowSizes& rows, RasterSink<float>& filled,
                  const TiledOptions& options, const RunControl& control, TiledReport* report = nullptr,
                  const FilledTileObserver& observe = nullptr);

// What the directions hold, for the log: cells per direction (0..7) and without one (8), and the
// cells that drain out of the grid (off its border or onto nodata).
struct DirectionCounts
{
  int64_t perDirection[9] = {};
  int64_t drainingOut = 0;
};

// The flat mask (dem.h's flatMask) of a filled DEM. The distances through flats that cross tiles
// take rounds over the tiles until the perimeters settle; between rounds each tile's flat cells and
// distances wait in raw files in `scratchFolder` (9 bytes a cell; on the GPU they stay on the device
// while TiledOptions::gpuKeepBytes allows, else a visit relaxes the tile's distances again; a
// distributed run takes the GPU's path when every worker is on the GPU, else the CPU's on every rank).
// report.passes counts the rounds, the pass for the components (Combined gradient, on the CPU) and
// the pass that writes.
void flatMaskTiled(const RasterSource<float>& filled, const RowSizes& rows, RasterSink<int32_t>& mask,
                   FlatGradient gradient, const std::string& scratchFolder, const TiledOptions& options,
                   const RunControl& control, TiledReport* report = nullptr);

// dem.h's raiseFlats tile by tile: each flat cell of the filled DEM raised by its mask (flatMaskTiled's)
// in float32 steps, then the cells that leaves without a lower neighbour raised in turn, in rounds
// over the tiles until none rises. `work` (a raster of the DEM's size, in the scratch folder) holds
// the elevations between rounds; the result goes to `raised`. `observe` sees each finished tile with
// `original`'s cells (the filled DEM's when null).
struct RaisedCounts
{
  int64_t raised = 0;        // cells raised by their mask
  int64_t raisedInTurn = 0;  // cells raised because raised neighbours overtook them
};
RaisedCounts raiseFlatsTiled(const RasterSource<float>& filled, const RasterSource<int32_t>& mask,
                             const RowSizes& rows, RawFileRaster<float>& work, RasterSink<float>& raised,
                             const TiledOptions& options, const RunControl& control, TiledReport* report = nullptr,
                             const RasterSource<float>* original = nullptr, const FilledTileObserver& observe = nullptr);

// D8 directions (dem.h's flowDirections): without flat resolution when `mask` is null, else the
// flats drained by it (flatMaskTiled's, Combined, for dem.h's resolveFlats).
DirectionCounts directionsTiled(const RasterSource<float>& filled, const RowSizes& rows,
                                RasterSink<uint8_t>& directions, const TiledOptions& options,
                                const RunControl& control, TiledReport* report = nullptr,
                                const RasterSource<int32_t>* mask = nullptr);

// What the accumulation found, for the log: the terminal cells (valid cells draining off the grid or
// onto nodata: outlets; without a direction: pits), the cells they gather (every valid cell, when no
// direction loops), and the terminal with the largest count (the first in row-major order of those).
struct AccumulationSummary
{
  int64_t outlets = 0, pits = 0, reached = 0;
  int64_t largestCell = -1, largestCells = 0, largestArea = 0;  // the cell's index y * width + x
};

// Accumulation (dem.h's flowAccumulation): cells and area (1e-6 m^2) per cell. Throws
// LoopedDirections (dem.h) where the directions go round in a loop, within a tile or across tiles,
// and InvalidInput where a catchment's area could pass the fixed-point range.
AccumulationSummary accumulationTiled(const RasterSource<uint8_t>& directions, const RowSizes& rows, RasterSink<int64_t>& cells,
                       RasterSink<int64_t>& area, const TiledOptions& options, const RunControl& control,
                       TiledReport* report = nullptr);

// --- Breaching -------------------------------------------------------------------------------------

// What breaching's window holds per cell while a tile's channels are searched: the DEM, the raised
// DEM, the edges, the sets' marks (8) and the search's three stamps (24), the tile's cut.
constexpr int64_t kBreachBytesPerWindowCell = 50;
// The margin around a tile that its window of the channels' pass reads (cells a side).
int64_t breachMargin(const BreachLimits& limits);

// breach.h's steps 1 to 4 (cutChannels) tile by tile, into `cut`; the counts are cutChannels'. Pass 1
// joins the sets of equal elevation across the tiles to find the large bottoms (more than
// max(maxLength, 32) cells across), each searched once in a window of its bounding box with a margin of
// maxLength + 2 (held in memory whole: the one part whose memory grows with the DEM's features rather
// than the tile); pass 2 reads each tile with breachMargin's margin and searches the small bottoms
// that may reach it. Throws InvalidInput as cutChannels, and in a run across processes.
BreachCounts cutChannelsTiled(const RasterSource<float>& dem, const RowSizes& rows, RasterSink<float>& cut,
                              const BreachLimits& limits, const TiledOptions& options, const RunControl& control,
                              TiledReport* report = nullptr);

// breach.h's breachDepressions tile by tile: the cut, then fillTiled, flatMaskTiled (Combined) and
// raiseFlatsTiled through raw rasters in `scratchFolder`; the result into `breached`, each finished
// tile shown to `observe` with the DEM's cells. `flats` gets the raise's counts.
BreachCounts breachDepressionsTiled(const RasterSource<float>& dem, const RowSizes& rows, RasterSink<float>& breached,
                                    const BreachLimits& limits, const std::string& scratchFolder,
                                    const TiledOptions& options, const RunControl& control,
                                    TiledReport* report = nullptr, RaisedCounts* flats = nullptr,
                                    const FilledTileObserver& observe = nullptr);

// cutChannels on the CPU's `threads`: the tiled cut over the grid in memory (tiles of 1,024², side by
// side); the same bits and counts as the one thread's.
std::vector<float> cutChannelsOnThreads(const Grid& grid, const BreachLimits& limits, int threads,
                                        const RunControl& control, BreachCounts* counts = nullptr);

// One bottom's channel on its own (breach.h's steps 1 to 3 for it), searched as the tiled cut searches a
// large bottom: in its bounding box [x0, x1] x [y0, y1] with a margin of maxLength + 2. `firstCell` is
// the bottom's lowest cell index. The channel's cells from the first step, with the elevations they
// are cut to (empty: not breached). For the GPU's cut, whose windows some searches outgrow.
std::vector<std::pair<int64_t, float>> bottomChannel(const Grid& grid, int64_t x0, int64_t y0, int64_t x1, int64_t y1,
                                                     int64_t firstCell, const BreachLimits& limits);

// --- Isochrones --------------------------------------------------------------------------------------

// The cell of highest count within `radius` metres of cell (x, y) (travel_time.h's snapOutlet, ties
// to the lowest index), reading `z` (NaN: nodata) and `cells` in windows of at most `tileSide` cells a
// side; with `cells` null, any valid cell within the radius (-1 when none lies there, which
// snapOutlet refuses). Throws InvalidInput as snapOutlet for (x, y) off the grid or a bad radius.
int64_t snapOutletTiled(const RasterSource<float>& z, const RasterSource<int64_t>* cells, const RowSizes& rows,
                        int64_t x, int64_t y, double radius, int64_t tileSide);

// The cell of highest value within `radius` metres of cell (x, y) (NaN: nodata; ties to the lowest
// index; -1 where no valid cell lies within), reading windows of at most `tileSide` cells a side: a
// pour point snapped onto an accumulation raster of any type (snapOutletTiled's search). Throws
// InvalidInput as snapOutletTiled does.
int64_t snapToHighestTiled(const RasterSource<double>& values, const RowSizes& rows, int64_t x, int64_t y,
                           double radius, int64_t tileSide);

struct TravelSummary
{
  int64_t watershedCells = 0;
  double watershedArea = 0;               // m², as travel_time.cpp sums it (per row, top down)
  double minSpeed = 0, maxSpeed = 0;      // m/s over the watershed
  double minTime = 0, maxTime = 0;        // minutes
  // Per tile of the run's layout (TiledOptions' tiles, row-major): 1 where a cell of the tile has a
  // time. Pass 2 skips the others (their times are NaN, written without reading their inputs), and
  // bandsTiled with the same tiles may skip them too.
  std::vector<uint8_t> tilesWithTimes;
};

// Travel times to `outlet` (y * width + x) in minutes, NaN outside its watershed (travel_time.h's,
// within about 1e-15 relative per tile a path crosses: the sums are associated otherwise), from the
// filled DEM, the D8 directions and the accumulated area (1e-6 m², accumulationTiled's) with
// `manning` (per cell, NaN: the model's overland n) where the Manning model has it. Throws
// InvalidInput as travelTime() does and LoopedDirections where the directions loop (on the GPU: across
// tiles; a loop within a tile leaves its cells without a time there, as the in-memory GPU's; the
// chain's directions, which its accumulation has checked, have none).
constexpr int64_t kTravelBytesPerTileCell = 40;
TravelSummary travelTimeTiled(const RasterSource<float>& filled, const RasterSource<uint8_t>& directions,
                              const RasterSource<int64_t>& area, const RasterSource<float>* manning,
                              const RowSizes& rows, int64_t outlet, const VelocityModel& model,
                              RasterSink<double>& minutes, const TiledOptions& options, const RunControl& control,
                              TiledReport* report = nullptr);

// The isochrone bands of travel times (band k: [k, k + 1) x interval; NaN: no band), counted per band
// (cells, and area in m² as the count per row times the row's cell area, summed top down) and traced
// as regions.h's polygons, and the watershed (the cells with a time) as one set. With `copy`, the
// times are written there too (the output raster). With `onBand`, each band's cells, area and
// polygons (a BandPolygons of one band) are given to it in turn, after the watershed is traced, and
// dropped, so that only a few bands' polygons are held at a time (the observer may take them, or
// free them as soon as it has what it needs); TiledBands::bands is then empty. Bands are assembled
// several at once, on the threads side by side, while their corners number at most an eighth of the
// cells of the tiles in flight (about 5 bytes a cell of those tiles); a larger band goes alone.
struct TiledBands
{
  std::vector<int64_t> bandCells;
  std::vector<double> bandArea;
  BandPolygons bands, watershed;
};
using BandObserver = std::function<void(int32_t band, int64_t cells, double area, BandPolygons& polygons)>;
constexpr int64_t kBandsBytesPerTileCell = 28;
// With `tilesWithTimes` (TravelSummary's, from a run on the same tiles), the tiles it marks 0 are not
// read: they hold no time.
TiledBands bandsTiled(const RasterSource<double>& minutes, const RowSizes& rows, double interval, int32_t bands,
                      RasterSink<double>* copy, const TiledOptions& options, const RunControl& control,
                      TiledReport* report = nullptr, const BandObserver& onBand = nullptr,
                      const std::vector<uint8_t>* tilesWithTimes = nullptr);

// --- Watersheds of many outlets -----------------------------------------------------------------------

// watersheds.h's watersheds tile by tile: the labels into `labels` (k + 1 in outlet k's own
// watershed, else 0), the rest as watersheds() gives it (labels empty; in a distributed run, on the
// coordinator only). Throws InvalidInput as watersheds() does.
constexpr int64_t kWatershedsBytesPerTileCell = 10;
Watersheds watershedsTiled(const RasterSource<uint8_t>& directions, const RowSizes& rows,
                           const std::vector<int64_t>& outlets, RasterSink<int32_t>& labels,
                           const TiledOptions& options, const RunControl& control, TiledReport* report = nullptr);
// watersheds() on the CPU's `threads`: the tiled run over the grid in memory (tiles of 1,024², side by
// side), with the labels; the same results as the one thread's walks.
// The polygons of a label raster (watershedsTiled's: 0 none, k + 1 set k) tile by tile, set k as band
// k of bandsTiled (its cells, areas and polygons, regions.h's as traceRegions gives them for labels
// k, -1 for none; with onBand, given set by set). Throws InvalidInput for a label past `count`.
TiledBands labelPolygonsTiled(const RasterSource<int32_t>& labels, const RowSizes& rows, int32_t count,
                              const TiledOptions& options, const RunControl& control, TiledReport* report = nullptr,
                              const BandObserver& onBand = nullptr);
Watersheds watershedsOnThreads(const std::vector<uint8_t>& directions, const RowSizes& rows,
                               const std::vector<int64_t>& outlets, int threads, const RunControl& control);

// --- Height above the nearest drainage --------------------------------------------------------------

// hand.h's heights and distances tile by tile into `height` and (when given) `distance`, NaN where no
// stream is reached; the same bits as heightAboveDrainage(). The counts (in a distributed run, on the
// coordinator only). Throws InvalidInput for rasters of different sizes.
struct HandSummary
{
  int64_t streamCells = 0, drained = 0, undrained = 0;
};
constexpr int64_t kHandBytesPerTileCell = 30;
HandSummary handTiled(const RasterSource<float>& elevations, const RasterSource<uint8_t>& directions,
                      const RasterSource<uint8_t>& streams, const RowSizes& rows, RasterSink<float>& height,
                      RasterSink<float>* distance, const TiledOptions& options, const RunControl& control,
                      TiledReport* report = nullptr);
// heightAboveDrainage() on the CPU's `threads`: the tiled run over the grid in memory (tiles of
// 1,024², side by side); the same results as the one thread's walks.
DrainageHeights handOnThreads(const Grid& grid, const std::vector<uint8_t>& directions,
                              const std::vector<uint8_t>& streams, int threads, const RunControl& control);

// --- Stream network -----------------------------------------------------------------------------------

// streams.h's network tile by tile from the directions and flowAccumulation()'s counts and areas (and
// the elevations, for the drops; StreamFields::Orders does not read them): the segment of every cell
// into `segments` (0 off the streams), the rest as streamNetwork() gives it with these `fields`
// (segment empty). The same numbers, orders and sums whatever the tiles. The fields are held for every
// segment of the whole raster (kStreamsBytesPerSegment): past options.heldBytesLimit the run throws
// InvalidInput after its first pass. Throws InvalidInput too for rasters of different sizes and in a
// distributed run (not yet).
constexpr int64_t kStreamsBytesPerTileCell = 48;
// What a tiled network holds per segment: Full's fields with the orders' working words (84 bytes),
// Orders' first cell, downstream segment, Strahler order and working word (20 bytes).
constexpr int64_t kStreamsBytesPerSegment(StreamFields fields)
{
  return fields == StreamFields::Full ? 84 : 20;
}
StreamNetwork streamNetworkTiled(const RasterSource<float>& elevations, const RasterSource<uint8_t>& directions,
                                 const RasterSource<int64_t>& cells, const RasterSource<int64_t>& area,
                                 const RowSizes& rows, const StreamThreshold& threshold, RasterSink<int32_t>& segments,
                                 const TiledOptions& options, const RunControl& control, TiledReport* report = nullptr,
                                 StreamFields fields = StreamFields::Full);

// --- Subbasins -------------------------------------------------------------------------------------------

// Where each segment of a segment raster (ids > 0, 0 none: streamNetwork's, or any raster whose ids
// each make one chain down the directions; a cell without a direction is none) leaves its cells: per id, in increasing order, the one
// cell of the id whose successor is not of the id (off the grid, a pit, nodata, another id or none),
// and the id of that successor (0 none). The subbasin of a segment is the watershed of its exit with
// these exits as the outlets (each cell's path meets its first stream cell's segment's exit first).
// Reads windows of `tileSide` cells a side with a one-cell halo, on `threads` (0: the default count).
// Throws InvalidInput for an id with two exits or with none (its cells loop), naming it (the lowest
// such id), and for rasters of different sizes.
struct SegmentExits
{
  std::vector<int32_t> id, down;
  std::vector<int64_t> cell;
};
SegmentExits segmentExits(const RasterSource<int32_t>& segments, const RasterSource<uint8_t>& directions,
                          int64_t tileSide, int threads, const RunControl& control);

// The segments' lines of a network run tile by tile (whose segment raster is not held): a sink for the
// segment raster (beside the output, through TeeSink) that keeps each stream cell with its direction,
// read from `directions` window by window as the segments are written (8 bytes a stream cell; safe
// from the tiles' threads). Then lines() gives every segment's cells, segmentLine()'s.
class StreamCellSink : public RasterSink<int32_t>
{
public:
  explicit StreamCellSink(const RasterSource<uint8_t>& directions);
  void write(const Window& window, const int32_t* segments) override;
  // onLine(k, cells) for k = 1 … the network's segments, in turn. Throws InvalidInput where a
  // segment's path leaves the stream cells kept (a network of other directions or another raster).
  void lines(const StreamNetwork& network, const std::function<void(int32_t, const std::vector<int64_t>&)>& onLine,
             const RunControl& control);
  int64_t streamCells() const { return int64_t(mKeys.size()); }

private:
  const RasterSource<uint8_t>& mDirections;
  std::mutex mMutex;
  std::vector<int64_t> mKeys;  // cell * 16 + direction, sorted by lines()
};

}  // namespace gpugeo::dem::tiled
