// cuda_one_kernel.cu - a small allreduce in one launch per rank: copy the
// input into this rank's slot, publish the call's word in its flag with a
// system-scope release, wait in the kernel until every peer's flag holds the
// word (acquire), reduce all slots in rank order into the output. One block:
// the messages it serves are a few KiB per rank, and one block is what a
// spinning wait may occupy on a GPU that other processes share (MPS).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_one_kernel.h"
#include "device/reduce_ops.h"

namespace gpucoll::cuda {
namespace {

constexpr int kThreads = 512;
static_assert(OneKernelAllreduce::kMaxRanks <= kThreads);

template <typename T>
using Storage = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

__device__ __forceinline__ uint64_t load_acquire(const uint64_t* p) {
    uint64_t v;
#if __CUDA_ARCH__ >= 700
    asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
#else
    v = *reinterpret_cast<const volatile uint64_t*>(p);
    __threadfence_system();
#endif
    return v;
}

__device__ __forceinline__ void store_release(uint64_t* p, uint64_t v) {
#if __CUDA_ARCH__ >= 700
    asm volatile("st.release.sys.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
#else
    __threadfence_system();
    *reinterpret_cast<volatile uint64_t*>(p) = v;
#endif
}

// A peer's slot element, from L2 (not a line of it this SM may hold from
// before the peer wrote it). Slots are 256-byte aligned: natural alignment.
template <typename T>
__device__ __forceinline__ T load_slot(const void* base, size_t i) {
    const T* p = static_cast<const T*>(base) + i;
    T v;
    if constexpr (sizeof(T) == 1) {
        const unsigned char x = __ldcg(reinterpret_cast<const unsigned char*>(p));
        memcpy(&v, &x, sizeof v);
    } else if constexpr (sizeof(T) == 2) {
        const unsigned short x = __ldcg(reinterpret_cast<const unsigned short*>(p));
        memcpy(&v, &x, sizeof v);
    } else if constexpr (sizeof(T) == 4) {
        const unsigned int x = __ldcg(reinterpret_cast<const unsigned int*>(p));
        memcpy(&v, &x, sizeof v);
    } else if constexpr (sizeof(T) == 8) {
        const unsigned long long x = __ldcg(reinterpret_cast<const unsigned long long*>(p));
        memcpy(&v, &x, sizeof v);
    } else {
        static_assert(sizeof(T) == 16);
        const uint4 x = __ldcg(reinterpret_cast<const uint4*>(p));
        memcpy(&v, &x, sizeof v);
    }
    return v;
}

template <typename T, gpucoll_op_t O>
__global__ void __launch_bounds__(kThreads) allreduce_one_kernel(const OneKernelAllreduce c) {
    const unsigned t = threadIdx.x;
    // 1. The input into this rank's slot (the input may lie at any address).
    const size_t bytes = c.count * sizeof(T);
    char* mine = c.slots[c.rank];
    const char* in = static_cast<const char*>(c.input);
    size_t done = 0;
    if (reinterpret_cast<uintptr_t>(in) % 16 == 0) {
        done = bytes / 16 * 16;
        for (size_t i = t; i < bytes / 16; i += blockDim.x)
            reinterpret_cast<uint4*>(mine)[i] = reinterpret_cast<const uint4*>(in)[i];
    }
    for (size_t i = done + t; i < bytes; i += blockDim.x) mine[i] = in[i];
    __syncthreads();
    // 2. Published after the slot's bytes (the block's writes, then a
    // system-scope fence and release by one thread).
    if (t == 0) {
        __threadfence_system();
        store_release(c.flags[c.rank], c.word);
    }
    // 3. Every peer's slot of this call is written.
    if (t < static_cast<unsigned>(c.size) && t != static_cast<unsigned>(c.rank)) {
        while (load_acquire(c.flags[t]) < c.word) __nanosleep(32);
    }
    __syncthreads();
    // 4. All slots in rank order: the same result, bit for bit, everywhere.
    const bool aligned = reinterpret_cast<uintptr_t>(c.output) % alignof(T) == 0;
    for (size_t i = t; i < c.count; i += blockDim.x) {
        using Acc = reduce::Accum<T>;  // binary16: combined in float, rounded once
        auto sum = Acc::load(load_slot<T>(c.slots[0], i));
        for (int p = 1; p < c.size; ++p)
            sum = reduce::Op_<O>::apply(sum, Acc::load(load_slot<T>(c.slots[p], i)));
        const T acc = Acc::store(sum);
        if (aligned) {
            static_cast<T*>(c.output)[i] = acc;
        } else {
            char b[sizeof(T)];
            memcpy(b, &acc, sizeof b);
            char* to = static_cast<char*>(c.output) + i * sizeof(T);
            for (size_t k = 0; k < sizeof(T); ++k) to[k] = b[k];
        }
    }
}

}  // namespace

Status launch_allreduce_one_kernel(const OneKernelAllreduce& call, cudaStream_t stream) {
    if (call.size < 1 || call.size > OneKernelAllreduce::kMaxRanks || call.rank < 0 ||
        call.rank >= call.size)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "one-kernel allreduce: rank %d of %d ranks",
                         call.rank, call.size);
    Status status = kSuccess;
    bool launched = false;
    reduce::dispatch(call.dtype, call.op, [&]<gpucoll_dtype_t D, gpucoll_op_t O>() {
        using T = Storage<typename reduce::TypeOf<D>::type>;
        if constexpr (!std::is_same_v<T, long double> &&
                      !std::is_same_v<T, reduce::Complex<long double>> && sizeof(T) <= 16 &&
                      (sizeof(T) & (sizeof(T) - 1)) == 0) {
            launched = true;
            void* params[] = {const_cast<OneKernelAllreduce*>(&call)};
            status =
                check(cudaLaunchKernel(allreduce_one_kernel<T, O>, dim3(1), dim3(kThreads), params,
                                       0, stream),
                      "launching the one-kernel allreduce (%s on %zu elements of %s, %d ranks)",
                      gpucoll_op_name(O), call.count, gpucoll_dtype_name(D), call.size);
        }
    });
    if (!launched)
        return set_error(GPUCOLL_ERR_UNSUPPORTED, "one-kernel allreduce: no kernel for %s on %s",
                         gpucoll_op_name(call.op), gpucoll_dtype_name(call.dtype));
    return status;
}

}  // namespace gpucoll::cuda
