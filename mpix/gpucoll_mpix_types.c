/*
 * gpucoll_mpix_types.c - MPI datatypes and operations as the device path
 * knows them (by the public handles: this library sees no Open MPI internals).
 */
#include <stdbool.h>

#include "gpucoll_mpix_internal.h"

typedef struct {
    MPI_Datatype mpi;
    gpucoll_dtype_t dtype;
} type_entry_t;

int gpucoll_mpix_dtype(MPI_Datatype type, gpucoll_dtype_t* out) {
    /* The handles are link-time addresses in Open MPI: a table built at run time. */
    const gpucoll_dtype_t long_type = sizeof(long) == 8 ? GPUCOLL_INT64 : GPUCOLL_INT32;
    const gpucoll_dtype_t ulong_type = sizeof(long) == 8 ? GPUCOLL_UINT64 : GPUCOLL_UINT32;
    const type_entry_t table[] = {
        {MPI_INT8_T, GPUCOLL_INT8},
        {MPI_SIGNED_CHAR, GPUCOLL_INT8},
        {MPI_INT16_T, GPUCOLL_INT16},
        {MPI_SHORT, GPUCOLL_INT16},
        {MPI_INT32_T, GPUCOLL_INT32},
        {MPI_INT, GPUCOLL_INT32},
        {MPI_INT64_T, GPUCOLL_INT64},
        {MPI_LONG, long_type},
        {MPI_LONG_LONG, GPUCOLL_INT64},
        {MPI_UINT8_T, GPUCOLL_UINT8},
        {MPI_UNSIGNED_CHAR, GPUCOLL_UINT8},
        {MPI_UINT16_T, GPUCOLL_UINT16},
        {MPI_UNSIGNED_SHORT, GPUCOLL_UINT16},
        {MPI_UINT32_T, GPUCOLL_UINT32},
        {MPI_UNSIGNED, GPUCOLL_UINT32},
        {MPI_UINT64_T, GPUCOLL_UINT64},
        {MPI_UNSIGNED_LONG, ulong_type},
        {MPI_UNSIGNED_LONG_LONG, GPUCOLL_UINT64},
        {MPI_FLOAT, GPUCOLL_FLOAT},
        {MPI_DOUBLE, GPUCOLL_DOUBLE},
        {MPI_LONG_DOUBLE, GPUCOLL_LONG_DOUBLE},
        {MPI_C_FLOAT_COMPLEX, GPUCOLL_C_FLOAT_COMPLEX},
        {MPI_C_DOUBLE_COMPLEX, GPUCOLL_C_DOUBLE_COMPLEX},
        {MPI_C_LONG_DOUBLE_COMPLEX, GPUCOLL_C_LONG_DOUBLE_COMPLEX},
        {MPI_C_BOOL, GPUCOLL_BOOL},
        {MPI_BYTE, GPUCOLL_BYTE},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
        if (table[i].mpi == type) {
            *out = table[i].dtype;
            return 0;
        }
    }
    return -1;
}

int gpucoll_mpix_op(MPI_Op op, gpucoll_op_t* out) {
    const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN,  MPI_MAX, MPI_LAND,
                          MPI_LOR, MPI_LXOR, MPI_BAND, MPI_BOR, MPI_BXOR};
    const gpucoll_op_t ours[] = {GPUCOLL_OP_SUM,  GPUCOLL_OP_PROD, GPUCOLL_OP_MIN,  GPUCOLL_OP_MAX,
                                 GPUCOLL_OP_LAND, GPUCOLL_OP_LOR,  GPUCOLL_OP_LXOR, GPUCOLL_OP_BAND,
                                 GPUCOLL_OP_BOR,  GPUCOLL_OP_BXOR};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; ++i) {
        if (ops[i] == op) {
            *out = ours[i];
            return 0;
        }
    }
    return -1;
}

int gpucoll_mpix_dense_bytes(MPI_Datatype type, size_t* bytes) {
    int size = 0;
    MPI_Aint lb = 0, extent = 0, true_lb = 0, true_extent = 0;
    if (MPI_SUCCESS != MPI_Type_size(type, &size) ||
        MPI_SUCCESS != MPI_Type_get_extent(type, &lb, &extent) ||
        MPI_SUCCESS != MPI_Type_get_true_extent(type, &true_lb, &true_extent))
        return -1;
    if (0 != lb || 0 != true_lb || extent != (MPI_Aint)size || true_extent != (MPI_Aint)size)
        return -1;
    *bytes = (size_t)size;
    return 0;
}
