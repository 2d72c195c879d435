/*
 * test_robustness.c - what must never hang or go wrong on the accelerated path:
 *  1. progress: a rank waiting for its peers in a device collective keeps Open
 *     MPI's own communication going (a peer is blocked in a receive that
 *     needs our send to progress);
 *  2. mpi_assert_memory_alloc_kinds listing host-capable kinds next to device
 *     ones ("cuda:host,cuda:device"): mixed memory in one call stays agreed;
 *  3. a failure after posting (rank 1's copy fails: GPUCOLL_EMU_FAIL_COPY_BYTES):
 *     the call fails on every rank, the communicator works on (staged) for
 *     every later call;
 *  4. the same failure followed at once by MPI_Comm_free: teardown must not
 *     wait for the rank that failed;
 *  5. device memory whose allocation the backend cannot determine (a failed
 *     driver attribute; emu: GPUCOLL_EMU_INCOMPLETE_SIZE) is staged: never
 *     accelerated, never handed to Open MPI as host memory;
 *  6. MPI_CHAR (OSU's default datatype) is accelerated, and its sums wrap
 *     around as C's char arithmetic does (Open MPI's op/avx saturates);
 *  7. buffers that do not fit their allocation (a 4 MiB allreduce into 1 MiB,
 *     bcast counts that differ): MPI_ERR_BUFFER on every rank (accelerated)
 *     or on the rank with the bad buffer (--staged), nothing written; a
 *     staged span that begins below its allocation (negative lower bound):
 *     MPI_ERR_BUFFER on that rank, nothing read or written; device
 *     MPI_Reduce_local with a count larger than a buffer: MPI_ERR_BUFFER;
 *  8. a peer that overstates its allocations (--lie): every rank fails the
 *     call instead of reading past what it mapped;
 *  9. a rank that cannot stage (--stage-fail: robustness.sh makes rank 1's
 *     host allocations for staging fail, GPUCOLL_TEST_STAGING_FAIL, and
 *     forces every collective staged): it still takes part, on zeros; every
 *     rank returns, rank 1 with MPI_ERR_NO_MEM (blocking and nonblocking).
 * Run at np >= 2 (run by robustness.sh).
 */
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpucoll.h"

static int fails = 0;
#define CHECK(cond, ...)                            \
    do {                                            \
        if (!(cond)) {                              \
            fprintf(stderr, "[%d] FAIL: ", g_rank); \
            fprintf(stderr, __VA_ARGS__);           \
            fprintf(stderr, "\n");                  \
            fails++;                                \
        }                                           \
    } while (0)
static int g_rank, g_size;

