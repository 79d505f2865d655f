#pragma once
#include <cstdint>
#include <hip/hip_runtime.h>

// Launches z = x + y on `stream`; returns the launch status.
hipError_t vector_add_f32_launch(const float* x, const float* y, float* z, std::int64_t n, hipStream_t stream);
