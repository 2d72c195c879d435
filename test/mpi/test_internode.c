/*
 * test_internode.c - the path between nodes, with nodes faked on one
 * machine (GPUCOLL_HOSTID per rank, see test/mpi/internode.sh) or on real
 * hosts told apart by their host names (test/cluster/internode.sh):
 *  1. allreduce (float sum; small, large, in place): results on every rank,
 *     the composition each call ran (hier on equal nodes, leader on uneven
 *     ones), and the bytes each rank sent between nodes against the bound
 *     of the issue: 2(N-1)/N x S/L per rank for hier (within 5%), only the
 *     leaders for leader;
 *  2. bcast from every root, allgather, reduce to every root,
 *     reduce_scatter_block: results, composition, bytes;
 *  3. a rank with host buffers: every rank stages that call, correctly;
 *  4. --inject (rank 1's copies of 4093 bytes fail, GPUCOLL_EMU_FAIL_COPY_BYTES):
 *     the bcast of 4093 bytes fails on rank 1's node and on every rank still
 *     waiting for it, nobody hangs, and the following calls are staged and
 *     correct everywhere (ranks of other nodes whose part of the call was
 *     complete return success, with correct data);
 *     With --nonblocking, the failing bcast is an MPI_Ibcast + MPI_Wait on
 *     the accelerated path (the progress thread may run it);
 *  5. --kill: rank 1 dies (SIGKILL) before a call the others enter: the job
 *     must end through mpirun's fault handling (internode.sh times it).
 *  6. --late S: the last rank enters an allreduce S seconds after the
 *     others, which wait (and, with coll_gpucoll_wait_warning below S, say
 *     whom they wait for: internode.sh reads it); the result is checked.
 *  7. --mixed-only: only the call of 3 (rank 0 on host memory); with
 *     coll_gpucoll_uniform_memory that breaks the assertion and the others
 *     wait for rank 0 for ever (internode.sh checks that they say so).
 *  8. --uneven-types: a bcast whose root describes its device buffer with a
 *     strided datatype (staged) while the others pass contiguous ints (the
 *     same type signature: legal), blocking, nonblocking and persistent:
 *     staged on every rank and correct, the root's gaps untouched. Device
 *     memory everywhere, so coll_gpucoll_uniform_memory holds: the root must
 *     still post its decline (the others queued the call).
 * usage: test_internode [common options]
 *        [--inject [--nonblocking] | --kill | --late S | --mixed-only | --uneven-types]
 */
#include <signal.h>
#include <unistd.h>

#include "mpi4_names.h" /* MPI_Bcast_init on every Open MPI series */
#include "mpi_test_util.h"

typedef struct shape {
    int nodes, node, local, per_node; /* per_node: ranks of my node */
    int equal;                        /* every node has per_node ranks */
    int leader;                       /* local rank 0 */
    int with_rank1;                   /* on the node of rank 1 */
} shape_t;

static shape_t learn_shape(void) {
    char mine[64] = {0}, *all = NULL;
    // The node: GPUCOLL_HOSTID where nodes are faked, else the host name
    // (real hosts: test/cluster/internode.sh).
    const char* id = getenv("GPUCOLL_HOSTID");
    if (id)
        snprintf(mine, sizeof mine, "%s", id);
    else if (gethostname(mine, sizeof mine - 1) != 0)
        TU_DIE("gethostname failed");
    all = calloc((size_t)tu.world_size, sizeof mine);
    if (!all) TU_DIE("out of memory");
    MPI_Allgather(mine, sizeof mine, MPI_CHAR, all, sizeof mine, MPI_CHAR, MPI_COMM_WORLD);
    shape_t s = {0};
    int first_of_node[1024] = {0}, count_of_node[1024] = {0};
    for (int r = 0; r < tu.world_size; ++r) {
        int n = 0;
        while (n < s.nodes && strcmp(all + r * sizeof mine, all + first_of_node[n] * sizeof mine))
            ++n;
        if (n == s.nodes) {
            first_of_node[s.nodes] = r;
            count_of_node[s.nodes++] = 0;
        }
        if (r == tu.world_rank) {
            s.node = n;
            s.local = count_of_node[n];
        }
        count_of_node[n]++;
    }
    s.per_node = count_of_node[s.node];
    s.with_rank1 = tu.world_size > 1 && strcmp(all + sizeof mine, mine) == 0;
    s.equal = 1;
    for (int n = 0; n < s.nodes; ++n) s.equal &= count_of_node[n] == s.per_node;
    s.leader = s.local == 0;
    free(all);
    return s;
}

