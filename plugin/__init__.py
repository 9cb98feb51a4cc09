"""GPU Geoprocessing: a QGIS processing provider written in C++ on CUDA.

QGIS (desktop and qgis_process) imports this package and calls classFactory(); the plugin then loads
the compiled provider library and registers it with the processing registry.
"""


def classFactory(iface):  # noqa: N802 (QGIS's name)
    from .gpugeo_plugin import GpuGeoPlugin

    return GpuGeoPlugin(iface)
