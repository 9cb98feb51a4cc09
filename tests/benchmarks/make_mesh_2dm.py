#!/usr/bin/python3
"""Writes the benchmark mesh of mesh_field.h as a 2DM file: an n x n grid of vertices 10 m apart
(vertex j * n + i at (10 i, 10 j), z = terrain(i, j), the same formula in the same order of
operations, in doubles), each cell cut into the triangles (a, b, c) and (a, c, d) with a = j * n + i,
b = a + 1, c = a + n + 1, d = a + n. Ids in the file are 1-based; coordinates are written with
repr() (17 significant digits at most, read back to the same double).

usage: make_mesh_2dm.py N out.2dm
"""
import math
import sys


def terrain(i, j):
    """mesh_field.h's terrain(), i and j as doubles."""
    return (100.0 * math.sin(i * 0.0123) * math.cos(j * 0.0089)
            + 60.0 * math.exp(-((i - 350) * (i - 350) + (j - 620) * (j - 620)) / 15000.0) + 0.05 * i)


def write_mesh(path, n):
    """Writes the n x n mesh to `path`, a row of vertices or of cells at a time."""
    with open(path, "w", buffering=1 << 22) as out:
        out.write("MESH2D\n")
        xs = [repr(10.0 * i) for i in range(n)]
        for j in range(n):
            y = repr(10.0 * j)
            fj = float(j)
            first = j * n + 1
            out.write("".join(f"ND {first + i} {xs[i]} {y} {terrain(float(i), fj)!r}\n" for i in range(n)))
        face = 1
        for j in range(n - 1):
            row = []
            for i in range(n - 1):
                a = j * n + i + 1  # 1-based
                b, c, d = a + 1, a + n + 1, a + n
                row.append(f"E3T {face} {a} {b} {c} 1\nE3T {face + 1} {a} {c} {d} 1\n")
                face += 2
            out.write("".join(row))
    return n * n, 2 * (n - 1) * (n - 1)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    n = int(sys.argv[1])
    if n < 2:
        sys.exit("N must be at least 2")
    vertices, triangles = write_mesh(sys.argv[2], n)
    print(f"{sys.argv[2]}: {vertices} vertices, {triangles} triangles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
