/*
 * test_userop_ddt.c - what the device fast path does not cover must still
 * work on device buffers (staged through host memory):
 *  - user-defined ops (MPI_Op_create): commutative and non-commutative (the
 *    order x0 op x1 op ... op xn-1 must hold), on predefined and derived
 *    types, through allreduce, reduce, reduce_scatter(_block), reduce_local;
 *    the user function must only ever see host pointers;
 *  - derived datatypes with gaps (MPI_Type_vector, MPI_Type_create_resized,
 *    MPI_Type_create_struct, a type with a negative lower bound) through
 *    bcast, allgather (also with different send and receive types of one
 *    signature) and allreduce/reduce/reduce_scatter_block with a user op:
 *    the gaps of receive buffers keep their contents, send buffers are not
 *    modified;
 *  - MPI_BOTTOM with datatypes of absolute addresses (bcast, ibcast,
 *    allgather, allreduce with a user op): device buffers staged (Open MPI
 *    would read them as host memory), gaps kept; a datatype over two device
 *    allocations fails with MPI_ERR_BUFFER on every rank, nothing written;
 *  - nonblocking calls whose user op and derived datatype are freed before
 *    the request completes (Open MPI 5.0 and 6.0 retain them in the
 *    request: it must be the request type they expect), and persistent
 *    calls with both, started three times.
 * Device buffers: path --expect (default staged); host buffers: delegated.
 *
 * usage: test_userop_ddt [common options]
 */
#include "mpi4_names.h"
#include "mpi_test_util.h"

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static int g_rank, g_size;
static uint32_t g_seed = 9000;
static long g_device_ptr_seen; /* user function called with a device pointer */

/* The user function may only see host memory. Returns 1 if both are host. */
static int host_ptrs(const void* a, const void* b) {
    if (gpucoll_mem_type(a) == GPUCOLL_MEM_HOST && gpucoll_mem_type(b) == GPUCOLL_MEM_HOST)
        return 1;
    g_device_ptr_seen++;
    return 0;
}

/* ------------------------------------------------------------------------
 * User-defined ops on predefined (and one contiguous derived) types
 * ---------------------------------------------------------------------- */

/* op_plus1 on MPI_INT: a op b = a + b + 1 (commutative, associative). */
static void fn_plus1(void* in, void* inout, int* len, MPI_Datatype* dt) {
    (void)dt;
    if (!host_ptrs(in, inout)) return;
    const int* a = in;
    int* b = inout;
    for (int i = 0; i < *len; i++) b[i] = a[i] + b[i] + 1;
}
static void gen_plus1(void* dst, size_t i, int rank, int op, uint32_t seed) {
    (void)op;
    int v = (int)(tu_hash(seed, rank, i) % 2001u) - 1000;
    memcpy(dst, &v, sizeof v);
}
static void apply_plus1(void* acc, const void* in, int op) {
    (void)op;
    int a, b;
    memcpy(&a, acc, sizeof a);
    memcpy(&b, in, sizeof b);
    a = a + b + 1;
    memcpy(acc, &a, sizeof a);
}

/* op_absmax on MPI_DOUBLE: max(|a|, |b|) (commutative). */
static double absd(double x) { return x < 0 ? -x : x; }
static void fn_absmax(void* in, void* inout, int* len, MPI_Datatype* dt) {
    (void)dt;
    if (!host_ptrs(in, inout)) return;
    const double* a = in;
    double* b = inout;
    for (int i = 0; i < *len; i++) b[i] = absd(a[i]) > absd(b[i]) ? absd(a[i]) : absd(b[i]);
}
static void gen_absmax(void* dst, size_t i, int rank, int op, uint32_t seed) {
    (void)op;
    double v = (double)((int)(tu_hash(seed, rank, i) % 2001u) - 1000) * 0.25;
    memcpy(dst, &v, sizeof v);
}
static void apply_absmax(void* acc, const void* in, int op) {
    (void)op;
    double a, b;
    memcpy(&a, acc, sizeof a);
    memcpy(&b, in, sizeof b);
    a = absd(b) > absd(a) ? absd(b) : absd(a);
    memcpy(acc, &a, sizeof a);
}

/* op_left on MPI_INT: a op b = a (non-commutative: the result is rank 0's). */
static void fn_left(void* in, void* inout, int* len, MPI_Datatype* dt) {
    (void)dt;
    if (!host_ptrs(in, inout)) return;
    memcpy(inout, in, sizeof(int) * (size_t)*len);
}
static void apply_left(void* acc, const void* in, int op) { (void)acc, (void)in, (void)op; }

/* op_matmul on a contiguous type of 4 unsigned (a 2x2 matrix, row major):
 * a op b = a x b (non-commutative), arithmetic mod 2^32. */
typedef struct {
    unsigned m[4];
} mat_t;
static mat_t matmul(mat_t a, mat_t b) {
    mat_t c = {{a.m[0] * b.m[0] + a.m[1] * b.m[2], a.m[0] * b.m[1] + a.m[1] * b.m[3],
                a.m[2] * b.m[0] + a.m[3] * b.m[2], a.m[2] * b.m[1] + a.m[3] * b.m[3]}};
    return c;
}
static void fn_matmul(void* in, void* inout, int* len, MPI_Datatype* dt) {
    (void)dt;
    if (!host_ptrs(in, inout)) return;
    for (int i = 0; i < *len; i++) {
        mat_t a, b;
        memcpy(&a, (char*)in + i * sizeof(mat_t), sizeof a);
        memcpy(&b, (char*)inout + i * sizeof(mat_t), sizeof b);
        b = matmul(a, b);
        memcpy((char*)inout + i * sizeof(mat_t), &b, sizeof b);
    }
}
static void gen_matmul(void* dst, size_t i, int rank, int op, uint32_t seed) {
    (void)op;
    uint64_t h = tu_hash(seed, rank, i);
    mat_t a;
    for (int k = 0; k < 4; k++) a.m[k] = (unsigned)((h >> (8 * k)) % 4u);
    memcpy(dst, &a, sizeof a);
}
static void apply_matmul(void* acc, const void* in, int op) {
    (void)op;
    mat_t a, b;
    memcpy(&a, acc, sizeof a);
    memcpy(&b, in, sizeof b);
    a = matmul(a, b);
    memcpy(acc, &a, sizeof a);
}
static int eq_mat(const void* a, const void* b) { return memcmp(a, b, sizeof(mat_t)) == 0; }
static void fmt_mat(char* buf, size_t n, const void* p) {
    mat_t a;
    memcpy(&a, p, sizeof a);
    snprintf(buf, n, "[%u %u; %u %u]", a.m[0], a.m[1], a.m[2], a.m[3]);
}

