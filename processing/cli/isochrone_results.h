// What `gpugeo_dem isochrones --results FILE` leaves for the QGIS algorithm that ran it under
// mpiexec: the outlet, the watershed's and the bands' counts, areas and polygons, which the algorithm
// then writes to its own feature sinks as its in-process runs do. A file of chunks, each a length
// (int64) and an Archive's bytes: one per band as the bands are traced, then the summary.
#pragma once

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/polygon_rings.h"
#include "dem/tiled/distribution.h"

namespace gpugeo::cli {

struct IsochroneResults
{
  int64_t outlet = -1, outletCells = 0, raisedCells = 0, validCells = 0;
  double interval = 0;
  int32_t bands = 0;
  std::vector<int64_t> bandCells;
  std::vector<double> bandArea;  // m²
  int64_t watershedCells = 0;
  double watershedArea = 0, minTime = 0, maxTime = 0, minSpeed = 0, maxSpeed = 0;
  BandPolygons watershed;
  BandPolygons bandPolygons;  // every band, in order
};

inline void visitPolygons(dem::tiled::Archive& a, BandPolygons& p)
{
  a.vector(p.bandPolygon);
  a.vector(p.polygonRing);
  a.vector(p.ringPoint);
  a.vector(p.x);
  a.vector(p.y);
  a.vector(p.z);
}

// Everything but the bands' polygons.
inline void visitSummary(dem::tiled::Archive& a, IsochroneResults& r)
{
  a.value(r.outlet);
  a.value(r.outletCells);
  a.value(r.raisedCells);
  a.value(r.validCells);
  a.value(r.interval);
  a.value(r.bands);
  a.vector(r.bandCells);
  a.vector(r.bandArea);
  a.value(r.watershedCells);
  a.value(r.watershedArea);
  a.value(r.minTime);
  a.value(r.maxTime);
  a.value(r.minSpeed);
  a.value(r.maxSpeed);
  visitPolygons(a, r.watershed);
}

// Appends `one` (the polygons of one band) as the next band of `all`.
inline void appendBand(BandPolygons& all, const BandPolygons& one)
{
  if (all.bandPolygon.empty())
  {
    all.bandPolygon.push_back(0);
    all.polygonRing.push_back(0);
    all.ringPoint.push_back(0);
  }
  const int64_t polygons = all.bandPolygon.back(), rings = all.polygonRing.back(), points = all.ringPoint.back();
  const int64_t added = one.bandPolygon.size() >= 2 ? one.bandPolygon[1] - one.bandPolygon[0] : 0;
  all.bandPolygon.push_back(polygons + added);
  for (std::size_t q = 1; q < one.polygonRing.size() && added > 0; ++q)
    all.polygonRing.push_back(rings + one.polygonRing[q]);
  for (std::size_t r = 1; r < one.ringPoint.size() && added > 0; ++r)
    all.ringPoint.push_back(points + one.ringPoint[r]);
  if (added > 0)
  {
    all.x.insert(all.x.end(), one.x.begin(), one.x.end());
    all.y.insert(all.y.end(), one.y.begin(), one.y.end());
    all.z.insert(all.z.end(), one.z.begin(), one.z.end());
  }
}

class IsochroneResultsWriter
{
public:
  explicit IsochroneResultsWriter(const std::string& path) : mPath(path), mOut(path, std::ios::binary | std::ios::trunc)
  {
    if (!mOut)
      throw WriteFailed("could not create " + path);
  }
  // A file not finished is removed.
  ~IsochroneResultsWriter()
  {
    if (!mFinished)
    {
      mOut.close();
      std::remove(mPath.c_str());
    }
  }
  void addBand(BandPolygons& one)
  {
    dem::tiled::Archive a;
    uint8_t kind = 1;
    a.value(kind);
    visitPolygons(a, one);
    chunk(a);
  }
  void finish(IsochroneResults& r)
  {
    dem::tiled::Archive a;
    uint8_t kind = 2;
    a.value(kind);
    visitSummary(a, r);
    chunk(a);
    mOut.close();
    if (!mOut)
      throw WriteFailed("could not write " + mPath + " (disk full?)");
    mFinished = true;
  }

private:
  void chunk(dem::tiled::Archive& a)
  {
    const int64_t size = int64_t(a.bytes().size());
    mOut.write(reinterpret_cast<const char*>(&size), sizeof(size));
    mOut.write(a.bytes().data(), std::streamsize(size));
    if (!mOut)
      throw WriteFailed("could not write " + mPath + " (disk full?)");
  }
  std::string mPath;
  std::ofstream mOut;
  bool mFinished = false;
};

inline IsochroneResults readIsochroneResults(const std::string& path)
{
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("the isochrones' results " + path + " are missing");
  IsochroneResults r;
  for (;;)
  {
    int64_t size = 0;
    if (!in.read(reinterpret_cast<char*>(&size), sizeof(size)) || size < 0)
      throw Error("the isochrones' results " + path + " end early");
    std::vector<char> bytes(static_cast<std::size_t>(size));
    if (!in.read(bytes.data(), std::streamsize(size)))
      throw Error("the isochrones' results " + path + " end early");
    dem::tiled::Archive a(bytes.data(), bytes.size());
    uint8_t kind = 0;
    a.value(kind);
    if (kind == 1)
    {
      BandPolygons one;
      visitPolygons(a, one);
      appendBand(r.bandPolygons, one);
      continue;
    }
    visitSummary(a, r);
    return r;
  }
}

}  // namespace gpugeo::cli
