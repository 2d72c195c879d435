/*
 * test_memory_bound.c - the memory a process keeps mapped for its peers'
 * freed buffers is bounded (emu backend: device memory is shared memory, so
 * the node's Shmem in /proc/meminfo shows it).
 *
 * Each iteration allocates a large device buffer per rank, allreduces it in
 * place, checks the result and frees it. On odd iterations a small buffer is
 * allocated first and kept, so the large buffers do not always come back at
 * the same address (where a peer's import of the old one would be closed
 * because the new one overlaps it): then only the byte bound of the IPC cache
 * (coll_gpucoll_ipc_cache_bytes) keeps freed buffers from staying resident.
 * After every iteration the node's Shmem must stay below
 *   baseline + live buffers + ranks x bound + slack (256 MiB)
 * and the test stops at the first violation (before the machine runs out).
 *
 * usage: test_memory_bound [--iterations N] [--mib M] [--bound-mib B]
 *   B must be the coll_gpucoll_ipc_cache_bytes given to mpirun, in MiB.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpucoll.h"

static long shmem_kib(void) {
    FILE* f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Shmem: %ld kB", &v) == 1) break;
    fclose(f);
    return v;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = 30;
    long mib = 128, bound_mib = 256;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--iterations"))
            iterations = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--mib"))
            mib = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--bound-mib"))
            bound_mib = atol(argv[i + 1]);
    }
    if (strcmp(gpucoll_backend(), "emu") != 0) {
        if (rank == 0) printf("test_memory_bound: SKIP (needs the emu backend)\n");
        MPI_Finalize();
        return 77;
    }
    const size_t bytes = (size_t)mib << 20, n = bytes / sizeof(float);
    float* host = malloc(bytes);
    void* spacers[256] = {0};
    int nspacers = 0, failures = 0, stop = 0;
    const long base = shmem_kib();
    for (int it = 0; it < iterations && stop == 0; ++it) {
        if (it % 2 == 1 && nspacers < 256) gpucoll_malloc_device(&spacers[nspacers++], 1 << 20);
        void* d = NULL;
        if (gpucoll_malloc_device(&d, bytes) != 0) {
            fprintf(stderr, "[%d] allocation: %s\n", rank, gpucoll_last_error());
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        for (size_t i = 0; i < n; i += 4096) host[i] = (float)(rank + it);
        host[n - 1] = (float)(rank + it);
        gpucoll_memcpy(d, host, bytes);
        MPI_Allreduce(MPI_IN_PLACE, d, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        gpucoll_memcpy(host, d, bytes);
        const float want = (float)(size * it + size * (size - 1) / 2);
        if (host[0] != want || host[n / 2 / 4096 * 4096] != want || host[n - 1] != want) {
            fprintf(stderr, "[%d] FAIL: iteration %d: got %g %g %g, expected %g\n", rank, it,
                    host[0], host[n / 2 / 4096 * 4096], host[n - 1], want);
            failures++;
        }
        gpucoll_free_device(d);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0) {
            const long grown_mib = (shmem_kib() - base) / 1024;
            /* live: everyone's spacers (the large buffers are freed by now) */
            const long limit = size * (long)nspacers + size * bound_mib + 256;
            if (grown_mib > limit) {
                fprintf(stderr,
                        "FAIL: iteration %d: the node's Shmem grew by %ld MiB, more than the "
                        "%ld MiB allowed (%d ranks x %ld MiB bound + spacers + 256): freed "
                        "buffers stay mapped in peers\n",
                        it, grown_mib, limit, size, bound_mib);
                failures++;
            } else if (it == iterations - 1) {
                printf(
                    "test_memory_bound: Shmem grew by %ld MiB after %d iterations of %ld MiB "
                    "(limit %ld MiB)\n",
                    grown_mib, iterations, mib, limit);
            }
        }
        MPI_Allreduce(&failures, &stop, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    }
    for (int i = 0; i < nspacers; ++i) gpucoll_free_device(spacers[i]);
    free(host);
    int all = 0;
    MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_memory_bound: %s\n", all ? "FAIL" : "PASS");
    MPI_Finalize();
    return all ? 1 : 0;
}
