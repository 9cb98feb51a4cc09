#!/usr/bin/python3
"""The shipped models as the graphical modeler sees them: each .model3 of tests/e2e loaded through
QgsProcessingModelAlgorithm with QGIS's native algorithms and the installed gpugeo provider
registered, valid (validate() reports no issue: every mandatory parameter of every step has a
source), and laid out (every input, step and output has a place of its own, none at 0,0 and no two
boxes on top of each other).

Needs Debian's python3 (PyQGIS) and GPUGEO_PLUGIN_DIR, the plugin folder that `cmake --install` laid out.
"""
import ctypes
import glob
import os
import tempfile
import unittest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
from qgis.analysis import QgsNativeAlgorithms  # noqa: E402
from qgis.core import QgsApplication, QgsProcessingModelAlgorithm  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN_DIR = os.environ.get("GPUGEO_PLUGIN_DIR", "")
MODELS = sorted(glob.glob(os.path.join(HERE, "*.model3")))


class ModelsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.profile = tempfile.TemporaryDirectory()
        cls.app = QgsApplication([], False, cls.profile.name)
        cls.app.initQgis()
        QgsApplication.processingRegistry().addProvider(QgsNativeAlgorithms())
        cls.library = ctypes.CDLL(os.path.join(PLUGIN_DIR, "lib", "libgpugeo_provider.so"))
        cls.library.gpugeo_register_provider.restype = ctypes.c_int
        assert cls.library.gpugeo_register_provider(), "the gpugeo provider could not be registered"

    def test_every_model_is_valid_and_laid_out(self):
        self.assertEqual(len(MODELS), 5, MODELS)
        for path in MODELS:
            name = os.path.basename(path)
            model = QgsProcessingModelAlgorithm()
            self.assertTrue(model.fromFile(path), name)
            valid, issues = model.validate()
            self.assertTrue(valid, f"{name}: {issues}")
            self.assertEqual(issues, [], name)
            places = []
            for component in model.parameterComponents().values():
                places.append((f"input {component.parameterName()}", component.position()))
            for child in model.childAlgorithms().values():
                self.assertIsNotNone(child.algorithm(), f"{name}: {child.algorithmId()} is not available")
                places.append((f"step {child.childId()}", child.position()))
                for output in child.modelOutputs().values():
                    places.append((f"output {output.name()}", output.position()))
            for what, place in places:
                self.assertFalse(place.x() == 0 and place.y() == 0, f"{name}: {what} at 0,0")
            # Boxes are about 200 x 30 pixels about their centre: no two within that of each other.
            for i, (a, pa) in enumerate(places):
                for b, pb in places[i + 1:]:
                    apart = abs(pa.x() - pb.x()) >= 200 or abs(pa.y() - pb.y()) >= 40
                    self.assertTrue(apart, f"{name}: {a} and {b} overlap")


if __name__ == "__main__":
    unittest.main()
