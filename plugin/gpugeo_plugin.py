"""Loads lib/libgpugeo_provider.so and registers its C++ processing provider.

The library exports C functions (processing/plugin_entry.cpp) that add the provider to
QgsApplication.processingRegistry() and remove it again; ctypes calls them. initProcessing() is what
qgis_process calls for plugins with hasProcessingProvider=yes; the desktop calls initGui().
"""
import ctypes
import os


class GpuGeoPlugin:
    LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "libgpugeo_provider.so")

    def __init__(self, iface):
        self.iface = iface
        self._library = None
        self._registered = False

    def _load(self):
        if self._library is None:
            if not os.path.exists(self.LIBRARY):
                raise RuntimeError(f"GPU Geoprocessing: the provider library is missing ({self.LIBRARY}); "
                                   "reinstall the plugin.")
            try:
                library = ctypes.CDLL(self.LIBRARY)
            except OSError as error:
                raise RuntimeError(f"GPU Geoprocessing: could not load {self.LIBRARY}: {error}. The plugin is "
                                   "built for QGIS 3.22 on Linux x86-64.") from error
            library.gpugeo_register_provider.restype = ctypes.c_int
            library.gpugeo_unregister_provider.restype = None
            library.gpugeo_version.restype = ctypes.c_char_p
            self._library = library
        return self._library

    def initProcessing(self):  # noqa: N802 (QGIS's name)
        if self._registered:
            return
        if not self._load().gpugeo_register_provider():
            raise RuntimeError("GPU Geoprocessing: the provider could not be registered "
                               "(is another copy of the plugin loaded?)")
        self._registered = True

    def initGui(self):  # noqa: N802 (QGIS's name)
        self.initProcessing()

    def unload(self):
        if self._registered and self._library is not None:
            self._library.gpugeo_unregister_provider()
        self._registered = False

    def version(self):
        return self._load().gpugeo_version().decode()
