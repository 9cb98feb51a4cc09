// Lets one function body serve both backends: __host__ __device__ under nvcc, plain inline otherwise.
#pragma once

#ifdef __CUDACC__
#define GPUGEO_HD __host__ __device__ __forceinline__
#else
#define GPUGEO_HD inline
#endif
