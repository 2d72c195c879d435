/*
 * test_lifecycle.c - resources over time.
 *  1. free-and-reallocate: allocate device buffers, allreduce/bcast, free,
 *     allocate again (often at the same address) with new contents, and so
 *     on; every result checked, so a stale mapping or cached data keyed on
 *     the address shows up as a wrong result;
 *  2. communicators: dup + split by parity (key order reversed every other
 *     iteration), collectives on device buffers on each, free (in varying
 *     order);
 *  3. MPI_Comm_idup while host collectives run on the parent (its rounds
 *     started from inside them on one rank, from MPI_Wait on the others);
 *  4. the process's open fds, its memory mappings (all, and those of memfd or
 *     /dev/shm files) and the /dev/shm entries named gpucoll* do not grow:
 *     iteration N/4 (at least 10: after warm-up, when a bounded cache has
 *     filled) against the last iteration N of each loop.
 *
 * usage: test_lifecycle [common options] [--iterations N] [--slack-fds N]
 *                       [--slack-maps N]
 *   --slack-maps must cover the bound of an IPC mapping cache (if any).
 */
#include <dirent.h>
#include <unistd.h>

#include "mpi_test_util.h"

static int g_iterations = 200;
static int g_baseline = 50; /* iteration of the reference counts: N/4, at least 10 */
static long g_slack_fds = 2, g_slack_maps = 8, g_slack_all_maps = 24;
static uint32_t g_seed = 20000;

/* ------------------------------------------------------------------------
 * Resource counts of this process
 * ---------------------------------------------------------------------- */

typedef struct resources {
    long fds;         /* entries of /proc/self/fd */
    long maps;        /* lines of /proc/self/maps */
    long shared_maps; /* mappings of memfd or /dev/shm files */
    long shm_entries; /* /dev/shm entries whose name contains "gpucoll" */
} resources_t;

static long count_dir(const char* path, const char* contains) {
    DIR* d = opendir(path);
    if (!d) return -1;
    long n = 0;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (contains && !strstr(e->d_name, contains)) continue;
        n++;
    }
    closedir(d);
    return n;
}

static resources_t resources(void) {
    resources_t r = {count_dir("/proc/self/fd", NULL), 0, 0, count_dir("/dev/shm", "gpucoll")};
    FILE* f = fopen("/proc/self/maps", "r");
    if (!f) TU_DIE("cannot read /proc/self/maps");
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        r.maps++;
        if (strstr(line, "/memfd:") || strstr(line, "/dev/shm/")) r.shared_maps++;
    }
    fclose(f);
    return r;
}

static void check_growth(const char* loop, const resources_t* a, const resources_t* b) {
    TU_CHECK(b->fds - a->fds <= g_slack_fds,
             "%s: open fds grew from %ld (iteration %d) to %ld (iteration %d)", loop, a->fds,
             g_baseline, b->fds, g_iterations);
    TU_CHECK(b->shared_maps - a->shared_maps <= g_slack_maps,
             "%s: memfd and /dev/shm mappings grew from %ld (iteration %d) to %ld (iteration %d)",
             loop, a->shared_maps, g_baseline, b->shared_maps, g_iterations);
    TU_CHECK(b->maps - a->maps <= g_slack_all_maps,
             "%s: memory mappings grew from %ld (iteration %d) to %ld (iteration %d)", loop,
             a->maps, g_baseline, b->maps, g_iterations);
    TU_CHECK(b->shm_entries - a->shm_entries <= 0,
             "%s: /dev/shm entries named gpucoll* grew from %ld to %ld", loop, a->shm_entries,
             b->shm_entries);
    if (tu.verbose)
        printf(
            "[rank %d] %s: fds %ld -> %ld, shared maps %ld -> %ld, maps %ld -> %ld, "
            "/dev/shm gpucoll* %ld -> %ld\n",
            tu.world_rank, loop, a->fds, b->fds, a->shared_maps, b->shared_maps, a->maps, b->maps,
            a->shm_entries, b->shm_entries);
}

/* ------------------------------------------------------------------------
 * 1. free and reallocate
 * ---------------------------------------------------------------------- */

static int value(int rank, size_t i, uint32_t seed) {
    return (int)(tu_hash(seed, rank, i) % 2001u) - 1000;
}

