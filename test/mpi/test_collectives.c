/*
 * test_collectives.c - every intercepted collective on device and host
 * buffers: every predefined type with every op MPI allows on it, counts 0 to
 * 1M elements (16 MB once), every MPI_IN_PLACE form, roots first/middle/last,
 * unaligned offsets; results against a host reference computed locally,
 * untouched guard bytes and send buffers, and the path each call took
 * (device buffers: --expect, default staged; host buffers: delegated).
 *
 * usage: test_collectives [common options] [--host-only] [--no-large]
 *   --host-only  only host buffers (for runs where no device backend exists)
 *   --no-large   skip the 1M-element cases
 */
#include "mpi_test_util.h"

static int g_size;
static uint32_t g_seed = 1000;

static int coll_has_in_place(gpucoll_coll_t coll) {
    return coll != GPUCOLL_COLL_BCAST && coll != GPUCOLL_COLL_REDUCE_LOCAL;
}
static int coll_has_root(gpucoll_coll_t coll) {
    return coll == GPUCOLL_COLL_BCAST || coll == GPUCOLL_COLL_REDUCE;
}
static int coll_reduces(gpucoll_coll_t coll) {
    return coll != GPUCOLL_COLL_BCAST && coll != GPUCOLL_COLL_ALLGATHER;
}

static void run(gpucoll_coll_t coll, const tu_type_t* t, int op, size_t count, int in_place,
                int root, tu_mem_t mem, size_t send_off_elems, size_t recv_off_elems) {
    tu_case_t c = {
        .coll = coll,
        .type = t,
        .op = op,
        .count = count,
        .in_place = in_place && coll_has_in_place(coll),
        .root = coll_has_root(coll) ? root : 0,
        .send_mem = mem,
        .recv_mem = mem,
        .send_off = send_off_elems * t->size,
        .recv_off = recv_off_elems * t->size,
        .seed = g_seed++,
        .comm = MPI_COMM_WORLD,
        .expect_mask = TU_MASK_DEFAULT,
    };
    tu_run_case(&c);
}

static const gpucoll_coll_t k_reducing[] = {
    GPUCOLL_COLL_ALLREDUCE, GPUCOLL_COLL_REDUCE, GPUCOLL_COLL_REDUCE_SCATTER,
    GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, GPUCOLL_COLL_REDUCE_LOCAL};
static const gpucoll_coll_t k_all[] = {GPUCOLL_COLL_ALLREDUCE,
                                       GPUCOLL_COLL_BCAST,
                                       GPUCOLL_COLL_ALLGATHER,
                                       GPUCOLL_COLL_REDUCE_SCATTER,
                                       GPUCOLL_COLL_REDUCE_SCATTER_BLOCK,
                                       GPUCOLL_COLL_REDUCE,
                                       GPUCOLL_COLL_REDUCE_LOCAL};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const size_t k_offsets[] = {0, 1, 3}; /* elements: unaligned device pointers */

static int root_of(int k) {
    const int roots[3] = {0, g_size - 1, g_size / 2};
    return roots[k % 3];
}

/* A: every (type, op) pair on every reducing collective; count, in-place
 * form, root and offsets rotate through their values. */
static void section_types_ops(tu_mem_t mem) {
    static const size_t counts[] = {1, 7, 1000, 0, 33, 2};
    int ntypes, k = 0;
    const tu_type_t* types = tu_types(&ntypes);
    for (size_t ci = 0; ci < N_OF(k_reducing); ci++) {
        for (int ti = 0; ti < ntypes; ti++) {
            for (int op = 0; op < TU_OP_COUNT; op++) {
                if (!tu_op_valid(types[ti].cls, op)) continue;
                run(k_reducing[ci], &types[ti], op, counts[k % N_OF(counts)], (k / 3) % 2,
                    root_of(k / 2), mem, k_offsets[k % 3], k_offsets[(k / 3) % 3]);
                k++;
            }
        }
    }
}

/* B: every type through bcast and allgather. */
static void section_movement(tu_mem_t mem) {
    static const size_t counts[] = {1, 7, 1000, 0};
    int ntypes, k = 0;
    const tu_type_t* types = tu_types(&ntypes);
    for (int ti = 0; ti < ntypes; ti++) {
        for (size_t n = 0; n < N_OF(counts); n++, k++) {
            run(GPUCOLL_COLL_BCAST, &types[ti], TU_OP_NONE, counts[n], 0, root_of(k), mem, 0,
                k_offsets[k % 3]);
            run(GPUCOLL_COLL_ALLGATHER, &types[ti], TU_OP_NONE, counts[n], k % 2, 0, mem,
                k_offsets[(k + 1) % 3], k_offsets[k % 3]);
        }
    }
}

