// reduce_reference.h - an independent host reference for every (dtype, op),
// written without reduce_ops.h so that it checks it: plain C++ types, a
// switch per op, integer SUM/PROD computed in 64-bit unsigned arithmetic and
// narrowed (modular, as C++20 defines it).
//
// The value generators are deterministic and keep every result exact (small
// integers, floats that are small integers), so results compare with == no
// matter in which order a backend combines its sources.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "gpucoll.h"

namespace reference {

template <typename T>
struct Cplx {
    T re, im;
};

struct Bool8 {  // C _Bool as stored: one byte, 0 or 1
    uint8_t v;
};
struct Byte8 {  // MPI_BYTE
    uint8_t v;
};
// IEEE binary16 as stored; converted with the compiler's _Float16 (not with
// reduce_ops.h's conversions, which this checks). A reduction of several
// sources is accumulated in float, left to right, and rounded once.
struct F16 {
    uint16_t bits;
};
inline float f16_to_float(F16 h) {
    _Float16 v;
    std::memcpy(&v, &h.bits, sizeof v);
    return static_cast<float>(v);
}
inline F16 f16_from_float(float f) {
    const auto v = static_cast<_Float16>(f);
    F16 h;
    std::memcpy(&h.bits, &v, sizeof h.bits);
    return h;
}

const gpucoll_dtype_t kAllDtypes[] = {
    GPUCOLL_INT8,
    GPUCOLL_INT16,
    GPUCOLL_INT32,
    GPUCOLL_INT64,
    GPUCOLL_UINT8,
    GPUCOLL_UINT16,
    GPUCOLL_UINT32,
    GPUCOLL_UINT64,
    GPUCOLL_FLOAT,
    GPUCOLL_DOUBLE,
    GPUCOLL_LONG_DOUBLE,
    GPUCOLL_C_FLOAT_COMPLEX,
    GPUCOLL_C_DOUBLE_COMPLEX,
    GPUCOLL_C_LONG_DOUBLE_COMPLEX,
    GPUCOLL_BOOL,
    GPUCOLL_BYTE,
    GPUCOLL_FLOAT16,
};
const gpucoll_op_t kAllOps[] = {
    GPUCOLL_OP_SUM, GPUCOLL_OP_PROD, GPUCOLL_OP_MIN,  GPUCOLL_OP_MAX, GPUCOLL_OP_LAND,
    GPUCOLL_OP_LOR, GPUCOLL_OP_LXOR, GPUCOLL_OP_BAND, GPUCOLL_OP_BOR, GPUCOLL_OP_BXOR,
};

inline const char* dtype_label(gpucoll_dtype_t d) {
    static const char* const names[] = {"int8",
                                        "int16",
                                        "int32",
                                        "int64",
                                        "uint8",
                                        "uint16",
                                        "uint32",
                                        "uint64",
                                        "float",
                                        "double",
                                        "long_double",
                                        "c_float_complex",
                                        "c_double_complex",
                                        "c_long_double_complex",
                                        "bool",
                                        "byte",
                                        "float16"};
    return d >= 0 && d < GPUCOLL_DTYPE_COUNT ? names[d] : "?";
}
inline const char* op_label(gpucoll_op_t op) {
    static const char* const names[] = {"sum", "prod", "min",  "max", "land",
                                        "lor", "lxor", "band", "bor", "bxor"};
    return op >= 0 && op < GPUCOLL_OP_COUNT ? names[op] : "?";
}

// MPI 4.1 section 6.9.2, written out as a table: rows are dtypes, columns ops
// in the order SUM PROD MIN MAX LAND LOR LXOR BAND BOR BXOR.
inline bool mpi_defines(gpucoll_dtype_t d, gpucoll_op_t op) {
    static const char* const table[GPUCOLL_DTYPE_COUNT] = {
        "1111111111",  // int8
        "1111111111",  // int16
        "1111111111",  // int32
        "1111111111",  // int64
        "1111111111",  // uint8
        "1111111111",  // uint16
        "1111111111",  // uint32
        "1111111111",  // uint64
        "1111000000",  // float
        "1111000000",  // double
        "1111000000",  // long double
        "1100000000",  // float complex
        "1100000000",  // double complex
        "1100000000",  // long double complex
        "0000111000",  // bool
        "0000000111",  // byte
        "1111000000",  // float16
    };
    if (d < 0 || d >= GPUCOLL_DTYPE_COUNT || op < 0 || op >= GPUCOLL_OP_COUNT) return false;
    return table[d][op] == '1';
}

// Calls f(T{}) with the plain C++ type stored for d.
template <typename F>
void with_type(gpucoll_dtype_t d, F&& f) {
    switch (d) {
        case GPUCOLL_INT8:
            return f(int8_t{});
        case GPUCOLL_INT16:
            return f(int16_t{});
        case GPUCOLL_INT32:
            return f(int32_t{});
        case GPUCOLL_INT64:
            return f(int64_t{});
        case GPUCOLL_UINT8:
            return f(uint8_t{});
        case GPUCOLL_UINT16:
            return f(uint16_t{});
        case GPUCOLL_UINT32:
            return f(uint32_t{});
        case GPUCOLL_UINT64:
            return f(uint64_t{});
        case GPUCOLL_FLOAT:
            return f(float{});
        case GPUCOLL_DOUBLE:
            return f(double{});
        case GPUCOLL_LONG_DOUBLE:
            return f(static_cast<long double>(0));
        case GPUCOLL_C_FLOAT_COMPLEX:
            return f(Cplx<float>{});
        case GPUCOLL_C_DOUBLE_COMPLEX:
            return f(Cplx<double>{});
        case GPUCOLL_C_LONG_DOUBLE_COMPLEX:
            return f(Cplx<long double>{});
        case GPUCOLL_BOOL:
            return f(Bool8{});
        case GPUCOLL_BYTE:
            return f(Byte8{});
        case GPUCOLL_FLOAT16:
            return f(F16{});
        default:
            return;
    }
}

inline size_t element_size(gpucoll_dtype_t d) {
    size_t size = 0;
    with_type(d, [&](auto t) { size = sizeof t; });
    return size;
}

template <typename T>
constexpr bool is_cplx = false;
template <typename T>
constexpr bool is_cplx<Cplx<T>> = true;

// ---- one combination step --------------------------------------------------
template <typename T>
T combine(gpucoll_op_t op, T a, T b) {
    if constexpr (std::is_integral_v<T>) {
        const auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
        switch (op) {
            case GPUCOLL_OP_SUM:
                return static_cast<T>(ua + ub);
            case GPUCOLL_OP_PROD:
                return static_cast<T>(ua * ub);
            case GPUCOLL_OP_MIN:
                return a < b ? a : b;
            case GPUCOLL_OP_MAX:
                return a > b ? a : b;
            case GPUCOLL_OP_LAND:
                return (a != 0 && b != 0) ? 1 : 0;
            case GPUCOLL_OP_LOR:
                return (a != 0 || b != 0) ? 1 : 0;
            case GPUCOLL_OP_LXOR:
                return ((a != 0) != (b != 0)) ? 1 : 0;
            case GPUCOLL_OP_BAND:
                return static_cast<T>(ua & ub);
            case GPUCOLL_OP_BOR:
                return static_cast<T>(ua | ub);
            case GPUCOLL_OP_BXOR:
                return static_cast<T>(ua ^ ub);
            default:
                return T{};
        }
    } else if constexpr (std::is_floating_point_v<T>) {
        switch (op) {
            case GPUCOLL_OP_SUM:
                return a + b;
            case GPUCOLL_OP_PROD:
                return a * b;
            case GPUCOLL_OP_MIN:
                return a < b ? a : b;
            case GPUCOLL_OP_MAX:
                return a > b ? a : b;
            default:
                return T{};
        }
    } else if constexpr (is_cplx<T>) {
        switch (op) {
            case GPUCOLL_OP_SUM:
                return {a.re + b.re, a.im + b.im};
            case GPUCOLL_OP_PROD:
                return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
            default:
                return T{};
        }
    } else if constexpr (std::is_same_v<T, F16>) {  // one step: rounded at once
        return f16_from_float(combine(op, f16_to_float(a), f16_to_float(b)));
    } else if constexpr (std::is_same_v<T, Bool8>) {
        const bool x = a.v != 0, y = b.v != 0;
        switch (op) {
            case GPUCOLL_OP_LAND:
                return {uint8_t(x && y)};
            case GPUCOLL_OP_LOR:
                return {uint8_t(x || y)};
            case GPUCOLL_OP_LXOR:
                return {uint8_t(x != y)};
            default:
                return T{};
        }
    } else {
        static_assert(std::is_same_v<T, Byte8>);
        switch (op) {
            case GPUCOLL_OP_BAND:
                return {uint8_t(a.v & b.v)};
            case GPUCOLL_OP_BOR:
                return {uint8_t(a.v | b.v)};
            case GPUCOLL_OP_BXOR:
                return {uint8_t(a.v ^ b.v)};
            default:
                return T{};
        }
    }
}

template <typename T>
T load(const void* base, size_t i) {
    T v;
    std::memcpy(&v, static_cast<const unsigned char*>(base) + i * sizeof(T), sizeof(T));
    return v;
}
template <typename T>
void store(void* base, size_t i, T v) {
    std::memcpy(static_cast<unsigned char*>(base) + i * sizeof(T), &v, sizeof(T));
}

// out[i] = srcs[0][i] op srcs[1][i] op ... (left to right), for i < count.
inline void reduce(gpucoll_dtype_t d, gpucoll_op_t op, const std::vector<const void*>& srcs,
                   size_t count, void* out) {
    with_type(d, [&](auto t) {
        using T = decltype(t);
        for (size_t i = 0; i < count; ++i) {
            if constexpr (std::is_same_v<T, F16>) {
                float acc = f16_to_float(load<T>(srcs[0], i));
                for (size_t k = 1; k < srcs.size(); ++k)
                    acc = combine(op, acc, f16_to_float(load<T>(srcs[k], i)));
                store(out, i, f16_from_float(acc));
            } else {
                T acc = load<T>(srcs[0], i);
                for (size_t k = 1; k < srcs.size(); ++k)
                    acc = combine(op, acc, load<T>(srcs[k], i));
                store(out, i, acc);
            }
        }
    });
}

// ---- deterministic inputs ------------------------------------------------------
// Element i of source s. Small magnitudes keep products of up to 7 sources
// exact in every type; zeros occur so that logical ops see both truth values;
// bytes use full 8-bit patterns for the bitwise ops.
template <typename T>
T value(size_t i, int s) {
    const int k = static_cast<int>((i * 7 + static_cast<size_t>(s) * 13 + i / 5) % 9);  // 0..8
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
        return static_cast<T>(k - 4);
    } else if constexpr (std::is_integral_v<T>) {
        return static_cast<T>(k == 8 ? (T(~T(0)) ^ T(i)) : T(k));  // also all-ones patterns
    } else if constexpr (std::is_floating_point_v<T>) {
        return static_cast<T>(k - 4);
    } else if constexpr (is_cplx<T>) {
        const int m = static_cast<int>((i * 3 + static_cast<size_t>(s) * 5) % 5);  // 0..4
        using R = decltype(T{}.re);
        return {static_cast<R>(k % 5 - 2), static_cast<R>(m - 2)};
    } else if constexpr (std::is_same_v<T, F16>) {
        return f16_from_float(static_cast<float>(k - 4));
    } else if constexpr (std::is_same_v<T, Bool8>) {
        return {uint8_t(k % 3 != 0)};
    } else {
        return {static_cast<uint8_t>(i * 37 + static_cast<size_t>(s) * 101 + i / 7)};
    }
}

