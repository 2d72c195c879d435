/*
 * test_stream.c - stream-ordered collectives through libgpucoll_mpix
 * (MPICH's MPIX stream API), on every rank:
 *   - the call returns before the stream reaches it: the stream is held by a
 *     host word, the enqueue returns, the result buffer still holds its old
 *     bytes (read without the stream), then the word releases the stream and
 *     the result is right after a stream synchronisation;
 *   - produce -> enqueue -> consume with many calls in flight (the stream
 *     held while all are enqueued), every collective, in place too, sizes of
 *     several chunks (slot reuse);
 *   - two stream communicators on two streams, calls interleaved;
 *   - refusals at enqueue time with their reason (host buffers, a datatype
 *     with holes, MPI_MAXLOC, a user operation, a communicator without a
 *     stream);
 * --fail: rank 1's copies of 4093 bytes fail on the stream (emu fault
 *   injection, GPUCOLL_EMU_FAIL_COPY_BYTES set by stream.sh): every rank
 *   learns it (gpucoll_mpix_stream_status, the next enqueue), nobody hangs.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpucoll.h"
#include "gpucoll_mpix.h"

static int rank, size, errors;

#define CHECK(cond, ...)                               \
    do {                                               \
        if (!(cond)) {                                 \
            fprintf(stderr, "rank %d: FAIL: ", rank);  \
            fprintf(stderr, __VA_ARGS__);              \
            fprintf(stderr, " (line %d)\n", __LINE__); \
            ++errors;                                  \
        }                                              \
    } while (0)

#define OK(call) CHECK(0 == (call), "%s failed: %s", #call, gpucoll_last_error())

static void* dev(size_t bytes) {
    void* p = NULL;
    OK(gpucoll_malloc_device(&p, bytes));
    return p;
}

/* A stream communicator on a new stream of gpucoll. */
static MPI_Comm stream_comm(void** stream, MPIX_Stream* s) {
    OK(gpucoll_stream_create(stream));
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    MPIX_Info_set_hex(info, "value", stream, sizeof *stream);
    CHECK(MPI_SUCCESS == MPIX_Stream_create(info, s), "MPIX_Stream_create");
    MPI_Info_free(&info);
    MPI_Comm comm = MPI_COMM_NULL;
    CHECK(MPI_SUCCESS == MPIX_Stream_comm_create(MPI_COMM_WORLD, *s, &comm),
          "MPIX_Stream_comm_create: %s", gpucoll_mpix_last_error());
    return comm;
}

static int32_t value(int r, int i, size_t k) {
    return (int32_t)(r * 1000 + i * 7 + (int)(k % 1013));
}

/* 1. The enqueue returns while the stream is held; the result comes after. */
static void test_held(MPI_Comm comm, void* stream) {
    const size_t n = 70000; /* 280 KB: two chunks */
    int32_t* host = malloc(n * sizeof *host);
    int32_t* out = malloc(n * sizeof *out);
    int32_t* d = dev(n * sizeof *d);
    for (size_t k = 0; k < n; ++k) host[k] = value(rank, 0, k);
    OK(gpucoll_memcpy(d, host, n * sizeof *d));
    static uint32_t gate;
    __atomic_store_n(&gate, 0, __ATOMIC_RELEASE);
    OK(gpucoll_stream_wait_host(stream, &gate, 1));
    CHECK(
        MPI_SUCCESS == MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, (int)n, MPI_INT32_T, MPI_SUM, comm),
        "enqueue: %s", gpucoll_mpix_last_error());
    /* Returned; the stream is still held: the buffer is untouched. */
    OK(gpucoll_memcpy(out, d, n * sizeof *d));
    CHECK(0 == memcmp(out, host, n * sizeof *out), "the held stream ran the allreduce early");
    MPI_Barrier(MPI_COMM_WORLD); /* every rank enqueued with its stream held */
    __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
    OK(gpucoll_stream_synchronize(stream));
    OK(gpucoll_memcpy(out, d, n * sizeof *d));
    for (size_t k = 0; k < n; ++k) {
        int32_t want = 0;
        for (int r = 0; r < size; ++r) want += value(r, 0, k);
        if (out[k] != want) {
            CHECK(0, "held allreduce: element %zu is %d, want %d", k, out[k], want);
            break;
        }
    }
    OK(gpucoll_free_device(d));
    free(host);
    free(out);
}

