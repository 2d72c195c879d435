// reduce_ops.h - element types and reduction operators, shared by the emu
// backend (host loops) and the cuda backend (kernels): one definition of what
// every (dtype, op) pair computes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gpucoll.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#define GPUCOLL_HD __host__ __device__ __forceinline__
#else
#define GPUCOLL_HD inline
#endif

namespace gpucoll::reduce {

// Layout-compatible with C's `float _Complex` etc.
template <typename T>
struct Complex {
    T re, im;
};
template <typename T>
GPUCOLL_HD Complex<T> operator+(Complex<T> a, Complex<T> b) {
    return {a.re + b.re, a.im + b.im};
}
// Every product and sum rounded on its own, on the device as on the host:
// nvcc would otherwise contract a*b - c*d into a fused multiply-add, and the
// accelerated path would differ in the last bit from the staged and emu paths
// (and from Open MPI's own op). Host code is compiled without FMA contraction
// (-ffp-contract=off in AM_CXXFLAGS).
template <typename T>
GPUCOLL_HD T mul_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, float>) return __fmul_rn(a, b);
    if constexpr (std::is_same_v<T, double>) return __dmul_rn(a, b);
#endif
    return a * b;
}
template <typename T>
GPUCOLL_HD T add_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, float>) return __fadd_rn(a, b);
    if constexpr (std::is_same_v<T, double>) return __dadd_rn(a, b);
#endif
    return a + b;
}
template <typename T>
GPUCOLL_HD T sub_rn(T a, T b) {
#if defined(__CUDA_ARCH__)
    if constexpr (std::is_same_v<T, float>) return __fsub_rn(a, b);
    if constexpr (std::is_same_v<T, double>) return __dsub_rn(a, b);
#endif
    return a - b;
}
template <typename T>
GPUCOLL_HD Complex<T> operator*(Complex<T> a, Complex<T> b) {
    return {sub_rn(mul_rn(a.re, b.re), mul_rn(a.im, b.im)),
            add_rn(mul_rn(a.re, b.im), mul_rn(a.im, b.re))};
}
template <typename T>
GPUCOLL_HD bool operator==(Complex<T> a, Complex<T> b) {
    return a.re == b.re && a.im == b.im;
}

// IEEE binary16 as stored (MPIX_C_FLOAT16, MPIX_SHORT_FLOAT): its bits. It
// has no arithmetic of its own: reductions convert to float (exactly), combine
// there, and round to nearest even once, when the result is stored (Accum).
struct Half {
    uint16_t bits;
};
GPUCOLL_HD float half_to_float(Half h) {
#if defined(__CUDACC__)
    __half_raw raw;
    raw.x = h.bits;
    return __half2float(__half(raw));
#else
    _Float16 v;
    std::memcpy(&v, &h.bits, sizeof v);
    return static_cast<float>(v);
#endif
}
GPUCOLL_HD Half float_to_half(float f) {
#if defined(__CUDACC__)
    const __half_raw raw = __float2half_rn(f);
    return {raw.x};
#else
    const auto v = static_cast<_Float16>(f);  // round to nearest even
    Half h;
    std::memcpy(&h.bits, &v, sizeof h.bits);
    return h;
#endif
}

// The type a reduction combines elements of storage type S in, and the
// conversions in and out: S itself, except binary16, combined in float.
template <typename S>
struct Accum {
    using type = S;
    static GPUCOLL_HD S load(S v) { return v; }
    static GPUCOLL_HD S store(S v) { return v; }
};
template <>
struct Accum<Half> {
    using type = float;
    static GPUCOLL_HD float load(Half v) { return half_to_float(v); }
    static GPUCOLL_HD Half store(float v) { return float_to_half(v); }
};

// ---- element type of each gpucoll_dtype_t ----------------------------------
template <gpucoll_dtype_t D>
struct TypeOf;
#define GPUCOLL_TYPEOF(D, T) \
    template <>              \
    struct TypeOf<D> {       \
        using type = T;      \
    }
