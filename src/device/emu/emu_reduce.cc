#include "device/emu/emu_reduce.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "device/reduce_ops.h"

namespace gpucoll {

namespace {

// Work is done in blocks that stay in L1: the accumulator block is local (so
// the compiler knows nothing aliases it), and full blocks have a compile-time
// trip count, which -O2's cheap vectoriser accepts.
constexpr size_t kBlockBytes = 8192;

// C _Bool is combined as bytes: any non-zero byte is true and results are 0/1,
// with no undefined behaviour on bytes other than 0 and 1.
template <typename T>
using Storage = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <gpucoll_op_t Op, typename A, typename S, size_t N>
void combine_full_block(A* __restrict acc, const S* __restrict src) {
    for (size_t i = 0; i < N; ++i)
        acc[i] = reduce::Op_<Op>::apply(acc[i], reduce::Accum<S>::load(src[i]));
}

template <gpucoll_op_t Op, typename A, typename S>
void combine_partial_block(A* __restrict acc, const S* __restrict src, size_t n) {
    for (size_t i = 0; i < n; ++i)
        acc[i] = reduce::Op_<Op>::apply(acc[i], reduce::Accum<S>::load(src[i]));
}

template <typename S>
bool is_aligned(const std::byte* p) {
    return reinterpret_cast<uintptr_t>(p) % alignof(S) == 0;
}

// Sources are combined in the accumulator type A (S itself, float for
// binary16): a block of srcs[0] is loaded into it, every further source
// combined in, and the block rounded to S once, when it is stored.
template <gpucoll_op_t Op, typename S>
void reduce_blocks(std::byte* dst, const void* const* srcs, int nsrc, size_t count) {
    using Acc = reduce::Accum<S>;
    using A = typename Acc::type;
    constexpr size_t kElems = kBlockBytes / sizeof(S);
    alignas(64) A acc[kElems];
    alignas(64) S staged[kElems];  // a misaligned source block, copied to alignment
    for (size_t first = 0; first < count; first += kElems) {
        const size_t n = std::min(kElems, count - first);
        const size_t offset = first * sizeof(S);
        if constexpr (std::is_same_v<A, S>) {
            std::memcpy(acc, static_cast<const std::byte*>(srcs[0]) + offset, n * sizeof(S));
        } else {
            std::memcpy(staged, static_cast<const std::byte*>(srcs[0]) + offset, n * sizeof(S));
            for (size_t i = 0; i < n; ++i) acc[i] = Acc::load(staged[i]);
        }
        for (int k = 1; k < nsrc; ++k) {
            const std::byte* p = static_cast<const std::byte*>(srcs[k]) + offset;
            const S* src = staged;
            if (is_aligned<S>(p)) {
                src = reinterpret_cast<const S*>(p);
            } else {
                std::memcpy(staged, p, n * sizeof(S));
            }
            if (n == kElems) {
                combine_full_block<Op, A, S, kElems>(acc, src);
            } else {
                combine_partial_block<Op>(acc, src, n);
            }
        }
        if constexpr (std::is_same_v<A, S>) {
            std::memcpy(dst + offset, acc, n * sizeof(S));
        } else {
            for (size_t i = 0; i < n; ++i) staged[i] = Acc::store(acc[i]);
            std::memcpy(dst + offset, staged, n * sizeof(S));
        }
    }
}

}  // namespace

Status emu_reduce(void* dst, const void* const* srcs, int nsrc, size_t count, gpucoll_dtype_t dtype,
                  gpucoll_op_t op) {
    auto* out = static_cast<std::byte*>(dst);
    const bool valid = reduce::dispatch(dtype, op, [&]<gpucoll_dtype_t D, gpucoll_op_t Op>() {
        reduce_blocks<Op, Storage<typename reduce::TypeOf<D>::type>>(out, srcs, nsrc, count);
    });
    if (!valid) {
        return set_error(GPUCOLL_ERR_UNSUPPORTED,
                         "emu reduce: MPI does not define %s on %s; use a valid (type, op) "
                         "pair",
                         gpucoll_op_name(op), gpucoll_dtype_name(dtype));
    }
    return kSuccess;
}

}  // namespace gpucoll
