#include "vector_add.cuh"

__global__ void vector_add_f32_kernel(const float* __restrict__ x, const float* __restrict__ y,
                                      float* __restrict__ z, std::int64_t n) {
    const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
    for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        z[i] = x[i] + y[i];
    }
}

cudaError_t vector_add_f32_launch(const float* x, const float* y, float* z, std::int64_t n, cudaStream_t stream) {
    if (n == 0) {
        return cudaSuccess;
    }
    constexpr int kThreads = 256;
    const std::int64_t wanted = (n + kThreads - 1) / kThreads;
    const int blocks = static_cast<int>(wanted < 65535 ? wanted : 65535);
    vector_add_f32_kernel<<<blocks, kThreads, 0, stream>>>(x, y, z, n);
    return cudaGetLastError();
}
