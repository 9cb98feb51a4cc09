// The command-line program's tools: the QGIS provider's four DEM algorithms (filldepressions,
// flowdirection, flowaccumulation, isochrones) with the same parameters and outputs, run tile by tile
// (native/dem/tiled) over GDAL (processing/gdal), alone or as the ranks of an MPI job
// (dem/tiled/distribution.h): every rank runs the same tool; rank 0 writes the outputs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cli/command_line.h"
#include "cli/reporter.h"
#include "core/backend.h"
#include "core/run_control.h"
#include "dem/tiled/distribution.h"
#include "gdal/output_format.h"

namespace gpugeo::cli {

// What every tool takes besides its own options.
struct RunContext
{
  explicit RunContext(Reporter& reporter) : report(reporter) {}
  Reporter& report;
  dem::tiled::Cluster* cluster = nullptr;  // null: this process alone
  RunControl control;
  Backend device = Backend::Auto;  // asked for; each rank resolves it on its own
  int threads = 0;                 // a rank's tiles at once (0: all its cores)
  int64_t budgetMiB = 0;           // 0: half the memory available
  int64_t tileSide = 0;            // 0: from the budget
  gdal::OutputFormat format;       // --cog and --creation-options: how the rasters are written
  std::string scratchParent;       // where the scratch folder goes (empty: the default)
  std::string crs;                 // the inputs' CRS instead of their files' (empty: theirs)

  bool coordinator() const { return !cluster || cluster->coordinator(); }
};

struct Command
{
  std::string name, summary;
  std::vector<OptionSpec> options;  // the tool's own
  std::function<void(const Arguments&, RunContext&)> run;
};

// The tools, and the options they all take.
const std::vector<Command>& commands();
const std::vector<OptionSpec>& commonOptions();

}  // namespace gpugeo::cli