/* C: the full product of count x in-place x root x offsets for one type/op
 * on every collective. */
static void section_sweep(tu_mem_t mem, MPI_Datatype dt, int op) {
    static const size_t counts[] = {0, 1, 7, 1000, 65537};
    const tu_type_t* t = tu_type_by_dt(dt);
    for (size_t ci = 0; ci < N_OF(k_all); ci++) {
        gpucoll_coll_t coll = k_all[ci];
        int nip = coll_has_in_place(coll) ? 2 : 1;
        int nroots = coll_has_root(coll) ? 3 : 1;
        for (size_t n = 0; n < N_OF(counts); n++)
            for (int ip = 0; ip < nip; ip++)
                for (int r = 0; r < nroots; r++)
                    for (int o = 0; o < 3; o++)
                        run(coll, t, coll_reduces(coll) ? op : TU_OP_NONE, counts[n], ip,
                            root_of(r), mem, k_offsets[o], k_offsets[(o + 1) % 3]);
    }
}

/* D: large messages (16 MB once). */
static void section_large(tu_mem_t mem) {
    const size_t M = 1u << 20;
    run(GPUCOLL_COLL_ALLREDUCE, tu_type_by_dt(MPI_C_DOUBLE_COMPLEX), TU_OP_SUM, M, 0, 0, mem, 0, 0);
    if (mem == TU_HOST) return;
    run(GPUCOLL_COLL_ALLREDUCE, tu_type_by_dt(MPI_FLOAT), TU_OP_SUM, M, 1, 0, mem, 0, 1);
    run(GPUCOLL_COLL_REDUCE, tu_type_by_dt(MPI_DOUBLE), TU_OP_MAX, M, 0, g_size - 1, mem, 1, 0);
    run(GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, tu_type_by_dt(MPI_INT32_T), TU_OP_BXOR,
        M / (size_t)g_size, 0, 0, mem, 0, 0);
    run(GPUCOLL_COLL_REDUCE_SCATTER, tu_type_by_dt(MPI_INT64_T), TU_OP_MIN, M / (size_t)g_size, 1,
        0, mem, 0, 0);
    run(GPUCOLL_COLL_ALLGATHER, tu_type_by_dt(MPI_UINT8_T), TU_OP_NONE, M, 0, 0, mem, 1, 3);
    run(GPUCOLL_COLL_BCAST, tu_type_by_dt(MPI_LONG_DOUBLE), TU_OP_NONE, M, 0, g_size / 2, mem, 0,
        0);
    run(GPUCOLL_COLL_REDUCE_LOCAL, tu_type_by_dt(MPI_DOUBLE), TU_OP_PROD, M, 0, 0, mem, 0, 0);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    tu_init("test_collectives");
    int host_only = 0, large = 1;
    for (int i = 1; i < argc; i++) {
        int r = tu_parse_option(argc, argv, &i);
        if (r == 1) continue;
        if (r == 0 && strcmp(argv[i], "--host-only") == 0) {
            host_only = 1;
        } else if (r == 0 && strcmp(argv[i], "--no-large") == 0) {
            large = 0;
        } else {
            if (tu.world_rank == 0) {
                fprintf(stderr, "test_collectives: bad option '%s'\n", argv[i]);
                tu_usage_common();
                fprintf(stderr, "  --host-only  host buffers only\n  --no-large   no 1M cases\n");
            }
            MPI_Finalize();
            return 2;
        }
    }
    g_size = tu.world_size;
    if (!host_only) tu_require_device_backend();

    tu_mem_t mems[2] = {TU_DEVICE, TU_HOST};
    for (int m = host_only ? 1 : 0; m < 2; m++) {
        section_types_ops(mems[m]);
        section_movement(mems[m]);
        section_sweep(mems[m], MPI_INT, TU_OP_SUM);
        if (mems[m] == TU_DEVICE) section_sweep(mems[m], MPI_BYTE, TU_OP_BXOR);
        if (large) section_large(mems[m]);
    }
    int rc = tu_finalize();
    MPI_Finalize();
    return rc;
}
