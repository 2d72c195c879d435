/*
 * coll_gpucoll_types.c - predefined MPI datatypes and ops as gpucoll enums.
 *
 * By handle comparison only (ompi/op/op.h does not compile from Debian's
 * headers, and numeric datatype ids differ between Open MPI versions).
 * C integer types map by their size on this platform. MPI_CHAR is reduced
 * as the platform's char (signed on x86-64: int8) with wrap-around, as C's
 * two's-complement arithmetic gives; Open MPI 4.1's own op (op/avx)
 * saturates instead (open-mpi/ompi#8045), so only overflowing sums differ.
 * Anything not listed (derived datatypes, Fortran types, pair types,
 * user-defined ops, MAXLOC/MINLOC/REPLACE/NO_OP) has no device equivalent:
 * the caller stages.
 */
#include <limits.h>

#include "coll_gpucoll.h"

#define GPUCOLL_SIGNED(T)             \
    (sizeof(T) == 1   ? GPUCOLL_INT8  \
     : sizeof(T) == 2 ? GPUCOLL_INT16 \
     : sizeof(T) == 4 ? GPUCOLL_INT32 \
                      : GPUCOLL_INT64)
#define GPUCOLL_UNSIGNED(T)            \
    (sizeof(T) == 1   ? GPUCOLL_UINT8  \
     : sizeof(T) == 2 ? GPUCOLL_UINT16 \
     : sizeof(T) == 4 ? GPUCOLL_UINT32 \
                      : GPUCOLL_UINT64)
#define GPUCOLL_SIZE_OK(T) \
    _Static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, #T)
GPUCOLL_SIZE_OK(short);
GPUCOLL_SIZE_OK(int);
GPUCOLL_SIZE_OK(long);
GPUCOLL_SIZE_OK(long long);
GPUCOLL_SIZE_OK(MPI_Aint);
GPUCOLL_SIZE_OK(MPI_Offset);
GPUCOLL_SIZE_OK(MPI_Count);
_Static_assert(sizeof(_Bool) == 1, "MPI_C_BOOL is mapped to a one-byte bool");

typedef struct gpucoll_dtype_entry {
    MPI_Datatype mpi;
    gpucoll_dtype_t dtype;
} gpucoll_dtype_entry_t;

/* Most frequent first: the lookup is linear. */
static const gpucoll_dtype_entry_t gpucoll_dtypes[] = {
    {MPI_FLOAT, GPUCOLL_FLOAT},
    {MPI_DOUBLE, GPUCOLL_DOUBLE},
    {MPI_INT, GPUCOLL_SIGNED(int)},
    {MPI_LONG, GPUCOLL_SIGNED(long)},
    {MPI_UNSIGNED, GPUCOLL_UNSIGNED(unsigned)},
    {MPI_UNSIGNED_LONG, GPUCOLL_UNSIGNED(unsigned long)},
    {MPI_LONG_LONG, GPUCOLL_SIGNED(long long)}, /* also MPI_LONG_LONG_INT */
    {MPI_UNSIGNED_LONG_LONG, GPUCOLL_UNSIGNED(unsigned long long)},
    {MPI_INT8_T, GPUCOLL_INT8},
    {MPI_INT16_T, GPUCOLL_INT16},
    {MPI_INT32_T, GPUCOLL_INT32},
    {MPI_INT64_T, GPUCOLL_INT64},
    {MPI_UINT8_T, GPUCOLL_UINT8},
    {MPI_UINT16_T, GPUCOLL_UINT16},
    {MPI_UINT32_T, GPUCOLL_UINT32},
    {MPI_UINT64_T, GPUCOLL_UINT64},
    {MPI_CHAR, CHAR_MIN < 0 ? GPUCOLL_INT8 : GPUCOLL_UINT8}, /* OSU's default datatype */
    {MPI_SIGNED_CHAR, GPUCOLL_INT8},
    {MPI_UNSIGNED_CHAR, GPUCOLL_UINT8},
    {MPI_SHORT, GPUCOLL_SIGNED(short)},
    {MPI_UNSIGNED_SHORT, GPUCOLL_UNSIGNED(unsigned short)},
    {MPI_AINT, GPUCOLL_SIGNED(MPI_Aint)},
    {MPI_OFFSET, GPUCOLL_SIGNED(MPI_Offset)},
    {MPI_COUNT, GPUCOLL_SIGNED(MPI_Count)},
    {MPI_LONG_DOUBLE, GPUCOLL_LONG_DOUBLE},
    {MPI_C_FLOAT_COMPLEX, GPUCOLL_C_FLOAT_COMPLEX}, /* also MPI_C_COMPLEX */
    {MPI_C_DOUBLE_COMPLEX, GPUCOLL_C_DOUBLE_COMPLEX},
    {MPI_C_LONG_DOUBLE_COMPLEX, GPUCOLL_C_LONG_DOUBLE_COMPLEX},
    {MPI_C_BOOL, GPUCOLL_BOOL},
    {MPI_BYTE, GPUCOLL_BYTE},
#if MCA_COLL_GPUCOLL_HAVE_FLOAT16
    {MPIX_C_FLOAT16, GPUCOLL_FLOAT16}, /* also MPIX_SHORT_FLOAT: one datatype */
#endif
};

bool mca_coll_gpucoll_map_dtype(const struct ompi_datatype_t* dtype, gpucoll_dtype_t* out) {
    for (size_t i = 0; i < sizeof gpucoll_dtypes / sizeof gpucoll_dtypes[0]; ++i) {
        if (gpucoll_dtypes[i].mpi == dtype) {
            *out = gpucoll_dtypes[i].dtype;
            return true;
        }
    }
    return false;
}

typedef struct gpucoll_op_entry {
    MPI_Op mpi;
    gpucoll_op_t op;
} gpucoll_op_entry_t;

static const gpucoll_op_entry_t gpucoll_ops[] = {
    {MPI_SUM, GPUCOLL_OP_SUM},   {MPI_MAX, GPUCOLL_OP_MAX},   {MPI_MIN, GPUCOLL_OP_MIN},
    {MPI_PROD, GPUCOLL_OP_PROD}, {MPI_LAND, GPUCOLL_OP_LAND}, {MPI_LOR, GPUCOLL_OP_LOR},
    {MPI_LXOR, GPUCOLL_OP_LXOR}, {MPI_BAND, GPUCOLL_OP_BAND}, {MPI_BOR, GPUCOLL_OP_BOR},
    {MPI_BXOR, GPUCOLL_OP_BXOR},
};

bool mca_coll_gpucoll_map_op(const struct ompi_op_t* op, gpucoll_op_t* out) {
    for (size_t i = 0; i < sizeof gpucoll_ops / sizeof gpucoll_ops[0]; ++i) {
        if (gpucoll_ops[i].mpi == op) {
            *out = gpucoll_ops[i].op;
            return true;
        }
    }
    return false;
}
