#include "cli/vector_outputs.h"

#include <cctype>
#include <filesystem>

#include <cpl_error.h>
#include <gdal.h>
#include <ogr_api.h>
#include <ogr_srs_api.h>

#include "core/errors.h"
#include "gdal/gdal_raster.h"

namespace gpugeo::cli {

namespace {

std::string driverFor(const std::string& path)
{
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".shp")
    return "ESRI Shapefile";
  if (ext == ".geojson" || ext == ".json")
    return "GeoJSON";
  if (ext == ".csv")
    return "CSV";
  if (ext == ".fgb")
    return "FlatGeobuf";
  return "GPKG";
}

// Band `index` of `polygons` as an OGR multipolygon (null when the band has none).
OGRGeometryH multiPolygon(const BandPolygons& b, std::size_t index, const MapAxes& axes)
{
  if (index + 1 >= b.bandPolygon.size() || b.bandPolygon[index] == b.bandPolygon[index + 1])
    return nullptr;
  OGRGeometryH multi = OGR_G_CreateGeometry(wkbMultiPolygon);
  for (int64_t q = b.bandPolygon[index]; q < b.bandPolygon[index + 1]; ++q)
  {
    OGRGeometryH polygon = OGR_G_CreateGeometry(wkbPolygon);
    for (int64_t r = b.polygonRing[std::size_t(q)]; r < b.polygonRing[std::size_t(q) + 1]; ++r)
    {
      OGRGeometryH ring = OGR_G_CreateGeometry(wkbLinearRing);
      const int64_t first = b.ringPoint[std::size_t(r)], last = b.ringPoint[std::size_t(r) + 1];
      OGR_G_SetPointCount(ring, int(last - first));
      for (int64_t i = first; i < last; ++i)
        OGR_G_SetPoint_2D(ring, int(i - first), axes.x0 + axes.dx * b.x[std::size_t(i)],
                          axes.y0 + axes.dy * b.y[std::size_t(i)]);
      OGR_G_AddGeometryDirectly(polygon, ring);
    }
    OGR_G_AddGeometryDirectly(multi, polygon);
  }
  return multi;
}

}  // namespace

struct VectorOutput::Impl
{
  std::string path;
  GDALDatasetH dataset = nullptr;
  OGRLayerH layer = nullptr;
  Kind kind;
  bool transaction = false;  // the features go in one transaction where the format has them
  bool finished = false;

  void add(OGRGeometryH geometry, const std::vector<std::pair<const char*, double>>& reals,
           const std::vector<std::pair<const char*, int64_t>>& integers)
  {
    OGRFeatureH feature = OGR_F_Create(OGR_L_GetLayerDefn(layer));
    for (const auto& [name, v] : integers)
      OGR_F_SetFieldInteger64(feature, OGR_F_GetFieldIndex(feature, name), v);
    for (const auto& [name, v] : reals)
      OGR_F_SetFieldDouble(feature, OGR_F_GetFieldIndex(feature, name), v);
    if (geometry)
      OGR_F_SetGeometryDirectly(feature, geometry);
    const OGRErr error = OGR_L_CreateFeature(layer, feature);
    OGR_F_Destroy(feature);
    if (error != OGRERR_NONE)
      throw WriteFailed("could not write a feature to " + path + ": " + gdal::lastGdalError() + " (disk full?)");
  }
};

