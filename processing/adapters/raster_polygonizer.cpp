#include "raster_polygonizer.h"

#include <vector>

#include <QObject>

#include <cpl_error.h>
#include <gdal.h>
#include <gdal_alg.h>
#include <ogr_api.h>

#include <qgsfeedback.h>
#include <qgsexception.h>

namespace gpugeo {

namespace {

int CPL_STDCALL progress(double fraction, const char*, void* data)
{
  auto* feedback = static_cast<QgsFeedback*>(data);
  if (!feedback)
    return TRUE;
  feedback->setProgress(100.0 * fraction);
  return feedback->isCanceled() ? FALSE : TRUE;
}

struct DatasetCloser
{
  GDALDatasetH dataset;
  ~DatasetCloser()
  {
    if (dataset)
      GDALClose(dataset);
  }
};

}  // namespace

bool polygonizeRegions(const QString& rasterPath, const std::function<void(int32_t, QgsGeometry&&)>& regionFound,
                       QgsFeedback* feedback)
{
  GDALAllRegister();
  CPLErrorReset();
  DatasetCloser raster{GDALOpen(rasterPath.toUtf8().constData(), GA_ReadOnly)};
  if (!raster.dataset)
    throw QgsProcessingException(QObject::tr("Could not open %1: %2").arg(rasterPath, CPLGetLastErrorMsg()));
  GDALRasterBandH band = GDALGetRasterBand(raster.dataset, 1);

  GDALDriverH memory = GDALGetDriverByName("Memory");
  DatasetCloser vectors{GDALCreate(memory, "regions", 0, 0, 0, GDT_Unknown, nullptr)};
  if (!vectors.dataset)
    throw QgsProcessingException(QObject::tr("GDAL could not create an in-memory vector layer."));
  OGRSpatialReferenceH srs = nullptr;
  OGRLayerH layer = GDALDatasetCreateLayer(vectors.dataset, "regions", srs, wkbPolygon, nullptr);
  OGRFieldDefnH field = OGR_Fld_Create("value", OFTInteger);
  OGR_L_CreateField(layer, field, TRUE);
  OGR_Fld_Destroy(field);

  int hasNoData = 0;
  GDALGetRasterNoDataValue(band, &hasNoData);
  GDALRasterBandH mask = hasNoData ? GDALGetMaskBand(band) : nullptr;
  const CPLErr status = GDALPolygonize(band, mask, layer, 0, nullptr, progress, feedback);
  if (feedback && feedback->isCanceled())
    return false;
  if (status != CE_None)
    throw QgsProcessingException(QObject::tr("Could not trace the regions of %1: %2").arg(rasterPath, CPLGetLastErrorMsg()));

  OGR_L_ResetReading(layer);
  std::vector<unsigned char> wkb;
  while (OGRFeatureH feature = OGR_L_GetNextFeature(layer))
  {
    const int32_t value = OGR_F_GetFieldAsInteger(feature, 0);
    OGRGeometryH geometry = OGR_F_GetGeometryRef(feature);
    if (geometry)
    {
      wkb.resize(static_cast<size_t>(OGR_G_WkbSize(geometry)));
      OGR_G_ExportToWkb(geometry, wkbNDR, wkb.data());
      QgsGeometry polygon;
      polygon.fromWkb(QByteArray(reinterpret_cast<const char*>(wkb.data()), static_cast<int>(wkb.size())));
      regionFound(value, std::move(polygon));
    }
    OGR_F_Destroy(feature);
  }
  return true;
}

}  // namespace gpugeo
