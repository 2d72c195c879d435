// cuda_flags.h - stream-ordered flag kernels (cuda_flags.cu).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/status.h"

namespace gpucoll::cuda {

Status launch_write_flag(uint64_t* flag, uint64_t value, cudaStream_t stream);
Status launch_wait_flag(const uint64_t* flag, uint64_t value, cudaStream_t stream);

}  // namespace gpucoll::cuda
