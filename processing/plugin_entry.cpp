// The C entry points the Python bootstrap (plugin/gpugeo_plugin.py) calls through ctypes: they add
// the C++ provider to QGIS's processing registry and take it out again.
#include <QPointer>

#include <qgsapplication.h>
#include <qgsprocessingregistry.h>

#include "provider.h"

namespace {
// Guarded: if something else removes (and deletes) the provider, this turns null.
QPointer<gpugeo::Provider> gRegistered;
}  // namespace

extern "C" {

// Returns 1 when the provider is registered (also when it already was), 0 on failure.
int gpugeo_register_provider()
{
  QgsProcessingRegistry* registry = QgsApplication::processingRegistry();
  if (!registry)
    return 0;
  if (gRegistered && registry->providerById(gRegistered->id()) == gRegistered)
    return 1;
  // On failure (a provider with this id exists, or loading fails) the registry deletes it.
  auto* provider = new gpugeo::Provider();
  if (!registry->addProvider(provider))
    return 0;
  gRegistered = provider;
  return 1;
}

// Removes the provider (the registry deletes it).
void gpugeo_unregister_provider()
{
  QgsProcessingRegistry* registry = QgsApplication::processingRegistry();
  if (gRegistered && registry)
    registry->removeProvider(gRegistered.data());
  gRegistered = nullptr;
}

const char* gpugeo_version()
{
  return GPUGEO_VERSION;
}
}