typedef struct userop {
    tu_type_t type;
    MPI_User_function* fn;
    int commute;
    MPI_Op op;
} userop_t;

static void section_userops(void) {
    MPI_Datatype mat;
    MPI_Type_contiguous(4, MPI_UNSIGNED, &mat);
    MPI_Type_commit(&mat);
    userop_t ops[] = {
        {{"MPI_INT/plus1", MPI_INT, sizeof(int), TU_CLS_USER, gen_plus1, apply_plus1, tu_eq_int,
          tu_fmt_int},
         fn_plus1,
         1,
         MPI_OP_NULL},
        {{"MPI_DOUBLE/absmax", MPI_DOUBLE, sizeof(double), TU_CLS_USER, gen_absmax, apply_absmax,
          tu_eq_double, tu_fmt_double},
         fn_absmax,
         1,
         MPI_OP_NULL},
        {{"MPI_INT/left(non-commutative)", MPI_INT, sizeof(int), TU_CLS_USER, gen_plus1, apply_left,
          tu_eq_int, tu_fmt_int},
         fn_left,
         0,
         MPI_OP_NULL},
        {{"mat2x2u/matmul(non-commutative)", mat, sizeof(mat_t), TU_CLS_USER, gen_matmul,
          apply_matmul, eq_mat, fmt_mat},
         fn_matmul,
         0,
         MPI_OP_NULL},
    };
    for (size_t u = 0; u < N_OF(ops); u++) MPI_Op_create(ops[u].fn, ops[u].commute, &ops[u].op);

    static const gpucoll_coll_t colls[] = {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_COLL_REDUCE,
                                           GPUCOLL_COLL_REDUCE_SCATTER_BLOCK,
                                           GPUCOLL_COLL_REDUCE_SCATTER, GPUCOLL_COLL_REDUCE_LOCAL};
    static const size_t counts[] = {7, 1000, 0, 1};
    const int roots[] = {0, g_size - 1, g_size / 2, 0};
    const tu_mem_t mems[] = {TU_DEVICE, TU_HOST};
    for (size_t m = 0; m < N_OF(mems); m++) {
        for (size_t ci = 0; ci < N_OF(colls); ci++) {
            for (size_t u = 0; u < N_OF(ops); u++) {
                for (int k = 0; k < 4; k++) {
                    tu_case_t c = {
                        .coll = colls[ci],
                        .type = &ops[u].type,
                        .op = TU_OP_NONE,
                        .count = counts[k],
                        .in_place = k == 1 && colls[ci] != GPUCOLL_COLL_REDUCE_LOCAL,
                        .root = roots[k],
                        .send_mem = mems[m],
                        .recv_mem = mems[m],
                        .send_off = (size_t)(k % 2) * ops[u].type.size,
                        .recv_off = (size_t)(k / 2) * ops[u].type.size,
                        .seed = g_seed++,
                        .comm = MPI_COMM_WORLD,
                        .expect_mask = TU_MASK_DEFAULT,
                        .has_user_op = 1,
                        .user_op = ops[u].op,
                    };
                    tu_run_case(&c);
                }
            }
        }
    }
    for (size_t u = 0; u < N_OF(ops); u++) MPI_Op_free(&ops[u].op);
    MPI_Type_free(&mat);
}

/* ------------------------------------------------------------------------
 * Derived datatypes with gaps
 * ---------------------------------------------------------------------- */

typedef struct ddt {
    const char* name;
    MPI_Datatype dt;
    MPI_Aint extent, true_lb, true_extent;
    int nblk;
    struct {
        MPI_Aint off; /* bytes from the element's origin */
        size_t len;
    } blk[4];          /* data bytes of one element, in type-map order */
    size_t data_bytes; /* per element */
    /* 1: contiguous for count 1, so the accelerated path may take it */
    int may_accelerate;
} ddt_t;

static void ddt_finish(ddt_t* d) {
    MPI_Type_commit(&d->dt);
    MPI_Aint lb, ext, tlb, text;
    MPI_Type_get_extent(d->dt, &lb, &ext);
    MPI_Type_get_true_extent(d->dt, &tlb, &text);
    d->data_bytes = 0;
    for (int b = 0; b < d->nblk; b++) d->data_bytes += d->blk[b].len;
    int size;
    MPI_Type_size(d->dt, &size);
    if (ext != d->extent || tlb != d->true_lb || text != d->true_extent ||
        (size_t)size != d->data_bytes)
        TU_DIE("%s: extent %ld true_lb %ld true_extent %ld size %d differ from the test's layout",
               d->name, (long)ext, (long)tlb, (long)text, size);
}

/* vector of 3 blocks of 2 ints, stride 3 ints, resized to 10 ints:
 * data ints 0,1,3,4,6,7 of every 10. */
static ddt_t make_vector(void) {
    ddt_t d = {"vector(3,2,3,int)+resized(40)",
               MPI_DATATYPE_NULL,
               40,
               0,
               32,
               3,
               {{0, 8}, {12, 8}, {24, 8}},
               0,
               0};
    MPI_Datatype v;
    MPI_Type_vector(3, 2, 3, MPI_INT, &v);
    MPI_Type_create_resized(v, 0, 40, &d.dt);
    MPI_Type_free(&v);
    ddt_finish(&d);
    return d;
}
/* struct {int at 0; double at 8} resized to 24 bytes: gaps 4..8, 16..24. */
static ddt_t make_struct(void) {
    ddt_t d = {"struct{int@0,double@8}+resized(24)",
               MPI_DATATYPE_NULL,
               24,
               0,
               16,
               2,
               {{0, 4}, {8, 8}},
               0,
               0};
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, 8};
    MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE}, s;
    MPI_Type_create_struct(2, bl, disp, types, &s);
    MPI_Type_create_resized(s, 0, 24, &d.dt);
    MPI_Type_free(&s);
    ddt_finish(&d);
    return d;
}
/* hindexed doubles at -16 and +8, resized to lb -16, extent 40: data before
 * the buffer pointer (negative true lower bound). */
static ddt_t make_neg_lb(void) {
    ddt_t d = {"hindexed(double@-16,@8)+resized(-16,40)",
               MPI_DATATYPE_NULL,
               40,
               -16,
               32,
               2,
               {{-16, 8}, {8, 8}},
               0,
               0};
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {-16, 8};
    MPI_Datatype h;
    MPI_Type_create_hindexed(2, bl, disp, MPI_DOUBLE, &h);
    MPI_Type_create_resized(h, -16, 40, &d.dt);
    MPI_Type_free(&h);
    ddt_finish(&d);
    return d;
}
/* int resized to 8 bytes: one element is contiguous, several are not, and
 * the elements of a rank in allgather are 8 bytes apart (like the padding of
 * MPI_DOUBLE_INT). */
