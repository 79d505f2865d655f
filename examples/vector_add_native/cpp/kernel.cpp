#include "vector_add.h"

void vector_add_f32(const float* x, const float* y, float* z, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) {
        z[i] = x[i] + y[i];
    }
}
