/*
 * gpucoll_host_overhead - what coll/gpucoll costs a host-buffer collective,
 * measured inside one run: the same calls on two duplicates of
 * MPI_COMM_WORLD, one with gpucoll ("on") and one that gpucoll leaves to Open
 * MPI's modules (info key gpucoll_enable=false, "off"), in alternating blocks.
 *
 *   mpirun -np 2 --mca coll_gpucoll_device emu gpucoll_host_overhead -c allreduce
 *
 * A comparison of two runs (the component loaded, then --mca coll ^gpucoll)
 * also sees what the component costs outside the calls (its progress thread,
 * its memory), but on a shared or throttled machine it mostly sees how fast
 * the machine ran each time: two runs minutes apart can differ by more than
 * gpucoll's whole host path. Here both sides share every slowdown: each
 * round times a block of calls on each communicator (the order alternating
 * round to round), and the table reports the median over the rounds of the
 * difference within a round.
 *
 * Per size, latency in microseconds (each block's time per call, averaged
 * over the ranks as the OSU benchmarks do): the medians of "on" and "off",
 * the median of on - off within a round and its quartiles, and that median
 * over "off". The run checks that gpucoll saw every "on" call as a host call
 * (delegated) and none of the "off" ones; it fails otherwise.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpucoll.h"

typedef enum { C_ALLREDUCE, C_BCAST, C_ALLGATHER } coll_t;
static const char* const coll_names[] = {"allreduce", "bcast", "allgather"};
static const gpucoll_coll_t coll_ids[] = {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_COLL_BCAST,
                                          GPUCOLL_COLL_ALLGATHER};

static int rank, size;

static void usage(FILE* f) {
    fprintf(f,
            "usage: gpucoll_host_overhead [-c COLL] [-m MIN:MAX] [-i ITERS] [-r ROUNDS] "
            "[-w WARMUP] [-I KEY=VALUE] [-M]\n"
            "  -c COLL     allreduce (float sum), bcast (root 0) or allgather; default "
            "allreduce\n"
            "  -m MIN:MAX  message sizes in bytes, doubling (allgather: per rank); default "
            "4:4096\n"
            "  -i ITERS    calls per block; default 20000\n"
            "  -r ROUNDS   blocks per communicator and size; default 21\n"
            "  -w WARMUP   untimed calls per communicator and size; default 2000\n"
            "  -I KEY=VALUE  an info key of the \"on\" communicator (e.g.\n"
            "              mpi_assert_memory_alloc_kinds=system); repeatable\n"
            "  -M          buffers from mmap, as malloc gives large ones (the OSU\n"
            "              benchmarks'), instead of the heap: with cuda, memory that\n"
            "              the backend cannot tell from its address ranges alone\n");
}

static size_t parse_size(const char* s) {
    char* end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end != NULL && (*end == 'k' || *end == 'K')) v <<= 10;
    if (end != NULL && (*end == 'm' || *end == 'M')) v <<= 20;
    return (size_t)v;
}

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of n values, sorted in place (nearest rank). */
static double quantile(double* v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int k = (int)(q * (n - 1) + 0.5);
    return v[k];
}

/* Zeroed buffers: from the heap (calloc), or mapped on their own. */
static char* alloc_buffer(size_t bytes, int use_mmap) {
    if (!use_mmap) return calloc(bytes, 1);
    void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : (char*)p;
}

static void free_buffer(char* p, size_t bytes, int use_mmap) {
    if (p == NULL) return;
    if (use_mmap)
        munmap(p, bytes);
    else
        free(p);
}

static void run_calls(coll_t c, MPI_Comm comm, char* sbuf, char* rbuf, size_t bytes, int n) {
    for (int i = 0; i < n; i++) {
        switch (c) {
            case C_ALLREDUCE:
                MPI_Allreduce(sbuf, rbuf, (int)(bytes / sizeof(float)), MPI_FLOAT, MPI_SUM, comm);
                break;
            case C_BCAST:
                MPI_Bcast(sbuf, (int)bytes, MPI_BYTE, 0, comm);
                break;
            case C_ALLGATHER:
                MPI_Allgather(sbuf, (int)bytes, MPI_BYTE, rbuf, (int)bytes, MPI_BYTE, comm);
                break;
        }
    }
}