static ddt_t make_padded(void) {
    ddt_t d = {"int+resized(8)", MPI_DATATYPE_NULL, 8, 0, 4, 1, {{0, 4}}, 0, 1};
    MPI_Type_create_resized(MPI_INT, 0, 8, &d.dt);
    ddt_finish(&d);
    return d;
}
/* contiguous ints: the same signature as n/6 vectors */
static ddt_t make_ints(void) {
    ddt_t d = {"int", MPI_INT, 4, 0, 4, 1, {{0, 4}}, 0, 1};
    ddt_finish(&d);
    return d;
}

/* A buffer of n elements of d: the allocation covers the span of the data,
 * [ptr + true_lb, ptr + true_lb + (n-1)*extent + true_extent). */
typedef struct dbuf {
    tu_buf_t b;
    const ddt_t* d;
    size_t n;
    void* ptr; /* what MPI sees */
} dbuf_t;

static size_t span(const ddt_t* d, size_t n) {
    return n ? (size_t)((MPI_Aint)(n - 1) * d->extent + d->true_extent) : 0;
}
static void dbuf_alloc(dbuf_t* x, const ddt_t* d, size_t n, tu_mem_t mem, size_t misalign) {
    x->d = d;
    x->n = n;
    tu_buf_alloc(&x->b, mem, span(d, n), 16 + misalign, g_seed * 7u);
    x->ptr = (unsigned char*)x->b.ptr - d->true_lb;
}
/* Position (relative to the start of the payload) of data byte s of the
 * stream of element j. */
static size_t dpos(const ddt_t* d, size_t j, size_t s) {
    for (int b = 0; b < d->nblk; b++) {
        if (s < d->blk[b].len)
            return (size_t)((MPI_Aint)j * d->extent + d->blk[b].off - d->true_lb) + s;
        s -= d->blk[b].len;
    }
    return (size_t)-1;
}
/* byte k of `rank`'s data stream */
static unsigned char stream_byte(int rank, size_t k, uint32_t seed) {
    return (unsigned char)tu_hash(seed, rank, k);
}
/* Writes rank's data stream (from stream byte `first`) into elements
 * [j0, j0 + n) of the image. */
static void dbuf_fill(dbuf_t* x, size_t j0, size_t n, int rank, size_t first, uint32_t seed) {
    unsigned char* p = tu_buf_payload(&x->b);
    for (size_t j = 0; j < n; j++)
        for (size_t s = 0; s < x->d->data_bytes; s++)
            p[dpos(x->d, j0 + j, s)] = stream_byte(rank, first + j * x->d->data_bytes + s, seed);
}

typedef unsigned char (*expect_byte_fn)(size_t j, size_t s, const void* ctx);

/* After tu_buf_read: data bytes must be expect(j, s); every other byte of
 * the allocation (gaps, guards) its initial value. */
static int dbuf_check(dbuf_t* x, expect_byte_fn expect, const void* ctx, const char* what,
                      const char* desc) {
    tu_buf_t* b = &x->b;
    if (b->mem == TU_NULLBUF) return 1;
    unsigned char* is_data = calloc(b->total, 1);
    if (!is_data) TU_DIE("out of memory");
    long bad_data = 0, bad_gap = 0;
    for (size_t j = 0; j < x->n; j++) {
        for (size_t s = 0; s < x->d->data_bytes; s++) {
            size_t k = b->off + dpos(x->d, j, s);
            is_data[k] = 1;
            unsigned char want = expect(j, s, ctx);
            if (b->out[k] != want && bad_data++ < 3)
                tu_fail("%s: %s element %zu data byte %zu: 0x%02x, expected 0x%02x", desc, what, j,
                        s, b->out[k], want);
        }
    }
    for (size_t k = 0; k < b->total; k++) {
        if (!is_data[k] && b->out[k] != b->img[k] && bad_gap++ < 3)
            tu_fail(
                "%s: %s byte %ld (relative to the span) is a gap or guard and was modified "
                "(0x%02x, was 0x%02x)",
                desc, what, (long)k - (long)b->off, b->out[k], b->img[k]);
    }
    free(is_data);
    tu.checks++;
    if (bad_data > 1 || bad_gap > 1)
        tu_fail("%s: %s: %ld data bytes and %ld gap/guard bytes wrong", desc, what, bad_data,
                bad_gap);
    return bad_data == 0 && bad_gap == 0;
}

typedef struct bctx {
    int rank;
    size_t per_rank; /* elements per rank (allgather) */
    size_t data_bytes;
    uint32_t seed;
} bctx_t;
static unsigned char expect_bcast(size_t j, size_t s, const void* p) {
    const bctx_t* c = p;
    return stream_byte(c->rank, j * c->data_bytes + s, c->seed);
}
static unsigned char expect_allgather(size_t j, size_t s, const void* p) {
    const bctx_t* c = p;
    size_t r = j / c->per_rank, jj = j % c->per_rank;
    return stream_byte((int)r, jj * c->data_bytes + s, c->seed);
}

static unsigned path_mask(int device, const ddt_t* a, const ddt_t* b) {
    if (!device) return tu.expect_host;
    return a->may_accelerate && b->may_accelerate ? TU_MASK_DEVICE_ANY : tu.expect_device;
}

static void ddt_bcast(const ddt_t* d, size_t n, int root, tu_mem_t mem, size_t misalign) {
    uint32_t seed = g_seed++;
    char desc[200];
    snprintf(desc, sizeof desc, "bcast %s count=%zu root=%d %s+%zu seed=%u", d->name, n, root,
             tu_mem_name(mem), misalign, seed);
    dbuf_t x;
    dbuf_alloc(&x, d, n, mem, misalign);
    if (g_rank == root) dbuf_fill(&x, 0, n, root, 0, seed);
    tu_buf_upload(&x.b);
    gpucoll_counters_t before;
    tu_counters(&before);
    int rc = MPI_Bcast(x.ptr, (int)n, d->dt, root, MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS, "%s: returned %d", desc, rc);
    tu_check_path(
        &before, GPUCOLL_COLL_BCAST,
        n && g_size > 1 ? path_mask(mem == TU_DEVICE, d, d) : TU_MASK_ALL | TU_MASK_MAY_SKIP, desc);
    tu_buf_read(&x.b);
    bctx_t c = {root, n, d->data_bytes, seed};
    dbuf_check(&x, expect_bcast, &c, "buffer", desc);
    tu_buf_free(&x.b);
}

