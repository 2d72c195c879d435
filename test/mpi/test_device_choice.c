/*
 * test_device_choice.c - the GPU chosen after the first collective.
 *
 * Applications learn their node-local rank with MPI_Comm_split_type and only
 * then choose their GPU. Open MPI's split runs a host allreduce on
 * MPI_COMM_WORLD, which sets gpucoll's accelerated path up there while every
 * rank is still on GPU 0. The calls on device buffers that follow must run
 * on the GPU the buffers are on: checked with the emu backend's several
 * devices (GPUCOLL_EMU_DEVICES, one per rank), whose reductions, like CUDA
 * kernels, cannot reach another GPU's memory.
 *
 * Checks, on MPI_COMM_WORLD after the split and cudaSetDevice's equivalent:
 * blocking allreduce, bcast and allgather right and accelerated; a
 * nonblocking allreduce right and accelerated (its work may run on the
 * progress thread, which has no GPU of its own); a persistent allreduce
 * right; the application's current GPU unchanged by the calls; and no
 * context on any GPU the application did not choose (the collectives before
 * the choice created none: on a real node, GPU 0 would otherwise hold a
 * context of every rank of the node, for the rest of the run); calls from a
 * worker thread that never chose a GPU (PyTorch's MPI process group calls
 * MPI from one), on communicators made before the choice, accelerated once
 * the process uses one GPU (set up there at once) and once it uses two (set
 * up again on the buffers' GPU, once, not at every call); communicators set
 * up before the choice and used with nonblocking calls only: the first is
 * staged, the next barrier, or the next blocking host-buffer call, sets them
 * up again on every rank, and the nonblocking calls after it are accelerated
 * (before, they stayed staged until a blocking call on device buffers).
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gpucoll.h"
/* MPI_*_init on every Open MPI series */
#include "mpi4_names.h"

enum { N = 262144 }; /* 1 MiB of floats: allreduce reads the peers' buffers (two-shot) */

static int fails = 0;
static int rank = 0, size = 0;

#define CHECK(cond, ...)                                      \
    do {                                                      \
        if (!(cond)) {                                        \
            fprintf(stderr, "[%d] ", rank);                   \
            fprintf(stderr, __VA_ARGS__);                     \
            fprintf(stderr, " (%s)\n", gpucoll_last_error()); \
            fails++;                                          \
        }                                                     \
    } while (0)

static unsigned long long accelerated(gpucoll_coll_t coll) {
    gpucoll_counters_t k;
    gpucoll_counters_get(&k);
    return k.calls[coll][GPUCOLL_PATH_ACCELERATED];
}

