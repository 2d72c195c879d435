/*
 * gpucoll_mpix.h - MPICH's stream extension (MPIX_Stream, stream
 * communicators, collectives enqueued on a GPU stream) for Open MPI, served
 * by gpucoll. Code written for MPICH's extension builds against this header
 * and libgpucoll_mpix unchanged. docs/streams.md says what runs where and
 * what is refused.
 *
 *   MPI_Info info;
 *   MPI_Info_create(&info);
 *   MPI_Info_set(info, "type", "cudaStream_t");
 *   MPIX_Info_set_hex(info, "value", &stream, sizeof stream);
 *   MPIX_Stream s;
 *   MPIX_Stream_create(info, &s);
 *   MPI_Comm scomm;
 *   MPIX_Stream_comm_create(MPI_COMM_WORLD, s, &scomm);
 *   produce<<<..., stream>>>(d_buf);
 *   MPIX_Allreduce_enqueue(MPI_IN_PLACE, d_buf, n, MPI_FLOAT, MPI_SUM, scomm);
 *   consume<<<..., stream>>>(d_buf);
 *
 * On gpucoll's emulated device (no GPU), the stream is one made by
 * gpucoll_stream_create (gpucoll.h), passed the same way.
 */
#ifndef GPUCOLL_MPIX_H
#define GPUCOLL_MPIX_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A local stream object (MPICH: struct MPIR_Stream *). */
typedef struct gpucoll_mpix_stream* MPIX_Stream;
#define MPIX_STREAM_NULL ((MPIX_Stream)0)

/* Sets key to the bytes of value, as hexadecimal text (two digits per byte,
 * in memory order), as MPICH does: how a cudaStream_t travels in an info. */
int MPIX_Info_set_hex(MPI_Info info, const char* key, const void* value, int value_size);

/* info: "type" = "cudaStream_t" and "value" = the stream (MPIX_Info_set_hex).
 * MPI_INFO_NULL or no "type": a stream with no GPU stream (its communicators
 * refuse enqueued calls). */
int MPIX_Stream_create(MPI_Info info, MPIX_Stream* stream);
/* Frees the object (not the GPU stream); *stream becomes MPIX_STREAM_NULL.
 * Free the stream communicators made with it first. */
int MPIX_Stream_free(MPIX_Stream* stream);
/* Collective over comm: a duplicate of comm whose enqueued calls go to this
 * rank's stream (each rank passes its own). Free it with MPI_Comm_free,
 * which waits until the stream has passed its calls. */
int MPIX_Stream_comm_create(MPI_Comm comm, MPIX_Stream stream, MPI_Comm* newcomm);

/* Collectives enqueued on the stream communicator's stream: each returns at
 * once; the operation runs after the work enqueued on the stream before it,
 * and work enqueued after it sees the result. Every rank enqueues the same
 * calls in the same order. The buffers belong to the stream until it has
 * passed the call. Device buffers, predefined datatypes (contiguous ones
 * for bcast and allgather) and predefined operations only: anything else is
 * refused with an error that says why (gpucoll_mpix_last_error). */
int MPIX_Allreduce_enqueue(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                           MPI_Op op, MPI_Comm comm);
int MPIX_Bcast_enqueue(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPIX_Allgather_enqueue(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm);
int MPIX_Reduce_scatter_enqueue(const void* sendbuf, void* recvbuf, const int recvcounts[],
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPIX_Reduce_scatter_block_enqueue(const void* sendbuf, void* recvbuf, int recvcount,
                                      MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);
int MPIX_Reduce_enqueue(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                        MPI_Op op, int root, MPI_Comm comm);

/* gpucoll's own: MPI_SUCCESS, or the error of a failure found on the stream
 * of comm (a peer that failed or ended, a device fault): the calls enqueued
 * since ran on undefined data. Errors are returned, never raised. */
int gpucoll_mpix_stream_status(MPI_Comm comm);
/* The message of the calling thread's last error of this library ("" if none). */
const char* gpucoll_mpix_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* GPUCOLL_MPIX_H */