static void ddt_allgather(const ddt_t* ds, size_t ns, const ddt_t* dr, size_t nr, int in_place,
                          tu_mem_t mem) {
    uint32_t seed = g_seed++;
    char desc[256];
    snprintf(desc, sizeof desc, "allgather send %zu x %s recv %zu x %s%s %s seed=%u", ns, ds->name,
             nr, dr->name, in_place ? " in_place" : "", tu_mem_name(mem), seed);
    dbuf_t s, r;
    dbuf_alloc(&s, ds, in_place ? 0 : ns, in_place ? TU_NULLBUF : mem, 0);
    dbuf_alloc(&r, dr, nr * (size_t)g_size, mem, 1);
    if (in_place)
        dbuf_fill(&r, (size_t)g_rank * nr, nr, g_rank, 0, seed);
    else
        dbuf_fill(&s, 0, ns, g_rank, 0, seed);
    tu_buf_upload(&s.b);
    tu_buf_upload(&r.b);
    gpucoll_counters_t before;
    tu_counters(&before);
    int rc = MPI_Allgather(in_place ? MPI_IN_PLACE : s.ptr, (int)ns, ds->dt, r.ptr, (int)nr, dr->dt,
                           MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS, "%s: returned %d", desc, rc);
    tu_check_path(&before, GPUCOLL_COLL_ALLGATHER,
                  nr ? path_mask(mem == TU_DEVICE, ds, dr) : TU_MASK_ALL | TU_MASK_MAY_SKIP, desc);
    tu_buf_read(&s.b);
    tu_buf_read(&r.b);
    tu_buf_check_unchanged(&s.b, 0, s.b.total, "send buffer", desc);
    bctx_t c = {0, nr, dr->data_bytes, seed};
    dbuf_check(&r, expect_allgather, &c, "recvbuf", desc);
    tu_buf_free(&s.b);
    tu_buf_free(&r.b);
}

/* User op on the vector type: sum of the data ints (the function walks the
 * type's layout; gaps are neither read nor written). */
static const int k_vec_ints[6] = {0, 1, 3, 4, 6, 7};
static void fn_vecsum(void* in, void* inout, int* len, MPI_Datatype* dt) {
    (void)dt;
    if (!host_ptrs(in, inout)) return;
    /* The tests place buffers at odd byte offsets: the ints are not aligned,
     * so each is read and written with memcpy (UBSan: misaligned load). */
    const unsigned char* a = in;
    unsigned char* b = inout;
    for (int j = 0; j < *len; j++)
        for (int k = 0; k < 6; k++) {
            const size_t at = (size_t)(j * 10 + k_vec_ints[k]) * sizeof(int);
            int x, y;
            memcpy(&x, a + at, sizeof x);
            memcpy(&y, b + at, sizeof y);
            y += x;
            memcpy(b + at, &y, sizeof y);
        }
}
static int vec_value(int rank, size_t j, int k, uint32_t seed) {
    return (int)(tu_hash(seed, rank, j * 6 + (size_t)k) % 2001u) - 1000;
}
static void vec_fill(dbuf_t* x, size_t j0, size_t n, int rank, size_t first, uint32_t seed) {
    unsigned char* p = tu_buf_payload(&x->b);
    for (size_t j = 0; j < n; j++)
        for (int k = 0; k < 6; k++) {
            int v = vec_value(rank, first + j, k, seed);
            memcpy(p + (j0 + j) * 40 + (size_t)k_vec_ints[k] * 4, &v, 4);
        }
}
typedef struct vctx {
    size_t first; /* element index of the result's element 0 */
    uint32_t seed;
} vctx_t;
static unsigned char expect_vecsum(size_t j, size_t s, const void* p) {
    const vctx_t* c = p;
    int k = (int)(s / 4), sum = 0;
    for (int r = 0; r < g_size; r++) sum += vec_value(r, c->first + j, k, c->seed);
    unsigned char bytes[4];
    memcpy(bytes, &sum, 4);
    return bytes[s % 4];
}

/* allreduce / reduce / reduce_scatter_block of the vector type with
 * fn_vecsum; n elements per rank (rs_block: n per rank, n*size in). */
static void ddt_reduce(gpucoll_coll_t coll, const ddt_t* d, MPI_Op op, size_t n, int in_place,
                       int root, tu_mem_t mem) {
    uint32_t seed = g_seed++;
    char desc[256];
    snprintf(desc, sizeof desc, "%s %s user-op count=%zu%s root=%d %s seed=%u",
             gpucoll_coll_name(coll), d->name, n, in_place ? " in_place" : "", root,
             tu_mem_name(mem), seed);
    const int is_root = g_rank == root;
    size_t in_n = coll == GPUCOLL_COLL_REDUCE_SCATTER_BLOCK ? n * (size_t)g_size : n;
    int send_used = !(in_place && (coll != GPUCOLL_COLL_REDUCE || is_root));
    int recv_sig = coll != GPUCOLL_COLL_REDUCE || is_root;
    size_t recv_n = in_place ? in_n : n;
    dbuf_t s, r;
    dbuf_alloc(&s, d, send_used ? in_n : 0, send_used ? mem : TU_NULLBUF, 0);
    dbuf_alloc(&r, d, recv_sig ? recv_n : 0, recv_sig ? mem : TU_NULLBUF, 3);
    if (send_used)
        vec_fill(&s, 0, in_n, g_rank, 0, seed);
    else
        vec_fill(&r, 0, in_n, g_rank, 0, seed);
    tu_buf_upload(&s.b);
    tu_buf_upload(&r.b);
    gpucoll_counters_t before;
    tu_counters(&before);
    const void* sp = send_used ? s.ptr : MPI_IN_PLACE;
    int rc = MPI_ERR_OTHER;
    if (coll == GPUCOLL_COLL_ALLREDUCE)
        rc = MPI_Allreduce(sp, r.ptr, (int)n, d->dt, op, MPI_COMM_WORLD);
    else if (coll == GPUCOLL_COLL_REDUCE)
        rc = MPI_Reduce(sp, recv_sig ? r.ptr : NULL, (int)n, d->dt, op, root, MPI_COMM_WORLD);
    else
        rc = MPI_Reduce_scatter_block(sp, r.ptr, (int)n, d->dt, op, MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS, "%s: returned %d", desc, rc);
    tu_check_path(&before, coll,
                  n ? path_mask(mem == TU_DEVICE, d, d) : TU_MASK_ALL | TU_MASK_MAY_SKIP, desc);
    tu_buf_read(&s.b);
    tu_buf_read(&r.b);
    tu_buf_check_unchanged(&s.b, 0, s.b.total, "send buffer", desc);
    if (recv_sig) {
        vctx_t c = {coll == GPUCOLL_COLL_REDUCE_SCATTER_BLOCK ? (size_t)g_rank * n : 0, seed};
        /* in place: elements past the result are input MPI may overwrite */
        dbuf_t res = r;
        res.n = n;
        if (recv_n > n) {
            /* bytes of elements [n, recv_n): not checked (data) */
            for (size_t j = n; j < recv_n; j++)
                for (size_t sb = 0; sb < d->data_bytes; sb++) {
                    size_t k = r.b.off + dpos(d, j, sb);
                    r.b.img[k] = r.b.out[k];
                }
        }
        dbuf_check(&res, expect_vecsum, &c, "recvbuf", desc);
    }
    tu_buf_free(&s.b);
    tu_buf_free(&r.b);
}

