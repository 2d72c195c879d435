// Checks reduce_ops.h (the operator definitions both backends share) against
// MPI's table and against the independent reference in reduce_reference.h.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>

#include "device/reduce_ops.h"
#include "reduce_reference.h"

namespace {

using gpucoll::reduce::Complex;
using gpucoll::reduce::dispatch;
using gpucoll::reduce::Op_;
using gpucoll::reduce::op_valid;
using gpucoll::reduce::TypeOf;

TEST(OpValid, MatchesMpiTableForEveryPair) {
    for (gpucoll_dtype_t d : reference::kAllDtypes) {
        for (gpucoll_op_t op : reference::kAllOps) {
            EXPECT_EQ(op_valid(d, op), reference::mpi_defines(d, op))
                << reference::op_label(op) << " on " << reference::dtype_label(d);
        }
    }
}

TEST(OpValid, SpotChecks) {
    EXPECT_FALSE(op_valid(GPUCOLL_C_FLOAT_COMPLEX, GPUCOLL_OP_MIN));
    EXPECT_FALSE(op_valid(GPUCOLL_C_DOUBLE_COMPLEX, GPUCOLL_OP_MAX));
    EXPECT_TRUE(op_valid(GPUCOLL_C_DOUBLE_COMPLEX, GPUCOLL_OP_PROD));
    EXPECT_FALSE(op_valid(GPUCOLL_FLOAT, GPUCOLL_OP_BAND));
    EXPECT_FALSE(op_valid(GPUCOLL_DOUBLE, GPUCOLL_OP_LAND));
    EXPECT_TRUE(op_valid(GPUCOLL_LONG_DOUBLE, GPUCOLL_OP_MAX));
    EXPECT_TRUE(op_valid(GPUCOLL_BOOL, GPUCOLL_OP_LAND));
    EXPECT_FALSE(op_valid(GPUCOLL_BOOL, GPUCOLL_OP_SUM));
    EXPECT_FALSE(op_valid(GPUCOLL_BOOL, GPUCOLL_OP_BOR));
    EXPECT_TRUE(op_valid(GPUCOLL_BYTE, GPUCOLL_OP_BXOR));
    EXPECT_FALSE(op_valid(GPUCOLL_BYTE, GPUCOLL_OP_LAND));
    EXPECT_FALSE(op_valid(GPUCOLL_BYTE, GPUCOLL_OP_SUM));
    EXPECT_TRUE(op_valid(GPUCOLL_UINT64, GPUCOLL_OP_LXOR));
    EXPECT_TRUE(op_valid(GPUCOLL_INT8, GPUCOLL_OP_BAND));
    EXPECT_TRUE(op_valid(GPUCOLL_FLOAT16, GPUCOLL_OP_PROD));
    EXPECT_TRUE(op_valid(GPUCOLL_FLOAT16, GPUCOLL_OP_MIN));
    EXPECT_FALSE(op_valid(GPUCOLL_FLOAT16, GPUCOLL_OP_LAND));
    EXPECT_FALSE(op_valid(GPUCOLL_FLOAT16, GPUCOLL_OP_BXOR));
}

TEST(OpValid, RejectsOutOfRangeEnums) {
    EXPECT_FALSE(op_valid(GPUCOLL_DTYPE_COUNT, GPUCOLL_OP_SUM));
    EXPECT_FALSE(op_valid(static_cast<gpucoll_dtype_t>(-1), GPUCOLL_OP_SUM));
    EXPECT_FALSE(op_valid(GPUCOLL_INT32, GPUCOLL_OP_COUNT));
    EXPECT_FALSE(op_valid(GPUCOLL_INT32, static_cast<gpucoll_op_t>(-1)));
}

TEST(TypeOf, MatchesTheCLayoutOfEachType) {
    for (gpucoll_dtype_t d : reference::kAllDtypes) {
        size_t size = 0;
        // Any op valid on d will do to reach TypeOf<D>.
        for (gpucoll_op_t op : reference::kAllOps) {
            if (dispatch(d, op, [&]<gpucoll_dtype_t D, gpucoll_op_t>() {
                    size = sizeof(typename TypeOf<D>::type);
                }))
                break;
        }
        EXPECT_EQ(size, reference::element_size(d)) << reference::dtype_label(d);
        EXPECT_EQ(gpucoll::reduce::dtype_size(d), reference::element_size(d))
            << reference::dtype_label(d);
    }
    EXPECT_EQ(sizeof(Complex<float>), 2 * sizeof(float));
    EXPECT_EQ(sizeof(Complex<long double>), 2 * sizeof(long double));
}

TEST(Dispatch, CallsExactlyTheRequestedPair) {
    for (gpucoll_dtype_t d : reference::kAllDtypes) {
        for (gpucoll_op_t op : reference::kAllOps) {
            int calls = 0;
            gpucoll_dtype_t seen_d = GPUCOLL_DTYPE_COUNT;
            gpucoll_op_t seen_op = GPUCOLL_OP_COUNT;
            const bool ran = dispatch(d, op, [&]<gpucoll_dtype_t D, gpucoll_op_t Op>() {
                ++calls;
                seen_d = D;
                seen_op = Op;
            });
            const bool valid = reference::mpi_defines(d, op);
            EXPECT_EQ(ran, valid) << reference::op_label(op) << " on " << reference::dtype_label(d);
            EXPECT_EQ(calls, valid ? 1 : 0);
            if (valid) {
                EXPECT_EQ(seen_d, d);
                EXPECT_EQ(seen_op, op);
            }
        }
    }
    EXPECT_FALSE(dispatch(GPUCOLL_DTYPE_COUNT, GPUCOLL_OP_SUM, []<gpucoll_dtype_t, gpucoll_op_t>() {
        ADD_FAILURE() << "called for an unknown dtype";
    }));
}

TEST(Functors, IntegerSumAndProdWrap) {
    EXPECT_EQ(Op_<GPUCOLL_OP_SUM>::apply<int8_t>(127, 1), -128);
    EXPECT_EQ(Op_<GPUCOLL_OP_SUM>::apply<int8_t>(-128, -1), 127);
    EXPECT_EQ(Op_<GPUCOLL_OP_SUM>::apply<uint8_t>(200, 100), 44);
    EXPECT_EQ(Op_<GPUCOLL_OP_SUM>::apply<int32_t>(INT32_MAX, 1), INT32_MIN);
    EXPECT_EQ(Op_<GPUCOLL_OP_PROD>::apply<int8_t>(16, 16), 0);
    EXPECT_EQ(Op_<GPUCOLL_OP_PROD>::apply<int8_t>(-3, 5), -15);
    EXPECT_EQ(Op_<GPUCOLL_OP_PROD>::apply<int32_t>(INT32_MAX, 2), -2);
    EXPECT_EQ(Op_<GPUCOLL_OP_PROD>::apply<int64_t>(INT64_MIN, -1), INT64_MIN);
    EXPECT_EQ(Op_<GPUCOLL_OP_PROD>::apply<uint16_t>(256, 256), 0);
}

TEST(Functors, MinMax) {
    EXPECT_EQ(Op_<GPUCOLL_OP_MIN>::apply<int16_t>(-5, 3), -5);
    EXPECT_EQ(Op_<GPUCOLL_OP_MAX>::apply<int16_t>(-5, 3), 3);
    EXPECT_EQ(Op_<GPUCOLL_OP_MIN>::apply<uint32_t>(7, 0xffffffffu), 7u);
    EXPECT_EQ(Op_<GPUCOLL_OP_MAX>::apply<double>(-0.5, -1.5), -0.5);
    EXPECT_EQ(Op_<GPUCOLL_OP_MIN>::apply<long double>(2.0L, -3.0L), -3.0L);
}

TEST(Functors, LogicalOpsYieldZeroOrOne) {
    EXPECT_EQ(Op_<GPUCOLL_OP_LAND>::apply<int32_t>(2, 3), 1);
    EXPECT_EQ(Op_<GPUCOLL_OP_LAND>::apply<int32_t>(2, 0), 0);
    EXPECT_EQ(Op_<GPUCOLL_OP_LOR>::apply<int32_t>(0, -7), 1);
    EXPECT_EQ(Op_<GPUCOLL_OP_LOR>::apply<int32_t>(0, 0), 0);
    EXPECT_EQ(Op_<GPUCOLL_OP_LXOR>::apply<int32_t>(5, 0), 1);
    EXPECT_EQ(Op_<GPUCOLL_OP_LXOR>::apply<int32_t>(5, 7), 0);
    EXPECT_EQ(Op_<GPUCOLL_OP_LXOR>::apply<uint8_t>(0, 0), 0);
    EXPECT_TRUE(Op_<GPUCOLL_OP_LXOR>::apply<bool>(true, false));
    EXPECT_FALSE(Op_<GPUCOLL_OP_LXOR>::apply<bool>(true, true));
    EXPECT_FALSE(Op_<GPUCOLL_OP_LAND>::apply<bool>(true, false));
    EXPECT_TRUE(Op_<GPUCOLL_OP_LOR>::apply<bool>(false, true));
}

TEST(Functors, BitwiseOps) {
    EXPECT_EQ(Op_<GPUCOLL_OP_BAND>::apply<uint8_t>(0xf0, 0x3c), 0x30);
    EXPECT_EQ(Op_<GPUCOLL_OP_BOR>::apply<uint8_t>(0xf0, 0x0c), 0xfc);
    EXPECT_EQ(Op_<GPUCOLL_OP_BXOR>::apply<uint8_t>(0xff, 0x0f), 0xf0);
    EXPECT_EQ(Op_<GPUCOLL_OP_BXOR>::apply<int64_t>(-1, 0), -1);
    EXPECT_EQ(Op_<GPUCOLL_OP_BAND>::apply<int16_t>(-1, 0x1234), 0x1234);
}

TEST(Functors, ComplexSumAndProduct) {
    const Complex<double> a{1, 2}, b{3, 4};
    const Complex<double> product = Op_<GPUCOLL_OP_PROD>::apply(a, b);
    EXPECT_EQ(product.re, -5);
    EXPECT_EQ(product.im, 10);
    const Complex<double> sum = Op_<GPUCOLL_OP_SUM>::apply(a, b);
    EXPECT_EQ(sum.re, 4);
    EXPECT_EQ(sum.im, 6);
    const Complex<float> i_squared =
        Op_<GPUCOLL_OP_PROD>::apply(Complex<float>{0, 1}, Complex<float>{0, 1});
    EXPECT_TRUE((i_squared == Complex<float>{-1, 0}));
}

// Every functor against the reference, on the generated inputs the device
// tests use.
TEST(Functors, AgreeWithReferenceForEveryValidPair) {
    constexpr size_t kCount = 200;
    for (gpucoll_dtype_t d : reference::kAllDtypes) {
        const auto a = reference::make_input(d, 0, kCount);
        const auto b = reference::make_input(d, 1, kCount);
        for (gpucoll_op_t op : reference::kAllOps) {
            if (!reference::mpi_defines(d, op)) continue;
            std::vector<unsigned char> expected(a.size()), actual(a.size());
            reference::reduce(d, op, {a.data(), b.data()}, kCount, expected.data());
            dispatch(d, op, [&]<gpucoll_dtype_t D, gpucoll_op_t Op>() {
                using T = typename TypeOf<D>::type;
                for (size_t i = 0; i < kCount; ++i) {
                    T x, y;
                    std::memcpy(&x, a.data() + i * sizeof(T), sizeof(T));
                    std::memcpy(&y, b.data() + i * sizeof(T), sizeof(T));
                    using Acc = gpucoll::reduce::Accum<T>;  // binary16: in float
                    const T r = Acc::store(Op_<Op>::apply(Acc::load(x), Acc::load(y)));
                    std::memcpy(actual.data() + i * sizeof(T), &r, sizeof(T));
                }
            });
            EXPECT_EQ(reference::compare(d, expected.data(), actual.data(), kCount), "")
                << reference::op_label(op) << " on " << reference::dtype_label(d);
        }
    }
}

// The reference itself, on hand-computed values, so that a wrong reference
// cannot silently agree with a wrong functor.
TEST(Reference, HandComputedValues) {
    const int8_t a8[] = {127, -3, 0, 5};
    const int8_t b8[] = {1, 5, 9, -5};
    int8_t out8[4];
    reference::reduce(GPUCOLL_INT8, GPUCOLL_OP_SUM, {a8, b8}, 4, out8);
    EXPECT_EQ(out8[0], -128);
    EXPECT_EQ(out8[1], 2);
    EXPECT_EQ(out8[3], 0);
    reference::reduce(GPUCOLL_INT8, GPUCOLL_OP_LXOR, {a8, b8}, 4, out8);
    EXPECT_EQ(out8[2], 1);
    EXPECT_EQ(out8[3], 0);

    const float af[] = {1.5f, -2.0f};
    const float bf[] = {-4.0f, 3.0f};
    const float cf[] = {2.0f, 0.5f};
    float outf[2];
    reference::reduce(GPUCOLL_FLOAT, GPUCOLL_OP_PROD, {af, bf, cf}, 2, outf);
    EXPECT_EQ(outf[0], -12.0f);
    EXPECT_EQ(outf[1], -3.0f);
    reference::reduce(GPUCOLL_FLOAT, GPUCOLL_OP_MIN, {af, bf, cf}, 2, outf);
    EXPECT_EQ(outf[0], -4.0f);
    EXPECT_EQ(outf[1], -2.0f);

    const double ac[] = {1, 2};
    const double bc[] = {3, 4};
    double outc[2];
    reference::reduce(GPUCOLL_C_DOUBLE_COMPLEX, GPUCOLL_OP_PROD, {ac, bc}, 1, outc);
    EXPECT_EQ(outc[0], -5);
    EXPECT_EQ(outc[1], 10);

    // binary16 1 + 2^-11 + 2^-11: accumulated in float, 1 + 2^-10 (0x3c01);
    // rounded after each step, 1 (ties to even, twice).
    const uint16_t one[] = {0x3c00}, tiny[] = {0x1000};
    uint16_t out16[1];
    reference::reduce(GPUCOLL_FLOAT16, GPUCOLL_OP_SUM, {one, tiny, tiny}, 1, out16);
    EXPECT_EQ(out16[0], 0x3c01);
    EXPECT_EQ(
        reference::combine(GPUCOLL_OP_SUM, reference::F16{0x3c00}, reference::F16{0x1000}).bits,
        0x3c00);
}

TEST(Reference, GeneratedInputsCoverBothTruthValuesAndDifferPerSource) {
    for (gpucoll_dtype_t d : reference::kAllDtypes) {
        const auto a = reference::make_input(d, 0, 64);
        const auto b = reference::make_input(d, 1, 64);
        EXPECT_NE(a, b) << reference::dtype_label(d);
        const std::vector<unsigned char> zeros(a.size(), 0);
        EXPECT_NE(a, zeros) << reference::dtype_label(d);
    }
    const auto bools = reference::make_input(GPUCOLL_BOOL, 0, 64);
    int ones = 0;
    for (unsigned char v : bools) {
        ASSERT_LE(v, 1);
        ones += v;
    }
    EXPECT_GT(ones, 0);
    EXPECT_LT(ones, 64);
}

}  // namespace
