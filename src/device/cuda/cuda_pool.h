// cuda_pool.h - device memory from CUDA's stream-ordered pool (cudaMallocAsync).
//
// Legacy CUDA IPC cannot export pool memory, and applications (PyTorch, JAX,
// Kokkos) hand it to MPI all the same; these let tests and tools create such
// buffers to exercise the fallback paths, without including a CUDA header.
// Compiled into every build: without CUDA they fail with GPUCOLL_ERR_NO_BACKEND.
#pragma once

#include <cstddef>

#include "common/status.h"

namespace gpucoll::cuda {

// Allocates bytes (0: a minimal allocation) from the current device's default
// memory pool and waits until the memory is usable from any stream.
Status alloc_pool_memory(void** ptr, size_t bytes);
// Returns memory from alloc_pool_memory to its pool, waiting for the free.
Status free_pool_memory(void* ptr);

}  // namespace gpucoll::cuda
