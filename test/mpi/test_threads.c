/*
 * test_threads.c - MPI_THREAD_MULTIPLE and MPI_Reduce_local.
 *
 * MPI_Reduce_local is not a collective: threads may call it at once, and
 * while another thread is inside a collective on MPI_COMM_SELF, whose coll
 * module Open MPI runs every MPI_Reduce_local through. Here the main thread
 * reduces device buffers with MPI_Reduce_local in a loop while a second
 * thread runs host allreduces on MPI_COMM_SELF and host MPI_Reduce_locals.
 * Every device reduction must run on the device: Open MPI's host op on
 * device pointers faults (emu's device memory is not readable by the host)
 * or reads garbage. Checks the sums, and that gpucoll counted every device
 * reduction as accelerated and every host one as delegated.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpucoll.h"

enum { N = 256, ITERATIONS = 20000 };

static int fails = 0;       /* the main thread's; the other thread returns its own */
static atomic_int done = 0; /* the main thread's device loop has ended */
static long host_calls = 0; /* the other thread's MPI_Reduce_local calls */

/* Host calls on MPI_COMM_SELF for as long as the main thread reduces. */
static void* host_thread(void* arg) {
    (void)arg;
    static int in[N], out[N], acc[N];
    long bad = 0;
    for (int i = 0; i < N; i++) in[i] = i;
    for (int it = 0; it < ITERATIONS || !atomic_load(&done); it++, host_calls++) {
        MPI_Allreduce(in, out, N, MPI_INT, MPI_SUM, MPI_COMM_SELF);
        for (int i = 0; i < N; i++) acc[i] = 1;
        MPI_Reduce_local(in, acc, N, MPI_INT, MPI_SUM);
        bad += out[it % N] != it % N || acc[it % N] != it % N + 1;
    }
    return (void*)bad;
}

int main(int argc, char** argv) {
    int provided = 0, rank = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (provided != MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "[%d] MPI_THREAD_MULTIPLE not provided (%d): cannot test\n", rank,
                provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float host[N];
    float *in = NULL, *acc = NULL;
    for (int i = 0; i < N; i++) host[i] = 1.0f;
    if (gpucoll_malloc_device((void**)&in, sizeof host) != 0 ||
        gpucoll_malloc_device((void**)&acc, sizeof host) != 0 ||
        gpucoll_memcpy(in, host, sizeof host) != 0) {
        fprintf(stderr, "[%d] device memory: %s\n", rank, gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int i = 0; i < N; i++) host[i] = 0.0f;
    gpucoll_memcpy(acc, host, sizeof host);
    gpucoll_counters_reset();

    pthread_t t;
    pthread_create(&t, NULL, host_thread, NULL);
    for (int it = 0; it < ITERATIONS; it++) MPI_Reduce_local(in, acc, N, MPI_FLOAT, MPI_SUM);
    atomic_store(&done, 1);
    void* other = NULL;
    pthread_join(t, &other);
    if (other != NULL) {
        fprintf(stderr, "[%d] host thread: %ld wrong results\n", rank, (long)other);
        fails++;
    }

    gpucoll_memcpy(host, acc, sizeof host);
    for (int i = 0; i < N; i++) {
        if (host[i] != (float)ITERATIONS) {
            fprintf(stderr, "[%d] device reduce_local: element %d is %g, expected %d\n", rank, i,
                    host[i], ITERATIONS);
            fails++;
            break;
        }
    }
    gpucoll_counters_t k;
    gpucoll_counters_get(&k);
    const unsigned long long dev = k.calls[GPUCOLL_COLL_REDUCE_LOCAL][GPUCOLL_PATH_ACCELERATED];
    const unsigned long long del = k.calls[GPUCOLL_COLL_REDUCE_LOCAL][GPUCOLL_PATH_DELEGATED];
    if (dev != ITERATIONS || del != (unsigned long long)host_calls) {
        fprintf(stderr,
                "[%d] reduce_local counted %llu on the device, %llu delegated; expected %d and "
                "%ld\n",
                rank, dev, del, ITERATIONS, host_calls);
        fails++;
    }
    gpucoll_free_device(in);
    gpucoll_free_device(acc);

    int all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("test_threads: %s\n", all ? "FAIL" : "PASS");
    MPI_Finalize();
    return all ? 1 : 0;
}
