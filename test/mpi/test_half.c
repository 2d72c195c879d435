/*
 * test_half.c - half precision (MPIX_C_FLOAT16 and MPIX_SHORT_FLOAT, Open
 * MPI's shortfloat extension, 5.0 and later) on device buffers: SUM, PROD,
 * MIN and MAX through allreduce (blocking, in place, nonblocking), reduce,
 * reduce_scatter_block, reduce_scatter and reduce_local.
 *
 * Inputs use every mantissa bit and both signs, so sums and products round.
 * Checks on every rank:
 *  - accelerated calls: each element within 1 ulp of the reference, which
 *    accumulates the ranks' values in float in rank order and rounds once
 *    (gpucoll combines the sources of a node in float and rounds once, so it
 *    is expected to match bit for bit; mismatches within 1 ulp are counted
 *    and printed);
 *  - staged calls: the same bits as Open MPI's own call on host buffers
 *    (staging must not change what Open MPI computes);
 *  - allreduce: every rank holds the same bits;
 *  - the path (--expect) and untouched bytes around the results.
 * An MPI without MPIX_C_FLOAT16 (Open MPI 4.1): prints "no MPIX_C_FLOAT16"
 * and exits 0 (half.sh skips).
 *
 * usage: test_half [common options]
 */
#include "mpi_test_util.h"

#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

#if !defined(MPIX_C_FLOAT16)
int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) printf("test_half: no MPIX_C_FLOAT16 in this MPI\n");
    MPI_Finalize();
    return 0;
}
#else

