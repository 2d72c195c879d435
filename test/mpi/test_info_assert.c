/*
 * test_info_assert.c - the MPI 4.1 info key mpi_assert_memory_alloc_kinds on a
 * communicator:
 *  1. only device kinds ("cuda:device"): device collectives run accelerated
 *     and correct; a rank that passes host memory anyway (legal for Open
 *     MPI's own collectives on the communicator, a broken promise for the
 *     application) gets a correct result, staged, and nobody hangs;
 *  2. only host kinds ("system"): host calls skip gpucoll's agreement
 *     (selection.sh checks the verbose line); a rank that passes device
 *     memory anyway is staged onto the host path: correct, no hang;
 *  3. gpucoll's own key gpucoll_enable=false: gpucoll is not on the
 *     communicator: its calls reach Open MPI's modules without passing
 *     gpucoll (no call counted); "true" leaves it on.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

#include "gpucoll.h"

static int rank, size, fails = 0;

static MPI_Comm dup_with(const char* key, const char* value) {
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, key, value);
    MPI_Comm c;
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c);
    MPI_Info_free(&info);
    return c;
}

enum { N = 1000 };

/* An allreduce of N floats where rank r passes device memory iff device[r]:
 * checks the result everywhere and the path this rank took. */
static void allreduce_mixed(MPI_Comm c, const char* what, int on_device, gpucoll_path_t want) {
    float host[N];
    for (int i = 0; i < N; i++) host[i] = (float)(rank + i % 7);
    float* dev = NULL;
    if (on_device && (gpucoll_malloc_device((void**)&dev, sizeof host) != 0 ||
                      gpucoll_memcpy(dev, host, sizeof host) != 0)) {
        fprintf(stderr, "[%d] device memory: %s\n", rank, gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    gpucoll_counters_reset();
    MPI_Allreduce(MPI_IN_PLACE, on_device ? (void*)dev : (void*)host, N, MPI_FLOAT, MPI_SUM, c);
    gpucoll_counters_t k;
    gpucoll_counters_get(&k);
    if (k.calls[GPUCOLL_COLL_ALLREDUCE][want] != 1) {
        fprintf(stderr, "[%d] %s: allreduce took path %s, expected %s\n", rank, what,
                gpucoll_path_name(k.last_path), gpucoll_path_name(want));
        fails++;
    }
    if (on_device) gpucoll_memcpy(host, dev, sizeof host);
    for (int i = 0; i < N; i++) {
        float expected = (float)(size * (size - 1) / 2 + size * (i % 7));
        if (host[i] != expected) {
            fprintf(stderr, "[%d] %s: element %d: %g, expected %g\n", rank, what, i, host[i],
                    expected);
            fails++;
            break;
        }
    }
    if (on_device) gpucoll_free_device(dev);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Comm device_only = dup_with("mpi_assert_memory_alloc_kinds", "cuda:device");
    allreduce_mixed(device_only, "device-only kinds, device memory", 1, GPUCOLL_PATH_ACCELERATED);
    allreduce_mixed(device_only, "device-only kinds, host memory on rank 0", rank != 0,
                    rank == 0 ? GPUCOLL_PATH_DELEGATED : GPUCOLL_PATH_STAGED);
    allreduce_mixed(device_only, "device-only kinds, host memory everywhere", 0,
                    GPUCOLL_PATH_DELEGATED);
    MPI_Comm split; /* Open MPI's own host collectives on it */
    MPI_Comm_split(device_only, rank % 2, rank, &split);
    MPI_Comm_free(&split);
    MPI_Comm_free(&device_only);

    MPI_Comm host_only = dup_with("mpi_assert_memory_alloc_kinds", "system");
    allreduce_mixed(host_only, "host-only kinds, host memory", 0, GPUCOLL_PATH_DELEGATED);
    allreduce_mixed(host_only, "host-only kinds, device memory on rank 0", rank == 0,
                    rank == 0 ? GPUCOLL_PATH_STAGED : GPUCOLL_PATH_DELEGATED);
    MPI_Comm_free(&host_only);

    /* Off: host calls on it are not counted by gpucoll (it never sees
     * them); "true" and MPI_COMM_WORLD's are. */
    MPI_Comm off = dup_with("gpucoll_enable", "Off");
    MPI_Comm on = dup_with("gpucoll_enable", "true");
    const MPI_Comm offs[] = {off, on, MPI_COMM_WORLD};
    for (int i = 0; i < 3; i++) {
        int v = rank + 1, sum = 0;
        gpucoll_counters_reset();
        MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, offs[i]);
        MPI_Bcast(&v, 1, MPI_INT, 0, offs[i]);
        gpucoll_counters_t k;
        gpucoll_counters_get(&k);
        const uint64_t seen = k.calls[GPUCOLL_COLL_ALLREDUCE][GPUCOLL_PATH_DELEGATED] +
                              k.calls[GPUCOLL_COLL_BCAST][GPUCOLL_PATH_DELEGATED];
        const uint64_t want = i == 0 ? 0 : 2;
        if (sum != size * (size + 1) / 2 || v != 1 || seen != want) {
            fprintf(stderr,
                    "[%d] gpucoll_enable=false, communicator %d: sum %d, bcast %d, "
                    "%llu calls seen by gpucoll (expected %llu)\n",
                    rank, i, sum, v, (unsigned long long)seen, (unsigned long long)want);
            fails++;
        }
    }
    MPI_Comm_free(&on);
    MPI_Comm_free(&off);

    int all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_info_assert: %s\n", all ? "FAIL" : "PASS");
    MPI_Finalize();
    return all ? 1 : 0;
}