/* 2. produce -> enqueue -> consume, many calls in flight, every collective. */
enum { kCalls = 24 };
static void test_ordering(MPI_Comm comm, void* stream) {
    const size_t n = 100000; /* elements per rank block: 400 KB */
    const size_t total = n * (size_t)size;
    int32_t* in[kCalls];
    int32_t* out[kCalls];
    int32_t* d_in = dev(total * sizeof(int32_t));
    int32_t* d_out = dev(total * sizeof(int32_t));
    int counts[64];
    static uint32_t gate;
    __atomic_store_n(&gate, 0, __ATOMIC_RELEASE);
    OK(gpucoll_stream_wait_host(stream, &gate, 1)); /* everything below is in flight */
    for (int i = 0; i < kCalls; ++i) {
        in[i] = malloc(total * sizeof(int32_t));
        out[i] = malloc(total * sizeof(int32_t));
        for (size_t k = 0; k < total; ++k) in[i][k] = value(rank, i, k);
        memset(out[i], 0xee, total * sizeof(int32_t));
        OK(gpucoll_memcpy_async(d_in, in[i], total * sizeof(int32_t), stream));
        OK(gpucoll_memcpy_async(d_out, out[i], total * sizeof(int32_t), stream));
        const int kind = i % 8, root = i % size;
        int rc = MPI_SUCCESS;
        switch (kind) {
            case 0:
                rc = MPIX_Allreduce_enqueue(d_in, d_out, (int)n, MPI_INT32_T, MPI_SUM, comm);
                break;
            case 1:
                rc = MPIX_Allreduce_enqueue(MPI_IN_PLACE, d_in, (int)n, MPI_INT, MPI_MAX, comm);
                break;
            case 2:
                rc = MPIX_Bcast_enqueue(d_in, (int)n, MPI_INT, root, comm);
                break;
            case 3:
                rc = MPIX_Allgather_enqueue(d_in, (int)n, MPI_INT, d_out, (int)n, MPI_INT, comm);
                break;
            case 4:
                rc = MPIX_Reduce_scatter_block_enqueue(d_in, d_out, (int)n, MPI_INT, MPI_SUM, comm);
                break;
            case 5:
                for (int p = 0; p < size; ++p) counts[p] = (int)(p % 2 ? n / 3 : n);
                rc = MPIX_Reduce_scatter_enqueue(d_in, d_out, counts, MPI_INT, MPI_SUM, comm);
                break;
            case 6:
                rc = MPIX_Reduce_enqueue(d_in, d_out, (int)n, MPI_INT, MPI_SUM, root, comm);
                break;
            default:
                rc = MPIX_Allgather_enqueue(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, d_in, (int)n,
                                            MPI_INT, comm);
                break;
        }
        CHECK(MPI_SUCCESS == rc, "call %d: %s", i, gpucoll_mpix_last_error());
        const bool result_in_input = kind == 1 || kind == 2 || kind == 7;
        OK(gpucoll_memcpy_async(out[i], result_in_input ? d_in : d_out, total * sizeof(int32_t),
                                stream));
    }
    __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
    OK(gpucoll_stream_synchronize(stream));
    for (int i = 0; i < kCalls; ++i) {
        const int kind = i % 8, root = i % size;
        size_t first = 0, len = n;
        for (int p = 0; p < size; ++p) counts[p] = (int)(p % 2 ? n / 3 : n);
        if (kind == 3 || kind == 7) len = total;
        if (kind == 5) {
            for (int p = 0; p < rank; ++p) first += (size_t)counts[p];
            len = (size_t)counts[rank];
        }
        if (kind == 4) first = (size_t)rank * n;
        for (size_t k = 0; k < len; ++k) {
            int32_t want = 0;
            switch (kind) {
                case 1:
                    want = value(size - 1, i, k);
                    break;
                case 2:
                    want = value(root, i, k);
                    break;
                case 3:
                case 7:
                    want = value((int)(k / n), i, kind == 3 ? k % n : k);
                    break;
                case 6:
                    if (rank != root)
                        want = (int32_t)0xeeeeeeee;
                    else
                        for (int r = 0; r < size; ++r) want += value(r, i, k);
                    break;
                default:
                    for (int r = 0; r < size; ++r) want += value(r, i, first + k);
                    break;
            }
            if (out[i][k] != want) {
                CHECK(0, "call %d (kind %d, root %d): element %zu is %d, want %d", i, kind, root, k,
                      out[i][k], want);
                break;
            }
        }
        free(in[i]);
        free(out[i]);
    }
    OK(gpucoll_free_device(d_in));
    OK(gpucoll_free_device(d_out));
}