static void section_ddt(void) {
    ddt_t vec = make_vector(), st = make_struct(), neg = make_neg_lb(), ints = make_ints(),
          pad = make_padded();
    MPI_Op vecsum;
    MPI_Op_create(fn_vecsum, 1, &vecsum);
    const tu_mem_t mems[] = {TU_DEVICE, TU_HOST};
    const int last = g_size - 1, mid = g_size / 2;
    for (size_t m = 0; m < N_OF(mems); m++) {
        tu_mem_t mem = mems[m];
        const ddt_t* all[] = {&vec, &st, &neg};
        for (size_t t = 0; t < N_OF(all); t++) {
            ddt_bcast(all[t], 1, 0, mem, 0);
            ddt_bcast(all[t], 3, last, mem, 1);
            ddt_bcast(all[t], 1000, mid, mem, 8);
            ddt_bcast(all[t], 0, 0, mem, 0);
            ddt_allgather(all[t], 2, all[t], 2, 0, mem);
            ddt_allgather(all[t], 1, all[t], 1, 1, mem);
            ddt_allgather(all[t], 300, all[t], 300, 0, mem);
        }
        /* padding after each element (contiguous when count is 1) */
        ddt_bcast(&pad, 1, last, mem, 0);
        ddt_bcast(&pad, 5, 0, mem, 4);
        ddt_allgather(&pad, 1, &pad, 1, 0, mem);
        ddt_allgather(&pad, 1, &pad, 1, 1, mem);
        ddt_allgather(&pad, 3, &pad, 3, 0, mem);
        ddt_allgather(&ints, 1, &pad, 1, 0, mem);
        ddt_allgather(&pad, 1, &ints, 1, 0, mem);
        /* one signature, different layouts: 6 ints = 1 vector */
        ddt_allgather(&ints, 6 * 5, &vec, 5, 0, mem);
        ddt_allgather(&vec, 4, &ints, 24, 0, mem);
        ddt_allgather(&ints, 0, &vec, 0, 0, mem);

        ddt_reduce(GPUCOLL_COLL_ALLREDUCE, &vec, vecsum, 3, 0, 0, mem);
        ddt_reduce(GPUCOLL_COLL_ALLREDUCE, &vec, vecsum, 1000, 1, 0, mem);
        ddt_reduce(GPUCOLL_COLL_REDUCE, &vec, vecsum, 5, 0, last, mem);
        ddt_reduce(GPUCOLL_COLL_REDUCE, &vec, vecsum, 2, 1, mid, mem);
        ddt_reduce(GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, &vec, vecsum, 2, 0, 0, mem);
        ddt_reduce(GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, &vec, vecsum, 3, 1, 0, mem);
    }
    MPI_Op_free(&vecsum);
    MPI_Type_free(&vec.dt);
    MPI_Type_free(&st.dt);
    MPI_Type_free(&neg.dt);
    MPI_Type_free(&pad.dt);
}

/* ------------------------------------------------------------------------
 * MPI_BOTTOM: datatypes of absolute addresses (MPI_Get_address). Into
 * device buffers they must be staged, never handed to Open MPI as host
 * memory (there they would be read by the CPU: a crash on a GPU).
 * ---------------------------------------------------------------------- */

/* Two blocks of k ints at p and p + 2k ints: a gap of k ints between them
 * (must keep its contents); extent 3k ints. Absolute displacements. */
static MPI_Datatype bottom_type(void* p, int k, MPI_Aint* at) {
    MPI_Get_address(p, at);
    int lens[2] = {k, k};
    MPI_Aint displs[2] = {*at, *at + (MPI_Aint)(2 * (size_t)k * sizeof(int))};
    MPI_Datatype t;
    MPI_Type_create_hindexed(2, lens, displs, MPI_INT, &t);
    MPI_Type_commit(&t);
    return t;
}

static int bottom_value(int rank, size_t j, uint32_t seed) {
    return (int)(tu_hash(seed, rank, j) % 100001u) - 50000;
}
static int is_gap(size_t j, int k) { return (j / (size_t)k) % 3 == 1; } /* of 3k-int periods */

/* The ints of x (read back) against want(j); gap ints must be unchanged. */
static void bottom_check(tu_buf_t* x, size_t n, int k, int (*want)(size_t, const void*),
                         const void* ctx, const char* desc) {
    tu_buf_read(x);
    for (size_t j = 0; j < n; j++) {
        int got, was;
        memcpy(&got, x->out + x->off + j * sizeof(int), sizeof got);
        memcpy(&was, x->img + x->off + j * sizeof(int), sizeof was);
        const int w = is_gap(j, k) ? was : want(j, ctx);
        if (!TU_CHECK(got == w, "%s: int %zu is %d, want %d%s", desc, j, got, w,
                      is_gap(j, k) ? " (a gap: unchanged)" : ""))
            return;
    }
    tu_buf_check_unchanged(x, x->off + n * sizeof(int), x->total, "guard", desc);
}

static void bottom_fill(tu_buf_t* x, size_t n, int rank, uint32_t seed) {
    for (size_t j = 0; j < n; j++) {
        int v = bottom_value(rank, j, seed);
        memcpy(tu_buf_payload(x) + j * sizeof(int), &v, sizeof v);
    }
    tu_buf_upload(x);
}

static unsigned bottom_mask(tu_mem_t mem) {
    return mem == TU_DEVICE ? TU_PATH_BIT(GPUCOLL_PATH_STAGED) : tu.expect_host;
}

