/*
 * gpucoll_mpix.c - MPICH's stream extension on Open MPI (gpucoll_mpix.h).
 *
 * A stream communicator is an MPI_Comm_dup of the parent with an attribute
 * that holds the core's stream-ordered communicator (gpucoll_stream_comm_t),
 * created over a bootstrap of MPI calls on host buffers and found again by
 * the attribute at each enqueue; MPI_Comm_free destroys it (the attribute's
 * delete callback). The core learns which MPI communicator it serves only
 * through the key the component registered (the MPI_Comm handle).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpucoll_mpix_internal.h"

struct gpucoll_mpix_stream {
    void* native; /* cudaStream_t, or the emu stream's handle; NULL: none */
};

typedef struct {
    gpucoll_stream_comm_t* core;
    MPIX_Stream stream;
} stream_comm_attr_t;

static _Thread_local char last_error[512];
static int attr_keyval = MPI_KEYVAL_INVALID;

const char* gpucoll_mpix_last_error(void) { return last_error; }

/* Records message, and raises code on comm the MPI way: with the default
 * MPI_ERRORS_ARE_FATAL the job ends, so the reason is printed first. */
static int fail(MPI_Comm comm, int code, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(MPI_Comm comm, int code, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (MPI_COMM_NULL == comm) return code;
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    if (MPI_SUCCESS == MPI_Comm_get_errhandler(comm, &eh)) {
        if (MPI_ERRORS_ARE_FATAL == eh) fprintf(stderr, "gpucoll_mpix: %s\n", last_error);
        if (MPI_ERRORS_RETURN != eh) MPI_Comm_call_errhandler(comm, code);
        MPI_Errhandler_free(&eh);
    }
    return code;
}

static int mpi_code(int status) {
    switch (status) {
        case GPUCOLL_SUCCESS:
            return MPI_SUCCESS;
        case GPUCOLL_ERR_UNSUPPORTED:
            return MPI_ERR_UNSUPPORTED_OPERATION;
        case GPUCOLL_ERR_BUFFER:
            return MPI_ERR_BUFFER;
        case GPUCOLL_ERR_INVALID_ARG:
            return MPI_ERR_ARG;
        default:
            return MPI_ERR_OTHER;
    }
}

/* ------------------------------------------------------------------ info */

int MPIX_Info_set_hex(MPI_Info info, const char* key, const void* value, int value_size) {
    static const char digits[] = "0123456789abcdef";
    if (value_size < 0 || value_size > (MPI_MAX_INFO_VAL - 1) / 2 || NULL == value)
        return MPI_ERR_ARG;
    char text[MPI_MAX_INFO_VAL];
    const unsigned char* bytes = (const unsigned char*)value;
    for (int i = 0; i < value_size; ++i) {
        text[2 * i] = digits[bytes[i] >> 4];
        text[2 * i + 1] = digits[bytes[i] & 15];
    }
    text[2 * value_size] = '\0';
    return MPI_Info_set(info, key, text);
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* ---------------------------------------------------------------- streams */

/* The value of key in info, in value[len] (cut to fit); *flag: set or not.
 * MPI 4.0 deprecates MPI_Info_get (Open MPI 6.0's mpi.h says so, an error
 * with -Werror); MPI_Info_get_string is its replacement. */
static void info_get(MPI_Info info, const char* key, char* value, int len, int* flag) {
#if MPI_VERSION >= 4
    int n = len;
    MPI_Info_get_string(info, key, &n, value, flag);
#else
    MPI_Info_get(info, key, len - 1, value, flag);
#endif
}

int MPIX_Stream_create(MPI_Info info, MPIX_Stream* stream) {
    if (NULL == stream)
        return fail(MPI_COMM_NULL, MPI_ERR_ARG, "MPIX_Stream_create: stream is NULL");
    *stream = MPIX_STREAM_NULL;
    void* native = NULL;
    if (MPI_INFO_NULL != info) {
        char type[MPI_MAX_INFO_VAL], value[MPI_MAX_INFO_VAL];
        int has_type = 0, has_value = 0;
        info_get(info, "type", type, MPI_MAX_INFO_VAL, &has_type);
        if (has_type) {
            if (0 != strcmp(type, "cudaStream_t"))
                return fail(MPI_COMM_WORLD, MPI_ERR_ARG,
                            "MPIX_Stream_create: info type \"%s\": gpucoll takes \"cudaStream_t\" "
                            "(on its emulated device, a stream of gpucoll_stream_create)",
                            type);
            info_get(info, "value", value, MPI_MAX_INFO_VAL, &has_value);
            if (!has_value || strlen(value) != 2 * sizeof native)
                return fail(MPI_COMM_WORLD, MPI_ERR_ARG,
                            "MPIX_Stream_create: info \"value\" must hold the stream as %zu "
                            "hexadecimal bytes (MPIX_Info_set_hex(info, \"value\", &stream, "
                            "sizeof stream))",
                            sizeof native);
            unsigned char* bytes = (unsigned char*)&native;
            for (size_t i = 0; i < sizeof native; ++i) {
                const int hi = hex_digit(value[2 * i]), lo = hex_digit(value[2 * i + 1]);
                if (hi < 0 || lo < 0)
                    return fail(MPI_COMM_WORLD, MPI_ERR_ARG,
                                "MPIX_Stream_create: info \"value\" is not hexadecimal");
                bytes[i] = (unsigned char)(hi << 4 | lo);
            }
        }
    }
    MPIX_Stream s = calloc(1, sizeof *s);
    if (NULL == s) return fail(MPI_COMM_WORLD, MPI_ERR_NO_MEM, "MPIX_Stream_create: out of memory");
    s->native = native;
    *stream = s;
    return MPI_SUCCESS;
}

int MPIX_Stream_free(MPIX_Stream* stream) {
    if (NULL == stream) return fail(MPI_COMM_NULL, MPI_ERR_ARG, "MPIX_Stream_free: stream is NULL");
    free(*stream);
    *stream = MPIX_STREAM_NULL;
    return MPI_SUCCESS;
}

/* ------------------------------------------------------ stream communicators */

static int attr_delete(MPI_Comm comm, int keyval, void* value, void* extra) {
    (void)comm;
    (void)keyval;
    (void)extra;
    stream_comm_attr_t* a = (stream_comm_attr_t*)value;
    gpucoll_stream_comm_destroy(a->core); /* waits for the stream to pass its calls */
    free(a);
    return MPI_SUCCESS;
}

static int boot_allgather(void* ctx, const void* send, void* recv, size_t bytes) {
    return MPI_SUCCESS == MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE,
                                        *(MPI_Comm*)ctx)
               ? 0
               : -1;
}

static int boot_barrier(void* ctx) { return MPI_SUCCESS == MPI_Barrier(*(MPI_Comm*)ctx) ? 0 : -1; }

int MPIX_Stream_comm_create(MPI_Comm comm, MPIX_Stream stream, MPI_Comm* newcomm) {
    if (NULL == newcomm) return fail(comm, MPI_ERR_ARG, "MPIX_Stream_comm_create: newcomm is NULL");
    int rc = MPI_Comm_dup(comm, newcomm);
    if (MPI_SUCCESS != rc) return rc;
    if (MPIX_STREAM_NULL == stream || NULL == stream->native) return MPI_SUCCESS;
    if (MPI_KEYVAL_INVALID == attr_keyval &&
        MPI_SUCCESS !=
            MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, attr_delete, &attr_keyval, NULL))
        return fail(comm, MPI_ERR_OTHER, "MPIX_Stream_comm_create: no attribute key left");
    /* A blocking collective of the accelerated set sets the component's core
     * up on the new communicator (it registers its key there). */
    int one = 1;
    rc = MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_INT, MPI_SUM, *newcomm);
    if (MPI_SUCCESS != rc) return rc;
    int rank = 0, size = 0;
    MPI_Comm_rank(*newcomm, &rank);
    MPI_Comm_size(*newcomm, &size);
    gpucoll_bootstrap_t bs = {newcomm, rank, size, boot_allgather, boot_barrier};
    stream_comm_attr_t* a = calloc(1, sizeof *a);
    if (NULL == a) return fail(comm, MPI_ERR_NO_MEM, "MPIX_Stream_comm_create: out of memory");
    a->stream = stream;
    const int status =
        gpucoll_stream_comm_create(&bs, (uint64_t)(uintptr_t)*newcomm, stream->native, &a->core);
    if (GPUCOLL_SUCCESS != status) {
        free(a);
        return fail(comm, mpi_code(status), "MPIX_Stream_comm_create: %s", gpucoll_last_error());
    }
    MPI_Comm_set_attr(*newcomm, attr_keyval, a);
    return MPI_SUCCESS;
}

