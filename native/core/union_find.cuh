// Union-find on the device, for any number of threads at once, in global or shared memory: sets of
// indices whose links only ever go to lower indices, so that a set's root is its lowest index
// whatever order the joins run in (the labels come out the same on every run and as the CPU's).
#pragma once

#include <cuda_runtime.h>

namespace gpugeo::cuda {

// The root of c; on the way, each index passed is linked to its grandparent (path halving: a link
// only ever moves to a lower index of the same set, so it is safe beside other threads' joins).
template <typename Index>
__device__ Index rootOf(Index* parent, Index c)
{
  const volatile Index* read = parent;
  for (Index p = read[c]; p != c;)
  {
    const Index up = read[p];
    if (up != p)
      atomicMin(parent + c, up);
    c = p;
    p = up;
  }
  return c;
}

// Joins the sets of a and b: the higher root links under the lower with atomicMin; if another thread
// linked it first, what it was linked to is joined with the other root instead.
template <typename Index>
__device__ void joinSets(Index* parent, Index a, Index b)
{
  for (;;)
  {
    a = rootOf(parent, a);
    b = rootOf(parent, b);
    if (a == b)
      return;
    if (a < b)
    {
      const Index t = a;
      a = b;
      b = t;
    }
    const Index was = atomicMin(parent + a, b);
    if (was == a)
      return;
    a = was;
  }
}

}  // namespace gpugeo::cuda
