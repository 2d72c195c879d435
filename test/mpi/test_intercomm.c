/*
 * test_intercomm.c - device buffers on an intercommunicator (even world
 * ranks form group A, odd ones group B) never reach Open MPI's coll/inter:
 *  - allreduce, bcast (MPI_ROOT / MPI_PROC_NULL / remote root), allgather and
 *    reduce are staged: correct results, path "staged" on every rank that
 *    has a significant device buffer, nothing written where the buffer is
 *    not significant;
 *  - reduce_scatter_block and reduce_scatter (blocking and nonblocking) are
 *    staged: each group receives its blocks of the other group's reduction
 *    (send vectors as long as the sum of the own group's counts, which the
 *    standard makes equal in both groups);
 *  - host buffers on the same intercommunicator go to coll/inter (delegated).
 * Needs 2 ranks or more.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpucoll.h"

static int wrank, fails = 0;
#define CHECK(cond, ...)                           \
    do {                                           \
        if (!(cond)) {                             \
            fprintf(stderr, "[%d] FAIL: ", wrank); \
            fprintf(stderr, __VA_ARGS__);          \
            fprintf(stderr, "\n");                 \
            fails++;                               \
        }                                          \
    } while (0)

enum { N = 257 };

static int* device_ints(int n, int value) {
    int* h = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) h[i] = value;
    void* d = NULL;
    if (gpucoll_malloc_device(&d, sizeof(int) * (size_t)n) != 0 ||
        gpucoll_memcpy(d, h, sizeof(int) * (size_t)n) != 0) {
        fprintf(stderr, "device memory: %s\n", gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    free(h);
    return d;
}

/* Element i of the n ints at d equals want(i). */
static void check_ints(const int* d, int n, int (*want)(int, const void*), const void* ctx,
                       const char* what) {
    int* h = malloc(sizeof(int) * (size_t)n);
    gpucoll_memcpy(h, d, sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        if (h[i] != want(i, ctx)) {
            CHECK(0, "%s: element %d is %d, expected %d", what, i, h[i], want(i, ctx));
            break;
        }
    free(h);
}

static int constant(int i, const void* ctx) {
    (void)i;
    return *(const int*)ctx;
}
static int block_of(int i, const void* ctx) { /* allgather: block r holds remote rank r's value */
    (void)ctx;
    return 1000 + i / N;
}

static uint64_t calls(gpucoll_coll_t coll, gpucoll_path_t path) {
    gpucoll_counters_t k;
    memset(&k, 0, sizeof k);
    gpucoll_counters_get(&k);
    return k.calls[coll][path];
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int wsize;
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    if (wsize < 2) {
        if (wrank == 0) printf("test_intercomm: needs 2 ranks or more\n");
        MPI_Finalize();
        return 77;
    }
    const int group = wrank % 2; /* 0: A (even world ranks), 1: B (odd) */
    MPI_Comm local, inter;
    MPI_Comm_split(MPI_COMM_WORLD, group, wrank, &local);
    /* remote leader: world rank 1 for A, world rank 0 for B */
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, group == 0 ? 1 : 0, 7, &inter);
    MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN);
    int lrank, lsize, rsize;
    MPI_Comm_rank(inter, &lrank);
    MPI_Comm_size(inter, &lsize);
    MPI_Comm_remote_size(inter, &rsize);
    /* value of a rank: 1000 + its local rank in its group */
    const int mine = 1000 + lrank;
    /* sum over the remote group of 1000 + r */
    const int remote_sum = rsize * 1000 + rsize * (rsize - 1) / 2;

    /* allreduce: each group gets the reduction of the other group's data */
    int* s = device_ints(N, mine);
    int* r = device_ints(N, -1);
    uint64_t staged = calls(GPUCOLL_COLL_ALLREDUCE, GPUCOLL_PATH_STAGED);
    int rc = MPI_Allreduce(s, r, N, MPI_INT, MPI_SUM, inter);
    CHECK(rc == MPI_SUCCESS, "allreduce: rc %d", rc);
    check_ints(r, N, constant, &remote_sum, "allreduce");
    CHECK(calls(GPUCOLL_COLL_ALLREDUCE, GPUCOLL_PATH_STAGED) == staged + 1,
          "allreduce on device buffers was not staged");

    /* bcast from A's rank 0 to group B */
    const int root_value = 4242, untouched = -7;
    int* b = device_ints(N, group == 0 && lrank == 0 ? root_value : untouched);
    const int root = group == 0 ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    rc = MPI_Bcast(b, N, MPI_INT, root, inter);
    CHECK(rc == MPI_SUCCESS, "bcast: rc %d", rc);
    const int bwant = group == 1 || lrank == 0 ? root_value : untouched;
    check_ints(b, N, constant, &bwant, "bcast");

    /* allgather: each rank gets the remote group's blocks in remote rank order */
    int* g = device_ints(N * rsize, -1);
    rc = MPI_Allgather(s, N, MPI_INT, g, N, MPI_INT, inter);
    CHECK(rc == MPI_SUCCESS, "allgather: rc %d", rc);
    check_ints(g, N * rsize, block_of, NULL, "allgather");

    /* reduce: group B's data to A's rank 0 */
    int* red = device_ints(N, untouched);
    const int rroot = group == 0 ? (lrank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    rc = MPI_Reduce(s, red, N, MPI_INT, MPI_SUM, rroot, inter);
    CHECK(rc == MPI_SUCCESS, "reduce: rc %d", rc);
    const int rwant = group == 0 && lrank == 0 ? remote_sum : untouched;
    check_ints(red, N, constant, &rwant, "reduce");

    /* gather: group B's blocks to A's rank 0 (in B's rank order) */
    int* ga = device_ints(N * rsize, untouched);
    uint64_t gstaged = calls(GPUCOLL_COLL_GATHER, GPUCOLL_PATH_STAGED);
    rc = MPI_Gather(s, N, MPI_INT, ga, N, MPI_INT, rroot, inter);
    CHECK(rc == MPI_SUCCESS, "gather: rc %d", rc);
    if (group == 0 && lrank == 0) {
        check_ints(ga, N * rsize, block_of, NULL, "gather at MPI_ROOT");
    } else {
        check_ints(ga, N * rsize, constant, &untouched, "gather: untouched receive buffer");
    }
    /* MPI_PROC_NULL ranks pass no significant buffer: delegated, not staged */
    const uint64_t gwant = group == 0 && lrank != 0 ? 0 : 1;
    CHECK(calls(GPUCOLL_COLL_GATHER, GPUCOLL_PATH_STAGED) == gstaged + gwant,
          "gather on device buffers: staged %llu times, expected %llu",
          (unsigned long long)(calls(GPUCOLL_COLL_GATHER, GPUCOLL_PATH_STAGED) - gstaged),
          (unsigned long long)gwant);

    /* scatter: A's rank 0 sends block r (1000 + r) to B's rank r */
    int* sc = device_ints(N * rsize, 0);
    if (group == 0 && lrank == 0) {
        int* h = malloc(sizeof(int) * (size_t)(N * rsize));
        for (int i = 0; i < N * rsize; i++) h[i] = 1000 + i / N;
        gpucoll_memcpy(sc, h, sizeof(int) * (size_t)(N * rsize));
        free(h);
    }
    int* sr = device_ints(N, untouched);
    rc = MPI_Scatter(sc, N, MPI_INT, sr, N, MPI_INT, rroot, inter);
    CHECK(rc == MPI_SUCCESS, "scatter: rc %d", rc);
    const int swant = group == 1 ? mine : untouched;
    check_ints(sr, N, constant, &swant, "scatter");

    /* alltoall: from every remote rank r, a block of 1000 + r */
    int* as = device_ints(N * rsize, mine);
    int* ar = device_ints(N * rsize, -1);
    rc = MPI_Alltoall(as, N, MPI_INT, ar, N, MPI_INT, inter);
    CHECK(rc == MPI_SUCCESS, "alltoall: rc %d", rc);
    check_ints(ar, N * rsize, block_of, NULL, "alltoall");

    /* nonblocking allreduce over the intercommunicator */
    int* ir = device_ints(N, -1);
    MPI_Request req;
    rc = MPI_Iallreduce(s, ir, N, MPI_INT, MPI_SUM, inter, &req);
    CHECK(rc == MPI_SUCCESS, "iallreduce: rc %d", rc);
    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    CHECK(rc == MPI_SUCCESS, "iallreduce wait: rc %d", rc);
    check_ints(ir, N, constant, &remote_sum, "iallreduce");
    gpucoll_free_device(ir);
    gpucoll_free_device(ar);
    gpucoll_free_device(as);
    gpucoll_free_device(sr);
    gpucoll_free_device(sc);
    gpucoll_free_device(ga);

    /* reduce_scatter(_block): each rank receives N x rsize elements, so that
     * both groups' vectors hold N x lsize x rsize elements */
    const int rcount = N * rsize;
    int* big = device_ints(rcount * lsize, mine);
    int* rs = device_ints(rcount, -1);
    staged = calls(GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, GPUCOLL_PATH_STAGED);
    rc = MPI_Reduce_scatter_block(big, rs, rcount, MPI_INT, MPI_SUM, inter);
    CHECK(rc == MPI_SUCCESS, "reduce_scatter_block: rc %d", rc);
    check_ints(rs, rcount, constant, &remote_sum, "reduce_scatter_block");
    CHECK(calls(GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, GPUCOLL_PATH_STAGED) == staged + 1,
          "reduce_scatter_block on device buffers was not staged");
    int* counts = malloc(sizeof(int) * (size_t)lsize);
    for (int i = 0; i < lsize; i++) counts[i] = rcount;
    gpucoll_memcpy(rs, (int[]){-1}, sizeof(int)); /* a stale first element would show */
    staged = calls(GPUCOLL_COLL_REDUCE_SCATTER, GPUCOLL_PATH_STAGED);
    rc = MPI_Reduce_scatter(big, rs, counts, MPI_INT, MPI_SUM, inter);
    CHECK(rc == MPI_SUCCESS, "reduce_scatter: rc %d", rc);
    check_ints(rs, rcount, constant, &remote_sum, "reduce_scatter");
    CHECK(calls(GPUCOLL_COLL_REDUCE_SCATTER, GPUCOLL_PATH_STAGED) == staged + 1,
          "reduce_scatter on device buffers was not staged");
    gpucoll_memcpy(rs, (int[]){-1}, sizeof(int));
    rc = MPI_Ireduce_scatter_block(big, rs, rcount, MPI_INT, MPI_SUM, inter, &req);
    CHECK(rc == MPI_SUCCESS, "ireduce_scatter_block: rc %d", rc);
    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    CHECK(rc == MPI_SUCCESS, "ireduce_scatter_block wait: rc %d", rc);
    check_ints(rs, rcount, constant, &remote_sum, "ireduce_scatter_block");
    free(counts);
    gpucoll_free_device(rs);

    /* host buffers: coll/inter, untouched by gpucoll */
    int hs = mine, hr = -1;
    uint64_t delegated = calls(GPUCOLL_COLL_ALLREDUCE, GPUCOLL_PATH_DELEGATED);
    rc = MPI_Allreduce(&hs, &hr, 1, MPI_INT, MPI_SUM, inter);
    CHECK(rc == MPI_SUCCESS && hr == remote_sum, "host allreduce: rc %d, %d", rc, hr);
    CHECK(calls(GPUCOLL_COLL_ALLREDUCE, GPUCOLL_PATH_DELEGATED) == delegated + 1,
          "host allreduce was not delegated");

    gpucoll_free_device(big);
    gpucoll_free_device(red);
    gpucoll_free_device(g);
    gpucoll_free_device(b);
    gpucoll_free_device(r);
    gpucoll_free_device(s);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
    int all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (wrank == 0) printf("test_intercomm: %s (%d ranks)\n", all ? "FAIL" : "PASS", wsize);
    MPI_Finalize();
    return all ? 1 : 0;
}