GPUCOLL_TYPEOF(GPUCOLL_INT8, int8_t);
GPUCOLL_TYPEOF(GPUCOLL_INT16, int16_t);
GPUCOLL_TYPEOF(GPUCOLL_INT32, int32_t);
GPUCOLL_TYPEOF(GPUCOLL_INT64, int64_t);
GPUCOLL_TYPEOF(GPUCOLL_UINT8, uint8_t);
GPUCOLL_TYPEOF(GPUCOLL_UINT16, uint16_t);
GPUCOLL_TYPEOF(GPUCOLL_UINT32, uint32_t);
GPUCOLL_TYPEOF(GPUCOLL_UINT64, uint64_t);
GPUCOLL_TYPEOF(GPUCOLL_FLOAT, float);
GPUCOLL_TYPEOF(GPUCOLL_DOUBLE, double);
GPUCOLL_TYPEOF(GPUCOLL_LONG_DOUBLE, long double);
GPUCOLL_TYPEOF(GPUCOLL_C_FLOAT_COMPLEX, Complex<float>);
GPUCOLL_TYPEOF(GPUCOLL_C_DOUBLE_COMPLEX, Complex<double>);
GPUCOLL_TYPEOF(GPUCOLL_C_LONG_DOUBLE_COMPLEX, Complex<long double>);
GPUCOLL_TYPEOF(GPUCOLL_BOOL, bool);
GPUCOLL_TYPEOF(GPUCOLL_BYTE, uint8_t);
GPUCOLL_TYPEOF(GPUCOLL_FLOAT16, Half);
#undef GPUCOLL_TYPEOF

// Every gpucoll_dtype_t, for switches that handle each one alike.
#define GPUCOLL_FOREACH_DTYPE(X)                                                           \
    X(GPUCOLL_INT8)                                                                        \
    X(GPUCOLL_INT16)                                                                       \
    X(GPUCOLL_INT32) X(GPUCOLL_INT64) X(GPUCOLL_UINT8) X(GPUCOLL_UINT16) X(GPUCOLL_UINT32) \
        X(GPUCOLL_UINT64) X(GPUCOLL_FLOAT) X(GPUCOLL_DOUBLE) X(GPUCOLL_LONG_DOUBLE)        \
            X(GPUCOLL_C_FLOAT_COMPLEX) X(GPUCOLL_C_DOUBLE_COMPLEX)                         \
                X(GPUCOLL_C_LONG_DOUBLE_COMPLEX) X(GPUCOLL_BOOL) X(GPUCOLL_BYTE)           \
                    X(GPUCOLL_FLOAT16)

// Size in bytes of one element of d (0 for an unknown d).
constexpr size_t dtype_size(gpucoll_dtype_t d) {
    switch (d) {
#define GPUCOLL_CASE(D) \
    case D:             \
        return sizeof(typename TypeOf<D>::type);
        GPUCOLL_FOREACH_DTYPE(GPUCOLL_CASE)
#undef GPUCOLL_CASE
        default:
            return 0;
    }
}

// ---- type classes, as MPI groups them --------------------------------------
enum class Kind { Integer, Floating, Complex, Logical, Byte };

constexpr Kind kind_of(gpucoll_dtype_t d) {
    switch (d) {
        case GPUCOLL_FLOAT:
        case GPUCOLL_DOUBLE:
        case GPUCOLL_LONG_DOUBLE:
        case GPUCOLL_FLOAT16:
            return Kind::Floating;
        case GPUCOLL_C_FLOAT_COMPLEX:
        case GPUCOLL_C_DOUBLE_COMPLEX:
        case GPUCOLL_C_LONG_DOUBLE_COMPLEX:
            return Kind::Complex;
        case GPUCOLL_BOOL:
            return Kind::Logical;
        case GPUCOLL_BYTE:
            return Kind::Byte;
        default:
            return Kind::Integer;
    }
}

// MPI 4.1, section 6.9.2: which ops apply to which type classes.
constexpr bool op_valid(gpucoll_dtype_t d, gpucoll_op_t op) {
    if (d < 0 || d >= GPUCOLL_DTYPE_COUNT || op < 0 || op >= GPUCOLL_OP_COUNT) return false;
    const Kind k = kind_of(d);
    switch (op) {
        case GPUCOLL_OP_SUM:
        case GPUCOLL_OP_PROD:
            return k == Kind::Integer || k == Kind::Floating || k == Kind::Complex;
        case GPUCOLL_OP_MIN:
        case GPUCOLL_OP_MAX:
            return k == Kind::Integer || k == Kind::Floating;
        case GPUCOLL_OP_LAND:
        case GPUCOLL_OP_LOR:
        case GPUCOLL_OP_LXOR:
            return k == Kind::Integer || k == Kind::Logical;
        case GPUCOLL_OP_BAND:
        case GPUCOLL_OP_BOR:
        case GPUCOLL_OP_BXOR:
            return k == Kind::Integer || k == Kind::Byte;
        default:
            return false;
    }
}

