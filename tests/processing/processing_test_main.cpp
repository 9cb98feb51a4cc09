// main() of the processing tests: a QGIS application (offscreen, throwaway profile) with QGIS's data
// providers and the gpugeo provider registered.
#include <gtest/gtest.h>

#include <cstdio>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include <QDir>
#include <QTemporaryDir>

#include <gdal.h>

#include <qgsapplication.h>
#include <qgsconfig.h>
#include <qgsproviderregistry.h>

extern "C" int gpugeo_register_provider();

int main(int argc, char** argv)
{
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QTemporaryDir profile;
  // What QGIS and Qt allocate while starting (the offscreen platform's screens, the OpenSSL provider
  // QgsAuthManager::init loads through QCA) is theirs and is never freed: under AddressSanitizer
  // those blocks are left out of the leak check here, where they are made, instead of by
  // suppressions that need the slow unwinder's deep malloc stacks (tests/sanitizers.sh).
#if defined(__SANITIZE_ADDRESS__)
  __lsan_disable();
#endif
  QgsApplication app(argc, argv, false, profile.path());
  QgsApplication::initQgis();
#if defined(__SANITIZE_ADDRESS__)
  __lsan_enable();
#endif
  // QGIS's data providers (MDAL for meshes among them) from QGIS's own plugin folder: QgsApplication
  // looks for them next to the test program.
  QgsProviderRegistry* providers = QgsProviderRegistry::instance();
  if (!providers->providerList().contains(QStringLiteral("mdal")))
    providers->setLibraryDirectory(QDir(QStringLiteral(CMAKE_INSTALL_PREFIX "/" QGIS_PLUGIN_SUBDIR)));
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