static gpucoll_stream_comm_t* core_of(MPI_Comm comm) {
    stream_comm_attr_t* a = NULL;
    int flag = 0;
    if (MPI_KEYVAL_INVALID == attr_keyval || MPI_COMM_NULL == comm ||
        MPI_SUCCESS != MPI_Comm_get_attr(comm, attr_keyval, &a, &flag) || !flag)
        return NULL;
    return a->core;
}

int gpucoll_mpix_stream_status(MPI_Comm comm) {
    gpucoll_stream_comm_t* core = core_of(comm);
    if (NULL == core) {
        snprintf(last_error, sizeof last_error,
                 "not a stream communicator with a GPU stream (MPIX_Stream_comm_create)");
        return MPI_ERR_COMM;
    }
    const int status = gpucoll_stream_comm_status(core);
    if (GPUCOLL_SUCCESS == status) return MPI_SUCCESS;
    snprintf(last_error, sizeof last_error, "%s", gpucoll_last_error());
    return mpi_code(status);
}

/* ---------------------------------------------------------------- enqueue */

static int enqueue(const char* name, MPI_Comm comm, gpucoll_call_t* call) {
    gpucoll_stream_comm_t* core = core_of(comm);
    if (NULL == core)
        return fail(comm, MPI_ERR_COMM,
                    "%s: not a stream communicator with a GPU stream (make it with "
                    "MPIX_Stream_comm_create and a stream whose info has type cudaStream_t)",
                    name);
    call->eligible = 1;
    call->on_device = 1;
    const int status = gpucoll_stream_comm_enqueue(core, call);
    if (GPUCOLL_SUCCESS != status)
        return fail(comm, mpi_code(status), "%s: %s", name, gpucoll_last_error());
    return MPI_SUCCESS;
}

