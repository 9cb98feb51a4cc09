// Checks every algorithm runs on its parameters before it reads or writes anything: numbers that are
// numbers (no NaN or infinity, within the parameter's range, named with that range when not), CRS and
// extents that mean something, and outputs that cannot destroy data (an output on a file the run
// reads, two outputs on one file).
#pragma once

#include <QString>
#include <QVariantMap>

class QgsProcessingAlgorithm;
class QgsProcessingContext;
class QgsProcessingParameterDefinition;

namespace gpugeo {

// The first numeric, band, CRS or extent parameter whose value cannot be used, as a sentence naming
// the parameter and what it accepts; empty when all can.
QString parameterValueProblem(const QgsProcessingAlgorithm& algorithm, const QVariantMap& parameters,
                              QgsProcessingContext& context);

// An output that would be written over a file the run reads (the same file after resolving paths and
// links), or two outputs given the same file (unless both are layers of their own name in one
// container, such as a GeoPackage), as a sentence; empty when there is none. Temporary and memory
// outputs never conflict.
QString outputConflict(const QgsProcessingAlgorithm& algorithm, const QVariantMap& parameters,
                       QgsProcessingContext& context);

// A numeric parameter whose minimum is not accepted itself ("greater than 0"), which QGIS's bounds
// cannot say: marked in the definition's metadata, enforced by parameterValueProblem().
void setMinimumExcluded(QgsProcessingParameterDefinition& definition);

// What a numeric parameter accepts, for messages and help: "from 1 to 13", "0 or more", "greater
// than 0", "any number".
QString acceptedRange(const QgsProcessingParameterDefinition& definition);

// A paragraph for an algorithm's help that lists each numeric parameter with its accepted range.
QString rangesHelp(const QgsProcessingAlgorithm& algorithm);

}  // namespace gpugeo
