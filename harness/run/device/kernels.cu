// Kernels of the harness's `cuda` backend (harness/run/device/cuda.py).
//
// Compiled once per device with PyCUDA's SourceModule for the device's own
// architecture (sm_XY, `no_extern_c=True`: the names below are already
// unmangled) and loaded before any timed step. Standalone: no includes, so
// `nvcc -cubin -arch=sm_90 kernels.cu` builds it too (tests/test_cuda_kernels.py).
//
//   spin        one block busy-waits `ns` nanoseconds on %globaltimer, so
//               concurrent stages on one GPU overlap like separate devices
//               (they do not compete for SMs). Optionally writes its first and
//               last timer reading to stamps[0..1].
//   gemm        C = A x B for square n x n float32 matrices, 16 x 16 shared
//               memory tiles, repeated `reps` times (a real, plain GEMM whose
//               size comes from the cost model's FLOPs).
//   copy        device-to-device copy of `nbytes` bytes (16-byte vectors plus
//               a byte tail); src and dst may live on different GPUs when peer
//               access is enabled.
//   timer_step  smallest non-zero step of %globaltimer seen over `samples`
//               consecutive reads (the device timer's resolution, in ns).

#define HARNESS_TILE 16

__device__ __forceinline__ unsigned long long harness_globaltimer()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void spin(unsigned long long ns, unsigned long long *stamps)
{
    const unsigned long long t0 = harness_globaltimer();
    unsigned long long t = t0;
    while (t - t0 < ns) {
        t = harness_globaltimer();
    }
    if (stamps != 0 && threadIdx.x == 0) {
        stamps[0] = t0;
        stamps[1] = t;
    }
}

extern "C" __global__ void gemm(const float *a, const float *b, float *c, int n, int reps)
{
    __shared__ float ta[HARNESS_TILE][HARNESS_TILE];
    __shared__ float tb[HARNESS_TILE][HARNESS_TILE];
    const int row = blockIdx.y * HARNESS_TILE + threadIdx.y;
    const int col = blockIdx.x * HARNESS_TILE + threadIdx.x;
    for (int r = 0; r < reps; ++r) {
        float acc = 0.0f;
        for (int k0 = 0; k0 < n; k0 += HARNESS_TILE) {
            const int ka = k0 + threadIdx.x;
            const int kb = k0 + threadIdx.y;
            ta[threadIdx.y][threadIdx.x] = (row < n && ka < n) ? a[(size_t)row * n + ka] : 0.0f;
            tb[threadIdx.y][threadIdx.x] = (kb < n && col < n) ? b[(size_t)kb * n + col] : 0.0f;
            __syncthreads();
#pragma unroll
            for (int k = 0; k < HARNESS_TILE; ++k) {
                acc += ta[threadIdx.y][k] * tb[k][threadIdx.x];
            }
            __syncthreads();
        }
        if (row < n && col < n) {
            c[(size_t)row * n + col] = acc;
        }
    }
}

extern "C" __global__ void copy(const unsigned char *src, unsigned char *dst, unsigned long long nbytes)
{
    const unsigned long long nvec = nbytes / 16;
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long first = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const uint4 *s4 = reinterpret_cast<const uint4 *>(src);
    uint4 *d4 = reinterpret_cast<uint4 *>(dst);
    for (unsigned long long i = first; i < nvec; i += stride) {
        d4[i] = s4[i];
    }
    for (unsigned long long i = nvec * 16 + first; i < nbytes; i += stride) {
        dst[i] = src[i];
    }
}

extern "C" __global__ void timer_step(unsigned long long *out, int samples)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) {
        return;
    }
    unsigned long long best = ~0ull;
    unsigned long long last = harness_globaltimer();
    int seen = 0;
    while (seen < samples) {
        const unsigned long long t = harness_globaltimer();
        if (t != last) {
            const unsigned long long d = t - last;
            if (d < best) {
                best = d;
            }
            last = t;
            ++seen;
        }
    }
    out[0] = best;
}