typedef struct bottom_ctx {
    int rank; /* bcast: the root */
    int k;    /* allgather: the block */
    int size; /* allreduce: the ranks summed */
    uint32_t seed;
} bottom_ctx_t;
static int want_from(size_t j, const void* p) {
    const bottom_ctx_t* c = p;
    return bottom_value(c->rank, j, c->seed);
}
static int want_gathered(size_t j, const void* p) { /* rank j / 3k's send ints */
    const bottom_ctx_t* c = p;
    const size_t period = 3 * (size_t)c->k;
    return bottom_value((int)(j / period), j % period, c->seed);
}

static void bottom_bcast(int k, int root, tu_mem_t mem, int nonblocking) {
    uint32_t seed = g_seed++;
    char desc[160];
    snprintf(desc, sizeof desc, "MPI_BOTTOM %sbcast k=%d root=%d %s seed=%u",
             nonblocking ? "i" : "", k, root, tu_mem_name(mem), seed);
    const size_t n = 3 * (size_t)k;
    tu_buf_t x;
    tu_buf_alloc(&x, mem, n * sizeof(int), 0, seed);
    if (g_rank == root) bottom_fill(&x, n, root, seed);
    tu_buf_upload(&x);
    MPI_Aint at;
    MPI_Datatype t = bottom_type(x.ptr, k, &at);
    gpucoll_counters_t before;
    tu_counters(&before);
    int rc;
    if (nonblocking) {
        MPI_Request req;
        rc = MPI_Ibcast(MPI_BOTTOM, 1, t, root, MPI_COMM_WORLD, &req);
        if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
        rc = MPI_Bcast(MPI_BOTTOM, 1, t, root, MPI_COMM_WORLD);
    }
    TU_CHECK(rc == MPI_SUCCESS, "%s: returned %d", desc, rc);
    if (g_size > 1) tu_check_path(&before, GPUCOLL_COLL_BCAST, bottom_mask(mem), desc);
    bottom_ctx_t c = {.rank = root, .seed = seed};
    bottom_check(&x, n, k, want_from, &c, desc);
    MPI_Type_free(&t);
    tu_buf_free(&x);
}

static void bottom_allgather(int k, tu_mem_t mem) {
    uint32_t seed = g_seed++;
    char desc[160];
    snprintf(desc, sizeof desc, "MPI_BOTTOM allgather k=%d %s seed=%u", k, tu_mem_name(mem), seed);
    const size_t n = 3 * (size_t)k;
    tu_buf_t s, r;
    tu_buf_alloc(&s, mem, n * sizeof(int), 0, seed);
    tu_buf_alloc(&r, mem, n * (size_t)g_size * sizeof(int), 0, seed + 1);
    bottom_fill(&s, n, g_rank, seed);
    tu_buf_upload(&r);
    MPI_Aint sat, rat;
    MPI_Datatype st = bottom_type(s.ptr, k, &sat), rt = bottom_type(r.ptr, k, &rat);
    gpucoll_counters_t before;
    tu_counters(&before);
    /* both buffers MPI_BOTTOM: rank j's block at the receive type's
     * addresses plus j extents (3k ints) */
    int rc = MPI_Allgather(MPI_BOTTOM, 1, st, MPI_BOTTOM, 1, rt, MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS, "%s: returned %d", desc, rc);
    tu_check_path(&before, GPUCOLL_COLL_ALLGATHER, bottom_mask(mem), desc);
    bottom_ctx_t c = {.k = k, .seed = seed};
    bottom_check(&r, n * (size_t)g_size, k, want_gathered, &c, desc);
    tu_buf_read(&s);
    tu_buf_check_unchanged(&s, 0, s.total, "send buffer", desc);
    MPI_Type_free(&st);
    MPI_Type_free(&rt);
    tu_buf_free(&s);
    tu_buf_free(&r);
}

/* The reduction of the user op below: sum of the ints the type holds. Its
 * arguments are base addresses (staged copies minus the type's first
 * address, Open MPI's temporaries likewise): the ints lie at the type's
 * displacements from them, this process's g_bottom_at. */
static MPI_Aint g_bottom_at;
static int g_bottom_k;
static void fn_bottom_sum(void* in, void* inout, int* len, MPI_Datatype* dt) {
    (void)dt;
    const size_t k = (size_t)g_bottom_k, period = 3 * k;
    for (int e = 0; e < *len; e++) {
        for (size_t j = 0; j < period; j++) {
            if (is_gap(j, g_bottom_k)) continue;
            const uintptr_t off = (uintptr_t)g_bottom_at + ((size_t)e * period + j) * sizeof(int);
            int* a = (int*)((uintptr_t)in + off);
            int* b = (int*)((uintptr_t)inout + off);
            if (j == 0 && !host_ptrs(a, b)) return;
            *b += *a;
        }
    }
}
static int want_sum(size_t j, const void* p) {
    const bottom_ctx_t* c = p;
    long v = 0;
    for (int r = 0; r < c->size; r++) v += bottom_value(r, j, c->seed);
    return (int)v;
}

static void bottom_allreduce(int k, tu_mem_t mem) {
    uint32_t seed = g_seed++;
    char desc[160];
    snprintf(desc, sizeof desc, "MPI_BOTTOM allreduce (user op) k=%d %s seed=%u", k,
             tu_mem_name(mem), seed);
    const size_t n = 3 * (size_t)k;
    tu_buf_t x;
    tu_buf_alloc(&x, mem, n * sizeof(int), 0, seed);
    bottom_fill(&x, n, g_rank, seed);
    MPI_Datatype t = bottom_type(x.ptr, k, &g_bottom_at);
    g_bottom_k = k;
    MPI_Op op;
    MPI_Op_create(fn_bottom_sum, 1, &op);
    gpucoll_counters_t before;
    tu_counters(&before);
    int rc = MPI_Allreduce(MPI_IN_PLACE, MPI_BOTTOM, 1, t, op, MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS, "%s: returned %d", desc, rc);
    if (g_size > 1) tu_check_path(&before, GPUCOLL_COLL_ALLREDUCE, bottom_mask(mem), desc);
    bottom_ctx_t c = {.size = g_size, .seed = seed};
    bottom_check(&x, n, k, want_sum, &c, desc);
    MPI_Op_free(&op);
    MPI_Type_free(&t);
    tu_buf_free(&x);
}

/* The send buffer MPI_BOTTOM with one contiguous block at a device address,
 * received as plain ints into a device buffer: one signature, so the
 * receive side alone would be eligible for the accelerated path, where a
 * NULL send buffer means "in place". Must be staged, the send block read. */