#include <math.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static float h2f(uint16_t b) {
    _Float16 v;
    memcpy(&v, &b, sizeof v);
    return (float)v;
}
static uint16_t f2h(float f) {
    const _Float16 v = (_Float16)f; /* round to nearest even */
    uint16_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

/* Rank r's element i: sign, exponent and mantissa from a hash. Sums and
 * extrema: magnitudes 2^-6 .. 2; products: 0.5 .. 2 (no overflow on 8 ranks). */
static uint16_t gen(int op, int rank, size_t i, uint32_t seed) {
    const uint64_t r = tu_hash(seed, rank, i);
    const unsigned sign = (unsigned)(r & 1u), mant = (unsigned)((r >> 8) & 0x3ffu);
    const unsigned exp =
        op == TU_OP_PROD ? 14u + (unsigned)((r >> 4) % 2u) : 9u + (unsigned)((r >> 4) % 7u);
    return (uint16_t)((sign << 15) | (exp << 10) | mant);
}

static float combine(int op, float a, float b) {
    switch (op) {
        case TU_OP_SUM:
            return a + b;
        case TU_OP_PROD:
            return a * b;
        case TU_OP_MIN:
            return b < a ? b : a;
        default:
            return a < b ? b : a;
    }
}

/* Ranks 0..n-1 of element i, accumulated in float in rank order, rounded once. */
static uint16_t reference(int op, size_t i, int n, uint32_t seed) {
    float acc = h2f(gen(op, 0, i, seed));
    for (int r = 1; r < n; r++) acc = combine(op, acc, h2f(gen(op, r, i, seed)));
    return f2h(acc);
}

/* |got - want| <= the spacing of binary16 just above |want|. */
static int within_ulp(uint16_t got, uint16_t want) {
    if (got == want) return 1;
    const uint16_t mag = (uint16_t)(want & 0x7fffu);
    if (mag >= 0x7bffu) return 0; /* largest finite, inf, NaN: exact only */
    const float ulp = h2f((uint16_t)(mag + 1u)) - h2f(mag);
    return fabsf(h2f(got) - h2f(want)) <= ulp;
}

static MPI_Op mpi_op(int op) {
    return op == TU_OP_SUM    ? MPI_SUM
           : op == TU_OP_PROD ? MPI_PROD
           : op == TU_OP_MIN  ? MPI_MIN
                              : MPI_MAX;
}

typedef enum {
    K_ALLREDUCE,
    K_ALLREDUCE_IN_PLACE,
    K_IALLREDUCE,
    K_REDUCE,
    K_RSB,
    K_RS,
    K_LOCAL
} kind_t;
static const char* const k_kind_names[] = {"allreduce",   "allreduce in place",   "iallreduce",
                                           "reduce",      "reduce_scatter_block", "reduce_scatter",
                                           "reduce_local"};
static gpucoll_coll_t coll_of(kind_t k) {
    switch (k) {
        case K_REDUCE:
            return GPUCOLL_COLL_REDUCE;
        case K_RSB:
            return GPUCOLL_COLL_REDUCE_SCATTER_BLOCK;
        case K_RS:
            return GPUCOLL_COLL_REDUCE_SCATTER;
        case K_LOCAL:
            return GPUCOLL_COLL_REDUCE_LOCAL;
        default:
            return GPUCOLL_COLL_ALLREDUCE;
    }
}

static long g_inexact; /* accelerated elements within 1 ulp but not bit-equal */

/* One call of kind k on buffers of kind mem; its result (this rank's part)
 * into res[0..*nres), its first element's global index into *base; the path
 * checked where check_path (device buffers). */
static void call(kind_t k, tu_mem_t mem, MPI_Datatype dt, int op, size_t count, int root,
                 uint32_t seed, uint16_t* res, size_t* nres, size_t* base, const char* desc,
                 int check_path) {
    const int rank = tu.world_rank, size = tu.world_size;
    int* rcounts = tu_xmalloc(sizeof(int) * (size_t)size);
    size_t total = count, mine = count;
    *base = 0;
    if (k == K_RSB || k == K_RS) {
        total = 0;
        for (int r = 0; r < size; r++) {
            rcounts[r] = k == K_RSB ? (int)count : (int)count + (r % 3) - 1;
            if (rcounts[r] < 0) rcounts[r] = 0;
            if (r == rank) *base = total;
            total += (size_t)rcounts[r];
        }
        mine = (size_t)rcounts[rank];
    }
    /* send: the rank's contribution over `total` elements (reduce_local:
     * "rank" 2*rank into inbuf, 2*rank+1 in inoutbuf, as 2 sources). */
    tu_buf_t s, r;
    tu_buf_alloc(&s, mem, total * 2, 16, seed);
    tu_buf_alloc(&r, mem, (k == K_RSB || k == K_RS ? mine : total) * 2, 32, seed + 1);
    uint16_t* sp = (uint16_t*)tu_buf_payload(&s);
    uint16_t* rp = (uint16_t*)tu_buf_payload(&r);
    for (size_t i = 0; i < total; i++) sp[i] = gen(op, k == K_LOCAL ? 0 : rank, i, seed);
    if (k == K_ALLREDUCE_IN_PLACE)
        for (size_t i = 0; i < total; i++) rp[i] = sp[i];
    if (k == K_LOCAL)
        for (size_t i = 0; i < total; i++) rp[i] = gen(op, 1, i, seed);
    tu_buf_upload(&s);
    tu_buf_upload(&r);

    gpucoll_counters_t before;
    tu_counters(&before);
    int rc = MPI_SUCCESS;
    MPI_Request req;
    switch (k) {
        case K_ALLREDUCE:
            rc = MPI_Allreduce(s.ptr, r.ptr, (int)count, dt, mpi_op(op), MPI_COMM_WORLD);
            break;
        case K_ALLREDUCE_IN_PLACE:
            rc = MPI_Allreduce(MPI_IN_PLACE, r.ptr, (int)count, dt, mpi_op(op), MPI_COMM_WORLD);
            break;
        case K_IALLREDUCE:
            rc = MPI_Iallreduce(s.ptr, r.ptr, (int)count, dt, mpi_op(op), MPI_COMM_WORLD, &req);
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            break;
        case K_REDUCE:
            rc = MPI_Reduce(s.ptr, rank == root ? r.ptr : NULL, (int)count, dt, mpi_op(op), root,
                            MPI_COMM_WORLD);
            break;
        case K_RSB:
            rc = MPI_Reduce_scatter_block(s.ptr, r.ptr, (int)count, dt, mpi_op(op), MPI_COMM_WORLD);
            break;
        case K_RS:
            rc = MPI_Reduce_scatter(s.ptr, r.ptr, rcounts, dt, mpi_op(op), MPI_COMM_WORLD);
            break;
        case K_LOCAL:
            rc = MPI_Reduce_local(s.ptr, r.ptr, (int)count, dt, mpi_op(op));
            break;
    }
    TU_CHECK(rc == MPI_SUCCESS, "%s: returned %d", desc, rc);
    if (check_path) {
        const gpucoll_coll_t coll = coll_of(k);
        const unsigned mask = mem == TU_HOST         ? tu.expect_host
                              : tu.expect_coll[coll] ? tu.expect_coll[coll]
                                                     : tu.expect_device;
        tu_check_path(&before, coll, mask, desc);
    }
    tu_buf_read(&r);
    const int significant = k != K_REDUCE || rank == root;
    *nres = significant ? (k == K_RSB || k == K_RS ? mine : count) : 0;
    if (significant) {
        memcpy(res, r.out + r.off, *nres * 2);
        tu_buf_check_unchanged(&r, 0, r.off, "bytes before the result", desc);
        tu_buf_check_unchanged(&r, r.off + *nres * 2, r.total, "bytes after the result", desc);
    }
    tu_buf_free(&s);
    tu_buf_free(&r);
    free(rcounts);
}

static void run(kind_t k, MPI_Datatype dt, int op, size_t count, int root, uint32_t seed) {
    const int size = tu.world_size;
    char desc[160];
    snprintf(desc, sizeof desc, "%s %s %s count=%zu root=%d seed=%u", k_kind_names[k],
             dt == MPIX_SHORT_FLOAT ? "MPIX_SHORT_FLOAT" : "MPIX_C_FLOAT16", tu_op_name(op), count,
             root, seed);
    if (tu.verbose && tu.world_rank == 0) printf("case: %s\n", desc);
    const size_t cap = count + 4;
    uint16_t* dev = tu_xmalloc(cap * 2);
    uint16_t* host = tu_xmalloc(cap * 2);
    size_t ndev, nhost, base, hbase;
    gpucoll_counters_t before;
    tu_counters(&before);
    call(k, TU_DEVICE, dt, op, count, root, seed, dev, &ndev, &base, desc, 1);
    gpucoll_counters_t after;
    tu_counters(&after);
    const int staged = after.last_path == GPUCOLL_PATH_STAGED;
    /* Open MPI's own answer, on host buffers. */
    call(k, TU_HOST, dt, op, count, root, seed, host, &nhost, &hbase, desc, 0);
    TU_CHECK(ndev == nhost && base == hbase, "%s: %zu result elements, host call %zu", desc, ndev,
             nhost);
    const int nsources = k == K_LOCAL ? 2 : size;
    size_t bad = 0, shown = 0;
    for (size_t i = 0; i < ndev && i < nhost; i++) {
        const uint16_t want = reference(op, base + i, nsources, seed);
        const int ok = staged ? dev[i] == host[i] : within_ulp(dev[i], want);
        if (!staged && ok && dev[i] != want) g_inexact++;
        if (!ok) {
            bad++;
            if (shown++ < 3)
                tu_fail("%s: element %zu: got %a (0x%04x), %s %a (0x%04x), float reference %a",
                        desc, base + i, (double)h2f(dev[i]), dev[i],
                        staged ? "Open MPI on host buffers" : "within 1 ulp of",
                        (double)h2f(staged ? host[i] : want), staged ? host[i] : want,
                        (double)h2f(want));
        }
    }
    tu.checks++;
    if (bad > 1) tu_fail("%s: %zu of %zu elements wrong", desc, bad, ndev);
    if (k == K_ALLREDUCE || k == K_ALLREDUCE_IN_PLACE || k == K_IALLREDUCE) {
        /* every rank the same bits: a hash, compared on host buffers */
        uint64_t h = 1469598103934665603ull;
        for (size_t i = 0; i < ndev; i++) h = (h ^ dev[i]) * 1099511628211ull;
        uint64_t lo = 0, hi = 0;
        MPI_Allreduce(&h, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&h, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
        TU_CHECK(lo == hi, "%s: ranks hold different bits", desc);
    }
    free(dev);
    free(host);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    tu_init("test_half");
    tu.expect_device = TU_PATH_BIT(GPUCOLL_PATH_ACCELERATED);
    for (int i = 1; i < argc; i++) {
        if (tu_parse_option(argc, argv, &i) != 1) {
            if (tu.world_rank == 0) {
                fprintf(stderr, "test_half: bad option '%s'\n", argv[i]);
                tu_usage_common();
            }
            MPI_Finalize();
            return 2;
        }
    }
    tu_require_device_backend();
    int sz = 0;
    MPI_Type_size(MPIX_C_FLOAT16, &sz);
    if (sz != 2) TU_DIE("MPIX_C_FLOAT16 has size %d", sz);

    const int size = tu.world_size;
    const int ops[] = {TU_OP_SUM, TU_OP_PROD, TU_OP_MIN, TU_OP_MAX};
    const size_t counts[] = {1, 7, 1000, 40000, 300001};
    uint32_t seed = 77;
    for (size_t o = 0; o < N_OF(ops); o++) {
        for (size_t c = 0; c < N_OF(counts); c++) {
            const MPI_Datatype dt = (o + c) % 2 ? MPIX_SHORT_FLOAT : MPIX_C_FLOAT16;
            const size_t n = counts[c];
            run(K_ALLREDUCE, dt, ops[o], n, 0, seed++);
            if (n <= 40000) {
                run(K_ALLREDUCE_IN_PLACE, dt, ops[o], n, 0, seed++);
                run(K_REDUCE, dt, ops[o], n, (int)(c % 2) * (size - 1), seed++);
                run(K_RSB, dt, ops[o], n / (size_t)size + 1, 0, seed++);
                run(K_RS, dt, ops[o], n / (size_t)size + 1, 0, seed++);
            }
            if (n == 1000) {
                run(K_IALLREDUCE, dt, ops[o], n, 0, seed++);
                run(K_LOCAL, dt, ops[o], n, 0, seed++);
            }
        }
    }
    if (tu.world_rank == 0)
        printf("test_half: %ld accelerated elements within 1 ulp but not bit-equal on rank 0\n",
               g_inexact);
    int rc = tu_finalize();
    MPI_Finalize();
    return rc;
}
#endif
