__global__ void scale_kernel(float* out, const float* in, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * factor;
}
__global__ void tile_sum_kernel(float* out, const float* in, int n) {
  __shared__ float tile[256];
  float local[64];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = 0; k < 64; ++k) local[k] = (i + k < n) ? in[i + k] : 0.f;
  tile[threadIdx.x] = local[(i * 7) & 63];
  __syncthreads();
  if (i < n) out[i] = tile[(threadIdx.x + 1) & 255] + local[i & 63];
}
extern "C" void launch(float* o, const float* i, int n) { scale_kernel<<<(n+255)/256, 256>>>(o, i, 2.f, n); tile_sum_kernel<<<(n+255)/256,256>>>(o,i,n); }