static void bottom_allgather_send_only(int k) {
    uint32_t seed = g_seed++;
    char desc[160];
    snprintf(desc, sizeof desc, "MPI_BOTTOM send, plain receive, allgather k=%d seed=%u", k, seed);
    tu_buf_t s, r;
    tu_buf_alloc(&s, TU_DEVICE, (size_t)k * sizeof(int), 0, seed);
    tu_buf_alloc(&r, TU_DEVICE, (size_t)k * (size_t)g_size * sizeof(int), 0, seed + 1);
    bottom_fill(&s, (size_t)k, g_rank, seed);
    tu_buf_upload(&r);
    MPI_Aint at;
    MPI_Get_address(s.ptr, &at);
    MPI_Datatype st;
    MPI_Type_create_hindexed(1, &k, &at, MPI_INT, &st);
    MPI_Type_commit(&st);
    gpucoll_counters_t before;
    tu_counters(&before);
    int rc = MPI_Allgather(MPI_BOTTOM, 1, st, r.ptr, k, MPI_INT, MPI_COMM_WORLD);
    TU_CHECK(rc == MPI_SUCCESS, "%s: returned %d", desc, rc);
    tu_check_path(&before, GPUCOLL_COLL_ALLGATHER, TU_PATH_BIT(GPUCOLL_PATH_STAGED), desc);
    tu_buf_read(&r);
    for (size_t j = 0; j < (size_t)k * (size_t)g_size; j++) {
        int got;
        memcpy(&got, r.out + j * sizeof(int), sizeof got);
        const int want = bottom_value((int)(j / (size_t)k), j % (size_t)k, seed);
        if (!TU_CHECK(got == want, "%s: int %zu is %d, want %d", desc, j, got, want)) break;
    }
    MPI_Type_free(&st);
    tu_buf_free(&s);
    tu_buf_free(&r);
}

/* A type of two blocks in a and b under MPI_BOTTOM, bcast: both must fail
 * with MPI_ERR_BUFFER on every rank (every rank passes one), and nothing is
 * written to either. */
static void bottom_refused(tu_buf_t* a, tu_buf_t* b, int root, const char* desc) {
    tu_buf_upload(a);
    tu_buf_upload(b);
    MPI_Aint displs[2];
    MPI_Get_address(a->ptr, &displs[0]);
    MPI_Get_address(b->ptr, &displs[1]);
    int lens[2] = {64, 64};
    MPI_Datatype t;
    MPI_Type_create_hindexed(2, lens, displs, MPI_INT, &t);
    MPI_Type_commit(&t);
    MPI_Errhandler old;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &old);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Bcast(MPI_BOTTOM, 1, t, root, MPI_COMM_WORLD);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, old);
    MPI_Errhandler_free(&old);
    int cls = -1;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    TU_CHECK(cls == MPI_ERR_BUFFER, "%s: returned %d (class %d), want MPI_ERR_BUFFER", desc, rc,
             cls);
    tu_buf_read(a);
    tu_buf_read(b);
    tu_buf_check_unchanged(a, 0, a->total, "first block's buffer", desc);
    tu_buf_check_unchanged(b, 0, b->total, "second block's buffer", desc);
    MPI_Type_free(&t);
    tu_buf_free(a);
    tu_buf_free(b);
}

/* Blocks in two device allocations: the staged span would cross them. */
static void bottom_two_allocations(int root) {
    char desc[120];
    snprintf(desc, sizeof desc, "MPI_BOTTOM bcast over two device allocations root=%d", root);
    uint32_t seed = g_seed++;
    tu_buf_t a, b;
    tu_buf_alloc(&a, TU_DEVICE, 64 * sizeof(int), 0, seed);
    tu_buf_alloc(&b, TU_DEVICE, 64 * sizeof(int), 0, seed + 1);
    bottom_refused(&a, &b, root, desc);
}

/* The first block in host memory, the second in device memory: not
 * supported, and must not reach Open MPI (it would read the device block
 * as host memory). */
static void bottom_host_then_device(int root) {
    char desc[120];
    snprintf(desc, sizeof desc, "MPI_BOTTOM bcast of a host block, then a device one, root=%d",
             root);
    uint32_t seed = g_seed++;
    tu_buf_t a, b;
    /* The host block in an allocation larger than malloc's largest mmap
     * threshold (32 MiB), so that it lies among the mappings like the device
     * block: a block in the brk heap would make the refused span tens of TB,
     * more than the address space has in one hole under Open MPI 5.0/6.0
     * (docs/limits.md, "A refused buffer that spans unrelated allocations"). */
    tu_buf_alloc(&a, TU_HOST, 64 * sizeof(int), (size_t)33 << 20, seed);
    tu_buf_alloc(&b, TU_DEVICE, 64 * sizeof(int), 0, seed + 1);
    /* the device block after the host one in the address space */
    if ((uintptr_t)b.ptr > (uintptr_t)a.ptr) {
        bottom_refused(&a, &b, root, desc);
    } else {
        bottom_refused(&b, &a, root, desc); /* then device first, host second: refused too */
    }
}

static void section_bottom(void) {
    const tu_mem_t mems[] = {TU_DEVICE, TU_HOST};
    for (size_t m = 0; m < N_OF(mems); m++) {
        tu_mem_t mem = mems[m];
        bottom_bcast(1, 0, mem, 0);
        bottom_bcast(1000, g_size - 1, mem, 0);
        bottom_bcast(7, g_size / 2, mem, 1);
        bottom_allgather(3, mem);
        bottom_allgather(500, mem);
        bottom_allreduce(2, mem);
        bottom_allreduce(700, mem);
    }
    bottom_allgather_send_only(5);
    bottom_allgather_send_only(2000);
    if (g_size > 1) {
        bottom_two_allocations(g_size - 1);
        bottom_host_then_device(0);
    }
}

/* ------------------------------------------------------------------------
 * Requests that keep a user-defined op and a derived datatype alive:
 * Open MPI writes the op and datatypes it retains into the request a
 * nonblocking call returns, as an ompi_coll_base_nbc_request_t
 * (ompi_coll_base_retain_op / _datatypes; 5.0 and 6.0 lay it out unlike
 * 4.1); the op and type are freed here before the request completes, so a
 * request of another layout would be written out of bounds (ASan) and the
 * call would run on freed objects.
 * ---------------------------------------------------------------------- */

/* inout[i] = in[i] + inout[i] over pairs of ints (the type: 2 ints, 1 gap) */
static void fn_pairsum(void* in, void* inout, int* len, MPI_Datatype* dt) {
    (void)dt;
    if (!host_ptrs(in, inout)) g_device_ptr_seen++;
    int* a = in;
    int* b = inout;
    for (int i = 0; i < *len; i++) {
        b[3 * i] += a[3 * i];
        b[3 * i + 1] += a[3 * i + 1];
    }
}

static int pair_value(int rank, size_t i, int k) { return (int)(i * 7 + (size_t)k) + rank * 1000; }

