/*
 * test_faults.c - a loop of accelerated device allreduces between nodes for
 * the fault tests on namespace hosts (test/cluster/faults.sh), which cut a
 * host's link, stop its processes or kill one while it runs.
 *
 * Every rank runs calls of BYTES (float sum, on a duplicate of
 * MPI_COMM_WORLD with MPI_ERRORS_RETURN) until SECONDS have passed, checks
 * every result, and records what it saw in DIR/rank.R (the file system is
 * shared by the hosts; a host whose link is down cannot send its output to
 * mpirun): "progress N" after each call, then one final line:
 *   "ok CALLS" - every call succeeded with the right values;
 *   "failed CALL AFTER_S ERROR" - call CALL returned an error after AFTER_S
 *     seconds inside it (ERROR: MPI's error string);
 *   "wrong CALL" - a call succeeded with wrong values (never acceptable).
 * After a failed call (or wrong values) the rank ends the job as an
 * application would: MPI_Abort, with 3 (failed) or 1 (wrong); --linger S
 * first waits S seconds (the others may be failing the same call: an
 * abort would end them before they can say so).
 * --host: host buffers (to see what Open MPI alone does, component off).
 * usage: test_faults DIR [--seconds S] [--bytes B] [--host] [--linger S]
 */
#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpucoll.h"

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static FILE* g_log;

static void memcpy_any(int host, void* dst, const void* src, size_t bytes) {
    if (host)
        memcpy(dst, src, bytes);
    else
        gpucoll_memcpy(dst, src, bytes);
}

static void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfprintf(g_log, fmt, ap);
    va_end(ap);
    fputc('\n', g_log);
    fflush(g_log);
}

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_faults DIR [--seconds S] [--bytes B] [--host] [--linger S]\n");
        return 2;
    }
    const char* dir = argv[1];
    double seconds = 20;
    size_t bytes = 1 << 20;
    int host = 0;
    unsigned linger = 0;
    for (int i = 2; i < argc; ++i) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (strcmp(argv[i], "--bytes") == 0 && i + 1 < argc)
            bytes = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--host") == 0)
            host = 1;
        else if (strcmp(argv[i], "--linger") == 0 && i + 1 < argc)
            linger = (unsigned)atoi(argv[++i]);
        else {
            fprintf(stderr, "test_faults: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    MPI_Init(&argc, &argv);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char path[4096];
    snprintf(path, sizeof path, "%s/rank.%d", dir, rank);
    g_log = fopen(path, "w");
    if (g_log == NULL) {
        fprintf(stderr, "test_faults: cannot write %s: %s\n", path, strerror(errno));
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    char hostname[256] = {0};
    gethostname(hostname, sizeof hostname - 1);
    note("host %s pid %d", hostname, (int)getpid());
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);

    /* n values, then one more that says whether any rank's time is up: all
     * ranks stop after the same call (a rank whose clock ran out first must
     * not leave the others in a call it never makes). */
    const size_t n = bytes / sizeof(float) - 1;
    float *dev = NULL, *img = malloc((n + 1) * sizeof(float));
    if (host) dev = malloc((n + 1) * sizeof(float));
    if (img == NULL ||
        (host ? dev == NULL : gpucoll_malloc_device((void**)&dev, (n + 1) * sizeof(float)) != 0)) {
        note("failed 0 0 cannot allocate %zu bytes: %s", bytes, gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const double start = now_s();
    int calls = 0, status = 0;
    for (int done = 0; !done;) {
        /* rank r contributes (r + 1) * (call % 7 + 1) in every element */
        const float mine = (float)((rank + 1) * (calls % 7 + 1));
        for (size_t i = 0; i < n; ++i) img[i] = mine;
        img[n] = now_s() - start >= seconds ? 1.0f : 0.0f;
        memcpy_any(host, dev, img, (n + 1) * sizeof(float));
        const double t0 = now_s();
        int rc = MPI_Allreduce(MPI_IN_PLACE, dev, (int)(n + 1), MPI_FLOAT, MPI_SUM, comm);
        const double took = now_s() - t0;
        ++calls;
        if (rc != MPI_SUCCESS) {
            char text[MPI_MAX_ERROR_STRING] = {0};
            int len = 0;
            MPI_Error_string(rc, text, &len);
            note("failed %d %.1f %s", calls, took, text);
            status = 3;
            break;
        }
        memcpy_any(host, img, dev, (n + 1) * sizeof(float));
        const float want = (float)(size * (size + 1) / 2 * ((calls - 1) % 7 + 1));
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; ++i)
            if (img[i] != want) bad = i;
        done = img[n] > 0;
        if (bad != n) {
            note("wrong %d element %zu: %g, want %g", calls, bad, (double)img[bad], (double)want);
            status = 1;
            break;
        }
        note("progress %d %.3f", calls, took);
    }
    if (status == 0) note("ok %d", calls);
    if (status != 0) {
        fclose(g_log);
        if (linger > 0) sleep(linger);
        MPI_Abort(MPI_COMM_WORLD, status);
    }
    if (host)
        free(dev);
    else
        gpucoll_free_device(dev);
    free(img);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    fclose(g_log);
    return 0;
}
