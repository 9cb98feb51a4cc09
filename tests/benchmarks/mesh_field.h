// The benchmark mesh, shared by bench_meshcontours and make_mesh_2dm.py (which writes the same mesh
// as a 2DM file for the qgis_process comparison): an n x n grid of vertices 10 m apart, each cell cut
// into two triangles along the same diagonal, and a smooth synthetic terrain (waves, a hill and a
// slope) sampled at the vertices. The levels avoid every vertex value by construction (x.3 steps).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace gpugeo::bench {

inline double terrain(double i, double j)
{
  return 100.0 * std::sin(i * 0.0123) * std::cos(j * 0.0089) + 60.0 * std::exp(-((i - 350) * (i - 350) + (j - 620) * (j - 620)) / 15000.0) +
         0.05 * i;
}

struct GridMesh
{
  std::vector<double> x, y, z;
  std::vector<int32_t> triangles;
};

// Vertices row by row (vertex j * n + i at (10 i, 10 j)); triangles (a, b, c), (a, c, d) per cell.
inline GridMesh gridMesh(int n)
{
  GridMesh m;
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < n; ++i)
    {
      m.x.push_back(10.0 * i);
      m.y.push_back(10.0 * j);
      m.z.push_back(terrain(i, j));
    }
  for (int j = 0; j + 1 < n; ++j)
    for (int i = 0; i + 1 < n; ++i)
    {
      const int32_t a = j * n + i, b = a + 1, c = a + n + 1, d = a + n;
      m.triangles.insert(m.triangles.end(), {a, b, c, a, c, d});
    }
  return m;
}

// count levels -95.3, -80.3, ... (15 apart).
inline std::vector<double> benchLevels(int count)
{
  std::vector<double> levels;
  for (int k = 0; k < count; ++k)
    levels.push_back(-95.3 + 15.0 * k);
  return levels;
}

}  // namespace gpugeo::bench
