#include "vector_add_hip.h"

__global__ void vector_add_f32_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                      float* __restrict__ z, std::int64_t n) {
    const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        z[i] = x[i] + y[i];
    }
}

hipError_t vector_add_f32_launch(const float* x, const float* y, float* z, std::int64_t n, hipStream_t stream) {
    if (n == 0) {
        return hipSuccess;
    }
    constexpr int kThreads = 256;  // four 64-wide wavefronts
    const std::int64_t wanted = (n + kThreads - 1) / kThreads;
    const int blocks = static_cast<int>(wanted < 65535 ? wanted : 65535);
    hipLaunchKernelGGL(vector_add_f32_kernel, dim3(blocks), dim3(kThreads), 0, stream, x, y, z, n);
    return hipGetLastError();
}
