/*
 * test_lifetime.c - gpucoll's C API at every point of a process's life
 * (issue #40, defects 1 and 4), without MPI:
 *  - before first use: calls that need nothing set up;
 *  - in use: device buffers and a communicator of one rank (a bootstrap of
 *    its own) with blocking and nonblocking calls, then gpucoll_finalize;
 *  - in a child forked then: the communicator's host gate (the component's
 *    inline host-buffer path) is closed, the core refuses the call with a
 *    message, the communicator is left alone, and the child's exit() ends;
 *    the parent's progress word in the node's shared segment is unchanged,
 *    and the parent's gate still works;
 *  - after exit-time destruction: an atexit handler registered before
 *    gpucoll's first use, and a destructor function of this program, both of
 *    which run after every static object of libgpucoll was destroyed, call
 *    the API again: the backend's name, freeing and allocating device
 *    memory, a copy, a collective on the communicator, destroying it. Each
 *    call must either work (results checked) or fail with a status and a
 *    message; it crashed (SIGSEGV) in gpucoll_free_device and
 *    gpucoll_backend.
 * Exit status 0: every call behaved; 1: a call failed without a message, gave
 * a wrong result, or the child misbehaved. Run with GPUCOLL_DEVICE=emu
 * (test/process/lifetime.sh).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpucoll.h"

#define COUNT 1024

static void* g_kept;           /* allocated in main, freed at exit */
static gpucoll_comm_t* g_comm; /* created in main, used and destroyed at exit */
static int g_failures;

static int one_rank_allgather(void* ctx, const void* send, void* recv, size_t bytes) {
    (void)ctx;
    memcpy(recv, send, bytes);
    return 0;
}
static int one_rank_barrier(void* ctx) {
    (void)ctx;
    return 0;
}
static gpucoll_bootstrap_t g_bootstrap = {NULL, 0, 1, one_rank_allgather, one_rank_barrier};

/* A status: success, or an error with a message. */
static int behaved(const char* when, const char* call, int status) {
    printf("%s: %s -> %d%s%s\n", when, call, status, status ? ": " : "",
           status ? gpucoll_last_error() : "");
    if (status != 0 && gpucoll_last_error()[0] == '\0') {
        printf("%s: FAIL: %s failed (%d) without a message\n", when, call, status);
        g_failures++;
        return 0;
    }
    return status == 0;
}

/* An allreduce of one rank on device memory: the result is the input. */
static void allreduce(const char* when) {
    float host[COUNT];
    void *send = NULL, *recv = NULL;
    if (!behaved(when, "gpucoll_malloc_device", gpucoll_malloc_device(&send, sizeof host)) ||
        !behaved(when, "gpucoll_malloc_device", gpucoll_malloc_device(&recv, sizeof host)))
        goto out;
    for (int i = 0; i < COUNT; ++i) host[i] = (float)i;
    if (!behaved(when, "gpucoll_memcpy", gpucoll_memcpy(send, host, sizeof host))) goto out;
    gpucoll_call_t call = {GPUCOLL_COLL_ALLREDUCE, send,           recv, COUNT, NULL,
                           GPUCOLL_FLOAT,          GPUCOLL_OP_SUM, 0,    1,     1};
    if (g_comm != NULL) {
        gpucoll_pending_t* op = NULL;
        if (behaved(when, "gpucoll_comm_start",
                    gpucoll_comm_start(g_comm, &call, GPUCOLL_FORM_NONBLOCKING, &op))) {
            int done = 0, s = 0;
            for (int spins = 0; s == 0 && !done && spins < 1000000; ++spins)
                s = gpucoll_pending_test(op, &done);
            behaved(when, "gpucoll_pending_test", s == GPUCOLL_DECLINED ? 0 : s);
            gpucoll_pending_free(op);
        }
        int s = gpucoll_comm_run(g_comm, &call);
        behaved(when, "gpucoll_comm_run", s == GPUCOLL_DECLINED ? 0 : s);
        if (s == 0) {
            memset(host, 0, sizeof host);
            if (behaved(when, "gpucoll_memcpy", gpucoll_memcpy(host, recv, sizeof host)))
                for (int i = 0; i < COUNT; ++i)
                    if (host[i] != (float)i) {
                        printf("%s: FAIL: element %d is %g, expected %d\n", when, i, host[i], i);
                        g_failures++;
                        break;
                    }
        }
    }
out:
    behaved(when, "gpucoll_free_device", gpucoll_free_device(send));
    behaved(when, "gpucoll_free_device", gpucoll_free_device(recv));
}

static void late_calls(const char* when) {
    const char* name = gpucoll_backend();
    printf("%s: gpucoll_backend -> %s\n", when, name ? name : "NULL");
    if (name == NULL) g_failures++;
    behaved(when, "gpucoll_free_device (allocated in main)", gpucoll_free_device(g_kept));
    g_kept = NULL;
    gpucoll_counters_t counters;
    behaved(when, "gpucoll_counters_get", gpucoll_counters_get(&counters));
    allreduce(when);
    if (g_comm != NULL) {
        gpucoll_comm_destroy(g_comm);
        g_comm = NULL;
        printf("%s: gpucoll_comm_destroy returned\n", when);
    }
    gpucoll_staging_release();
    gpucoll_finalize();
}