static void* device_alloc(size_t bytes) {
    void* p = NULL;
    if (gpucoll_malloc_device(&p, bytes) != GPUCOLL_SUCCESS)
        TU_DIE("gpucoll_malloc_device(%zu): %s", bytes, gpucoll_last_error());
    return p;
}

static void put(void* dev, const void* host, size_t bytes) {
    if (gpucoll_memcpy(dev, host, bytes) != GPUCOLL_SUCCESS)
        TU_DIE("upload: %s", gpucoll_last_error());
}

static void get(void* host, const void* dev, size_t bytes) {
    if (gpucoll_memcpy(host, dev, bytes) != GPUCOLL_SUCCESS)
        TU_DIE("download: %s", gpucoll_last_error());
}

/* The last call took `algo` and sent bytes between nodes in [lo, hi]. */
static void check_call(const char* what, const char* algo, double lo, double hi) {
    gpucoll_counters_t c;
    gpucoll_counters_get(&c);
    TU_CHECK(c.last_path == GPUCOLL_PATH_ACCELERATED && strcmp(c.last_algorithm, algo) == 0,
             "%s: path %s, algorithm \"%s\"; expected accelerated, \"%s\"", what,
             gpucoll_path_name(c.last_path), c.last_algorithm, algo);
    TU_CHECK((double)c.last_bytes_inter >= lo && (double)c.last_bytes_inter <= hi,
             "%s: %llu bytes sent between nodes, expected %.0f..%.0f", what,
             (unsigned long long)c.last_bytes_inter, lo, hi);
}

static void test_allreduce(const shape_t* s, size_t count, int in_place) {
    const size_t bytes = count * sizeof(float);
    float* host = malloc(bytes);
    float* dsend = device_alloc(bytes);
    float* drecv = device_alloc(bytes);
    for (size_t i = 0; i < count; ++i) host[i] = (float)((tu.world_rank + 1) * (int)(i % 97));
    put(in_place ? drecv : dsend, host, bytes);
    int rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : dsend, drecv, (int)count, MPI_FLOAT, MPI_SUM,
                           MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS, "allreduce of %zu floats: error %d", count, rc);
    get(host, drecv, bytes);
    const int n = tu.world_size;
    long bad = 0;
    for (size_t i = 0; i < count; ++i) bad += host[i] != (float)(n * (n + 1) / 2 * (int)(i % 97));
    TU_CHECK(bad == 0, "allreduce of %zu floats%s: %ld wrong elements", count,
             in_place ? " (in place)" : "", bad);
    char what[96];
    snprintf(what, sizeof what, "allreduce of %zu bytes%s", bytes, in_place ? " in place" : "");
    const double N = s->nodes, S = (double)bytes;
    if (s->equal && count >= (size_t)(s->per_node * 1024)) {
        /* ring on every rail: 2(N-1)/N x S/L per rank */
        const double bound = 2.0 * (N - 1) / N * S / s->per_node;
        check_call(what, "hier", 0.95 * bound, 1.05 * bound);
    } else if (s->equal) {
        check_call(what, "hier", 0, 1.05 * (N - 1) * S / s->per_node + 64);
    } else if (s->leader) {
        check_call(what, "leader", 1, 1.05 * (N - 1) * S);
    } else {
        check_call(what, "leader", 0, 0);
    }
    gpucoll_free_device(dsend);
    gpucoll_free_device(drecv);
    free(host);
}

static void test_bcast(const shape_t* s, size_t bytes, int root) {
    unsigned char* host = malloc(bytes);
    unsigned char* dbuf = device_alloc(bytes);
    for (size_t i = 0; i < bytes; ++i)
        host[i] = (unsigned char)(tu.world_rank == root ? i * 7 + (size_t)root : 0xee);
    put(dbuf, host, bytes);
    int rc = MPI_Bcast(dbuf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS, "bcast of %zu bytes from %d: error %d", bytes, root, rc);
    get(host, dbuf, bytes);
    long bad = 0;
    for (size_t i = 0; i < bytes; ++i) bad += host[i] != (unsigned char)(i * 7 + (size_t)root);
    TU_CHECK(bad == 0, "bcast of %zu bytes from root %d: %ld wrong bytes", bytes, root, bad);
    char what[64];
    snprintf(what, sizeof what, "bcast of %zu bytes from %d", bytes, root);
    /* binomial tree among the node leaders: at most log2(N) sends each */
    check_call(what, "hier", 0, s->leader ? (double)bytes * s->nodes : 0);
    gpucoll_free_device(dbuf);
    free(host);
}

