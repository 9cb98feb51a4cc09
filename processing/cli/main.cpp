// gpugeo_dem: the QGIS provider's DEM tools from a shell, alone or under MPI (see --help). Exit
// status: 0 success, 1 the run failed (the reason on stderr, or as @error), 2 wrong arguments.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "cli/cleanup_guard.h"
#include "cli/command_line.h"
#include "cli/dem_commands.h"
#include "cli/reporter.h"
#include "core/errors.h"
#include "dem/tiled/tiling.h"
#include "cli/gpu_mapping.h"
#include "core/parallel.h"
#ifdef GPUGEO_WITH_MPI
#include "cli/mpi_transport.h"
#endif

namespace {

using namespace gpugeo;
using namespace gpugeo::cli;

std::atomic<int> gSignal{0};

void onSignal(int signal)
{
  gSignal = signal;
}

std::string usage()
{
  std::string text =
    "Usage: gpugeo_dem TOOL --option value ...\n"
    "       mpiexec -n N [--hostfile FILE] gpugeo_dem TOOL --option value ...\n"
    "       gpugeo_dem TOOL --help\n\n"
    "The DEM tools of the QGIS provider GPU Geoprocessing, without QGIS: the same parameters and outputs as\n"
    "gpugeo:<TOOL>, run tile by tile so that the DEM's size is limited by disk, not memory (Barnes 2016, 2017).\n"
    "Alone, one process uses all cores and the GPU if any. Under mpiexec, rank 0 holds the perimeters' graphs\n"
    "and writes the outputs; the other ranks process the tiles it hands out, each reading them itself from a\n"
    "file system every rank sees (inputs and the scratch folder). The outputs are the same bits for any\n"
    "number of ranks.\n\nTools:\n";
  for (const Command& c : commands())
    text += "  " + c.name + std::string(c.name.size() < 18 ? 18 - c.name.size() : 1, ' ') + c.summary + "\n";
  text += "\nOptions of every tool:\n" + optionsHelp(commonOptions());
  return text;
}

const Command* findCommand(const std::string& name)
{
  for (const Command& c : commands())
    if (c.name == name)
      return &c;
  return nullptr;
}

// The job's rank count, and this rank's cluster when there are several.
struct Job
{
#ifdef GPUGEO_WITH_MPI
  std::unique_ptr<MpiSession> session;
  std::unique_ptr<MpiTransport> transport;
#endif
  std::unique_ptr<dem::tiled::Cluster> cluster;
  int rank = 0;
  int localRanks = 1;  // ranks on this host
};

int runTool(const Command& command, int argc, char** argv, Job& job)
{
  std::vector<OptionSpec> specs = command.options;
  specs.insert(specs.end(), commonOptions().begin(), commonOptions().end());
  specs.push_back({"help", "", "This help."});
  const Arguments args(argc, argv, 2, specs);
  if (args.flag("help"))
  {
    if (job.rank == 0)
      std::printf("Usage: gpugeo_dem %s --option value ...\n\n%s\n\nOptions:\n%s", command.name.c_str(),
                  command.summary.c_str(), optionsHelp(specs).c_str());
    return 0;
  }
  Reporter report(args.flag("machine-readable"), args.flag("quiet"), job.rank == 0);
  RunContext ctx(report);
  ctx.control.canceled = [] { return gSignal.load() != 0; };
  ctx.device = Backend(args.choice("device", {"auto", "cpu", "gpu"}, 0));
  // A rank's tiles at once: --threads, else its share of the host's cores.
  ctx.threads = int(args.integer("threads", std::max(1, defaultThreadCount() / std::max(1, job.localRanks))));
  ctx.budgetMiB = args.integer("memory-budget", 0);
  ctx.tileSide = args.integer("tile", 0);
  ctx.scratchParent = args.text("scratch");
  ctx.crs = args.text("crs");
  if (ctx.threads < 1 || ctx.budgetMiB < 0 || ctx.tileSide < 0)
    throw UsageError{"--threads takes a number of at least 1, --memory-budget and --tile of at least 0"};
#ifdef GPUGEO_WITH_MPI
  if (job.transport)
    job.cluster = std::make_unique<dem::tiled::Cluster>(*job.transport, ctx.threads);
#endif
  ctx.cluster = job.cluster.get();
  try
  {
    ctx.format = gdal::outputFormat(args.text("creation-options"), args.flag("cog"));
    command.run(args, ctx);
    if (ctx.cluster)
    {
      ctx.cluster->finish();
      ctx.cluster->awaitEnd();
    }
    return 0;
  }
  catch (const dem::tiled::RunStopped&)
  {
    return 1;  // a worker stopped by rank 0, which reports why
  }
  catch (const std::exception& e)
  {
    std::string text = e.what();
    if (dynamic_cast<const Canceled*>(&e) && gSignal.load() != 0)
    {
      text = std::string("stopped by signal ") + std::to_string(gSignal.load()) + " (" + strsignal(gSignal.load()) + ")";
      if (ctx.cluster && ctx.coordinator())
      {
        const std::string out = ctx.cluster->inFlight([](int64_t i) { return "tile " + std::to_string(i); });
        if (!out.empty())
          text += "; tiles in flight: " + out;
      }
    }
    if (ctx.coordinator())
    {
      report.error(text);
      if (ctx.cluster)
        ctx.cluster->abort(text);
    }
    else if (ctx.cluster)
    {
      ctx.cluster->fail(e);
      try
      {
        ctx.cluster->awaitEnd();
      }
      catch (const std::exception&)
      {
      }
    }
    return 1;
  }
}

}  // namespace

// Whether an MPI launcher made this process a rank other than 0 (read before MPI starts).
bool launchedAsWorker()
{
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"})
    if (const char* rank = std::getenv(name))
      return std::atoi(rank) != 0;
  return false;
}

int main(int argc, char** argv)
{
  std::signal(SIGINT, onSignal);
  std::signal(SIGTERM, onSignal);
  if (!launchedAsWorker())
    startCleanupGuard();
  Job job;
  try
  {
#ifdef GPUGEO_WITH_MPI
    job.session = std::make_unique<MpiSession>(argc, argv);
    if (job.session->active())
    {
      job.transport = std::make_unique<MpiTransport>();
      job.rank = job.transport->rank();
      job.localRanks = job.transport->localSize();
      // Before any CUDA call: the GPU this rank's place on its host maps to.
      if (job.transport->size() > 1)
        cli::mapGpu(job.rank, job.transport->localRank(), job.transport->hostHoldsRankZero());
    }
#endif
    if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"))
    {
      if (job.rank == 0)
        std::printf("%s", usage().c_str());
      return argc < 2 ? 2 : 0;
    }
    const Command* command = findCommand(argv[1]);
    if (!command)
      throw UsageError{std::string("unknown tool '") + argv[1] + "'"};
    const int status = runTool(*command, argc, argv, job);
    job.cluster.reset();
    return status;
  }
  catch (const UsageError& e)
  {
    if (job.rank == 0)
      std::fprintf(stderr, "gpugeo_dem: %s (see gpugeo_dem --help)\n", e.text.c_str());
    return 2;
  }
}
