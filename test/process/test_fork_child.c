/*
 * test_fork_child.c - a child created by fork() in a process that used
 * gpucoll (issue #40, defect 4).
 *
 * Every rank runs accelerated nonblocking allreduces on device (emu) buffers,
 * each started while the peer is late, so that every rank has a progress
 * thread, then forks twice:
 *  1. after its calls ended: the child tries gpucoll (allocation, a copy into
 *     the parent's device buffer, a pointer query, the backend's name) and
 *     must get an error status with a message that says why, then calls
 *     exit(0), which must return (it hung in the progress thread's
 *     destructor);
 *  2. while a nonblocking allreduce is in flight (started, not yet waited
 *     for): the child calls exit(0) at once.
 * The parent waits for each child with a timeout (a child still running is
 * killed and the test fails), checks that its device buffer was not written
 * by the child, and keeps working: its in-flight call completes, more
 * nonblocking and blocking calls run accelerated with correct results.
 *
 * Run with the component on the emu device at np 2 (test/process/fork.sh);
 * the script checks the child's one line on stderr.
 */
#include <errno.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpucoll.h"

#define COUNT 4096
#define CHILD_TIMEOUT_S 10

static int g_rank, g_size, g_failures;

#define CHECK(cond, ...)                                       \
    do {                                                       \
        if (!(cond)) {                                         \
            fprintf(stderr, "rank %d: FAIL: ", g_rank);        \
            fprintf(stderr, __VA_ARGS__);                      \
            fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__); \
            g_failures++;                                      \
        }                                                      \
    } while (0)

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Rank r contributes r + 1 + i + round: the sum is known everywhere. */
static void fill(float* host, int round) {
    for (int i = 0; i < COUNT; ++i) host[i] = (float)(g_rank + 1 + i % 97 + round);
}

static int check_sum(const float* host, int round, const char* what) {
    for (int i = 0; i < COUNT; ++i) {
        float want = 0;
        for (int r = 0; r < g_size; ++r) want += (float)(r + 1 + i % 97 + round);
        if (host[i] != want) {
            CHECK(0, "%s round %d: element %d is %g, expected %g", what, round, i, host[i], want);
            return 0;
        }
    }
    return 1;
}

/* A nonblocking allreduce on device buffers, started by rank `late` after
 * the other rank (so that the other one's call waits on its progress
 * thread); not waited for. */
static MPI_Request start(float* d_send, float* d_recv, float* host, int round, int late) {
    fill(host, round);
    if (gpucoll_memcpy(d_send, host, sizeof(float) * COUNT) != 0)
        CHECK(0, "gpucoll_memcpy: %s", gpucoll_last_error());
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == late) sleep_ms(30);
    MPI_Request req;
    MPI_Iallreduce(d_send, d_recv, COUNT, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &req);
    return req;
}

static void finish(MPI_Request* req, float* d_recv, float* host, int round, const char* what) {
    MPI_Wait(req, MPI_STATUS_IGNORE);
    if (gpucoll_memcpy(host, d_recv, sizeof(float) * COUNT) != 0)
        CHECK(0, "gpucoll_memcpy: %s", gpucoll_last_error());
    check_sum(host, round, what);
}

/* The child of case 1: gpucoll refuses, with a reason; nothing of the
 * parent's is written. Returns the child's exit status. */
static int child_tries_gpucoll(float* d_parent) {
    int bad = 0;
    void* p = NULL;
    int s = gpucoll_malloc_device(&p, 4096);
    if (s == 0 || strstr(gpucoll_last_error(), "fork") == NULL) {
        fprintf(stderr, "child of rank %d: gpucoll_malloc_device returned %d (%s)\n", g_rank, s,
                gpucoll_last_error());
        bad |= 1;
    }
    float junk[16];
    for (int i = 0; i < 16; ++i) junk[i] = -1.0f;
    s = gpucoll_memcpy(d_parent, junk, sizeof junk);
    if (s == 0 || gpucoll_last_error()[0] == '\0') {
        fprintf(stderr, "child of rank %d: gpucoll_memcpy into the parent's buffer returned %d\n",
                g_rank, s);
        bad |= 2;
    }
    s = gpucoll_free_device(d_parent);
    if (s == 0) {
        fprintf(stderr, "child of rank %d: gpucoll_free_device of the parent's buffer succeeded\n",
                g_rank);
        bad |= 4;
    }
    const char* name = gpucoll_backend();
    if (name == NULL || strcmp(name, "none") != 0) {
        fprintf(stderr, "child of rank %d: gpucoll_backend() is %s\n", g_rank,
                name ? name : "NULL");
        bad |= 8;
    }
    return bad;
}