static float* device_floats(size_t n, float value) {
    float* h = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = value;
    void* d = NULL;
    if (gpucoll_malloc_device(&d, n * sizeof(float)) != 0 ||
        gpucoll_memcpy(d, h, n * sizeof(float)) != 0) {
        fprintf(stderr, "device memory: %s\n", gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    free(h);
    return d;
}

static void check_all(const float* d, size_t n, float want, const char* what) {
    float* h = malloc(n * sizeof(float));
    gpucoll_memcpy(h, d, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        if (h[i] != want) {
            CHECK(0, "%s: element %zu is %g, expected %g", what, i, h[i], want);
            break;
        }
    free(h);
}

static void progress_while_waiting(void) {
    const size_t big = 8u << 20, n = 1024;
    char* h = calloc(big, 1);
    float* d = device_floats(n, 1.0f);
    MPI_Allreduce(MPI_IN_PLACE, d, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* set up */
    if (g_rank == 0) {
        MPI_Request r;
        MPI_Isend(h, (int)big, MPI_BYTE, 1, 7, MPI_COMM_WORLD, &r);
        MPI_Allreduce(MPI_IN_PLACE, d, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else {
        if (g_rank == 1) MPI_Recv(h, (int)big, MPI_BYTE, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(MPI_IN_PLACE, d, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    check_all(d, n, (float)(g_size * g_size), "allreduce next to a pending send");
    gpucoll_free_device(d);
    free(h);
}

static void host_capable_kinds_keep_agreement(void) {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_assert_memory_alloc_kinds", "cuda:host,cuda:device");
    MPI_Comm c;
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c);
    MPI_Info_free(&info);
    enum { N = 100 };
    float host[N];
    for (int i = 0; i < N; i++) host[i] = 1.0f;
    float* d = device_floats(N, 1.0f);
    float* buf = g_rank == 0 ? host : d; /* host memory on rank 0, device elsewhere */
    MPI_Allreduce(MPI_IN_PLACE, buf, N, MPI_FLOAT, MPI_SUM, c);
    if (g_rank == 0) {
        CHECK(host[0] == (float)g_size && host[N - 1] == (float)g_size, "mixed kinds: %g", host[0]);
    } else {
        check_all(d, N, (float)g_size, "mixed kinds");
    }
    gpucoll_free_device(d);
    MPI_Comm_free(&c);
}

static uint64_t allreduce_calls(gpucoll_path_t path) {
    gpucoll_counters_t k;
    memset(&k, 0, sizeof k);
    gpucoll_counters_get(&k);
    return k.calls[GPUCOLL_COLL_ALLREDUCE][path];
}

static void incomplete_pointer_info_is_staged(size_t bytes) {
    const size_t n = bytes / sizeof(float);
    float* d = device_floats(n, 1.0f);   /* queries without its range */
    float* ok = device_floats(64, 1.0f); /* an ordinary allocation */
    const uint64_t staged = allreduce_calls(GPUCOLL_PATH_STAGED);
    MPI_Allreduce(MPI_IN_PLACE, d, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    check_all(d, n, (float)g_size, "allreduce on memory of unknown range");
    CHECK(allreduce_calls(GPUCOLL_PATH_STAGED) == staged + 1,
          "memory of unknown range: the allreduce was not staged");
    const uint64_t accelerated = allreduce_calls(GPUCOLL_PATH_ACCELERATED);
    MPI_Allreduce(MPI_IN_PLACE, ok, 64, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    check_all(ok, 64, (float)g_size, "allreduce next to it");
    CHECK(allreduce_calls(GPUCOLL_PATH_ACCELERATED) == accelerated + 1,
          "an ordinary allocation after it was not accelerated");
    gpucoll_free_device(d);
    gpucoll_free_device(ok);
}

static void char_sums_wrap_around(void) {
    enum { N = 1000 };
    char h[N];
    for (int i = 0; i < N; i++) h[i] = (char)(100 + (i % 3));
    char* d = NULL;
    if (gpucoll_malloc_device((void**)&d, N) != 0 || gpucoll_memcpy(d, h, N) != 0) {
        fprintf(stderr, "device memory: %s\n", gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const uint64_t accelerated = allreduce_calls(GPUCOLL_PATH_ACCELERATED);
    MPI_Allreduce(MPI_IN_PLACE, d, N, MPI_CHAR, MPI_SUM, MPI_COMM_WORLD);
    CHECK(allreduce_calls(GPUCOLL_PATH_ACCELERATED) == accelerated + 1,
          "MPI_CHAR allreduce was not accelerated");
    gpucoll_memcpy(h, d, N);
    for (int i = 0; i < N; i++) {
        /* two's complement: the sum modulo 256, as the platform's char */
        const char want = (char)(unsigned char)((unsigned)(100 + i % 3) * (unsigned)g_size);
        if (h[i] != want) {
            CHECK(0, "MPI_CHAR SUM element %d: %d, expected %d (wrap-around)", i, (int)h[i],
                  (int)want);
            break;
        }
    }
    gpucoll_free_device(d);
}

/* A device allreduce on c after a failed call: succeeds, correct. */
static void still_works(MPI_Comm c, const char* when) {
    float* v = device_floats(64, 2.0f);
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, 64, MPI_FLOAT, MPI_SUM, c);
    CHECK(rc == MPI_SUCCESS, "allreduce %s: rc %d", when, rc);
    check_all(v, 64, 2.0f * (float)g_size, when);
    gpucoll_free_device(v);
}

/* Copies of this size fail on rank 1 (GPUCOLL_EMU_FAIL_COPY_BYTES, set by
 * robustness.sh): a fault in the middle of a call. */
enum { kInjectedBytes = 4093 };

/* Buffers that do not fit: every rank gets MPI_ERR_BUFFER (accelerated path)
 * or the rank with the bad buffer does (staged: its peers cannot know), no
 * byte is written anywhere, and the communicator works on. */
static void overrun_is_refused(bool staged) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    const size_t n = 1 << 20;                                   /* 4 MiB of floats */
    float* send = device_floats(n, 1.0f);                       /* right size everywhere */
    float* recv = device_floats(g_rank == 1 ? n / 4 : n, 7.0f); /* 1 MiB on rank 1 */
    float* neighbour = device_floats(n / 4, 9.0f);              /* allocated right after it */
    int rc = MPI_Allreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, c);
    int eclass = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &eclass);
    if (staged && g_rank != 1) {
        CHECK(rc == MPI_SUCCESS, "staged overrun: rank %d (buffers fine) got an error", g_rank);
    } else {
        CHECK(eclass == MPI_ERR_BUFFER, "overrun: rank %d got error class %d, not MPI_ERR_BUFFER",
              g_rank, eclass);
        check_all(recv, g_rank == 1 ? n / 4 : n, 7.0f, "receive buffer after the refused call");
    }
    check_all(send, n, 1.0f, "send buffer after the overrun");
    check_all(neighbour, n / 4, 9.0f, "the allocation next to the short buffer");
    /* bcast counts that differ between ranks: an error everywhere (accelerated)
     * or whatever Open MPI's host bcast makes of it (staged): never a crash in
     * libgpucoll */
    if (!staged) {
        rc = MPI_Bcast(send, g_rank == 0 ? 1000 : 2000, MPI_FLOAT, 0, c);
        eclass = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) MPI_Error_class(rc, &eclass);
        CHECK(eclass == MPI_ERR_BUFFER, "bcast count mismatch: rank %d got error class %d", g_rank,
              eclass);
        check_all(send, n, 1.0f, "bcast buffer after the refused mismatch");
    }
    still_works(c, "after the refused calls");
    gpucoll_free_device(neighbour);
    gpucoll_free_device(recv);
    gpucoll_free_device(send);
    MPI_Comm_free(&c);
}

/* A span that begins below its allocation: a datatype whose data lies 64
 * bytes before the buffer pointer (true lower bound -64), elements 64 bytes
 * apart; bcast 2 of them, [ptr - 64, ptr + 4). Ranks other than 1 pass a
 * pointer 64 bytes into their allocation; rank 1 passes the allocation's
 * start. Derived datatype: staged. Rank 1 must refuse (MPI_ERR_BUFFER, no
 * byte read or written, still taking part); the others get the root's
 * data. */
static void span_below_allocation_is_refused(void) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    const MPI_Aint below = -64;
    MPI_Datatype one, t;
    MPI_Type_create_hindexed_block(1, 1, &below, MPI_FLOAT, &one);
    MPI_Type_create_resized(one, below, 64, &t);
    MPI_Type_commit(&t);
    MPI_Type_free(&one);
    enum { N = 64 }; /* floats per allocation: 256 bytes */
    float* d = device_floats(N, g_rank == 0 ? 1.0f : 7.0f);
    float* ptr = g_rank == 1 ? d : d + 16; /* rank 1: 64 bytes short below */
    int rc = MPI_Bcast(ptr, 2, t, 0, c);
    int eclass = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &eclass);
    if (g_rank == 1) {
        CHECK(eclass == MPI_ERR_BUFFER,
              "span below the allocation: rank 1 got error class %d, not MPI_ERR_BUFFER", eclass);
        check_all(d, N, 7.0f, "the allocation whose start the span lies below");
    } else {
        CHECK(rc == MPI_SUCCESS, "span below the allocation: rank %d (buffer fine) got error %d",
              g_rank, rc);
        float h[N];
        gpucoll_memcpy(h, d, sizeof h);
        for (int i = 0; i < N; i++) {
            const float want = g_rank == 0 || i == 0 || i == 16 ? 1.0f : 7.0f;
            if (h[i] != want) {
                CHECK(0, "bcast with a negative lower bound: float %d is %g, expected %g", i, h[i],
                      want);
                break;
            }
        }
    }
    MPI_Type_free(&t);
    still_works(c, "after the span below the allocation");
    gpucoll_free_device(d);
    MPI_Comm_free(&c);
}

/* Device MPI_Reduce_local with a count larger than one of its buffers:
 * MPI_ERR_BUFFER, nothing written (the short buffer, the other one, the
 * allocation after the short one all unchanged); the same staged, with a
 * host inout buffer. */
static void reduce_local_overrun_is_refused(void) {
    const size_t n = 1 << 18;                                   /* 1 MiB of floats */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); /* reduce_local reports there */
    for (int shortbuf = 0; shortbuf < 2; shortbuf++) {          /* 0: inbuf, 1: inoutbuf short */
        const char* which = shortbuf == 0 ? "input" : "inout";
        float* in = device_floats(shortbuf == 0 ? n / 4 : n, 1.0f);
        float* inout = device_floats(shortbuf == 1 ? n / 4 : n, 7.0f);
        float* neighbour = device_floats(n / 4, 9.0f); /* allocated right after them */
        int rc = MPI_Reduce_local(in, inout, (int)n, MPI_FLOAT, MPI_SUM);
        int eclass = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) MPI_Error_class(rc, &eclass);
        CHECK(eclass == MPI_ERR_BUFFER,
              "reduce_local, %s buffer short: error class %d, not MPI_ERR_BUFFER", which, eclass);
        check_all(inout, shortbuf == 1 ? n / 4 : n, 7.0f, "reduce_local's refused inout buffer");
        check_all(in, shortbuf == 0 ? n / 4 : n, 1.0f, "reduce_local's input buffer");
        check_all(neighbour, n / 4, 9.0f, "the allocation after reduce_local's buffers");
        gpucoll_free_device(neighbour);
        gpucoll_free_device(inout);
        gpucoll_free_device(in);
    }
    /* staged (a short device input, a host inout): refused before Open
     * MPI's reduce_local runs, the host buffer untouched (MPI_PROD: a
     * reduction with zeros in place of the input would zero it) */
    const size_t h = n; /* past what --lie's rank 1 overstates its allocations by */
    float* in = device_floats(h / 4, 1.0f);
    float* host = malloc(h * sizeof(float));
    for (size_t i = 0; i < h; i++) host[i] = 7.0f;
    int rc = MPI_Reduce_local(in, host, (int)h, MPI_FLOAT, MPI_PROD);
    int eclass = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &eclass);
    CHECK(eclass == MPI_ERR_BUFFER, "staged reduce_local, input short: error class %d", eclass);
    for (size_t i = 0; i < h; i++)
        if (host[i] != 7.0f) {
            CHECK(0, "staged reduce_local refused, host inout float %zu is %g, was 7", i, host[i]);
            break;
        }
    free(host);
    gpucoll_free_device(in);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
}

/* Rank 1 overstates its allocations (GPUCOLL_EMU_OVERSTATE_BYTES, set by
 * robustness.sh): its peers must not trust the sizes it posts. The call fails
 * on every rank; the communicator stages from then on, correct. */
static void lying_peer_fails_everywhere(void) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    const size_t n = 1 << 18; /* 1 MiB: two-shot, buffers posted to peers */
    float* v = device_floats(n, 1.0f);
    int rc = MPI_Allreduce(MPI_IN_PLACE, v, (int)n, MPI_FLOAT, MPI_SUM, c);
    int mine = rc != MPI_SUCCESS, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(all == g_size, "a peer's overstated allocation: %d of %d ranks reported an error", all,
          g_size);
    still_works(c, "after the refused peer");
    gpucoll_free_device(v);
    MPI_Comm_free(&c);
}

static void failure_then_staging(void) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    const int n = kInjectedBytes;
    /* Rank 1's copy of the bcast fails after it posted (as a device fault
     * would): robustness.sh sets GPUCOLL_EMU_FAIL_COPY_BYTES on rank 1. */
    char* d = NULL;
    gpucoll_malloc_device((void**)&d, (size_t)n);
    float* ok = device_floats(64, 1.0f);
    MPI_Allreduce(MPI_IN_PLACE, ok, 64, MPI_FLOAT, MPI_SUM, c); /* set up, accelerated */
    int rc = MPI_Bcast(d, n, MPI_BYTE, 0, c);
    int any_error = rc != MPI_SUCCESS, errors = 0;
    MPI_Allreduce(&any_error, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    /* Every rank of the call gets the error (also those whose own copy
     * went well: they must not return before the failure shows). */
    CHECK(errors == g_size, "the failing bcast returned an error on %d of %d ranks (rank %d: %s)",
          errors, g_size, g_rank, rc == MPI_SUCCESS ? "success" : "error");
    /* Later calls on the same communicator: all ranks decline, none hangs. */
    int x = g_rank == 0 ? 42 : 0;
    rc = MPI_Bcast(&x, 1, MPI_INT, 0, c);
    CHECK(rc == MPI_SUCCESS && x == 42, "host bcast after the failure: rc %d, x %d", rc, x);
    gpucoll_counters_reset();
    float* v = device_floats(64, 2.0f);
    rc = MPI_Allreduce(MPI_IN_PLACE, v, 64, MPI_FLOAT, MPI_SUM, c);
    gpucoll_counters_t k;
    gpucoll_counters_get(&k);
    CHECK(rc == MPI_SUCCESS, "device allreduce after the failure: rc %d", rc);
    CHECK(k.calls[GPUCOLL_COLL_ALLREDUCE][GPUCOLL_PATH_STAGED] == 1,
          "device allreduce after the failure took path %s, expected staged",
          gpucoll_path_name(k.last_path));
    check_all(v, 64, 2.0f * (float)g_size, "device allreduce after the failure");
    gpucoll_free_device(v);
    gpucoll_free_device(ok);
    gpucoll_free_device(d);
    MPI_Comm_free(&c);
}

static void failure_then_free(void) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    char* d = NULL;
    /* pool memory on rank 1: its results are copied back after the call, and
     * that copy (injected failure on rank 1) fails after the algorithm
     * finished */
    if (g_rank == 1)
        gpucoll_malloc_device_pool((void**)&d, kInjectedBytes);
    else
        gpucoll_malloc_device((void**)&d, kInjectedBytes);
    float* ok = device_floats(64, 1.0f);
    MPI_Allreduce(MPI_IN_PLACE, ok, 64, MPI_FLOAT, MPI_SUM, c);
    (void)MPI_Bcast(d, kInjectedBytes, MPI_BYTE, 0, c);
    MPI_Comm_free(&c); /* no collective in between */
    gpucoll_free_device(ok);
    gpucoll_free_device(d);
}