static void* dev_alloc(size_t bytes) {
    void* p = NULL;
    if (gpucoll_malloc_device(&p, bytes) != GPUCOLL_SUCCESS || !p)
        TU_DIE("gpucoll_malloc_device(%zu): %s", bytes, gpucoll_last_error());
    return p;
}
static void dev_free(void* p) {
    TU_CHECK(gpucoll_free_device(p) == GPUCOLL_SUCCESS, "gpucoll_free_device: %s",
             gpucoll_last_error());
}
static void upload(void* dev, const void* host, size_t bytes) {
    if (gpucoll_memcpy(dev, host, bytes) != GPUCOLL_SUCCESS)
        TU_DIE("gpucoll_memcpy: %s", gpucoll_last_error());
}

static void loop_realloc(void) {
    const int rank = tu.world_rank, size = tu.world_size;
    const size_t max_n = 65536;
    int *host = tu_xmalloc(sizeof(int) * max_n), *out = tu_xmalloc(sizeof(int) * max_n);
    void *send = NULL, *prev_send = NULL, *prev_recv = NULL;
    size_t send_n = 0;
    long reused = 0;
    resources_t base = {0, 0, 0, 0};
    for (int it = 0; it < g_iterations; it++) {
        const uint32_t seed = g_seed++;
        const size_t n = it % 10 == 9 ? max_n : 4096;
        char desc[160];
        /* the send buffer lives on for one more iteration every other time
         * (same buffer, new contents); the receive buffer is always new */
        if (send && (it % 2 == 0 || send_n != n)) {
            dev_free(send);
            send = NULL;
        }
        if (!send) {
            send = dev_alloc(n * sizeof(int));
            send_n = n;
            if (send == prev_send) reused++;
        }
        void* recv = dev_alloc(n * sizeof(int));
        if (recv == prev_recv) reused++;
        for (size_t i = 0; i < n; i++) host[i] = value(rank, i, seed);
        upload(send, host, n * sizeof(int));
        host[0] = -7;
        upload(recv, host, sizeof(int));

        snprintf(desc, sizeof desc, "realloc iteration %d: allreduce int SUM count=%zu seed=%u", it,
                 n, seed);
        gpucoll_counters_t before;
        tu_counters(&before);
        MPI_Allreduce(send, recv, (int)n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        tu_check_path(&before, GPUCOLL_COLL_ALLREDUCE, tu.expect_device, desc);
        if (gpucoll_memcpy(out, recv, n * sizeof(int)) != GPUCOLL_SUCCESS)
            TU_DIE("gpucoll_memcpy: %s", gpucoll_last_error());
        long bad = 0;
        for (size_t i = 0; i < n; i++) {
            int want = 0;
            for (int r = 0; r < size; r++) want += value(r, i, seed);
            if (out[i] != want && bad++ < 3)
                tu_fail("%s: element %zu = %d, expected %d", desc, i, out[i], want);
        }
        tu.checks++;

        /* bcast into the same (new) buffer from a rotating root */
        const int root = it % size;
        snprintf(desc, sizeof desc, "realloc iteration %d: bcast int count=%zu root=%d seed=%u", it,
                 n, root, seed);
        if (rank == root) {
            for (size_t i = 0; i < n; i++) host[i] = value(root + 100, i, seed);
            upload(recv, host, n * sizeof(int));
        }
        tu_counters(&before);
        MPI_Bcast(recv, (int)n, MPI_INT, root, MPI_COMM_WORLD);
        if (size > 1) tu_check_path(&before, GPUCOLL_COLL_BCAST, tu.expect_device, desc);
        if (gpucoll_memcpy(out, recv, n * sizeof(int)) != GPUCOLL_SUCCESS)
            TU_DIE("gpucoll_memcpy: %s", gpucoll_last_error());
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            int want = value(root + 100, i, seed);
            if (out[i] != want && bad++ < 3)
                tu_fail("%s: element %zu = %d, expected %d", desc, i, out[i], want);
        }
        tu.checks++;

        dev_free(recv);
        prev_send = send;
        prev_recv = recv;
        if (it + 1 == g_baseline) base = resources();
    }
    if (send) dev_free(send);
    resources_t end = resources();
    if (g_iterations > g_baseline) check_growth("free/reallocate loop", &base, &end);
    long all = 0;
    MPI_Reduce(&reused, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (tu.world_rank == 0)
        printf(
            "free/reallocate loop: %d iterations, a buffer came back at the address of "
            "its predecessor %ld times (all ranks)\n",
            g_iterations, all);
    free(host);
    free(out);
}

/* ------------------------------------------------------------------------
 * 2. communicators
 * ---------------------------------------------------------------------- */

static void run_case(MPI_Comm comm, gpucoll_coll_t coll, MPI_Datatype dt, int op, size_t count,
                     int in_place, int root, int extra_delegated) {
    tu_case_t c = {
        .coll = coll,
        .type = tu_type_by_dt(dt),
        .op = op,
        .count = count,
        .in_place = in_place,
        .root = root,
        .send_mem = TU_DEVICE,
        .recv_mem = TU_DEVICE,
        .seed = g_seed++,
        .comm = comm,
        .expect_mask = TU_MASK_DEFAULT,
        .extra_delegated = extra_delegated,
    };
    tu_run_case(&c);
}

static void run_on(MPI_Comm comm, gpucoll_coll_t coll, MPI_Datatype dt, int op, size_t count,
                   int in_place, int root) {
    run_case(comm, coll, dt, op, count, in_place, root, 0);
}

static void loop_comms(void) {
    const int rank = tu.world_rank, size = tu.world_size;
    resources_t base = {0, 0, 0, 0};
    for (int it = 0; it < g_iterations; it++) {
        MPI_Comm dup, half;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, it % 2 ? size - rank : rank, &half);
        int hsize;
        MPI_Comm_size(half, &hsize);

        run_on(dup, GPUCOLL_COLL_ALLREDUCE, MPI_INT, TU_OP_SUM, 100, it % 3 == 0, 0);
        run_on(half, GPUCOLL_COLL_ALLGATHER, MPI_DOUBLE, TU_OP_NONE, 10, it % 2, 0);
        if (it % 4 == 0) {
            run_on(dup, GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, MPI_FLOAT, TU_OP_MAX, 33, 0, 0);
            run_on(half, GPUCOLL_COLL_BCAST, MPI_INT8_T, TU_OP_NONE, 77, 0, hsize - 1);
            run_on(half, GPUCOLL_COLL_REDUCE, MPI_UINT64_T, TU_OP_BOR, 5, 0, hsize / 2);
            run_on(dup, GPUCOLL_COLL_REDUCE_SCATTER, MPI_LONG, TU_OP_SUM, 9, 1, 0);
        }
        if (it % 2) {
            MPI_Comm_free(&dup);
            MPI_Comm_free(&half);
        } else {
            MPI_Comm_free(&half);
            MPI_Comm_free(&dup);
        }
        if (it + 1 == g_baseline) base = resources();
    }
    resources_t end = resources();
    if (g_iterations > g_baseline) check_growth("communicator loop", &base, &end);
}