/* 3. Two stream communicators on two streams, interleaved. */
static void test_two(MPI_Comm a, void* sa, MPI_Comm b, void* sb) {
    const size_t n = 30000;
    int32_t *da = dev(n * 4), *db = dev(n * 4);
    int32_t* ha = malloc(n * 4);
    int32_t* hb = malloc(n * 4);
    int32_t* ra = malloc(n * 4);
    int32_t* rb = malloc(n * 4);
    for (size_t k = 0; k < n; ++k) {
        ha[k] = value(rank, 1, k);
        hb[k] = value(rank, 2, k);
    }
    OK(gpucoll_memcpy_async(da, ha, n * 4, sa));
    OK(gpucoll_memcpy_async(db, hb, n * 4, sb));
    for (int i = 0; i < 6; ++i) {
        CHECK(MPI_SUCCESS == MPIX_Allreduce_enqueue(MPI_IN_PLACE, da, (int)n, MPI_INT, MPI_MAX, a),
              "a");
        CHECK(MPI_SUCCESS == MPIX_Allreduce_enqueue(MPI_IN_PLACE, db, (int)n, MPI_INT, MPI_MIN, b),
              "b");
    }
    OK(gpucoll_memcpy_async(ra, da, n * 4, sa));
    OK(gpucoll_memcpy_async(rb, db, n * 4, sb));
    OK(gpucoll_stream_synchronize(sb));
    OK(gpucoll_stream_synchronize(sa));
    for (size_t k = 0; k < n; ++k) {
        if (ra[k] != value(size - 1, 1, k) || rb[k] != value(0, 2, k)) {
            CHECK(0, "two streams: element %zu is %d/%d", k, ra[k], rb[k]);
            break;
        }
    }
    OK(gpucoll_free_device(da));
    OK(gpucoll_free_device(db));
    free(ha);
    free(hb);
    free(ra);
    free(rb);
}

static void user_op(void* in, void* inout, int* len, MPI_Datatype* t) {
    (void)in;
    (void)inout;
    (void)len;
    (void)t;
}

/* 4. Refusals at enqueue time, with the reason. */
static void expect_refusal(int rc, int code, const char* words, const char* what) {
    CHECK(code == rc, "%s: error %d, want %d (%s)", what, rc, code, gpucoll_mpix_last_error());
    CHECK(NULL != strstr(gpucoll_mpix_last_error(), words), "%s: message \"%s\" lacks \"%s\"", what,
          gpucoll_mpix_last_error(), words);
}

static void test_refusals(MPI_Comm comm) {
    int host[16] = {0};
    int* d = dev(sizeof host * 4);
    expect_refusal(MPIX_Allreduce_enqueue(host, d, 16, MPI_INT, MPI_SUM, comm),
                   MPI_ERR_UNSUPPORTED_OPERATION, "host memory", "host send buffer");
    expect_refusal(MPIX_Bcast_enqueue(host, 16, MPI_INT, 0, comm), MPI_ERR_UNSUPPORTED_OPERATION,
                   "host memory", "host bcast buffer");
    MPI_Datatype holes;
    MPI_Type_vector(4, 1, 2, MPI_INT, &holes);
    MPI_Type_commit(&holes);
    expect_refusal(MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, 2, holes, MPI_SUM, comm), MPI_ERR_TYPE,
                   "predefined", "derived datatype");
    expect_refusal(MPIX_Bcast_enqueue(d, 2, holes, 0, comm), MPI_ERR_TYPE, "holes",
                   "bcast of a datatype with holes");
    MPI_Type_free(&holes);
    expect_refusal(MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, 4, MPI_2INT, MPI_MAXLOC, comm),
                   MPI_ERR_TYPE, "predefined", "MPI_2INT");
    expect_refusal(MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, 4, MPI_INT, MPI_MAXLOC, comm),
                   MPI_ERR_OP, "MPI_MAXLOC", "MPI_MAXLOC");
    MPI_Op op;
    MPI_Op_create(user_op, 1, &op);
    expect_refusal(MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, 4, MPI_INT, op, comm), MPI_ERR_OP,
                   "user operations", "user operation");
    MPI_Op_free(&op);
    expect_refusal(MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
                   MPI_ERR_COMM, "not a stream communicator", "plain communicator");
    expect_refusal(MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, 4, MPI_FLOAT, MPI_BAND, comm),
                   MPI_ERR_UNSUPPORTED_OPERATION, "do not do it", "BAND on float");
    CHECK(MPI_SUCCESS == gpucoll_mpix_stream_status(comm), "status after refusals: %s",
          gpucoll_mpix_last_error());
    OK(gpucoll_free_device(d));
}