/* One block: seconds per call on this rank, averaged over the ranks. */
static double block(coll_t c, MPI_Comm comm, MPI_Comm sync, char* sbuf, char* rbuf, size_t bytes,
                    int iters) {
    MPI_Barrier(sync);
    const double t0 = MPI_Wtime();
    run_calls(c, comm, sbuf, rbuf, bytes, iters);
    const double mine = (MPI_Wtime() - t0) / iters;
    double total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, sync);
    return total / size;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    coll_t c = C_ALLREDUCE;
    size_t min = 4, max = 4096;
    int iters = 20000, rounds = 21, warmup = 2000;
    MPI_Info on_info;
    MPI_Info_create(&on_info);
    int opt;
    int use_mmap = 0;
    while ((opt = getopt(argc, argv, "c:m:i:r:w:I:Mh")) != -1) {
        switch (opt) {
            case 'c': {
                int found = 0;
                for (int k = 0; k < 3; k++)
                    if (strcmp(optarg, coll_names[k]) == 0) c = (coll_t)k, found = 1;
                if (!found) {
                    if (rank == 0) usage(stderr);
                    MPI_Finalize();
                    return 2;
                }
                break;
            }
            case 'm': {
                const char* colon = strchr(optarg, ':');
                min = parse_size(optarg);
                max = colon != NULL ? parse_size(colon + 1) : min;
                break;
            }
            case 'i':
                iters = atoi(optarg);
                break;
            case 'r':
                rounds = atoi(optarg);
                break;
            case 'w':
                warmup = atoi(optarg);
                break;
            case 'I': {
                char* eq = strchr(optarg, '=');
                if (eq == NULL) {
                    if (rank == 0) usage(stderr);
                    MPI_Finalize();
                    return 2;
                }
                *eq = '\0';
                MPI_Info_set(on_info, optarg, eq + 1);
                break;
            }
            case 'M':
                use_mmap = 1;
                break;
            case 'h':
                if (rank == 0) usage(stdout);
                MPI_Finalize();
                return 0;
            default:
                if (rank == 0) usage(stderr);
                MPI_Finalize();
                return 2;
        }
    }
    if (min < 4) min = 4;
    if (max < min || iters < 1 || rounds < 1 || warmup < 0) {
        if (rank == 0) usage(stderr);
        MPI_Finalize();
        return 2;
    }

    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "gpucoll_enable", "false");
    MPI_Comm off, on;
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &off);
    MPI_Info_free(&info);
    MPI_Comm_dup_with_info(MPI_COMM_WORLD, on_info, &on);
    MPI_Info_free(&on_info);

    char* sbuf = alloc_buffer(max, use_mmap);
    char* rbuf = alloc_buffer(max * (size_t)size, use_mmap);
    double* t_on = calloc((size_t)rounds, sizeof(double));
    double* t_off = calloc((size_t)rounds, sizeof(double));
    double* diff = calloc((size_t)rounds, sizeof(double));
    if (sbuf == NULL || rbuf == NULL || t_on == NULL || t_off == NULL || diff == NULL) {
        fprintf(stderr, "gpucoll_host_overhead: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    if (rank == 0) {
        printf(
            "# gpucoll_host_overhead: %s, %d ranks, %d rounds of %d calls per communicator "
            "and size, buffers from %s (backend %s)\n",
            coll_names[c], size, rounds, iters, use_mmap ? "mmap" : "the heap", gpucoll_backend());
        printf("# latency in us; diff = on - off within a round (median, quartiles)\n");
        printf("# %10s %9s %9s %9s %9s %9s %8s\n", "bytes", "on", "off", "diff", "diff_q1",
               "diff_q3", "diff_%");
    }
    int bad = 0;
    for (size_t bytes = min; bytes <= max; bytes *= 2) {
        gpucoll_counters_reset();
        run_calls(c, on, sbuf, rbuf, bytes, warmup);
        run_calls(c, off, sbuf, rbuf, bytes, warmup);
        for (int r = 0; r < rounds; r++) {
            if (r % 2 == 0) {
                t_on[r] = block(c, on, off, sbuf, rbuf, bytes, iters);
                t_off[r] = block(c, off, off, sbuf, rbuf, bytes, iters);
            } else {
                t_off[r] = block(c, off, off, sbuf, rbuf, bytes, iters);
                t_on[r] = block(c, on, off, sbuf, rbuf, bytes, iters);
            }
            diff[r] = t_on[r] - t_off[r];
        }
        /* gpucoll saw exactly the "on" calls, as host calls */
        gpucoll_counters_t k;
        gpucoll_counters_get(&k);
        const uint64_t want = (uint64_t)warmup + (uint64_t)rounds * (uint64_t)iters;
        const uint64_t seen = k.calls[coll_ids[c]][GPUCOLL_PATH_DELEGATED];
        if (seen != want) {
            fprintf(stderr,
                    "[%d] gpucoll_host_overhead: %zu bytes: gpucoll saw %llu host calls, "
                    "expected %llu (is coll/gpucoll loaded and selected?)\n",
                    rank, bytes, (unsigned long long)seen, (unsigned long long)want);
            bad = 1;
        }
        if (rank == 0) {
            const double us = 1e6;
            const double d = quantile(diff, rounds, 0.5);
            const double q1 = quantile(diff, rounds, 0.25), q3 = quantile(diff, rounds, 0.75);
            const double m_on = quantile(t_on, rounds, 0.5), m_off = quantile(t_off, rounds, 0.5);
            printf("  %10zu %9.3f %9.3f %+9.3f %+9.3f %+9.3f %+7.1f%%\n", bytes, m_on * us,
                   m_off * us, d * us, q1 * us, q3 * us, 100.0 * d / m_off);
            fflush(stdout);
        }
    }
    if (rank == 0) {
        uint64_t kept = 0, refused = 0;
        int watching = 0;
        gpucoll_host_cache_stats(&kept, &refused, &watching);
        printf("# host page cache (rank 0): %s, %llu pages kept, %llu answers not kept\n",
               watching ? "unmaps reported" : "not in use", (unsigned long long)kept,
               (unsigned long long)refused);
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, off);

    free(diff);
    free(t_off);
    free(t_on);
    free_buffer(rbuf, max * (size_t)size, use_mmap);
    free_buffer(sbuf, max, use_mmap);
    MPI_Comm_free(&on);
    MPI_Comm_free(&off);
    MPI_Finalize();
    return any ? 1 : 0;
}