/* The call's element type for a reduction, or an error saying why not. */
static int reduction(const char* name, MPI_Comm comm, MPI_Datatype type, MPI_Op op,
                     gpucoll_call_t* call) {
    if (0 != gpucoll_mpix_dtype(type, &call->dtype))
        return fail(comm, MPI_ERR_TYPE,
                    "%s: the datatype is not a predefined numeric type that the device "
                    "reductions know (derived, pair and Fortran types are refused; no "
                    "synchronous fallback on a stream)",
                    name);
    if (0 != gpucoll_mpix_op(op, &call->op))
        return fail(comm, MPI_ERR_OP,
                    "%s: the operation is not one the device reductions know (user "
                    "operations, MPI_MAXLOC, MPI_MINLOC, MPI_REPLACE and MPI_NO_OP are refused)",
                    name);
    return MPI_SUCCESS;
}

/* count elements of type as bytes (bcast, allgather). */
static int as_bytes(const char* name, MPI_Comm comm, MPI_Datatype type, int count,
                    gpucoll_call_t* call) {
    size_t bytes = 0;
    if (count < 0) return fail(comm, MPI_ERR_COUNT, "%s: negative count", name);
    if (0 != gpucoll_mpix_dense_bytes(type, &bytes))
        return fail(comm, MPI_ERR_TYPE,
                    "%s: the datatype has holes or a lower bound other than 0; only dense "
                    "datatypes are moved on a stream",
                    name);
    call->dtype = GPUCOLL_BYTE;
    call->count = (size_t)count * bytes;
    return MPI_SUCCESS;
}

static const void* send_of(const void* sendbuf) { return MPI_IN_PLACE == sendbuf ? NULL : sendbuf; }