static void retained_allreduce(tu_mem_t mem, int persistent) {
    const size_t n = 257; /* elements of the pair type: 3 ints each, the third a gap */
    MPI_Datatype pair, vec;
    MPI_Type_vector(1, 2, 3, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, 3 * sizeof(int), &pair);
    MPI_Type_commit(&pair);
    MPI_Type_free(&vec);
    MPI_Op op;
    MPI_Op_create(fn_pairsum, 1, &op);
    tu_buf_t sb, rb;
    tu_buf_alloc(&sb, mem, n * 3 * sizeof(int), 0, 31);
    tu_buf_alloc(&rb, mem, n * 3 * sizeof(int), 0, 32);
    int* in = (int*)tu_buf_payload(&sb);
    int* gaps = (int*)tu_buf_payload(&rb);
    for (size_t i = 0; i < n; i++) {
        in[3 * i] = pair_value(g_rank, i, 0);
        in[3 * i + 1] = pair_value(g_rank, i, 1);
        in[3 * i + 2] = -7;
        gaps[3 * i + 2] = -9; /* the gap of the receive buffer keeps it */
    }
    tu_buf_upload(&sb);
    tu_buf_upload(&rb);
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = persistent ? MPI_Allreduce_init(sb.ptr, rb.ptr, (int)n, pair, op, MPI_COMM_WORLD,
                                             MPI_INFO_NULL, &req)
                        : MPI_Iallreduce(sb.ptr, rb.ptr, (int)n, pair, op, MPI_COMM_WORLD, &req);
    TU_CHECK(rc == MPI_SUCCESS, "%s allreduce with a user op on a derived type (%s): rc %d",
             persistent ? "persistent" : "nonblocking", tu_mem_name(mem), rc);
    /* A nonblocking request holds them now (Open MPI retains them in it); a
     * persistent one is inactive until started, and Open MPI retains
     * nothing in an inactive request (4.1's libnbc would then start on a
     * freed type): freed after MPI_Request_free. */
    if (!persistent) {
        MPI_Op_free(&op);
        MPI_Type_free(&pair);
    }
    for (int start = 0; start < (persistent ? 3 : 1) && rc == MPI_SUCCESS; start++) {
        if (persistent) MPI_Start(&req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        tu_buf_read(&rb);
        const int* got = (const int*)(rb.out + rb.off);
        int bad = 0;
        for (size_t i = 0; i < n && !bad; i++)
            for (int k = 0; k < 3 && !bad; k++) {
                int want = -9;
                if (k < 2) {
                    want = 0;
                    for (int r = 0; r < g_size; r++) want += pair_value(r, i, k);
                }
                bad = !TU_CHECK(got[3 * i + (size_t)k] == want,
                                "%s allreduce (%s), start %d: element %zu.%d is %d, want %d",
                                persistent ? "persistent" : "nonblocking", tu_mem_name(mem), start,
                                i, k, got[3 * i + (size_t)k], want);
            }
    }
    if (persistent) {
        if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
        MPI_Op_free(&op);
        MPI_Type_free(&pair);
    }
    tu_buf_free(&sb);
    tu_buf_free(&rb);
}

/* Nonblocking bcast and allgather of a derived type freed before the wait
 * (Open MPI retains the datatypes). */
static void retained_bcast_allgather(tu_mem_t mem) {
    const size_t n = 100;
    MPI_Datatype pair, vec;
    MPI_Type_vector(1, 2, 3, MPI_INT, &vec);
    MPI_Type_create_resized(vec, 0, 3 * sizeof(int), &pair);
    MPI_Type_commit(&pair);
    MPI_Type_free(&vec);
    tu_buf_t b, all;
    tu_buf_alloc(&b, mem, n * 3 * sizeof(int), 0, 33);
    tu_buf_alloc(&all, mem, (size_t)g_size * n * 3 * sizeof(int), 0, 34);
    int* x = (int*)tu_buf_payload(&b);
    for (size_t i = 0; i < 3 * n; i++) x[i] = g_rank == 0 ? (int)i : -1;
    tu_buf_upload(&b);
    tu_buf_upload(&all);
    MPI_Request req[2];
    MPI_Ibcast(b.ptr, (int)n, pair, 0, MPI_COMM_WORLD, &req[0]);
    MPI_Waitall(1, req, MPI_STATUSES_IGNORE);
    /* every rank now holds rank 0's pairs (gaps its own -1 or rank 0's) */
    MPI_Iallgather(b.ptr, (int)n, pair, all.ptr, (int)n, pair, MPI_COMM_WORLD, &req[1]);
    MPI_Type_free(&pair);
    MPI_Wait(&req[1], MPI_STATUS_IGNORE);
    tu_buf_read(&all);
    const int* got = (const int*)(all.out + all.off);
    const int* sentinel = (const int*)all.img;
    int bad = 0;
    for (size_t r = 0; r < (size_t)g_size && !bad; r++)
        for (size_t i = 0; i < n && !bad; i++)
            for (size_t k = 0; k < 3 && !bad; k++) {
                const size_t at = (r * n + i) * 3 + k;
                const int want = k < 2 ? (int)(3 * i + k) : sentinel[at];
                bad = !TU_CHECK(got[at] == want,
                                "ibcast + iallgather of a freed derived type (%s): block %zu "
                                "element %zu.%zu is %d, want %d",
                                tu_mem_name(mem), r, i, k, got[at], want);
            }
    tu_buf_free(&b);
    tu_buf_free(&all);
}

static void section_requests(void) {
    const tu_mem_t mems[] = {TU_DEVICE, TU_HOST};
    for (size_t m = 0; m < N_OF(mems); m++) {
        retained_allreduce(mems[m], 0);
        retained_allreduce(mems[m], 1);
        retained_bcast_allgather(mems[m]);
    }
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    tu_init("test_userop_ddt");
    for (int i = 1; i < argc; i++) {
        if (tu_parse_option(argc, argv, &i) != 1) {
            if (tu.world_rank == 0) {
                fprintf(stderr, "test_userop_ddt: bad option '%s'\n", argv[i]);
                tu_usage_common();
            }
            MPI_Finalize();
            return 2;
        }
    }
    tu_require_device_backend();
    g_rank = tu.world_rank;
    g_size = tu.world_size;
    section_userops();
    section_ddt();
    section_bottom();
    section_requests();
    TU_CHECK(g_device_ptr_seen == 0,
             "a user-defined op function was called %ld time(s) with a "
             "device pointer",
             g_device_ptr_seen);
    int rc = tu_finalize();
    MPI_Finalize();
    return rc;
}
