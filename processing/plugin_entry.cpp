// The C entry points the Python bootstrap (plugin/gpugeo_plugin.py) calls through ctypes: they add
// the C++ provider to QGIS's processing registry and take it out again.
#include <qgsapplication.h>
#include <qgsprocessingregistry.h>

#include "provider.h"

namespace {
gpugeo::Provider* gRegistered = nullptr;
}

extern "C" {

// Returns 1 when the provider is registered (also when it already was), 0 on failure.
__attribute__((visibility("default"))) int gpugeo_register_provider()
{
  QgsProcessingRegistry* registry = QgsApplication::processingRegistry();
  if (!registry)
    return 0;
  if (gRegistered && registry->providerById(gRegistered->id()) == gRegistered)
    return 1;
  auto* provider = new gpugeo::Provider();
  if (!registry->addProvider(provider))
  {
    delete provider;
    gRegistered = nullptr;
    return 0;
  }
  gRegistered = provider;
  return 1;
}

// Removes the provider (the registry deletes it).
__attribute__((visibility("default"))) void gpugeo_unregister_provider()
{
  if (!gRegistered)
    return;
  if (QgsProcessingRegistry* registry = QgsApplication::processingRegistry())
    registry->removeProvider(gRegistered);
  gRegistered = nullptr;
}

__attribute__((visibility("default"))) const char* gpugeo_version()
{
  return GPUGEO_VERSION;
}
}
