#pragma once
#include <cstdint>

// z[i] = x[i] + y[i] for i < n (host code, no torch headers: this file compiles in well under a second).
void vector_add_f32(const float* x, const float* y, float* z, std::int64_t n);
