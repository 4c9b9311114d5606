// Functions that host code and CUDA kernels share, so that both compute the same numbers from one
// definition: plain C++ compilers see ordinary inline functions, nvcc sees __host__ __device__ ones.
#pragma once

#if defined(__CUDACC__)
#define DUET_HOST_DEVICE __host__ __device__
#else
#define DUET_HOST_DEVICE
#endif
