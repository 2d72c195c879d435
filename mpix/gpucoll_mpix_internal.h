/*
 * gpucoll_mpix_internal.h - what the files of libgpucoll_mpix share.
 */
#ifndef GPUCOLL_MPIX_INTERNAL_H
#define GPUCOLL_MPIX_INTERNAL_H

#include <stddef.h>

#include "gpucoll.h"
#include "gpucoll_mpix.h"

/* The device reductions' element type of a predefined MPI datatype: 0, or
 * -1 where it has none (derived, pair and other types). */
int gpucoll_mpix_dtype(MPI_Datatype type, gpucoll_dtype_t* out);
/* The device reductions' operation of a predefined MPI operation: 0, or -1
 * (user operations, MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE, MPI_NO_OP). */
int gpucoll_mpix_op(MPI_Op op, gpucoll_op_t* out);
/* *bytes: the size of one element of type where its data is one dense run
 * starting at the buffer (what bcast and allgather move as bytes): 0, else
 * -1 (holes, a lower bound other than 0). */
int gpucoll_mpix_dense_bytes(MPI_Datatype type, size_t* bytes);

#endif /* GPUCOLL_MPIX_INTERNAL_H */
