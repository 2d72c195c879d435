// cuda_reduce.h - the reduction kernels of the cuda backend (cuda_reduce.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/status.h"
#include "gpucoll.h"

namespace gpucoll::cuda {

// Sources one kernel launch reads; more are folded in by further launches.
inline constexpr int kReduceMaxSources = 8;
// Threads per block of the reduction kernels.
inline constexpr int kReduceBlock = 256;

// Enqueues dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrc-1][i] for
// i < count on stream, folding left to right. dst may alias srcs[0].
// Pointers are device memory or host memory the device can reach (pinned).
// The kernel runs on the calling thread's current device, which must be the
// stream's device; max_blocks bounds the grid (resident blocks of that device).
// GPUCOLL_ERR_UNSUPPORTED for long double and long double complex (the device
// has no such type: stage to the host); GPUCOLL_ERR_INVALID_ARG for an op MPI
// does not define on dtype.
Status launch_reduce(void* dst, const void* const* srcs, int nsrc, size_t count,
                     gpucoll_dtype_t dtype, gpucoll_op_t op, int max_blocks, cudaStream_t stream);

}  // namespace gpucoll::cuda