/* Waits for the child, at most CHILD_TIMEOUT_S seconds; kills it after. */
static void reap(pid_t child, const char* what) {
    int status = 0;
    for (int waited = 0;; ++waited) {
        const pid_t r = waitpid(child, &status, WNOHANG);
        if (r == child) break;
        if (r < 0 && errno != EINTR) {
            CHECK(0, "%s: waitpid: %s", what, strerror(errno));
            return;
        }
        if (waited >= CHILD_TIMEOUT_S * 10) {
            CHECK(0, "%s: the child did not exit within %d s (hang at exit?): killed", what,
                  CHILD_TIMEOUT_S);
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            return;
        }
        sleep_ms(100);
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: the child ended with %s %d", what,
          WIFEXITED(status) ? "exit status" : "signal",
          WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

int main(int argc, char** argv) {
    (void)argc;
    (void)argv;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (strcmp(gpucoll_backend(), "none") == 0) {
        fprintf(stderr, "no gpucoll device backend: %s\n", gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *d_send = NULL, *d_recv = NULL;
    float* host = malloc(sizeof(float) * COUNT);
    if (host == NULL || gpucoll_malloc_device((void**)&d_send, sizeof(float) * COUNT) != 0 ||
        gpucoll_malloc_device((void**)&d_recv, sizeof(float) * COUNT) != 0) {
        fprintf(stderr, "rank %d: allocation failed: %s\n", g_rank, gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }

    /* The accelerated path is set up by a first (blocking) call on device
     * buffers; then every rank's calls wait for a late peer once, so that
     * each rank has a progress thread. */
    int round = 0;
    fill(host, round);
    gpucoll_memcpy(d_send, host, sizeof(float) * COUNT);
    MPI_Allreduce(d_send, d_recv, COUNT, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    gpucoll_memcpy(host, d_recv, sizeof(float) * COUNT);
    check_sum(host, round++, "the first call");
    for (int late = 0; late < g_size; ++late, ++round) {
        MPI_Request req = start(d_send, d_recv, host, round, late);
        finish(&req, d_recv, host, round, "before the forks");
    }
    gpucoll_counters_t c;
    gpucoll_counters_get(&c);
    CHECK(c.forms[GPUCOLL_FORM_NONBLOCKING][GPUCOLL_PATH_ACCELERATED] >= (uint64_t)g_size,
          "nonblocking device calls were not accelerated (%llu accelerated)",
          (unsigned long long)c.forms[GPUCOLL_FORM_NONBLOCKING][GPUCOLL_PATH_ACCELERATED]);

    /* 1. Calls ended: the child tries gpucoll, then exits. The parent's
     * d_recv holds the last round's sums. */
    fflush(NULL);
    pid_t child = fork();
    if (child == 0) exit(child_tries_gpucoll(d_recv));
    CHECK(child > 0, "fork: %s", strerror(errno));
    if (child > 0) reap(child, "child 1 (tried gpucoll, then exit)");
    if (gpucoll_memcpy(host, d_recv, sizeof(float) * COUNT) != 0)
        CHECK(0, "gpucoll_memcpy: %s", gpucoll_last_error());
    check_sum(host, round - 1, "the parent's buffer after child 1");

    /* 2. A call in flight: the child exits at once. */
    MPI_Request req = start(d_send, d_recv, host, round, 1);
    fflush(NULL);
    child = fork();
    if (child == 0) exit(0);
    CHECK(child > 0, "fork: %s", strerror(errno));
    if (child > 0) reap(child, "child 2 (exit with a call in flight)");
    finish(&req, d_recv, host, round, "the call in flight at fork");
    ++round;

    /* The parent keeps working: nonblocking (each rank late once) and blocking. */
    for (int late = 0; late < g_size; ++late, ++round) {
        req = start(d_send, d_recv, host, round, late);
        finish(&req, d_recv, host, round, "after the forks");
    }
    fill(host, round);
    gpucoll_memcpy(d_send, host, sizeof(float) * COUNT);
    gpucoll_counters_get(&c);
    const uint64_t accelerated = c.calls[GPUCOLL_COLL_ALLREDUCE][GPUCOLL_PATH_ACCELERATED];
    MPI_Allreduce(d_send, d_recv, COUNT, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    gpucoll_counters_get(&c);
    CHECK(c.calls[GPUCOLL_COLL_ALLREDUCE][GPUCOLL_PATH_ACCELERATED] == accelerated + 1,
          "the blocking allreduce after the forks took the %s path",
          gpucoll_path_name(c.last_path));
    gpucoll_memcpy(host, d_recv, sizeof(float) * COUNT);
    check_sum(host, round, "blocking, after the forks");

    gpucoll_free_device(d_send);
    gpucoll_free_device(d_recv);
    free(host);
    int failures = 0;
    MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0)
        printf("%s: test_fork_child (%d failures)\n", failures ? "FAIL" : "PASS", failures);
    MPI_Finalize();
    return failures ? 1 : 0;
}