/* A reduction of count elements (allreduce, reduce, reduce_scatter_block). */
static int enqueue_reduction(const char* name, gpucoll_coll_t coll, const void* sendbuf,
                             void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                             MPI_Comm comm) {
    gpucoll_call_t call = {0};
    call.coll = coll;
    if (count < 0) return fail(comm, MPI_ERR_COUNT, "%s: negative count", name);
    int rc = reduction(name, comm, datatype, op, &call);
    if (MPI_SUCCESS != rc) return rc;
    call.sendbuf = send_of(sendbuf);
    call.recvbuf = recvbuf;
    call.count = (size_t)count;
    call.root = root;
    return enqueue(name, comm, &call);
}

int MPIX_Allreduce_enqueue(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                           MPI_Op op, MPI_Comm comm) {
    return enqueue_reduction("MPIX_Allreduce_enqueue", GPUCOLL_COLL_ALLREDUCE, sendbuf, recvbuf,
                             count, datatype, op, 0, comm);
}

int MPIX_Reduce_enqueue(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                        MPI_Op op, int root, MPI_Comm comm) {
    return enqueue_reduction("MPIX_Reduce_enqueue", GPUCOLL_COLL_REDUCE, sendbuf, recvbuf, count,
                             datatype, op, root, comm);
}

int MPIX_Bcast_enqueue(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
    static const char name[] = "MPIX_Bcast_enqueue";
    gpucoll_call_t call = {0};
    call.coll = GPUCOLL_COLL_BCAST;
    int rc = as_bytes(name, comm, datatype, count, &call);
    if (MPI_SUCCESS != rc) return rc;
    call.recvbuf = buffer;
    call.root = root;
    return enqueue(name, comm, &call);
}

int MPIX_Allgather_enqueue(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                           int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    static const char name[] = "MPIX_Allgather_enqueue";
    gpucoll_call_t call = {0};
    call.coll = GPUCOLL_COLL_ALLGATHER;
    int rc = as_bytes(name, comm, recvtype, recvcount, &call);
    if (MPI_SUCCESS != rc) return rc;
    if (MPI_IN_PLACE != sendbuf) {
        gpucoll_call_t send = {0};
        rc = as_bytes(name, comm, sendtype, sendcount, &send);
        if (MPI_SUCCESS != rc) return rc;
        if (send.count != call.count)
            return fail(comm, MPI_ERR_TRUNCATE,
                        "%s: the send signature (%zu bytes) differs from the receive one "
                        "(%zu bytes per rank)",
                        name, send.count, call.count);
    }
    call.sendbuf = send_of(sendbuf);
    call.recvbuf = recvbuf;
    return enqueue(name, comm, &call);
}

int MPIX_Reduce_scatter_block_enqueue(const void* sendbuf, void* recvbuf, int recvcount,
                                      MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    return enqueue_reduction("MPIX_Reduce_scatter_block_enqueue", GPUCOLL_COLL_REDUCE_SCATTER_BLOCK,
                             sendbuf, recvbuf, recvcount, datatype, op, 0, comm);
}

int MPIX_Reduce_scatter_enqueue(const void* sendbuf, void* recvbuf, const int recvcounts[],
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
    static const char name[] = "MPIX_Reduce_scatter_enqueue";
    gpucoll_call_t call = {0};
    call.coll = GPUCOLL_COLL_REDUCE_SCATTER;
    int rc = reduction(name, comm, datatype, op, &call);
    if (MPI_SUCCESS != rc) return rc;
    int size = 0;
    MPI_Comm_size(comm, &size);
    size_t* counts = malloc(sizeof *counts * (size_t)(size > 0 ? size : 1));
    if (NULL == counts) return fail(comm, MPI_ERR_NO_MEM, "%s: out of memory", name);
    for (int p = 0; p < size; ++p) {
        if (recvcounts[p] < 0) {
            free(counts);
            return fail(comm, MPI_ERR_COUNT, "%s: negative count for rank %d", name, p);
        }
        counts[p] = (size_t)recvcounts[p];
    }
    call.sendbuf = send_of(sendbuf);
    call.recvbuf = recvbuf;
    call.counts = counts;
    rc = enqueue(name, comm, &call); /* the core copies what the stream needs */
    free(counts);
    return rc;
}
