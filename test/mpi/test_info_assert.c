/*
 * test_info_assert.c - the MPI 4.1 info key mpi_assert_memory_alloc_kinds on a
 * communicator: with only device kinds listed, gpucoll drops the per-call
 * agreement on that communicator (selection.sh checks the verbose line), and
 * device collectives on it still run accelerated and correct.
 */
#include <mpi.h>
#include <stdio.h>

#include "gpucoll.h"

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, size, fails = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_assert_memory_alloc_kinds", "cuda:device");
    MPI_Comm uniform;
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &uniform);
    MPI_Info_free(&info);

    enum { N = 1000 };
    float host[N];
    for (int i = 0; i < N; i++) host[i] = (float)(rank + i % 7);
    float* dev = NULL;
    if (gpucoll_malloc_device((void**)&dev, sizeof host) != 0 ||
        gpucoll_memcpy(dev, host, sizeof host) != 0) {
        fprintf(stderr, "[%d] device memory: %s\n", rank, gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    gpucoll_counters_reset();
    MPI_Allreduce(MPI_IN_PLACE, dev, N, MPI_FLOAT, MPI_SUM, uniform);
    gpucoll_counters_t c;
    gpucoll_counters_get(&c);
    if (c.calls[GPUCOLL_COLL_ALLREDUCE][GPUCOLL_PATH_ACCELERATED] != 1) {
        fprintf(stderr, "[%d] allreduce took path %s, expected accelerated\n", rank,
                gpucoll_path_name(c.last_path));
        fails++;
    }
    gpucoll_memcpy(host, dev, sizeof host);
    for (int i = 0; i < N; i++) {
        float want = (float)(size * (size - 1) / 2 + size * (i % 7));
        if (host[i] != want) {
            fprintf(stderr, "[%d] element %d: %g, expected %g\n", rank, i, host[i], want);
            fails++;
            break;
        }
    }
    /* Host buffers on every rank (uniform, as asserted): Open MPI's module. */
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, uniform);
    if (sum != size) fails++;

    gpucoll_free_device(dev);
    MPI_Comm_free(&uniform);
    int all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_info_assert: %s\n", all ? "FAIL" : "PASS");
    MPI_Finalize();
    return all ? 1 : 0;
}