/* The child of a process whose communicator has a host gate. Returns its
 * exit status (bits: what went wrong). */
static int child_of_gate(gpucoll_host_gate_t* gate) {
    int bad = 0, device = 0;
    float a[4] = {0}, b[4] = {0};
    if (gpucoll_host_gate_call(gate, a, b, GPUCOLL_COLL_ALLREDUCE) != GPUCOLL_SUCCESS) bad |= 1;
    const int s = gpucoll_comm_host_call(g_comm, a, b, GPUCOLL_COLL_ALLREDUCE, &device);
    if (s == GPUCOLL_SUCCESS || s == GPUCOLL_DECLINED ||
        strstr(gpucoll_last_error(), "fork") == NULL)
        bad |= 2;
    if (gpucoll_comm_host_gate(g_comm, GPUCOLL_HOST_GATE_VERSION, sizeof *gate) != NULL) bad |= 4;
    gpucoll_comm_destroy(g_comm); /* left alone: it is the parent's */
    if (bad) printf("child: FAIL (%d): host call answered %d (%s)\n", bad, s, gpucoll_last_error());
    fflush(stdout);
    return bad;
}

/* Forks while the communicator lives; the child's exit() runs this
 * program's atexit handler and destructor too (in the child: refused). */
static void fork_with_gate(void) {
    gpucoll_host_gate_t* gate =
        gpucoll_comm_host_gate(g_comm, GPUCOLL_HOST_GATE_VERSION, sizeof *gate);
    if (gate == NULL) {
        printf("fork: no host gate on this communicator: its check skipped\n");
    } else {
        float a[4] = {0};
        const int s = gpucoll_host_gate_call(gate, a, NULL, GPUCOLL_COLL_BCAST);
        if (s != GPUCOLL_DECLINED) {
            printf("fork: FAIL: the parent's gate answered %d before the fork\n", s);
            g_failures++;
        }
    }
    const uint64_t progress = gate ? __atomic_load_n(gate->progress, __ATOMIC_ACQUIRE) : 0;
    fflush(stdout);
    const pid_t child = fork();
    if (child == 0) exit(gate ? child_of_gate(gate) : 0);
    if (child < 0) {
        printf("fork: FAIL: fork failed\n");
        g_failures++;
        return;
    }
    int status = 0;
    for (int waited = 0; waitpid(child, &status, WNOHANG) != child; ++waited) {
        if (waited == 100) { /* 10 s */
            printf("fork: FAIL: the child did not exit within 10 s (hang at exit?): killed\n");
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            g_failures++;
            return;
        }
        const struct timespec tenth = {0, 100000000L};
        nanosleep(&tenth, NULL);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("fork: FAIL: the child ended with %s %d\n", WIFEXITED(status) ? "status" : "signal",
               WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        g_failures++;
    }
    if (gate == NULL) return;
    if (__atomic_load_n(gate->progress, __ATOMIC_ACQUIRE) != progress) {
        printf("fork: FAIL: the child wrote the parent's progress word\n");
        g_failures++;
    }
    float a[4] = {0};
    if (gpucoll_host_gate_call(gate, a, NULL, GPUCOLL_COLL_BCAST) != GPUCOLL_DECLINED) {
        printf("fork: FAIL: the parent's gate no longer declines host calls\n");
        g_failures++;
    }
    printf("fork: the child exited normally; the parent's gate is untouched\n");
}

/* Registered before gpucoll's first use: runs after its static objects were
 * destroyed (in the reverse order of registration). */
static void at_exit(void) {
    late_calls("atexit");
    fflush(stdout);
    if (g_failures) _exit(1);
}

/* Runs after every atexit handler (the program's fini array). */
__attribute__((destructor)) static void at_unload(void) {
    late_calls("destructor");
    fflush(stdout);
    if (g_failures) _exit(1);
}

int main(void) {
    if (atexit(at_exit) != 0) return 2;

    /* Before first use. */
    gpucoll_counters_t counters;
    behaved("before", "gpucoll_counters_get", gpucoll_counters_get(&counters));
    behaved("before", "gpucoll_free_device(NULL)", gpucoll_free_device(NULL));
    behaved("before", "gpucoll_comm_run(NULL)", gpucoll_comm_run(NULL, NULL));
    gpucoll_comm_destroy(NULL);
    gpucoll_finalize();

    /* In use. */
    if (strcmp(gpucoll_backend(), "none") == 0) {
        printf("no device backend (set GPUCOLL_DEVICE=emu): %s\n", gpucoll_last_error());
        return 2;
    }
    if (!behaved("main", "gpucoll_malloc_device", gpucoll_malloc_device(&g_kept, 4096))) return 1;
    gpucoll_comm_config_t config;
    gpucoll_comm_config_init(&config);
    config.progress_thread = 1;
    if (!behaved("main", "gpucoll_comm_create",
                 gpucoll_comm_create(&g_bootstrap, &config, &g_comm)))
        return 1;
    printf("main: communicator %s\n", g_comm != NULL ? "created" : "not created (NULL)");
    allreduce("main");
    if (g_comm != NULL) fork_with_gate();
    gpucoll_finalize(); /* as the component does at MPI_Finalize */
    allreduce("after gpucoll_finalize");
    return g_failures ? 1 : 0;
}