/* MPI_Comm_idup: Open MPI runs its rounds as iallreduces on the parent,
 * started by the progress engine wherever it runs: on rank 0 inside its
 * host allreduces on the parent (Open MPI's own algorithm, called by
 * gpucoll), on the others in MPI_Wait. gpucoll counted them on some ranks
 * only (not from inside a saved host algorithm), and the next call on the
 * parent waited for ever. */
static void loop_idup(void) {
    MPI_Comm parent;
    MPI_Comm_dup(MPI_COMM_WORLD, &parent);
    run_on(parent, GPUCOLL_COLL_ALLREDUCE, MPI_FLOAT, TU_OP_SUM, 1024, 0, 0);
    const int iterations = g_iterations < 20 ? g_iterations : 20;
    for (int it = 0; it < iterations; it++) {
        MPI_Comm copy;
        MPI_Request req;
        MPI_Comm_idup(parent, &copy, &req);
        static int in[1024], out[1024];
        if (tu.world_rank != 0) MPI_Wait(&req, MPI_STATUS_IGNORE);
        for (int k = 0; k < 3; k++) MPI_Allreduce(in, out, 1024, MPI_INT, MPI_SUM, parent);
        if (tu.world_rank == 0) MPI_Wait(&req, MPI_STATUS_IGNORE);
        run_on(parent, GPUCOLL_COLL_ALLREDUCE, MPI_FLOAT, TU_OP_SUM, 1024, 0, 0);
        run_on(copy, GPUCOLL_COLL_BCAST, MPI_INT, TU_OP_NONE, 100, 0, 0);
        MPI_Comm_free(&copy);
    }
    MPI_Comm_free(&parent);
}