/* 9: rank 1 cannot stage. Every rank returns; rank 1 with MPI_ERR_NO_MEM and
 * nothing written, the others with rank 1's contribution as zeros. */
static void staging_failure_never_hangs(void) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    /* Open MPI 4.1 raises a failed collective request's error on
     * MPI_COMM_WORLD (ompi_errhandler_request_invoke) */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const size_t n = 1 << 16;
    const float others = (float)(g_size * (g_size + 1) / 2 - 2); /* ranks but 1, each rank+1 */
    float* send = device_floats(n, (float)(g_rank + 1));
    float* recv = device_floats(n * (size_t)g_size, 7.0f);
    char what[64];
    for (int k = 0; k < 6; k++) {
        MPI_Request q = MPI_REQUEST_NULL;
        int rc = MPI_SUCCESS;
        float want = others;
        size_t nout = n;
        switch (k) {
            case 0:
                snprintf(what, sizeof what, "allreduce");
                rc = MPI_Allreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, c);
                break;
            case 1:
                snprintf(what, sizeof what, "iallreduce");
                rc = MPI_Iallreduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, c, &q);
                if (rc == MPI_SUCCESS) rc = MPI_Wait(&q, MPI_STATUS_IGNORE);
                break;
            case 2:
                snprintf(what, sizeof what, "reduce to rank 0");
                rc = MPI_Reduce(send, recv, (int)n, MPI_FLOAT, MPI_SUM, 0, c);
                if (g_rank != 0) nout = 0;
                break;
            case 3:
                snprintf(what, sizeof what, "reduce_scatter_block");
                rc = MPI_Reduce_scatter_block(send, recv, (int)n / g_size, MPI_FLOAT, MPI_SUM, c);
                nout = n / (size_t)g_size;
                break;
            case 4:
                snprintf(what, sizeof what, "bcast from rank 0");
                rc = MPI_Bcast(g_rank == 0 ? send : recv, (int)n, MPI_FLOAT, 0, c);
                want = 1.0f;
                if (g_rank == 0) nout = 0;
                break;
            default:
                snprintf(what, sizeof what, "allgather (rank 0's block)");
                rc = MPI_Allgather(send, (int)n, MPI_FLOAT, recv, (int)n, MPI_FLOAT, c);
                want = 1.0f;
        }
        int eclass = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) MPI_Error_class(rc, &eclass);
        if (g_rank == 1) {
            CHECK(eclass == MPI_ERR_NO_MEM, "%s: rank 1 (cannot stage) got error class %d", what,
                  eclass);
            check_all(recv, n, 7.0f, what); /* nothing written */
        } else {
            CHECK(rc == MPI_SUCCESS, "%s: rank %d got error %d", what, g_rank, rc);
            if (nout > 0) check_all(recv, nout, want, what);
        }
        float* reset = device_floats(n * (size_t)g_size, 7.0f);
        gpucoll_memcpy(recv, reset, n * (size_t)g_size * sizeof(float));
        gpucoll_free_device(reset);
    }
    gpucoll_free_device(send);
    gpucoll_free_device(recv);
    MPI_Comm_free(&c);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (g_size < 2) {
        if (g_rank == 0) printf("test_robustness: needs 2 ranks or more\n");
        MPI_Finalize();
        return 77;
    }
    /* --staged: allreduce forced staged; --inject: rank 1's copies of
     * kInjectedBytes fail; --lie: rank 1 overstates its allocations */
    bool staged = false, inject = false, lie = false, stage_fail = false;
    for (int i = 1; i < argc; i++) {
        stage_fail |= strcmp(argv[i], "--stage-fail") == 0;
        staged |= strcmp(argv[i], "--staged") == 0;
        inject |= strcmp(argv[i], "--inject") == 0;
        lie |= strcmp(argv[i], "--lie") == 0;
    }
    if (stage_fail) { /* every other case stages on rank 1: this one alone */
        staging_failure_never_hangs();
        int all = 0;
        MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (g_rank == 0) printf("test_robustness --stage-fail: %s\n", all ? "FAIL" : "PASS");
        MPI_Finalize();
        return all ? 1 : 0;
    }
    progress_while_waiting();
    host_capable_kinds_keep_agreement();
    if (!staged) char_sums_wrap_around();
    /* The failures are injected with a too-small buffer, which only the emu
     * backend bounds-checks: on a GPU the copy would corrupt memory. */
    if (strcmp(gpucoll_backend(), "emu") == 0) {
        overrun_is_refused(staged);
        span_below_allocation_is_refused();
        reduce_local_overrun_is_refused();
        if (lie) lying_peer_fails_everywhere();
        if (inject) { /* robustness.sh sets GPUCOLL_EMU_FAIL_COPY_BYTES on rank 1 */
            failure_then_staging();
            failure_then_free();
        }
        const char* incomplete = getenv("GPUCOLL_EMU_INCOMPLETE_SIZE");
        if (incomplete != NULL) incomplete_pointer_info_is_staged(strtoul(incomplete, NULL, 10));
    }
    int all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("test_robustness: %s\n", all ? "FAIL" : "PASS");
    MPI_Finalize();
    return all ? 1 : 0;
}