inline void fill(gpucoll_dtype_t d, int source, size_t count, void* out) {
    with_type(d, [&](auto t) {
        using T = decltype(t);
        for (size_t i = 0; i < count; ++i) store(out, i, value<T>(i, source));
    });
}

inline std::vector<unsigned char> make_input(gpucoll_dtype_t d, int source, size_t count) {
    std::vector<unsigned char> v(count * element_size(d));
    fill(d, source, count, v.data());
    return v;
}

// ---- comparison ---------------------------------------------------------------------
template <typename T>
bool same_value(T a, T b) {
    if constexpr (is_cplx<T>) {
        return a.re == b.re && a.im == b.im;
    } else if constexpr (std::is_same_v<T, Bool8> || std::is_same_v<T, Byte8>) {
        return a.v == b.v;
    } else if constexpr (std::is_same_v<T, F16>) {
        return a.bits == b.bits;  // the same bits: one rounding, in the same order
    } else {
        return a == b;
    }
}

template <typename T>
void print_value(std::ostream& os, T v) {
    if constexpr (is_cplx<T>) {
        os << "(" << v.re << "," << v.im << ")";
    } else if constexpr (std::is_same_v<T, Bool8> || std::is_same_v<T, Byte8>) {
        os << int(v.v);
    } else if constexpr (std::is_same_v<T, F16>) {
        os << f16_to_float(v) << " (0x" << std::hex << v.bits << std::dec << ")";
    } else if constexpr (std::is_integral_v<T>) {
        os << +v;
    } else {
        os << v;
    }
}

// "" if the first count elements are equal (by value: long double padding
// bytes are ignored), else a description of the first mismatch.
inline std::string compare(gpucoll_dtype_t d, const void* expected, const void* actual,
                           size_t count) {
    std::string result;
    with_type(d, [&](auto t) {
        using T = decltype(t);
        for (size_t i = 0; i < count; ++i) {
            const T e = load<T>(expected, i), a = load<T>(actual, i);
            if (!same_value(e, a)) {
                std::ostringstream os;
                os << "element " << i << " of " << count << ": expected ";
                print_value(os, e);
                os << ", got ";
                print_value(os, a);
                result = os.str();
                return;
            }
        }
    });
    return result;
}

}  // namespace reference
