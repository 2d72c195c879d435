// cuda_reduce.cu - multi-source element-wise reductions on the GPU.
//
// One kernel per (element type, op, access mode), instantiated through
// reduce_ops.h's dispatch for every pair MPI defines. Access modes:
//  - Vector: all pointers sit at the same offset from a 16-byte boundary (the
//    usual case: cudaMalloc'd buffers at equal element offsets). The few
//    elements up to that boundary (head) and after the last full pack (tail)
//    are done one by one; everything between with 16-byte loads and stores.
//  - Scalar: pointers naturally aligned for the element type but at different
//    offsets modulo 16: one element per load.
//  - Bytes: some pointer is not aligned for its element type (MPI allows any
//    address): each element is assembled from single-byte loads.
// Every kernel is grid-stride and reads up to kReduceMaxSources sources; more
// sources are folded into dst by further launches on the same stream.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_reduce.h"
#include "device/reduce_ops.h"

namespace gpucoll::cuda {
namespace {

enum class Access { Vector, Scalar, Bytes };

// Kernel parameters, passed by value (about 100 bytes).
struct ReduceArgs {
    void* dst;
    const void* src[kReduceMaxSources];
    int nsrc;       // 1..kReduceMaxSources
    size_t count;   // elements
    size_t head;    // Vector: elements before the first 16-byte boundary
    size_t npacks;  // Vector: whole 16-byte packs after the head
};

constexpr size_t kPackBytes = 16;

// C _Bool is combined as a byte, as the emu backend does: any non-zero byte is
// true, results are 0 or 1, and bytes other than 0 and 1 are no undefined
// behaviour.
template <typename T>
using Storage = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <typename T>
struct alignas(kPackBytes) Pack {
    static constexpr int kN = int(kPackBytes / sizeof(T));
    T v[kN];
};

template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const void* base, size_t i) {
    const uint4 raw = static_cast<const uint4*>(base)[i];
    Pack<T> p;
    memcpy(&p, &raw, sizeof p);
    return p;
}

template <typename T>
__device__ __forceinline__ void store_pack(void* base, size_t i, const Pack<T>& p) {
    uint4 raw;
    memcpy(&raw, &p, sizeof raw);
    static_cast<uint4*>(base)[i] = raw;
}

template <typename T, Access A>
__device__ __forceinline__ T load_element(const void* base, size_t i) {
    if constexpr (A == Access::Bytes) {
        const unsigned char* from = static_cast<const unsigned char*>(base) + i * sizeof(T);
        unsigned char bytes[sizeof(T)];
#pragma unroll
        for (size_t k = 0; k < sizeof(T); ++k) bytes[k] = from[k];
        T v;
        memcpy(&v, bytes, sizeof v);
        return v;
    } else {
        return static_cast<const T*>(base)[i];
    }
}

template <typename T, Access A>
__device__ __forceinline__ void store_element(void* base, size_t i, const T& v) {
    if constexpr (A == Access::Bytes) {
        unsigned char* to = static_cast<unsigned char*>(base) + i * sizeof(T);
        unsigned char bytes[sizeof(T)];
        memcpy(bytes, &v, sizeof v);
#pragma unroll
        for (size_t k = 0; k < sizeof(T); ++k) to[k] = bytes[k];
    } else {
        static_cast<T*>(base)[i] = v;
    }
}

// dst[i] = src[0][i] op ... op src[nsrc-1][i] for one element i. The source
// loop is unrolled to the compile-time bound, so every src[] index is a
// constant (kernel parameters stay in registers, never in local memory) and
// the predicated loads of all sources can be in flight together.
// Sources combine in reduce::Accum<T>'s type (T, or float for binary16) and
// the result is rounded to T once, when it is stored.
template <typename T, gpucoll_op_t O, Access A>
__device__ __forceinline__ void reduce_element(const ReduceArgs& a, size_t i) {
    using Acc = reduce::Accum<T>;
    auto acc = Acc::load(load_element<T, A>(a.src[0], i));
#pragma unroll
    for (int s = 1; s < kReduceMaxSources; ++s) {
        if (s < a.nsrc)
            acc = reduce::Op_<O>::apply(acc, Acc::load(load_element<T, A>(a.src[s], i)));
    }
    store_element<T, A>(a.dst, i, Acc::store(acc));
}

template <typename T, gpucoll_op_t O, Access A>
__global__ void __launch_bounds__(kReduceBlock) reduce_kernel(const ReduceArgs a) {
    const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    if constexpr (A == Access::Vector) {
        const size_t skip = a.head * sizeof(T);  // bytes up to the 16-byte boundary
        using Acc = reduce::Accum<T>;
        for (size_t p = first; p < a.npacks; p += stride) {
            const Pack<T> x0 = load_pack<T>(static_cast<const char*>(a.src[0]) + skip, p);
            typename Acc::type acc[Pack<T>::kN];
#pragma unroll
            for (int k = 0; k < Pack<T>::kN; ++k) acc[k] = Acc::load(x0.v[k]);
#pragma unroll
            for (int s = 1; s < kReduceMaxSources; ++s) {
                if (s < a.nsrc) {
                    const Pack<T> x = load_pack<T>(static_cast<const char*>(a.src[s]) + skip, p);
#pragma unroll
                    for (int k = 0; k < Pack<T>::kN; ++k) {
                        acc[k] = reduce::Op_<O>::apply(acc[k], Acc::load(x.v[k]));
                    }
                }
            }
            Pack<T> out;
#pragma unroll
            for (int k = 0; k < Pack<T>::kN; ++k) out.v[k] = Acc::store(acc[k]);
            store_pack<T>(static_cast<char*>(a.dst) + skip, p, out);
        }
        // Head [0, head) and tail [tail, count): fewer than 2 packs' worth of
        // elements, numbered e = 0..edges-1 across the grid.
        const size_t tail = a.head + a.npacks * size_t(Pack<T>::kN);
        const size_t edges = a.head + (a.count - tail);
        for (size_t e = first; e < edges; e += stride) {
            reduce_element<T, O, Access::Scalar>(a, e < a.head ? e : tail + (e - a.head));
        }
    } else {
        for (size_t i = first; i < a.count; i += stride) reduce_element<T, O, A>(a, i);
    }
}

// ---- host side -------------------------------------------------------------------

struct Layout {
    Access access;
    size_t head;    // Vector only
    size_t npacks;  // Vector only
};

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

template <typename T>
Layout choose_layout(const void* dst, const void* const* srcs, int nsrc, size_t count) {
    const uintptr_t offset = address(dst) % kPackBytes;
    bool aligned = address(dst) % alignof(T) == 0;
    bool same_offset = true;
    for (int s = 0; s < nsrc; ++s) {
        aligned = aligned && address(srcs[s]) % alignof(T) == 0;
        same_offset = same_offset && address(srcs[s]) % kPackBytes == offset;
    }
    if (!aligned) return {Access::Bytes, 0, 0};
    // An element boundary meets a 16-byte boundary only if the offset is a
    // multiple of the element size (a power of two up to 16).
    if (!same_offset || offset % sizeof(T) != 0) return {Access::Scalar, 0, 0};
    const size_t head = std::min(count, (kPackBytes - offset) % kPackBytes / sizeof(T));
    return {Access::Vector, head, (count - head) / size_t(Pack<T>::kN)};
}

template <typename T, gpucoll_op_t O, Access A>
Status launch(const ReduceArgs& a, unsigned blocks, cudaStream_t stream) {
    void* params[] = {const_cast<ReduceArgs*>(&a)};
    return check(cudaLaunchKernel(reduce_kernel<T, O, A>, dim3(blocks), dim3(kReduceBlock), params,
                                  0, stream),
                 "launching the reduction kernel (%s on %zu elements of %zu bytes, %d sources)",
                 gpucoll_op_name(O), a.count, sizeof(T), a.nsrc);
}

template <typename T, gpucoll_op_t O>
Status run(void* dst, const void* const* srcs, int nsrc, size_t count, int max_blocks,
           cudaStream_t stream) {
    const Layout layout = choose_layout<T>(dst, srcs, nsrc, count);
    size_t work = count;  // elements (Scalar, Bytes) or packs and edges (Vector) per launch
    if (layout.access == Access::Vector) {
        const size_t edges = count - layout.npacks * size_t(Pack<T>::kN);
        work = std::max(layout.npacks, edges);
    }
    const size_t wanted = (work + kReduceBlock - 1) / kReduceBlock;
    const auto blocks =
        static_cast<unsigned>(std::clamp<size_t>(wanted, 1, size_t(std::max(max_blocks, 1))));

    ReduceArgs a{};
    a.dst = dst;
    a.count = count;
    a.head = layout.head;
    a.npacks = layout.npacks;
    // First launch: up to kReduceMaxSources sources. Later launches fold the
    // next kReduceMaxSources-1 sources into dst, which is their source 0; the
    // order of combination stays left to right (binary16 is rounded once per
    // launch: once for up to kReduceMaxSources sources).
    int next = 0;
    for (int launch_no = 0; next < nsrc; ++launch_no) {
        int n = 0;
        if (launch_no > 0) a.src[n++] = dst;
        while (n < kReduceMaxSources && next < nsrc) a.src[n++] = srcs[next++];
        a.nsrc = n;
        Status s = kSuccess;
        switch (layout.access) {
            case Access::Vector:
                s = launch<T, O, Access::Vector>(a, blocks, stream);
                break;
            case Access::Scalar:
                s = launch<T, O, Access::Scalar>(a, blocks, stream);
                break;
            case Access::Bytes:
                s = launch<T, O, Access::Bytes>(a, blocks, stream);
                break;
        }
        GPUCOLL_TRY(s);
    }
    return kSuccess;
}

}  // namespace

