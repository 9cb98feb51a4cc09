// The CUDA backend's index: the bucket grid of the sites (count, order, gather or scatter, the
// duplicates' hash table), built by voronoi_cuda.cu's starts and read by the labelling kernels of
// voronoi_grid_cuda.cu.
#include "detail/bucket_grid.h"

#include "core/cuda_check.h"

namespace gpugeo::voronoi::detail::grid {

namespace {

constexpr unsigned kFull = 0xffffffffu;

unsigned blocksFor(long long items, int threads)
{
  return static_cast<unsigned>((items + threads - 1) / threads);
}

__device__ __forceinline__ uint32_t bucketKey(const Point& p, int shift, int bx, int by)
{
  // Sites outside the grid go to the nearest edge bucket, which only brings them nearer: every
  // certificate below treats the edge buckets as reaching to infinity.
  return uint32_t(bucketOf(p.y, shift, by)) * uint32_t(bx) + uint32_t(bucketOf(p.x, shift, bx));
}

__global__ void countKernel(const Point* p, const uint8_t* duplicate, int first, int count, int shift, int bx, int by,
                            uint32_t* key, int32_t* rank, int32_t* bucketCount)
{
  const unsigned j = blockIdx.x * blockDim.x + threadIdx.x;  // unsigned: no wrap near 2^31 sites
  if (j >= unsigned(count))
    return;
  const int i = first + int(j);
  if (duplicate && duplicate[i])
    return;
  const uint32_t k = bucketKey(p[i], shift, bx, by);
  key[i] = k;
  // Arrival order within a bucket: no result depends on it, every tie being broken by input index.
  rank[i] = atomicAdd(bucketCount + k, 1);
}

__global__ void orderKernel(const uint8_t* duplicate, const uint32_t* key, const int32_t* rank, const int32_t* start,
                            int n, int32_t* order)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && !(duplicate && duplicate[i]))
    order[start[key[i]] + rank[i]] = i;
}

__global__ void gatherKernel(const Point* p, const int32_t* order, int n, Point* sorted)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    sorted[i] = p[order[i]];
}

__global__ void fillKernel(int32_t* start, int first, int count, int32_t value)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count)
    start[first + i] = value;
}

__global__ void farSitesKernel(Point* points, int32_t* index, int n)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
  {
    // Squared distances to it overflow to infinity: never below a bound, never a best (its index
    // loses every tie, even infinity's).
    points[i] = Point{1e300, 1e300};
    index[i] = 0x7fffffff;
  }
}

__global__ void scatterKernel(const Point* p, const int32_t* original, const uint32_t* key, const int32_t* rank,
                              const int32_t* start, int first, int count, Point* sorted, int32_t* index)
{
  const unsigned j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= unsigned(count))
    return;
  const int i = first + int(j);
  const int32_t to = start[key[i]] + rank[i];
  sorted[to] = p[i];
  index[to] = original[i];
}

__device__ __forceinline__ uint32_t pointHash(const Point& p)
{
  // +0.0 makes -0.0 and 0.0 (equal points) hash alike.
  const unsigned long long x = __double_as_longlong(p.x + 0.0), y = __double_as_longlong(p.y + 0.0);
  unsigned long long h = x * 0x9E3779B97F4A7C15ull ^ (y + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 29;
  return uint32_t(h ^ (h >> 32));
}

// Each slot, once taken, holds an index of one point; atomicMin keeps its lowest.
__global__ void insertKernel(const Point* p, int n, int32_t* table, uint32_t mask)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const Point q = p[i];
  for (uint32_t h = pointHash(q) & mask;; h = (h + 1) & mask)
  {
    const int32_t held = atomicCAS(table + h, -1, i);
    if (held == -1)
      return;
    if (samePoint(p[held], q))
    {
      atomicMin(table + h, i);
      return;
    }
  }
}

__global__ void flagKernel(const Point* p, int n, const int32_t* table, uint32_t mask, uint8_t* duplicate,
                           int32_t* uniqueCount)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  bool unique = false;
  if (i < n)
  {
    const Point q = p[i];
    uint32_t h = pointHash(q) & mask;
    while (!samePoint(p[table[h]], q))
      h = (h + 1) & mask;
    unique = table[h] == i;
    duplicate[i] = unique ? 0 : 1;
  }
  const unsigned votes = __ballot_sync(kFull, unique);
  if (threadIdx.x % 32 == 0 && votes)
    atomicAdd(uniqueCount, __popc(votes));
}

}  // namespace

// --- Launches ----------------------------------------------------------------------------------

void launchCount(const Point* points, const uint8_t* duplicate, int first, int count, int shift, int bx, int by,
                 uint32_t* key, int32_t* rank, int32_t* bucketCount, cudaStream_t stream)
{
  if (count <= 0)
    return;
  countKernel<<<blocksFor(count, 256), 256, 0, stream>>>(points, duplicate, first, count, shift, bx, by, key, rank,
                                                         bucketCount);
  GPUGEO_CUDA_CHECK_LAUNCH();
}

void launchOrder(const Point*, const uint8_t* duplicate, const uint32_t* key, const int32_t* rank, const int32_t* start,
                 int n, int32_t* order, cudaStream_t stream)
{
  orderKernel<<<blocksFor(n, 256), 256, 0, stream>>>(duplicate, key, rank, start, n, order);
  GPUGEO_CUDA_CHECK_LAUNCH();
}

void launchGather(const Point* points, const int32_t* order, int n, Point* sorted, cudaStream_t stream)
{
  if (n <= 0)
    return;
  gatherKernel<<<blocksFor(n, 256), 256, 0, stream>>>(points, order, n, sorted);
  GPUGEO_CUDA_CHECK_LAUNCH();
}

void launchFill(int32_t* start, int first, int count, int32_t value, cudaStream_t stream)
{
  if (count <= 0)
    return;
  fillKernel<<<blocksFor(count, 256), 256, 0, stream>>>(start, first, count, value);
  GPUGEO_CUDA_CHECK_LAUNCH();
}

void launchFarSites(Point* points, int32_t* index, int n, cudaStream_t stream)
{
  if (n <= 0)
    return;
  farSitesKernel<<<blocksFor(n, 256), 256, 0, stream>>>(points, index, n);
  GPUGEO_CUDA_CHECK_LAUNCH();
}

void launchScatter(const Point* points, const int32_t* original, const uint32_t* key, const int32_t* rank,
                   const int32_t* start, int first, int count, Point* sorted, int32_t* index, cudaStream_t stream)
{
  if (count <= 0)
    return;
  scatterKernel<<<blocksFor(count, 256), 256, 0, stream>>>(points, original, key, rank, start, first, count, sorted,
                                                           index);
  GPUGEO_CUDA_CHECK_LAUNCH();
}

void launchMarkDuplicates(const Point* points, int n, int32_t* table, uint32_t capacity, uint8_t* duplicate,
                          int32_t* uniqueCount, cudaStream_t stream)
{
  insertKernel<<<blocksFor(n, 256), 256, 0, stream>>>(points, n, table, capacity - 1);
  GPUGEO_CUDA_CHECK_LAUNCH();
  flagKernel<<<blocksFor(n, 256), 256, 0, stream>>>(points, n, table, capacity - 1, duplicate, uniqueCount);
  GPUGEO_CUDA_CHECK_LAUNCH();
}

}  // namespace gpugeo::voronoi::detail::grid
