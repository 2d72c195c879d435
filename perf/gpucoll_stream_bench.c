/*
 * gpucoll_stream_bench.c - a produce -> allreduce -> consume loop written
 * for MPICH's stream extension (MPIX_Stream_create, MPIX_Stream_comm_create,
 * MPIX_Allreduce_enqueue), built unchanged against gpucoll_mpix.h, timed
 * against the same loop with MPI_Allreduce and a stream synchronisation
 * before it (what a CUDA-aware MPI needs), in one run.
 *
 * Only the device calls differ between a GPU and gpucoll's emulated device:
 * the DEV_* macros below (cuda runtime with -DSTREAM_BENCH_CUDA, else
 * gpucoll.h's allocator and streams). The MPI part is MPICH's API as is.
 *
 *   mpirun -np 4 gpucoll_stream_bench [-n CALLS] [-b BYTES] [-i ITERS]
 * prints, per size: the enqueue loop's time and the blocking loop's time per
 * iteration, and the enqueue figure: CALLS allreduces enqueued on a held
 * stream, the host time to enqueue them all against the time the stream then
 * takes to run them.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpucoll_mpix.h"

#ifdef STREAM_BENCH_CUDA
#include <cuda_runtime.h>
typedef cudaStream_t dev_stream_t;
#define DEV_STREAM_CREATE(s) cudaStreamCreateWithFlags((s), cudaStreamNonBlocking)
#define DEV_STREAM_DESTROY(s) cudaStreamDestroy(s)
#define DEV_SYNC(s) cudaStreamSynchronize(s)
#define DEV_MALLOC(p, n) cudaMalloc((p), (n))
#define DEV_FREE(p) cudaFree(p)
#define DEV_COPY_ASYNC(d, s_, n, st) cudaMemcpyAsync((d), (s_), (n), cudaMemcpyDefault, (st))
#else
#include "gpucoll.h"
typedef void* dev_stream_t;
#define DEV_STREAM_CREATE(s) gpucoll_stream_create(s)
#define DEV_STREAM_DESTROY(s) gpucoll_stream_destroy(s)
#define DEV_SYNC(s) gpucoll_stream_synchronize(s)
#define DEV_MALLOC(p, n) gpucoll_malloc_device((p), (n))
#define DEV_FREE(p) gpucoll_free_device(p)
#define DEV_COPY_ASYNC(d, s_, n, st) gpucoll_memcpy_async((d), (s_), (n), (st))
#endif

static int rank, size;

/* produce: the host image into the device buffer on the stream; consume:
 * the result back (a kernel on each side in a real code). */
static double loop_enqueue(MPI_Comm scomm, dev_stream_t st, float* d, float* h_in, float* h_out,
                           int count, int iters) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
        DEV_COPY_ASYNC(d, h_in, (size_t)count * sizeof(float), st);
        MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, count, MPI_FLOAT, MPI_SUM, scomm);
        DEV_COPY_ASYNC(h_out, d, (size_t)count * sizeof(float), st);
    }
    DEV_SYNC(st);
    return (MPI_Wtime() - t0) / iters;
}

static double loop_blocking(dev_stream_t st, float* d, float* h_in, float* h_out, int count,
                            int iters) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
        DEV_COPY_ASYNC(d, h_in, (size_t)count * sizeof(float), st);
        DEV_SYNC(st); /* MPI works on what the stream has finished */
        MPI_Allreduce(MPI_IN_PLACE, d, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        DEV_COPY_ASYNC(h_out, d, (size_t)count * sizeof(float), st);
    }
    DEV_SYNC(st);
    return (MPI_Wtime() - t0) / iters;
}

int main(int argc, char** argv) {
    int calls = 100, iters = 20;
    size_t max_bytes = 1 << 20;
    for (int c; (c = getopt(argc, argv, "n:b:i:")) != -1;) {
        if ('n' == c) calls = atoi(optarg);
        if ('b' == c) max_bytes = strtoull(optarg, NULL, 0);
        if ('i' == c) iters = atoi(optarg);
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    dev_stream_t st;
    DEV_STREAM_CREATE(&st);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "type", "cudaStream_t");
    MPIX_Info_set_hex(info, "value", &st, sizeof(st));
    MPIX_Stream mpi_stream;
    MPIX_Stream_create(info, &mpi_stream);
    MPI_Info_free(&info);
    MPI_Comm scomm;
    MPIX_Stream_comm_create(MPI_COMM_WORLD, mpi_stream, &scomm);

    float* d = NULL;
    DEV_MALLOC((void**)&d, max_bytes);
    float* h_in = calloc(max_bytes / sizeof(float) + 1, sizeof(float));
    float* h_out = calloc(max_bytes / sizeof(float) + 1, sizeof(float));
    if (0 == rank)
        printf(
            "# %d ranks; per iteration: produce -> allreduce -> consume\n"
            "# %12s %14s %14s\n",
            size, "bytes", "enqueue_us", "blocking_us");
    for (size_t bytes = 8; bytes <= max_bytes; bytes *= 8) {
        const int count = (int)(bytes / sizeof(float));
        (void)loop_enqueue(scomm, st, d, h_in, h_out, count, 2); /* warm-up */
        (void)loop_blocking(st, d, h_in, h_out, count, 2);
        const double te = loop_enqueue(scomm, st, d, h_in, h_out, count, iters);
        const double tb = loop_blocking(st, d, h_in, h_out, count, iters);
        if (0 == rank) printf("  %12zu %14.1f %14.1f\n", bytes, te * 1e6, tb * 1e6);
    }

    /* The enqueue figure: calls allreduces of max_bytes on a held stream. */
#ifndef STREAM_BENCH_CUDA
    static uint32_t gate;
    const int count = (int)(max_bytes / sizeof(float));
    MPI_Barrier(MPI_COMM_WORLD);
    gpucoll_stream_wait_host(st, &gate, 1);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < calls; ++i)
        MPIX_Allreduce_enqueue(MPI_IN_PLACE, d, count, MPI_FLOAT, MPI_SUM, scomm);
    const double t1 = MPI_Wtime();
    __atomic_store_n(&gate, 1, __ATOMIC_RELEASE);
    DEV_SYNC(st);
    const double t2 = MPI_Wtime();
    double mine[2] = {t1 - t0, t2 - t1}, worst[2];
    MPI_Reduce(mine, worst, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (0 == rank)
        printf(
            "# enqueue figure: %d allreduces of %zu bytes: host enqueue %.3f ms, stream run "
            "%.3f ms, ratio %.1f%% (largest over ranks)\n",
            calls, max_bytes, worst[0] * 1e3, worst[1] * 1e3, 100 * worst[0] / worst[1]);
#endif
    int status = gpucoll_mpix_stream_status(scomm);
    if (MPI_SUCCESS != status) fprintf(stderr, "rank %d: %s\n", rank, gpucoll_mpix_last_error());
    MPI_Comm_free(&scomm);
    MPIX_Stream_free(&mpi_stream);
    DEV_FREE(d);
    DEV_STREAM_DESTROY(st);
    free(h_in);
    free(h_out);
    MPI_Finalize();
    return MPI_SUCCESS == status ? 0 : 1;
}