Status launch_reduce(void* dst, const void* const* srcs, int nsrc, size_t count,
                     gpucoll_dtype_t dtype, gpucoll_op_t op, int max_blocks, cudaStream_t stream) {
    if (dtype < 0 || dtype >= GPUCOLL_DTYPE_COUNT || op < 0 || op >= GPUCOLL_OP_COUNT) {
        return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda reduce: unknown dtype %d or op %d",
                         static_cast<int>(dtype), static_cast<int>(op));
    }
    if (!reduce::op_valid(dtype, op)) {
        return set_error(GPUCOLL_ERR_UNSUPPORTED, "cuda reduce: MPI does not define %s on %s",
                         gpucoll_op_name(op), gpucoll_dtype_name(dtype));
    }
    if (dtype == GPUCOLL_LONG_DOUBLE || dtype == GPUCOLL_C_LONG_DOUBLE_COMPLEX) {
        return set_error(GPUCOLL_ERR_UNSUPPORTED,
                         "cuda reduce: GPUs have no %s arithmetic; reduce these elements on the "
                         "host (stage the buffers through host memory)",
                         gpucoll_dtype_name(dtype));
    }
    if (nsrc < 1 || srcs == nullptr) {
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "cuda reduce: needs at least one source (nsrc=%d)", nsrc);
    }
    if (count == 0) return kSuccess;
    if (dst == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda reduce: dst is NULL");
    for (int k = 0; k < nsrc; ++k) {
        if (srcs[k] == nullptr) {
            return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda reduce: srcs[%d] is NULL", k);
        }
    }
    if (count > SIZE_MAX / gpucoll_dtype_size(dtype)) {
        return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda reduce: %zu elements overflow size_t",
                         count);
    }
    Status status = kSuccess;
    reduce::dispatch(dtype, op, [&]<gpucoll_dtype_t D, gpucoll_op_t O>() {
        using T = typename reduce::TypeOf<D>::type;
        if constexpr (!std::is_same_v<T, long double> &&
                      !std::is_same_v<T, reduce::Complex<long double>>) {
            status = run<Storage<T>, O>(dst, srcs, nsrc, count, max_blocks, stream);
        }
    });
    return status;
}

}  // namespace gpucoll::cuda
