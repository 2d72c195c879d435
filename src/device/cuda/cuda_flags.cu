// cuda_flags.cu - stream-ordered flags in device memory: the device-side
// synchronisation of the intra-node algorithms (one rank per GPU).
//
// A flag is an 8-byte word in device memory, the writer's own or a peer's
// mapped through CUDA IPC. Kernels on one stream run in order, so a write
// kernel runs after the copies and reductions enqueued before it; the system
// fences make their results visible to peers before the flag is.
#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_flags.h"

namespace gpucoll::cuda {

namespace {

__global__ void write_flag_kernel(unsigned long long* flag, unsigned long long value) {
    __threadfence_system();
    *reinterpret_cast<volatile unsigned long long*>(flag) = value;
    __threadfence_system();
}

__global__ void wait_flag_kernel(const unsigned long long* flag, unsigned long long value) {
    const volatile unsigned long long* word =
        reinterpret_cast<const volatile unsigned long long*>(flag);
    while (*word < value) {
#if __CUDA_ARCH__ >= 700
        __nanosleep(200);
#endif
    }
    __threadfence_system();  // later work sees what the peer wrote before its flag
}

}  // namespace

Status launch_write_flag(uint64_t* flag, uint64_t value, cudaStream_t stream) {
    write_flag_kernel<<<1, 1, 0, stream>>>(reinterpret_cast<unsigned long long*>(flag), value);
    return check(cudaGetLastError(), "launching the flag write kernel");
}

Status launch_wait_flag(const uint64_t* flag, uint64_t value, cudaStream_t stream) {
    wait_flag_kernel<<<1, 1, 0, stream>>>(reinterpret_cast<const unsigned long long*>(flag), value);
    return check(cudaGetLastError(), "launching the flag wait kernel");
}

}  // namespace gpucoll::cuda