/* --fail: rank 1's copy-in of 4093 bytes fails on its stream. */
static void test_failure(MPI_Comm comm, void* stream) {
    int8_t* d = dev(8192);
    OK(gpucoll_memcpy(d, (int8_t[8192]){0}, 8192));
    CHECK(MPI_SUCCESS == MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, 100, MPI_INT8_T, MPI_SUM, comm),
          "first call");
    for (int i = 0; i < 3; ++i)
        CHECK(
            MPI_SUCCESS == MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, 4093, MPI_INT8_T, MPI_SUM, comm),
            "call %d: %s", i, gpucoll_mpix_last_error());
    const int synced = gpucoll_stream_synchronize(stream); /* returns: nobody hangs */
    if (1 == rank) CHECK(0 != synced, "rank 1's stream reported no error");
    int status = MPI_SUCCESS;
    for (int t = 0; t < 2000 && MPI_SUCCESS == status; ++t) {
        status = gpucoll_mpix_stream_status(comm);
        if (MPI_SUCCESS == status) nanosleep(&(struct timespec){0, 5000000}, NULL);
    }
    CHECK(MPI_SUCCESS != status, "the failure was not reported by gpucoll_mpix_stream_status");
    printf("rank %d learned: %s\n", rank, gpucoll_mpix_last_error());
    const int rc = MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, 100, MPI_INT8_T, MPI_SUM, comm);
    CHECK(MPI_SUCCESS != rc && NULL != strstr(gpucoll_mpix_last_error(), "failed earlier"),
          "the next enqueue did not report the failure (%d: %s)", rc, gpucoll_mpix_last_error());
    OK(gpucoll_free_device(d));
}

/* --between-nodes (ranks on faked nodes, GPUCOLL_HOSTID): refused with the reason. */
static void test_between_nodes(MPI_Comm comm) {
    int* d = dev(64);
    expect_refusal(MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, 4, MPI_INT, MPI_SUM, comm),
                   MPI_ERR_UNSUPPORTED_OPERATION, "nodes", "a communicator across nodes");
    if (0 == rank) printf("refused: %s\n", gpucoll_mpix_last_error());
    OK(gpucoll_free_device(d));
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const bool fail_mode = argc > 1 && 0 == strcmp(argv[1], "--fail");
    const bool nodes_mode = argc > 1 && 0 == strcmp(argv[1], "--between-nodes");
    void *sa = NULL, *sb = NULL;
    MPIX_Stream xa = MPIX_STREAM_NULL, xb = MPIX_STREAM_NULL;
    MPI_Comm a = stream_comm(&sa, &xa);
    if (fail_mode) {
        test_failure(a, sa);
    } else if (nodes_mode) {
        test_between_nodes(a);
    } else {
        MPI_Comm b = stream_comm(&sb, &xb);
        test_held(a, sa);
        test_ordering(a, sa);
        test_two(a, sa, b, sb);
        test_refusals(a);
        MPI_Comm_free(&b);
        MPIX_Stream_free(&xb);
        OK(gpucoll_stream_destroy(sb));
    }
    MPI_Comm_free(&a);
    MPIX_Stream_free(&xa);
    gpucoll_stream_destroy(sa);
    int all = 0;
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (0 == rank)
        printf("%s: test_stream%s, %d ranks\n", all ? "FAIL" : "PASS",
               fail_mode    ? " --fail"
               : nodes_mode ? " --between-nodes"
                            : "",
               size);
    MPI_Finalize();
    return all ? 1 : 0;
}
