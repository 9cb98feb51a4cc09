// The DEM algorithms' MPI parameters (MPI_PROCESSES, MPI_HOSTFILE), as TauDEM's provider offers
// them: the run handed to the command-line program gpugeo_dem (processing/cli) under mpiexec, its
// progress and log streamed into the algorithm's feedback; a cancel ends the job, which removes its
// outputs and scratch folder. Without mpiexec on the PATH the parameters say so and the algorithm
// runs in-process.
#pragma once

#include <optional>

#include <QString>
#include <QStringList>
#include <QVariantMap>

class QgsProcessingContext;
class QgsProcessingFeedback;
class QgsProcessingParameterDefinition;

namespace gpugeo {

// mpiexec on the PATH (empty when there is none).
QString mpiexecPath();
// The plugin's bin/gpugeo_dem (or the build's; GPUGEO_DEM_PROGRAM overrides both).
QString demProgramPath();

// The two advanced parameters, their descriptions saying whether mpiexec was found.
QgsProcessingParameterDefinition* mpiProcessesParameter();
QgsProcessingParameterDefinition* mpiHostfileParameter();
QString mpiHelp();

struct MpiJob
{
  int processes = 0;
  QString hostfile;
};

// The job MPI_PROCESSES asks for, or none: MPI_PROCESSES 0 (the default), or no mpiexec (a warning
// says the run stays in-process). Throws QgsProcessingException when gpugeo_dem is missing or the
// host file does not exist.
std::optional<MpiJob> mpiJobOf(const QVariantMap& parameters, QgsProcessingContext& context,
                               QgsProcessingFeedback* feedback);

// Runs `gpugeo_dem <tool> <arguments> --machine-readable` under mpiexec with the job's processes
// (Open MPI: --oversubscribe without a host file, so that more ranks than cores run on one machine),
// its @progress, @text, @info and @warning lines into `feedback`. Throws Canceled when the feedback is
// canceled (the job is terminated first), QgsProcessingException with the program's @error (or the
// end of its output) when it fails; either way `outputs` (the rasters the job writes) are deleted
// too, should the job have finished them as the cancel came.
void runDemProgram(const MpiJob& job, const QString& tool, const QStringList& arguments, const QStringList& outputs,
                   QgsProcessingFeedback* feedback);

// The largest value of band 1 of a raster the job wrote (GDAL's statistics), for a style's range; 0
// where it cannot be read.
double rasterMaximum(const QString& path);

}  // namespace gpugeo
