// The isochrones' vector outputs from the command-line program, through OGR: the watershed, the
// isochrone bands, the time–area table and the hydrograph with gpugeo:isochrones's fields; the format from the file's
// extension (.gpkg, .shp, .geojson, .csv for the table ...; GeoPackage where it names none). A file
// not finished is deleted: a failed run leaves nothing that looks like a result.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/polygon_rings.h"

namespace gpugeo::cli {

// Cell corners (regions.h's coordinates) to the DEM's map coordinates: x' = x0 + dx x, y' = y0 + dy y.
struct MapAxes
{
  double x0 = 0, dx = 1, y0 = 0, dy = 1;
};

class VectorOutput
{
public:
  enum class Kind
  {
    Watershed,  // area_km2, cells, t_max
    Bands,      // band, t_min, t_max, cells, area_km2
    Table,      // the bands' fields and cumulative_share, no geometry
    Hydrograph  // step, t_min, t_max, excess_mm_h, discharge_m3s, unit_m3s, no geometry
  };
  // Throws WriteFailed when the file cannot be made (the message says why).
  VectorOutput(const std::string& path, Kind kind, const std::string& crsWkt);
  ~VectorOutput();
  VectorOutput(const VectorOutput&) = delete;
  VectorOutput& operator=(const VectorOutput&) = delete;

  // The watershed: band 0 of `polygons`.
  void addWatershed(const BandPolygons& polygons, const MapAxes& axes, double areaKm2, int64_t cells, double tMax);
  // Band `band` (from 0) of `interval` minutes from band `index` of `polygons` (nothing when it has
  // none); without polygons for the table.
  void addBand(int band, double interval, int64_t cells, double areaKm2, const BandPolygons* polygons,
               std::size_t index, const MapAxes& axes, double cumulativeShare = 0.0);
  // One step (from 0) of `step` minutes of a hydrograph.
  void addHydrographStep(int index, double step, double excess, double discharge, double unit);
  // Closes the file, which is kept.
  void finish();

private:
  struct Impl;
  std::unique_ptr<Impl> mImpl;
};

}  // namespace gpugeo::cli