/* MPI_Comm_idup's rounds started by the progress engine while this rank
 * waits inside gpucoll's own blocking call on the parent: rank 0 returns
 * from the bcast at once and waits in the allreduce for the late ranks,
 * running Open MPI's progress, which starts the idup's rounds there; the
 * late ranks start them elsewhere. Such a round took the next call number
 * in the middle of the allreduce: wrong results, "different collectives"
 * errors on some ranks, a hang. The allreduce must be accelerated and
 * right on every rank. */
static void loop_idup_inside_call(void) {
    MPI_Comm parent;
    MPI_Comm_dup(MPI_COMM_WORLD, &parent);
    run_on(parent, GPUCOLL_COLL_ALLREDUCE, MPI_FLOAT, TU_OP_SUM, 256, 0, 0);
    const int iterations = g_iterations < 20 ? g_iterations : 20;
    for (int it = 0; it < iterations; it++) {
        int x = it;
        if (tu.world_rank != 0) usleep(5000u * (unsigned)tu.world_rank);
        MPI_Bcast(&x, 1, MPI_INT, 0, parent);
        MPI_Comm copy;
        MPI_Request req;
        MPI_Comm_idup(parent, &copy, &req);
        /* the idup's rounds may run inside it, on the delegated path */
        run_case(parent, GPUCOLL_COLL_ALLREDUCE, MPI_FLOAT, TU_OP_SUM, it % 2 ? 256 : 70000, 0, 0,
                 1);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        MPI_Comm_free(&copy);
    }
    MPI_Comm_free(&parent);
}

/* MPI_Comm_idup on a communicator not set up yet, its request tested on
 * rank 0 only (local, legal): the progress engine starts the idup's first
 * round there alone. The next barrier set the accelerated path up (a
 * blocking exchange) on rank 0 alone, while the others ran Open MPI's
 * barrier: a hang. After it, calls on the parent and the copy work. */
static void idup_tested_then_barrier(void) {
    MPI_Comm parent, copy;
    MPI_Request req;
    MPI_Comm_dup(MPI_COMM_WORLD, &parent);
    MPI_Comm_idup(parent, &copy, &req);
    if (tu.world_rank == 0) {
        int flag = 0;
        for (int i = 0; i < 20 && !flag; i++) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(parent);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    run_on(parent, GPUCOLL_COLL_ALLREDUCE, MPI_FLOAT, TU_OP_SUM, 1024, 0, 0);
    run_on(copy, GPUCOLL_COLL_BCAST, MPI_INT, TU_OP_NONE, 100, 0, 0);
    MPI_Comm_free(&copy);
    MPI_Comm_free(&parent);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    tu_init("test_lifecycle");
    for (int i = 1; i < argc; i++) {
        int r = tu_parse_option(argc, argv, &i);
        if (r == 1) continue;
        if (r == 0 && i + 1 < argc && strcmp(argv[i], "--iterations") == 0) {
            g_iterations = atoi(argv[++i]);
        } else if (r == 0 && i + 1 < argc && strcmp(argv[i], "--slack-fds") == 0) {
            g_slack_fds = atol(argv[++i]);
        } else if (r == 0 && i + 1 < argc && strcmp(argv[i], "--slack-maps") == 0) {
            g_slack_maps = atol(argv[++i]);
        } else {
            if (tu.world_rank == 0) {
                fprintf(stderr, "test_lifecycle: bad option '%s'\n", argv[i]);
                tu_usage_common();
                fprintf(stderr, "  --iterations N  --slack-fds N  --slack-maps N\n");
            }
            MPI_Finalize();
            return 2;
        }
    }
    tu_require_device_backend();
    g_baseline = g_iterations / 4 < 10 ? 10 : g_iterations / 4;
    loop_realloc();
    loop_comms();
    loop_idup();
    loop_idup_inside_call();
    idup_tested_then_barrier();
    int rc = tu_finalize();
    MPI_Finalize();
    return rc;
}