static void test_allgather(const shape_t* s, size_t count) {
    const int n = tu.world_size;
    const size_t total = count * (size_t)n;
    int* host = malloc(total * sizeof(int));
    int* dsend = device_alloc(count * sizeof(int));
    int* drecv = device_alloc(total * sizeof(int));
    for (size_t i = 0; i < count; ++i) host[i] = tu.world_rank * 100000 + (int)i;
    put(dsend, host, count * sizeof(int));
    int rc = MPI_Allgather(dsend, (int)count, MPI_INT, drecv, (int)count, MPI_INT, MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS, "allgather of %zu ints: error %d", count, rc);
    get(host, drecv, total * sizeof(int));
    long bad = 0;
    for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < count; ++i)
            bad += host[(size_t)r * count + i] != r * 100000 + (int)i;
    TU_CHECK(bad == 0, "allgather of %zu ints per rank: %ld wrong elements", count, bad);
    char what[64];
    snprintf(what, sizeof what, "allgather of %zu ints per rank", count);
    const double node_bytes = (double)count * sizeof(int) * s->per_node;
    check_call(what, "leader", 0, s->leader ? (s->nodes - 1) * node_bytes * 1.05 + 64 : 0);
    gpucoll_free_device(dsend);
    gpucoll_free_device(drecv);
    free(host);
}

/* reduce to every root, and reduce_scatter_block: results, composition,
 * bytes (only the leaders send: reduce an allreduce of the whole vector,
 * reduce_scatter each other node its blocks). */
static void test_reduce(const shape_t* s, size_t count) {
    const int n = tu.world_size;
    const size_t bytes = count * sizeof(int64_t);
    int64_t* host = malloc(bytes * (size_t)n);
    int64_t* dsend = device_alloc(bytes * (size_t)n);
    int64_t* drecv = device_alloc(bytes);
    for (size_t i = 0; i < count * (size_t)n; ++i)
        host[i] = (int64_t)(tu.world_rank + 1) * (int64_t)i;
    put(dsend, host, bytes * (size_t)n);
    const double leader_bound =
        s->leader ? 1.05 * 2.0 * (s->nodes - 1) / s->nodes * (double)bytes + 64 : 0;
    for (int root = 0; root < n; ++root) {
        int rc = MPI_Reduce(dsend, tu.world_rank == root ? drecv : NULL, (int)count, MPI_INT64_T,
                            MPI_SUM, root, MPI_COMM_WORLD);
        TU_CHECK(rc == MPI_SUCCESS, "reduce to %d: error %d", root, rc);
        char what[64];
        snprintf(what, sizeof what, "reduce of %zu int64 to %d", count, root);
        check_call(what, "leader", 0, leader_bound);
        if (tu.world_rank != root) continue;
        get(host, drecv, bytes);
        long bad = 0;
        for (size_t i = 0; i < count; ++i) bad += host[i] != (int64_t)n * (n + 1) / 2 * (int64_t)i;
        TU_CHECK(bad == 0, "%s: %ld wrong elements", what, bad);
    }
    int rc =
        MPI_Reduce_scatter_block(dsend, drecv, (int)count, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS, "reduce_scatter_block: error %d", rc);
    /* leaders send every other node its blocks: S - S(own node), one round */
    const double rs_bytes = (double)bytes * (n - s->per_node);
    check_call("reduce_scatter_block", "leader", s->leader ? 0.95 * rs_bytes : 0,
               s->leader ? 1.05 * rs_bytes + 64 : 0);
    get(host, drecv, bytes);
    long bad = 0;
    for (size_t i = 0; i < count; ++i) {
        const int64_t at = (int64_t)tu.world_rank * (int64_t)count + (int64_t)i;
        bad += host[i] != (int64_t)n * (n + 1) / 2 * at;
    }
    TU_CHECK(bad == 0, "reduce_scatter_block of %zu int64 per rank: %ld wrong elements", count,
             bad);
    gpucoll_free_device(dsend);
    gpucoll_free_device(drecv);
    free(host);
}

