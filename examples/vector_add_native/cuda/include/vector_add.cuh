#pragma once
#include <cstdint>
#include <cuda_runtime.h>

// Launches z = x + y on `stream`; returns the launch status.
cudaError_t vector_add_f32_launch(const float* x, const float* y, float* z, std::int64_t n, cudaStream_t stream);
