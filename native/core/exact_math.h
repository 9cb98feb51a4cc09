// Rounded IEEE operations that give the same bits on the CPU and the GPU.
//
// nvcc contracts a*b+c into one fused multiply-add unless told not to, and GCC does the same on
// targets with FMA; either changes the last bit of a result. The per-element math shared by both
// backends goes through these helpers (the CUDA intrinsics are never contracted) and the host side
// is compiled with -ffp-contract=off.
#pragma once

#include "hd.h"

#ifndef __CUDA_ARCH__
#include <cmath>
#include <cstdint>
#include <cstring>
#endif

namespace gpugeo::exact {

GPUGEO_HD double add(double a, double b)
{
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

GPUGEO_HD double sub(double a, double b)
{
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

GPUGEO_HD double mul(double a, double b)
{
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

GPUGEO_HD double div(double a, double b)
{
#ifdef __CUDA_ARCH__
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}

GPUGEO_HD double sqrt(double a)
{
#ifdef __CUDA_ARCH__
  return __dsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

GPUGEO_HD float add(float a, float b)
{
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

GPUGEO_HD float sub(float a, float b)
{
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

GPUGEO_HD float mul(float a, float b)
{
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// Round to nearest float, the same on both sides.
GPUGEO_HD float toFloat(double a)
{
#ifdef __CUDA_ARCH__
  return __double2float_rn(a);
#else
  return static_cast<float>(a);
#endif
}

// c ? a : b without a branch on the CPU (compilers turn a plain ?: on doubles back into a branch,
// which random data mispredicts); the GPU predicates the plain form.
GPUGEO_HD double select(bool c, double a, double b)
{
#ifdef __CUDA_ARCH__
  return c ? a : b;
#else
  uint64_t ua, ub;
  std::memcpy(&ua, &a, sizeof a);
  std::memcpy(&ub, &b, sizeof b);
  const uint64_t mask = uint64_t(0) - uint64_t(c);
  const uint64_t r = (ua & mask) | (ub & ~mask);
  double out;
  std::memcpy(&out, &r, sizeof out);
  return out;
#endif
}

}  // namespace gpugeo::exact
