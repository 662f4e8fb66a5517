// FRUGAL_HOST_DEVICE marks a function that the CUDA kernels (gpu/*.cu) call as well as host code:
// __host__ __device__ under nvcc, nothing for the host compiler. Such functions are written once,
// so the device computes exactly what the host does and the host tests check the device's code.
#pragma once

#if defined(__CUDACC__)
#define FRUGAL_HOST_DEVICE __host__ __device__
#else
#define FRUGAL_HOST_DEVICE
#endif