/* Every element of the device buffer d (n floats) equals want. */
static void check_values(const float* d, size_t n, float want, const char* what) {
    static float host[N * 8];
    if (gpucoll_memcpy(host, d, n * sizeof(float)) != 0) {
        CHECK(0, "%s: copy back failed", what);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (host[i] != want) {
            CHECK(0, "%s: element %zu is %g, expected %g", what, i, host[i], want);
            return;
        }
}

static void fill(float* d, size_t n, float v) {
    static float host[N * 8];
    for (size_t i = 0; i < n; i++) host[i] = v;
    if (gpucoll_memcpy(d, host, n * sizeof(float)) != 0) {
        fprintf(stderr, "[%d] fill: %s\n", rank, gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* Three blocking allreduces on comm from a new thread, which has no GPU of
 * its own; accelerated: how many were accelerated. */
struct Worker {
    MPI_Comm comm;
    float *send, *recv;
    float sum;
    unsigned long long accelerated;
};

static void* worker_calls(void* arg) {
    struct Worker* w = arg;
    const unsigned long long before = accelerated(GPUCOLL_COLL_ALLREDUCE);
    for (int i = 0; i < 3; i++) /* MPI only: a copy here would create a context */
        CHECK(MPI_Allreduce(w->send, w->recv, N, MPI_FLOAT, MPI_SUM, w->comm) == MPI_SUCCESS,
              "allreduce %d from a worker thread failed", i);
    w->accelerated = accelerated(GPUCOLL_COLL_ALLREDUCE) - before;
    return NULL;
}

static void from_worker(MPI_Comm comm, float* send, float* recv, float sum, const char* when) {
    struct Worker w = {comm, send, recv, sum, 0};
    fill(send, N, (float)(rank + 1));
    fill(recv, N, -1.0f);
    pthread_t t;
    if (pthread_create(&t, NULL, worker_calls, &w) != 0) {
        CHECK(0, "pthread_create failed");
        return;
    }
    pthread_join(t, NULL);
    check_values(recv, N, sum, "allreduce from a worker thread");
    CHECK(w.accelerated == 3, "%llu of 3 allreduces from a worker thread accelerated (%s)",
          w.accelerated, when);
}

/* One MPI_Iallreduce on comm, checked; whether it was accelerated. */
static int one_iallreduce(MPI_Comm comm, float* send, float* recv, float sum, const char* what) {
    fill(send, N, (float)(rank + 1));
    fill(recv, N, -1.0f);
    const unsigned long long before = accelerated(GPUCOLL_COLL_ALLREDUCE);
    MPI_Request req;
    int rc = MPI_Iallreduce(send, recv, N, MPI_FLOAT, MPI_SUM, comm, &req);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    CHECK(rc == MPI_SUCCESS, "%s failed (%d)", what, rc);
    check_values(recv, N, sum, what);
    return accelerated(GPUCOLL_COLL_ALLREDUCE) != before;
}

/* comm was set up before the choice, on no GPU; it sees nonblocking calls
 * only. The first cannot set it up again (that waits for every rank):
 * staged. The next barrier (or blocking host call) does, on every rank;
 * the calls after it are accelerated. */
static void nonblocking_only(MPI_Comm comm, float* send, float* recv, float sum, int barrier) {
    const char* how = barrier ? "a barrier" : "a blocking host allreduce";
    /* A persistent request made before: started after, accelerated too. */
    MPI_Request preq;
    CHECK(MPI_Allreduce_init(send, recv, N, MPI_FLOAT, MPI_SUM, comm, MPI_INFO_NULL, &preq) ==
              MPI_SUCCESS,
          "allreduce_init failed");
    one_iallreduce(comm, send, recv, sum, "iallreduce before the set-up");
    if (barrier) {
        CHECK(MPI_Barrier(comm) == MPI_SUCCESS, "barrier failed");
    } else {
        int one = 1, got = 0;
        CHECK(MPI_Allreduce(&one, &got, 1, MPI_INT, MPI_SUM, comm) == MPI_SUCCESS && got == size,
              "host allreduce failed (%d)", got);
    }
    for (int round = 0; round < 2; round++)
        CHECK(one_iallreduce(comm, send, recv, sum, "iallreduce after the set-up"),
              "iallreduce %d after %s was not accelerated", round, how);
    fill(send, N, (float)(rank + 1));
    fill(recv, N, -1.0f);
    const unsigned long long before = accelerated(GPUCOLL_COLL_ALLREDUCE);
    int rc = MPI_Start(&preq);
    if (rc == MPI_SUCCESS) rc = MPI_Wait(&preq, MPI_STATUS_IGNORE);
    CHECK(rc == MPI_SUCCESS, "persistent allreduce failed (%d)", rc);
    check_values(recv, N, sum, "persistent allreduce made before the set-up");
    CHECK(accelerated(GPUCOLL_COLL_ALLREDUCE) == before + 1,
          "persistent allreduce made before %s, started after, was not accelerated", how);
    MPI_Request_free(&preq);
}

int main(int argc, char** argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (size > 8) {
        if (rank == 0) fprintf(stderr, "test_device_choice: at most 8 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* The node-local rank, the usual way: a host collective on WORLD first. */
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm early1, early2; /* made before the choice, first used from a worker */
    MPI_Comm_dup(MPI_COMM_WORLD, &early1);
    MPI_Comm_dup(MPI_COMM_WORLD, &early2);
    /* Set up before the choice (a host call), then used with nonblocking
     * calls only: set up again at a barrier, at a blocking host call. */
    MPI_Comm nb_barrier, nb_host;
    MPI_Comm_dup(MPI_COMM_WORLD, &nb_barrier);
    MPI_Comm_dup(MPI_COMM_WORLD, &nb_host);
    for (int k = 0; k < 2; k++) {
        int one = 1, got = 0;
        MPI_Allreduce(&one, &got, 1, MPI_INT, MPI_SUM, k == 0 ? nb_barrier : nb_host);
    }
    int local_rank = 0;
    MPI_Comm_rank(local, &local_rank);

    /* The collectives so far (Open MPI's split, a host allreduce) created no
     * context: the process has not touched a GPU yet. */
    const int devices = gpucoll_device_count();
    int dummy = rank, total = 0;
    CHECK(MPI_Allreduce(&dummy, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS,
          "host allreduce failed");
    for (int d = 0; d < devices; d++)
        CHECK(gpucoll_device_has_context(d) == 0,
              "GPU %d holds a context before the application chose its GPU", d);

    /* Now the GPU: one per rank. */
    const int gpu = gpucoll_select_local_device();
    if (gpu < 0 || devices < 2 || gpu != local_rank % devices) {
        fprintf(stderr,
                "[%d] needs one GPU per rank (emu: GPUCOLL_EMU_DEVICES); got GPU %d of %d: %s\n",
                rank, gpu, devices, gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    float *send = NULL, *recv = NULL, *all = NULL;
    if (gpucoll_malloc_device((void**)&send, N * sizeof(float)) != 0 ||
        gpucoll_malloc_device((void**)&recv, N * sizeof(float)) != 0 ||
        gpucoll_malloc_device((void**)&all, (size_t)size * N * sizeof(float)) != 0) {
        fprintf(stderr, "[%d] device memory: %s\n", rank, gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const float sum = (float)size * (float)(size + 1) / 2.0f;

    /* Nonblocking calls only, on communicators set up before the choice. */
    nonblocking_only(nb_barrier, send, recv, sum, 1);
    nonblocking_only(nb_host, send, recv, sum, 0);

    /* Blocking calls, accelerated, on the GPU the buffers are on. */
    for (int round = 0; round < 2; round++) {
        fill(send, N, (float)(rank + 1));
        fill(recv, N, -1.0f);
        const unsigned long long before = accelerated(GPUCOLL_COLL_ALLREDUCE);
        const int rc = MPI_Allreduce(send, recv, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        CHECK(rc == MPI_SUCCESS, "allreduce %d failed (%d)", round, rc);
        check_values(recv, N, sum, round == 0 ? "first allreduce" : "second allreduce");
        CHECK(accelerated(GPUCOLL_COLL_ALLREDUCE) == before + 1, "allreduce %d was not accelerated",
              round);
    }
    fill(recv, N, rank == 1 ? 7.0f : 0.0f);
    unsigned long long before = accelerated(GPUCOLL_COLL_BCAST);
    CHECK(MPI_Bcast(recv, N, MPI_FLOAT, 1, MPI_COMM_WORLD) == MPI_SUCCESS, "bcast failed");
    check_values(recv, N, 7.0f, "bcast");
    CHECK(accelerated(GPUCOLL_COLL_BCAST) == before + 1, "bcast was not accelerated");
    fill(send, N, (float)rank);
    before = accelerated(GPUCOLL_COLL_ALLGATHER);
    CHECK(MPI_Allgather(send, N, MPI_FLOAT, all, N, MPI_FLOAT, MPI_COMM_WORLD) == MPI_SUCCESS,
          "allgather failed");
    for (int p = 0; p < size; p++) check_values(all + (size_t)p * N, N, (float)p, "allgather");
    CHECK(accelerated(GPUCOLL_COLL_ALLGATHER) == before + 1, "allgather was not accelerated");

    /* Nonblocking: the progress thread, which has no GPU of its own, does
     * the work while this thread sleeps (with coll_gpucoll_progress_thread
     * 1), on buffers no call has used yet (peers map them in that call). */
    for (int round = 0; round < 3; round++) {
        float *s2 = NULL, *r2 = NULL;
        if (gpucoll_malloc_device((void**)&s2, N * sizeof(float)) != 0 ||
            gpucoll_malloc_device((void**)&r2, N * sizeof(float)) != 0) {
            fprintf(stderr, "[%d] device memory: %s\n", rank, gpucoll_last_error());
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        fill(s2, N, (float)(rank + 1));
        fill(r2, N, -1.0f);
        before = accelerated(GPUCOLL_COLL_ALLREDUCE);
        MPI_Request req;
        int rc = MPI_Iallreduce(s2, r2, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
        usleep(50 * 1000);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        CHECK(rc == MPI_SUCCESS, "iallreduce %d failed (%d)", round, rc);
        check_values(r2, N, sum, "iallreduce");
        CHECK(accelerated(GPUCOLL_COLL_ALLREDUCE) == before + 1,
              "iallreduce %d was not accelerated", round);
        gpucoll_free_device(s2);
        gpucoll_free_device(r2);
    }

    /* Persistent, started twice. */
    MPI_Request preq;
    CHECK(MPI_Allreduce_init(send, recv, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL,
                             &preq) == MPI_SUCCESS,
          "allreduce_init failed");
    for (int round = 0; round < 2; round++) {
        fill(send, N, (float)(rank + 1));
        fill(recv, N, -1.0f);
        int rc = MPI_Start(&preq);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&preq, MPI_STATUS_IGNORE);
        CHECK(rc == MPI_SUCCESS, "persistent allreduce %d failed (%d)", round, rc);
        check_values(recv, N, sum, "persistent allreduce");
    }
    MPI_Request_free(&preq);

    /* A worker thread while the process uses one GPU: set up there. */
    if (provided >= MPI_THREAD_SERIALIZED) from_worker(early1, send, recv, sum, "one GPU in use");

    /* MPI_Reduce_local with the input on another GPU: the reduction runs on
     * the result's GPU, which cannot read the input where it is. */
    {
        const int other = (gpu + 1) % devices;
        float* away = NULL;
        CHECK(gpucoll_set_device(other) == 0, "cannot choose GPU %d", other);
        if (gpucoll_malloc_device((void**)&away, N * sizeof(float)) != 0) {
            fprintf(stderr, "[%d] device memory on GPU %d: %s\n", rank, other,
                    gpucoll_last_error());
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        CHECK(gpucoll_set_device(gpu) == 0, "cannot choose GPU %d again", gpu);
        fill(away, N, 2.0f);
        fill(recv, N, 3.0f);
        CHECK(MPI_Reduce_local(away, recv, N, MPI_FLOAT, MPI_SUM) == MPI_SUCCESS,
              "reduce_local with the input on GPU %d, the result on GPU %d failed", other, gpu);
        check_values(recv, N, 5.0f, "reduce_local across GPUs");
        gpucoll_free_device(away);
    }

    /* A worker thread while the process uses two GPUs: set up again on the
     * buffers' GPU at the first call, then accelerated (not a rebind at every
     * call, staged). */
    if (provided >= MPI_THREAD_SERIALIZED) from_worker(early2, send, recv, sum, "two GPUs in use");

    /* The application's GPU is still the one it chose, and the only one
     * this process holds a context on. */
    const int current = gpucoll_current_device();
    CHECK(current == gpu, "current GPU %d after the calls, expected %d", current, gpu);
    for (int d = 0; d < devices; d++)
        CHECK(gpucoll_device_has_context(d) == (d == gpu || d == (gpu + 1) % devices),
              "GPU %d: context %d after the calls (this rank chose GPU %d, and used the next)", d,
              gpucoll_device_has_context(d), gpu);

    gpucoll_free_device(send);
    gpucoll_free_device(recv);
    gpucoll_free_device(all);
    MPI_Comm_free(&local);
    MPI_Comm_free(&early1);
    MPI_Comm_free(&early2);
    MPI_Comm_free(&nb_barrier);
    MPI_Comm_free(&nb_host);
    int any = 0;
    MPI_Allreduce(&fails, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_device_choice: %s (%d ranks)\n", any ? "FAIL" : "PASS", size);
    MPI_Finalize();
    return any ? 1 : 0;
}
