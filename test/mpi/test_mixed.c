/*
 * test_mixed.c - calls in which ranks pass different kinds of memory: some
 * ranks device buffers, others host buffers; within one rank a device send
 * buffer with a host receive buffer and the reverse. Every collective, with
 * MPI_IN_PLACE forms, several roots and counts (0 included). Results must be
 * correct on every rank and no call may hang (the script's timeout).
 *
 * Paths: a rank with a significant device buffer must not take the
 * delegated path (--expect, default: staged or accelerated); a rank with
 * host buffers only may take any path but the call must be counted once.
 *
 * usage: test_mixed [common options]
 */
#include "mpi_test_util.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

typedef struct pattern {
    const char* name;
    void (*kinds)(int rank, int size, tu_mem_t* send, tu_mem_t* recv);
} pattern_t;

static void p_even_device(int rank, int size, tu_mem_t* s, tu_mem_t* r) {
    (void)size;
    *s = *r = rank % 2 == 0 ? TU_DEVICE : TU_HOST;
}
static void p_first_device(int rank, int size, tu_mem_t* s, tu_mem_t* r) {
    (void)size;
    *s = *r = rank == 0 ? TU_DEVICE : TU_HOST;
}
static void p_last_host(int rank, int size, tu_mem_t* s, tu_mem_t* r) {
    *s = *r = rank == size - 1 ? TU_HOST : TU_DEVICE;
}
static void p_dsend_hrecv(int rank, int size, tu_mem_t* s, tu_mem_t* r) {
    (void)rank, (void)size;
    *s = TU_DEVICE;
    *r = TU_HOST;
}
static void p_hsend_drecv(int rank, int size, tu_mem_t* s, tu_mem_t* r) {
    (void)rank, (void)size;
    *s = TU_HOST;
    *r = TU_DEVICE;
}
static void p_rotate(int rank, int size, tu_mem_t* s, tu_mem_t* r) {
    (void)size;
    static const tu_mem_t send[3] = {TU_DEVICE, TU_DEVICE, TU_HOST};
    static const tu_mem_t recv[3] = {TU_DEVICE, TU_HOST, TU_DEVICE};
    *s = send[rank % 3];
    *r = recv[rank % 3];
}

static const pattern_t k_patterns[] = {
    {"even ranks device, odd ranks host", p_even_device},
    {"rank 0 device, others host", p_first_device},
    {"last rank host, others device", p_last_host},
    {"device send + host recv on every rank", p_dsend_hrecv},
    {"host send + device recv on every rank", p_hsend_drecv},
    {"rank%3: dev/dev, dev/host, host/dev", p_rotate},
};

static const gpucoll_coll_t k_colls[] = {GPUCOLL_COLL_ALLREDUCE,
                                         GPUCOLL_COLL_BCAST,
                                         GPUCOLL_COLL_ALLGATHER,
                                         GPUCOLL_COLL_REDUCE_SCATTER,
                                         GPUCOLL_COLL_REDUCE_SCATTER_BLOCK,
                                         GPUCOLL_COLL_REDUCE,
                                         GPUCOLL_COLL_REDUCE_LOCAL};

static uint32_t g_seed = 5000;

static void run(const tu_case_t* proto, tu_mem_t s, tu_mem_t r, const char* pattern) {
    tu_case_t c = *proto;
    c.send_mem = s;
    c.recv_mem = r;
    c.seed = g_seed++;
    if (tu.verbose && tu.world_rank == 0) printf("pattern: %s\n", pattern);
    if (!tu_run_case(&c)) tu_fail("  (pattern: %s)", pattern);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    tu_init("test_mixed");
    /* A rank with device memory in a mixed call: staged or accelerated. */
    tu.expect_device = TU_MASK_DEVICE_ANY;
    for (int i = 1; i < argc; i++) {
        if (tu_parse_option(argc, argv, &i) != 1) {
            if (tu.world_rank == 0) {
                fprintf(stderr, "test_mixed: bad option '%s'\n", argv[i]);
                tu_usage_common();
            }
            MPI_Finalize();
            return 2;
        }
    }
    tu_require_device_backend();
    /* A host-only rank in a call where other ranks pass device memory: any
     * path, but counted (the component saw the call). */
    if (tu.expect_host != TU_MASK_UNCOUNTED) tu.expect_host = TU_MASK_ALL;

    const int rank = tu.world_rank, size = tu.world_size;
    const struct {
        MPI_Datatype dt;
        int op;
    } combos[] = {{MPI_INT, TU_OP_SUM},
                  {MPI_DOUBLE, TU_OP_MAX},
                  {MPI_UINT8_T, TU_OP_BXOR},
                  {MPI_C_FLOAT_COMPLEX, TU_OP_PROD},
                  {MPI_DOUBLE_INT, TU_OP_MINLOC}};
    static const size_t counts[] = {1, 1000, 0, 7, 65536};
    const int roots[3] = {0, size - 1, size / 2};

    for (size_t p = 0; p < N_OF(k_patterns); p++) {
        tu_mem_t s, r;
        k_patterns[p].kinds(rank, size, &s, &r);
        for (size_t ci = 0; ci < N_OF(k_colls); ci++) {
            for (int k = 0; k < 10; k++) {
                tu_case_t c = {
                    .coll = k_colls[ci],
                    .type = tu_type_by_dt(combos[k % N_OF(combos)].dt),
                    .op = combos[k % N_OF(combos)].op,
                    .count = counts[(k / 2) % N_OF(counts)],
                    .in_place = k % 2 && k_colls[ci] != GPUCOLL_COLL_BCAST &&
                                k_colls[ci] != GPUCOLL_COLL_REDUCE_LOCAL,
                    .root = roots[k % 3],
                    .send_off = (size_t)(k % 3) * 8,
                    .recv_off = (size_t)((k + 1) % 3) * 8,
                    .comm = MPI_COMM_WORLD,
                    .expect_mask = TU_MASK_DEFAULT,
                };
                run(&c, s, r, k_patterns[p].name);
            }
        }
    }

    /* Reduce: the receive buffer of non-roots is not significant. It may be
     * NULL, or device memory while the send buffer is host memory (the call
     * is then a host call on that rank and must not touch it). */
    for (int k = 0; k < 6; k++) {
        tu_case_t c = {
            .coll = GPUCOLL_COLL_REDUCE,
            .type = tu_type_by_dt(MPI_INT),
            .op = TU_OP_SUM,
            .count = k < 3 ? 100 : 1,
            .root = roots[k % 3],
            .in_place = k % 2,
            .comm = MPI_COMM_WORLD,
            .expect_mask = TU_MASK_DEFAULT,
        };
        const int root = c.root == rank;
        run(&c, TU_HOST, root ? TU_DEVICE : TU_NULLBUF, "root device, others host + NULL recv");
        run(&c, TU_DEVICE, root ? TU_HOST : TU_NULLBUF, "device send, host recv at root, NULL");
        /* every rank's significant buffers are host memory: Open MPI's module */
        tu_case_t h = c;
        if (tu.expect_host != TU_MASK_UNCOUNTED)
            h.expect_mask = TU_PATH_BIT(GPUCOLL_PATH_DELEGATED);
        run(&h, TU_HOST, root ? TU_HOST : TU_DEVICE, "host, device recv at non-roots");
        run(&c, TU_DEVICE, root ? TU_DEVICE : TU_HOST, "device, host recv at non-roots");
    }

    int rc = tu_finalize();
    MPI_Finalize();
    return rc;
}