/* Rank 0 passes host memory: everyone stages this call, correctly. */
static void test_mixed(void) {
    const size_t count = 4096, bytes = count * sizeof(double);
    double* host = malloc(bytes);
    for (size_t i = 0; i < count; ++i) host[i] = (double)(tu.world_rank + (int)i);
    double* buf = host;
    if (tu.world_rank != 0) {
        buf = device_alloc(bytes);
        put(buf, host, bytes);
    }
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS, "mixed allreduce: error %d", rc);
    if (buf != host) get(host, buf, bytes);
    long bad = 0;
    for (size_t i = 0; i < count; ++i) bad += host[i] != (double)(tu.world_size - 1 + (int)i);
    TU_CHECK(bad == 0, "mixed allreduce (rank 0 on host memory): %ld wrong elements", bad);
    gpucoll_counters_t c;
    gpucoll_counters_get(&c);
    TU_CHECK(c.last_path == (tu.world_rank == 0 ? GPUCOLL_PATH_DELEGATED : GPUCOLL_PATH_STAGED),
             "mixed allreduce: path %s", gpucoll_path_name(c.last_path));
    if (buf != host) gpucoll_free_device(buf);
    free(host);
}

static void test_uneven_types(void) {
    const int count = 1000;
    const size_t bytes = 2 * (size_t)count * sizeof(int);
    const int root = 0;
    MPI_Datatype strided; /* every other int */
    MPI_Type_vector(count, 1, 2, MPI_INT, &strided);
    MPI_Type_commit(&strided);
    int* host = malloc(bytes);
    int* d = device_alloc(bytes);
    const char* forms[] = {"MPI_Bcast", "MPI_Ibcast", "MPI_Bcast_init"};
    for (int form = 0; form < 3; ++form) {
        for (int i = 0; i < 2 * count; ++i)
            host[i] = tu.world_rank != root ? -5 : i % 2 ? -1 : i / 2 + 7 * form;
        put(d, host, bytes);
        const int n = tu.world_rank == root ? 1 : count;
        const MPI_Datatype type = tu.world_rank == root ? strided : MPI_INT;
        MPI_Request req = MPI_REQUEST_NULL;
        int rc = MPI_SUCCESS;
        if (form == 0) {
            rc = MPI_Bcast(d, n, type, root, MPI_COMM_WORLD);
        } else if (form == 1) {
            rc = MPI_Ibcast(d, n, type, root, MPI_COMM_WORLD, &req);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        } else {
            rc = MPI_Bcast_init(d, n, type, root, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
            if (rc == MPI_SUCCESS) rc = MPI_Start(&req);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
        }
        TU_CHECK(rc == MPI_SUCCESS, "%s, strided root: error %d", forms[form], rc);
        get(host, d, bytes);
        long bad = 0;
        for (int i = 0; i < count; ++i)
            bad += tu.world_rank == root ? host[2 * i] != i + 7 * form || host[2 * i + 1] != -1
                                         : host[i] != i + 7 * form;
        TU_CHECK(bad == 0, "%s, strided root: %ld wrong elements", forms[form], bad);
        gpucoll_counters_t c;
        gpucoll_counters_get(&c);
        TU_CHECK(c.last_path == GPUCOLL_PATH_STAGED, "%s, strided root: path %s", forms[form],
                 gpucoll_path_name(c.last_path));
    }
    MPI_Type_free(&strided);
    gpucoll_free_device(d);
    free(host);
}

/* Rank 1's copies of 4093 bytes fail: the call fails on every rank of rank
 * 1's node and on any rank still waiting for it, never hangs;
 * every later call is staged, and correct, on every rank. */
static void test_inject(const shape_t* s, int nonblocking) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    const size_t bytes = 4093;
    unsigned char* dbuf = device_alloc(bytes);
    unsigned char* host = calloc(bytes, 1);
    if (tu.world_rank == 0) put(dbuf, host, bytes); /* rank 1 cannot copy 4093 bytes */
    int rc;
    if (nonblocking) {
        int one = 1, sum = 0; /* a blocking call of the set: the accelerated path is set up */
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        gpucoll_counters_t before, after;
        gpucoll_counters_get(&before);
        MPI_Request req = MPI_REQUEST_NULL;
        rc = MPI_Ibcast(dbuf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD, &req);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        gpucoll_counters_get(&after);
        /* Failed calls are not counted: no staged or delegated call either. */
        TU_CHECK(after.forms[GPUCOLL_FORM_NONBLOCKING][GPUCOLL_PATH_STAGED] ==
                     before.forms[GPUCOLL_FORM_NONBLOCKING][GPUCOLL_PATH_STAGED],
                 "the failing MPI_Ibcast was staged, not accelerated");
    } else {
        rc = MPI_Bcast(dbuf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
    if (s->with_rank1) /* every rank of the node fails the call together */
        TU_CHECK(rc != MPI_SUCCESS, "the injected failure on rank 1 did not fail this bcast");
    int failed = rc != MPI_SUCCESS, nfailed = 0;
    MPI_Allreduce(&failed, &nfailed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (tu.world_rank == 0)
        printf("injected failure: %d of %d ranks failed the call\n", nfailed, tu.world_size);
    free(host);
    gpucoll_free_device(dbuf);
    for (int round = 0; round < 3; ++round) {
        const size_t count = 65536, b = count * sizeof(float);
        float* h = malloc(b);
        float* d = device_alloc(b);
        for (size_t i = 0; i < count; ++i) h[i] = (float)(tu.world_rank + (int)(i % 13));
        put(d, h, b);
        rc = MPI_Allreduce(MPI_IN_PLACE, d, (int)count, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
        TU_CHECK(rc == MPI_SUCCESS, "allreduce after the failure: error %d", rc);
        get(h, d, b);
        long bad = 0;
        for (size_t i = 0; i < count; ++i)
            bad += h[i] != (float)(tu.world_size - 1 + (int)(i % 13));
        TU_CHECK(bad == 0, "allreduce after the failure: %ld wrong elements", bad);
        gpucoll_counters_t c;
        gpucoll_counters_get(&c);
        TU_CHECK(c.last_path == GPUCOLL_PATH_STAGED, "allreduce after the failure: path %s",
                 gpucoll_path_name(c.last_path));
        gpucoll_free_device(d);
        free(h);
    }
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    tu_init("test_internode");
    int inject = 0, kill_rank1 = 0, nonblocking = 0, late = 0, mixed_only = 0, uneven_types = 0;
    for (int i = 1; i < argc; ++i) {
        int r = tu_parse_option(argc, argv, &i);
        if (r == 0 && strcmp(argv[i], "--inject") == 0) {
            inject = 1;
        } else if (r == 0 && strcmp(argv[i], "--nonblocking") == 0) {
            nonblocking = 1;
        } else if (r == 0 && strcmp(argv[i], "--kill") == 0) {
            kill_rank1 = 1;
        } else if (r == 0 && strcmp(argv[i], "--late") == 0 && i + 1 < argc) {
            late = atoi(argv[++i]);
        } else if (r == 0 && strcmp(argv[i], "--mixed-only") == 0) {
            mixed_only = 1;
        } else if (r == 0 && strcmp(argv[i], "--uneven-types") == 0) {
            uneven_types = 1;
        } else if (r <= 0) {
            fprintf(stderr, "test_internode: bad option '%s'\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    tu_require_device_backend();
    const shape_t s = learn_shape();
    if (tu.world_rank == 0)
        printf("test_internode: %d ranks on %d nodes (%s)\n", tu.world_size, s.nodes,
               s.equal ? "equal" : "uneven");
    if (late > 0) {
        test_allreduce(&s, 1000, 0); /* the path is set up */
        if (tu.world_rank == tu.world_size - 1) sleep((unsigned)late);
        test_allreduce(&s, 1000, 0);
    } else if (mixed_only) {
        test_allreduce(&s, 1000, 0);
        test_mixed();
    } else if (uneven_types) {
        test_allreduce(&s, 1000, 0); /* the path is set up */
        test_uneven_types();
    } else if (kill_rank1) {
        test_allreduce(&s, 1000, 0);
        if (tu.world_rank == 1) raise(SIGKILL);
        test_allreduce(&s, (size_t)1 << 20, 0); /* never returns on the others */
    } else if (inject) {
        test_inject(&s, nonblocking);
    } else {
        for (int in_place = 0; in_place < 2; ++in_place) {
            test_allreduce(&s, 7, in_place);
            test_allreduce(&s, 1000, in_place);
            test_allreduce(&s, (size_t)1 << 20, in_place); /* 4 MiB */
        }
        for (int root = 0; root < tu.world_size; ++root) test_bcast(&s, 1 << 16, root);
        test_bcast(&s, (size_t)3 << 20, tu.world_size - 1);
        test_allgather(&s, 3);
        test_allgather(&s, 100000);
        test_reduce(&s, 5);
        test_reduce(&s, 200000);
        test_mixed();
        test_allreduce(&s, (size_t)1 << 18, 0); /* after the mixed call: accelerated again */
    }
    return tu_finalize() ? (MPI_Finalize(), 1) : (MPI_Finalize(), 0);
}