VectorOutput::VectorOutput(const std::string& path, Kind kind, const std::string& crsWkt) : mImpl(new Impl)
{
  mImpl->path = path;
  mImpl->kind = kind;
  GDALAllRegister();
  const std::string driverName = driverFor(path);
  GDALDriverH driver = GDALGetDriverByName(driverName.c_str());
  if (!driver)
    throw WriteFailed("this GDAL has no " + driverName + " driver for " + path);
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  CPLErrorReset();
  mImpl->dataset = GDALCreate(driver, path.c_str(), 0, 0, 0, GDT_Unknown, nullptr);
  if (!mImpl->dataset)
    throw WriteFailed("could not create " + path + ": " + gdal::lastGdalError());
  OGRSpatialReferenceH srs = nullptr;
  const bool table = kind == Kind::Table || kind == Kind::Hydrograph;
  if (!table && !crsWkt.empty())
  {
    srs = OSRNewSpatialReference(crsWkt.c_str());
    OSRSetAxisMappingStrategy(srs, OAMS_TRADITIONAL_GIS_ORDER);
  }
  const std::string name = std::filesystem::path(path).stem().string();
  mImpl->layer = GDALDatasetCreateLayer(mImpl->dataset, name.c_str(), srs,
                                        table ? wkbNone : wkbMultiPolygon, nullptr);
  if (srs)
    OSRRelease(srs);
  if (!mImpl->layer)
    throw WriteFailed("could not create a layer in " + path + ": " + gdal::lastGdalError());
  const auto field = [&](const char* fieldName, OGRFieldType type) {
    OGRFieldDefnH f = OGR_Fld_Create(fieldName, type);
    OGR_L_CreateField(mImpl->layer, f, TRUE);
    OGR_Fld_Destroy(f);
  };
  if (kind == Kind::Hydrograph)
  {
    field("step", OFTInteger);
    field("t_min", OFTReal);
    field("t_max", OFTReal);
    field("excess_mm_h", OFTReal);
    field("discharge_m3s", OFTReal);
    field("unit_m3s", OFTReal);
  }
  else if (kind == Kind::Watershed)
  {
    field("area_km2", OFTReal);
    field("cells", OFTInteger64);
    field("t_max", OFTReal);
  }
  else
  {
    field("band", OFTInteger);
    field("t_min", OFTReal);
    field("t_max", OFTReal);
    field("cells", OFTInteger64);
    field("area_km2", OFTReal);
    if (kind == Kind::Table)
      field("cumulative_share", OFTReal);
  }
  mImpl->transaction = OGR_L_StartTransaction(mImpl->layer) == OGRERR_NONE;
}

VectorOutput::~VectorOutput()
{
  if (mImpl->dataset)
    GDALClose(mImpl->dataset);
  if (!mImpl->finished)
  {
    GDALDriverH driver = GDALGetDriverByName(driverFor(mImpl->path).c_str());
    CPLPushErrorHandler(CPLQuietErrorHandler);
    if (!driver || GDALDeleteDataset(driver, mImpl->path.c_str()) != CE_None)
    {
      std::error_code ignored;
      std::filesystem::remove(mImpl->path, ignored);
    }
    CPLPopErrorHandler();
  }
}

void VectorOutput::addWatershed(const BandPolygons& polygons, const MapAxes& axes, double areaKm2, int64_t cells,
                                double tMax)
{
  mImpl->add(multiPolygon(polygons, 0, axes), {{"area_km2", areaKm2}, {"t_max", tMax}}, {{"cells", cells}});
}

void VectorOutput::addBand(int band, double interval, int64_t cells, double areaKm2, const BandPolygons* polygons,
                           std::size_t index, const MapAxes& axes, double cumulativeShare)
{
  OGRGeometryH geometry = polygons ? multiPolygon(*polygons, index, axes) : nullptr;
  if (polygons && !geometry)
    return;
  std::vector<std::pair<const char*, double>> reals{
    {"t_min", double(band) * interval}, {"t_max", double(band + 1) * interval}, {"area_km2", areaKm2}};
  if (mImpl->kind == Kind::Table)
    reals.emplace_back("cumulative_share", cumulativeShare);
  mImpl->add(geometry, reals, {{"band", band + 1}, {"cells", cells}});
}

void VectorOutput::addHydrographStep(int index, double step, double excess, double discharge, double unit)
{
  mImpl->add(nullptr,
             {{"t_min", double(index) * step},
              {"t_max", double(index + 1) * step},
              {"excess_mm_h", excess},
              {"discharge_m3s", discharge},
              {"unit_m3s", unit}},
             {{"step", index + 1}});
}

void VectorOutput::finish()
{
  if (mImpl->transaction && OGR_L_CommitTransaction(mImpl->layer) != OGRERR_NONE)
    throw WriteFailed("could not write " + mImpl->path + ": " + gdal::lastGdalError() + " (disk full?)");
  GDALClose(mImpl->dataset);
  mImpl->dataset = nullptr;
  mImpl->finished = true;
}

}  // namespace gpugeo::cli
