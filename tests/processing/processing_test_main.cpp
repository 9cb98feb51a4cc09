// main() of the processing tests: a QGIS application (offscreen, throwaway profile) with the gpugeo
// provider registered.
#include <gtest/gtest.h>

#include <cstdio>

#include <QTemporaryDir>

#include <gdal.h>

#include <qgsapplication.h>

extern "C" int gpugeo_register_provider();

int main(int argc, char** argv)
{
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QTemporaryDir profile;
  QgsApplication app(argc, argv, false, profile.path());
  QgsApplication::initQgis();
  GDALAllRegister();
  if (!gpugeo_register_provider())
  {
    std::fprintf(stderr, "could not register the gpugeo provider\n");
    return 1;
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int status = RUN_ALL_TESTS();
  QgsApplication::exitQgis();
  return status;
}