// ---- operators ---------------------------------------------------------------
// Integer SUM/PROD wrap (computed unsigned): no undefined behaviour on overflow.
template <typename T>
struct Arith {
    using type = T;
};
template <typename T>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) struct Arith<T> {
    using type = std::make_unsigned_t<T>;
};

template <gpucoll_op_t Op>
struct Op_;

template <>
struct Op_<GPUCOLL_OP_SUM> {
    template <typename T>
    static GPUCOLL_HD T apply(T a, T b) {
        using A = typename Arith<T>::type;
        return T(A(a) + A(b));
    }
};
template <>
struct Op_<GPUCOLL_OP_PROD> {
    template <typename T>
    static GPUCOLL_HD T apply(T a, T b) {
        using A = typename Arith<T>::type;
        return T(A(a) * A(b));
    }
};
template <>
struct Op_<GPUCOLL_OP_MIN> {
    template <typename T>
    static GPUCOLL_HD T apply(T a, T b) {
        return b < a ? b : a;
    }
};
template <>
struct Op_<GPUCOLL_OP_MAX> {
    template <typename T>
    static GPUCOLL_HD T apply(T a, T b) {
        return a < b ? b : a;
    }
};
template <>
struct Op_<GPUCOLL_OP_LAND> {
    template <typename T>
    static GPUCOLL_HD T apply(T a, T b) {
        return T((a != T(0)) && (b != T(0)));
    }
};
template <>
struct Op_<GPUCOLL_OP_LOR> {
    template <typename T>
    static GPUCOLL_HD T apply(T a, T b) {
        return T((a != T(0)) || (b != T(0)));
    }
};
template <>
struct Op_<GPUCOLL_OP_LXOR> {
    template <typename T>
    static GPUCOLL_HD T apply(T a, T b) {
        return T((a != T(0)) != (b != T(0)));
    }
};
template <>
struct Op_<GPUCOLL_OP_BAND> {
    template <typename T>
    static GPUCOLL_HD T apply(T a, T b) {
        return T(a & b);
    }
};
template <>
struct Op_<GPUCOLL_OP_BOR> {
    template <typename T>
    static GPUCOLL_HD T apply(T a, T b) {
        return T(a | b);
    }
};
template <>
struct Op_<GPUCOLL_OP_BXOR> {
    template <typename T>
    static GPUCOLL_HD T apply(T a, T b) {
        return T(a ^ b);
    }
};

// ---- dispatch ------------------------------------------------------------------
// Calls f.template operator()<D, Op>() for the runtime pair (d, op), where D
// is a gpucoll_dtype_t and Op a gpucoll_op_t as template arguments; only valid
// pairs are instantiated. Returns false (f not called) for invalid pairs.
template <gpucoll_dtype_t D, typename F>
bool dispatch_op(gpucoll_op_t op, F&& f) {
    switch (op) {
#define GPUCOLL_CASE(O)                    \
    case O:                                \
        if constexpr (op_valid(D, O)) {    \
            f.template operator()<D, O>(); \
            return true;                   \
        } else {                           \
            return false;                  \
        }
        GPUCOLL_CASE(GPUCOLL_OP_SUM)
        GPUCOLL_CASE(GPUCOLL_OP_PROD)
        GPUCOLL_CASE(GPUCOLL_OP_MIN)
        GPUCOLL_CASE(GPUCOLL_OP_MAX)
        GPUCOLL_CASE(GPUCOLL_OP_LAND)
        GPUCOLL_CASE(GPUCOLL_OP_LOR)
        GPUCOLL_CASE(GPUCOLL_OP_LXOR)
        GPUCOLL_CASE(GPUCOLL_OP_BAND)
        GPUCOLL_CASE(GPUCOLL_OP_BOR)
        GPUCOLL_CASE(GPUCOLL_OP_BXOR)
#undef GPUCOLL_CASE
        default:
            return false;
    }
}

template <typename F>
bool dispatch(gpucoll_dtype_t d, gpucoll_op_t op, F&& f) {
    switch (d) {
#define GPUCOLL_CASE(D) \
    case D:             \
        return dispatch_op<D>(op, f);
        GPUCOLL_FOREACH_DTYPE(GPUCOLL_CASE)
#undef GPUCOLL_CASE
        default:
            return false;
    }
}

}  // namespace gpucoll::reduce
