/*
 * test_many_comms.c - thousands of live communicators (issue #40, defect
 * 3): --comms K duplicates of MPI_COMM_WORLD, all alive at once, a device
 * allreduce on each (checked). With coll_gpucoll_max_comms B (--bound B, as
 * the script sets it): MPI_COMM_WORLD and the first B - 1 have the
 * accelerated path, the rest stage theirs; freeing one makes room for the next. Prints what a
 * communicator costs this process (memory mappings, file descriptors, resident memory) with and
 * without the accelerated path, and checks that everything is given back when they are freed.
 *
 * usage: test_many_comms [common options] --comms K --bound B
 */
#include <dirent.h>

#include "mpi_test_util.h"

static long count_lines(const char* path) {
    FILE* f = fopen(path, "r");
    if (!f) return -1;
    long n = 0;
    for (int c; (c = fgetc(f)) != EOF;) n += c == '\n';
    fclose(f);
    return n;
}
static long count_fds(void) {
    DIR* d = opendir("/proc/self/fd");
    if (!d) return -1;
    long n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n - 3; /* ., .., the directory's own */
}
static long rss_kb(void) {
    long pages = 0, resident = 0;
    FILE* f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    fclose(f);
    return resident * 4;
}

typedef struct {
    long maps, fds, rss;
} usage_t;
static usage_t usage(void) {
    return (usage_t){count_lines("/proc/self/maps"), count_fds(), rss_kb()};
}

/* A device allreduce of 16 floats on c (value rank + k); its path. */
static int allreduce_on(MPI_Comm c, float* dev, int k) {
    const int n = 16;
    float host[16];
    for (int i = 0; i < n; i++) host[i] = (float)(tu.world_rank + k);
    if (gpucoll_memcpy(dev, host, sizeof host) != GPUCOLL_SUCCESS) TU_DIE("upload");
    gpucoll_counters_t before, after;
    tu_counters(&before);
    int rc = MPI_Allreduce(MPI_IN_PLACE, dev, n, MPI_FLOAT, MPI_SUM, c);
    tu_counters(&after);
    TU_CHECK(rc == MPI_SUCCESS, "allreduce on communicator %d: %d", k, rc);
    if (gpucoll_memcpy(host, dev, sizeof host) != GPUCOLL_SUCCESS) TU_DIE("download");
    const float want = (float)(tu.world_size * (tu.world_size - 1) / 2 + tu.world_size * k);
    for (int i = 0; i < n; i++)
        if (!TU_CHECK(host[i] == want, "communicator %d: element %d is %g, expected %g", k, i,
                      (double)host[i], (double)want))
            break;
    return (int)after.last_path;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    tu_init("test_many_comms");
    int ncomms = 1000, bound = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--comms") == 0 && i + 1 < argc) {
            ncomms = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--bound") == 0 && i + 1 < argc) {
            bound = atoi(argv[++i]);
        } else if (tu_parse_option(argc, argv, &i) != 1) {
            if (tu.world_rank == 0) fprintf(stderr, "test_many_comms: bad option '%s'\n", argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    tu_require_device_backend();
    void* p = NULL;
    if (gpucoll_malloc_device(&p, 64) != GPUCOLL_SUCCESS) TU_DIE("device memory");
    float* dev = p;
    (void)allreduce_on(MPI_COMM_WORLD, dev, 0); /* the world's path, before counting */

    /* duplicates that get the accelerated path: the world holds one */
    const int room = bound > 0 && bound - 1 < ncomms ? bound - 1 : ncomms;
    MPI_Comm* comms = tu_xmalloc(sizeof(MPI_Comm) * (size_t)ncomms);
    const usage_t u0 = usage();
    usage_t ub = u0; /* after the last with the accelerated path */
    int accelerated = 0, staged = 0;
    const double t0 = MPI_Wtime();
    for (int k = 0; k < ncomms; k++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[k]);
        const int path = allreduce_on(comms[k], dev, k);
        accelerated += path == GPUCOLL_PATH_ACCELERATED;
        staged += path == GPUCOLL_PATH_STAGED;
        const int want = k < room ? GPUCOLL_PATH_ACCELERATED : GPUCOLL_PATH_STAGED;
        TU_CHECK(path == want, "communicator %d of %d (bound %d): path %s, expected %s", k, ncomms,
                 bound, gpucoll_path_name((gpucoll_path_t)path),
                 gpucoll_path_name((gpucoll_path_t)want));
        if (k + 1 == room) ub = usage();
    }
    const double t1 = MPI_Wtime();
    const usage_t uk = usage();
    /* Freeing an accelerated one makes room for one more. */
    if (room < ncomms) {
        MPI_Comm_free(&comms[0]);
        MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
        const int path = allreduce_on(comms[0], dev, 0);
        TU_CHECK(path == GPUCOLL_PATH_ACCELERATED,
                 "a communicator created after one with the accelerated path was freed: path %s",
                 gpucoll_path_name((gpucoll_path_t)path));
    }
    for (int k = 0; k < ncomms; k++) MPI_Comm_free(&comms[k]);
    const usage_t uf = usage();
    const int with = room, without = ncomms - room;
    if (tu.world_rank == 0) {
        printf(
            "test_many_comms: %d communicators of %d ranks in %.1f s: %d accelerated, %d "
            "staged\n",
            ncomms, tu.world_size, t1 - t0, accelerated, staged);
        printf(
            "  per communicator with the accelerated path: %.1f mappings, %.2f fds, %.0f KiB "
            "resident\n",
            (double)(ub.maps - u0.maps) / with, (double)(ub.fds - u0.fds) / with,
            (double)(ub.rss - u0.rss) / with);
        if (without > 0)
            printf(
                "  per communicator without (staged): %.2f mappings, %.2f fds, %.1f KiB "
                "resident (Open MPI's own included)\n",
                (double)(uk.maps - ub.maps) / without, (double)(uk.fds - ub.fds) / without,
                (double)(uk.rss - ub.rss) / without);
        printf("  after freeing them all: %+ld mappings, %+ld fds, %+ld KiB resident\n",
               uf.maps - u0.maps, uf.fds - u0.fds, uf.rss - u0.rss);
    }
    /* Given back: mappings and descriptors (memory stays in malloc's arenas). */
    TU_CHECK(uf.maps - u0.maps < 64, "%ld mappings more after freeing every communicator",
             uf.maps - u0.maps);
    TU_CHECK(uf.fds - u0.fds < 8, "%ld file descriptors more after freeing every communicator",
             uf.fds - u0.fds);
    free(comms);
    gpucoll_free_device(dev);
    int rc = tu_finalize();
    MPI_Finalize();
    return rc;
}
