// cuda_one_kernel.h - the one-kernel allreduce of small messages
// (cuda_one_kernel.cu; what it does: OneKernelAllreduce in device/device.h).
#pragma once

#include <cuda_runtime_api.h>

#include "common/status.h"
#include "device/device.h"

namespace gpucoll::cuda {

// Enqueues the call on stream (the caller's current device is the stream's).
// GPUCOLL_ERR_UNSUPPORTED for long double types and elements over 16 bytes.
Status launch_allreduce_one_kernel(const OneKernelAllreduce& call, cudaStream_t stream);

}  // namespace gpucoll::cuda
