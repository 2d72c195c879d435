/*
 * test_gaps.c - the staged path writes back only the bytes a receive
 * datatype covers. The bytes between its blocks (a vector's stride, a
 * struct's holes, a resized type's tail, the space between the blocks of a
 * v-collective) are not part of the buffer: the application may write them
 * while the call is in flight, e.g. a kernel updating a halo exchange's
 * interior during an MPI_Iallgatherv. A copy back of the whole span reverted
 * those writes to what the gaps held when the call started.
 *
 * For each datatype with gaps (vector, negative lower bound, struct with
 * holes, a matrix column) and collective (allgather, in place too, allgatherv, alltoallv,
 * gatherv, allreduce), on device buffers:
 *  - nonblocking and persistent (MPIX_*_init, two starts): every rank writes
 *    new bytes into every gap of its receive allocation after its call
 *    started and before it completes (the ranks start one after the other,
 *    each after the previous one wrote its gaps, so that no call can
 *    complete before its rank wrote: only the last rank relies on nothing
 *    progressing between its start and its write); after the wait the gaps
 *    hold the new bytes and the covered bytes what Open MPI's own call on
 *    host buffers gives;
 *  - blocking: the gaps keep their initial bytes.
 * The counters must show each device call staged, and the bytes staged
 * show that a receive buffer not read by its collective was not copied in
 * (blocking: the send span in, the covered bytes back).
 *
 * usage: test_gaps [common options]
 */
#include "mpi_test_util.h"
/* MPI_*_init on every Open MPI series */
#include "mpi4_names.h"

enum { MAXP = 64, GUARD = 16, TOKEN_TAG = 4242 };

typedef enum {
    G_ALLGATHER,
    G_ALLGATHER_IN_PLACE,
    G_ALLGATHERV,
    G_ALLTOALLV,
    G_GATHERV,
    G_ALLREDUCE,
    G_COUNT
} gcoll_t;
static const char* const gcoll_names[G_COUNT] = {
    "allgather", "allgather (in place)", "allgatherv", "alltoallv", "gatherv", "allreduce"};
static const gpucoll_coll_t gcoll_ids[G_COUNT] = {GPUCOLL_COLL_ALLGATHER,  GPUCOLL_COLL_ALLGATHER,
                                                  GPUCOLL_COLL_ALLGATHERV, GPUCOLL_COLL_ALLTOALLV,
                                                  GPUCOLL_COLL_GATHERV,    GPUCOLL_COLL_ALLREDUCE};

enum { F_BLOCKING, F_NONBLOCKING, F_PERSISTENT, F_COUNT };
static const char* const form_names[F_COUNT] = {"blocking", "nonblocking", "persistent"};

typedef struct gtype {
    const char* name;
    MPI_Datatype dt;
    int reducible; /* made of MPI_INT only: summed by g_sum */
    /* so many small pieces that the staged path copies the whole span back
     * (gaps copied in first): a write into a gap during the call is not
     * kept, by design */
    int whole;
} gtype_t;

/* n blocks of counts[i] elements at displs[i] extents from the pointer. */
typedef struct blocks {
    int n;
    int counts[MAXP], displs[MAXP];
} blocks_t;

/* One buffer: its allocation (guards around the span of its blocks), the
 * pointer handed to MPI, and which bytes the datatype covers. */
typedef struct gbuf {
    size_t total, off; /* allocation bytes; the pointer's offset in it */
    unsigned char* covered;
    unsigned char* img; /* host image */
    void* dev;          /* device allocation */
    size_t span;        /* bytes from the first block's first byte to the last's end */
    long lo;            /* where that span starts, from the pointer */
} gbuf_t;

static int g_rank, g_size;

/* MPI_SUM is not defined on derived datatypes in Open MPI: allreduce sums
 * with a user-defined op that knows where the ints of each type are. */
typedef struct int_layout {
    MPI_Datatype dt;
    MPI_Aint extent;
    int nints;
    MPI_Aint at[8]; /* byte offsets of the ints in an element */
} int_layout_t;
static int_layout_t g_layouts[5];
static int g_nlayouts;

static void learn_int_layout(MPI_Datatype dt, int nints, const MPI_Aint* at) {
    int_layout_t* l = &g_layouts[g_nlayouts++];
    MPI_Aint lb;
    l->dt = dt;
    MPI_Type_get_extent(dt, &lb, &l->extent);
    l->nints = nints;
    memcpy(l->at, at, (size_t)nints * sizeof *at);
}

static void sum_ints(void* in, void* inout, int* len, MPI_Datatype* dt) {
    const int_layout_t* l = NULL;
    for (int i = 0; i < g_nlayouts; i++)
        if (g_layouts[i].dt == *dt) l = &g_layouts[i];
    if (l == NULL || gpucoll_mem_type(in) != GPUCOLL_MEM_HOST ||
        gpucoll_mem_type(inout) != GPUCOLL_MEM_HOST) {
        tu_fail("sum_ints: unknown datatype or a device pointer");
        return;
    }
    for (int e = 0; e < *len; e++)
        for (int j = 0; j < l->nints; j++) {
            const MPI_Aint at = (MPI_Aint)e * l->extent + l->at[j];
            unsigned a, b; /* wraps, as the oracle's (the same op) does */
            memcpy(&a, (char*)in + at, sizeof a);
            memcpy(&b, (char*)inout + at, sizeof b);
            b += a;
            memcpy((char*)inout + at, &b, sizeof b);
        }
}
static MPI_Op g_sum;

static void blocks_span(const blocks_t* b, MPI_Datatype dt, MPI_Aint* lo, MPI_Aint* hi) {
    MPI_Aint lb, ext, tlb, text;
    MPI_Type_get_extent(dt, &lb, &ext);
    MPI_Type_get_true_extent(dt, &tlb, &text);
    *lo = 0;
    *hi = 0;
    int any = 0;
    for (int i = 0; i < b->n; i++) {
        if (b->counts[i] == 0) continue;
        const MPI_Aint first = (MPI_Aint)b->displs[i] * ext + tlb;
        const MPI_Aint last = (MPI_Aint)(b->displs[i] + b->counts[i] - 1) * ext + tlb + text;
        if (!any || first < *lo) *lo = first;
        if (!any || last > *hi) *hi = last;
        any = 1;
    }
}

/* Allocates g for blocks of dt; covered[k]: MPI writes byte k there (found
 * with MPI_Unpack of 0xFF bytes, Open MPI's own datatype engine). */
static void gbuf_make(gbuf_t* g, const blocks_t* b, MPI_Datatype dt) {
    MPI_Aint lo, hi, ext, lb;
    MPI_Type_get_extent(dt, &lb, &ext);
    blocks_span(b, dt, &lo, &hi);
    g->span = (size_t)(hi - lo);
    g->lo = (long)lo;
    g->off = GUARD + (size_t)(lo < 0 ? -lo : 0); /* the pointer: room for a negative lb */
    g->total = g->off + (size_t)(hi > 0 ? hi : 0) + GUARD;
    g->covered = tu_xmalloc(g->total);
    g->img = tu_xmalloc(g->total);
    memset(g->covered, 0, g->total);
    for (int i = 0; i < b->n; i++) {
        if (b->counts[i] == 0) continue;
        int packed = 0;
        MPI_Pack_size(b->counts[i], dt, MPI_COMM_WORLD, &packed);
        unsigned char* ones = tu_xmalloc((size_t)packed);
        memset(ones, 0xFF, (size_t)packed);
        int pos = 0;
        MPI_Unpack(ones, packed, &pos, g->covered + g->off + (MPI_Aint)b->displs[i] * ext,
                   b->counts[i], dt, MPI_COMM_WORLD);
        free(ones);
    }
    if (gpucoll_malloc_device(&g->dev, g->total) != GPUCOLL_SUCCESS)
        TU_DIE("gpucoll_malloc_device(%zu): %s", g->total, gpucoll_last_error());
}

static void gbuf_free(gbuf_t* g) {
    gpucoll_free_device(g->dev);
    free(g->covered);
    free(g->img);
    memset(g, 0, sizeof *g);
}

static void* gbuf_ptr(const gbuf_t* g) { return (char*)g->dev + g->off; }

static size_t gbuf_covered_bytes(const gbuf_t* g) {
    size_t n = 0;
    for (size_t k = 0; k < g->total; k++) n += g->covered[k] != 0;
    return n;
}

static void copy(void* dst, const void* src, size_t n) {
    if (gpucoll_memcpy(dst, src, n) != GPUCOLL_SUCCESS)
        TU_DIE("gpucoll_memcpy: %s", gpucoll_last_error());
}

/* Writes new[k] into every byte k of g's allocation the datatype does not
 * cover, one copy per gap, as a kernel or another thread would. */
static void write_gaps(const gbuf_t* g, const unsigned char* fresh) {
    for (size_t k = 0; k < g->total;) {
        if (g->covered[k]) {
            k++;
            continue;
        }
        size_t end = k;
        while (end < g->total && !g->covered[end]) end++;
        copy((char*)g->dev + k, fresh + k, end - k);
        k = end;
    }
}

/* The call's layout on this rank: send and receive blocks, counts. */
typedef struct call {
    gcoll_t coll;
    MPI_Datatype dt;
    int c, root;
    blocks_t sb, rb;
    int scounts[MAXP], sdispls[MAXP], rcounts[MAXP], rdispls[MAXP];
} call_t;

static void make_call(call_t* k, gcoll_t coll, MPI_Datatype dt) {
    memset(k, 0, sizeof *k);
    k->coll = coll;
    k->dt = dt;
    k->c = 2;
    k->root = g_size - 1;
    const int n = g_size, c = k->c, r = g_rank;
    switch (coll) {
        case G_ALLGATHER:
        case G_ALLGATHER_IN_PLACE:
            k->sb.n = 1;
            k->sb.counts[0] = c;
            k->rb.n = n;
            for (int i = 0; i < n; i++) {
                k->rb.counts[i] = c;
                k->rb.displs[i] = i * c;
            }
            break;
        case G_ALLGATHERV:
        case G_GATHERV: { /* rank i sends c + i % 2; one element of gap between blocks */
            k->sb.n = 1;
            k->sb.counts[0] = c + r % 2;
            const int receives = coll == G_ALLGATHERV || r == k->root;
            for (int i = 0, at = 0; i < n; i++) {
                k->rcounts[i] = c + i % 2;
                k->rdispls[i] = at;
                at += k->rcounts[i] + 1;
            }
            k->rb.n = receives ? n : 0;
            memcpy(k->rb.counts, k->rcounts, sizeof k->rcounts);
            memcpy(k->rb.displs, k->rdispls, sizeof k->rdispls);
            break;
        }
        case G_ALLTOALLV: /* the pair (r, i) exchanges c + (r + i) % 2 elements */
            for (int i = 0, sat = 0, rat = 0; i < n; i++) {
                k->scounts[i] = k->rcounts[i] = c + (r + i) % 2;
                k->sdispls[i] = sat;
                k->rdispls[i] = rat;
                sat += k->scounts[i] + 1;
                rat += k->rcounts[i] + 1;
            }
            k->sb.n = k->rb.n = n;
            memcpy(k->sb.counts, k->scounts, sizeof k->scounts);
            memcpy(k->sb.displs, k->sdispls, sizeof k->sdispls);
            memcpy(k->rb.counts, k->rcounts, sizeof k->rcounts);
            memcpy(k->rb.displs, k->rdispls, sizeof k->rdispls);
            break;
        case G_ALLREDUCE:
            k->sb.n = k->rb.n = 1;
            k->sb.counts[0] = k->rb.counts[0] = c;
            break;
        default:
            break;
    }
    if (coll == G_ALLGATHER_IN_PLACE) k->sb.n = 0;
}

static int is_in_place(const call_t* k) { return k->coll == G_ALLGATHER_IN_PLACE; }

static int call_blocking(const call_t* k, const void* s, void* r, MPI_Comm comm) {
    const MPI_Datatype dt = k->dt;
    switch (k->coll) {
        case G_ALLGATHER:
            return MPI_Allgather(s, k->c, dt, r, k->c, dt, comm);
        case G_ALLGATHER_IN_PLACE:
            return MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, k->c, dt, comm);
        case G_ALLGATHERV:
            return MPI_Allgatherv(s, k->sb.counts[0], dt, r, k->rcounts, k->rdispls, dt, comm);
        case G_ALLTOALLV:
            return MPI_Alltoallv(s, k->scounts, k->sdispls, dt, r, k->rcounts, k->rdispls, dt,
                                 comm);
        case G_GATHERV:
            return MPI_Gatherv(s, k->sb.counts[0], dt, r, k->rcounts, k->rdispls, dt, k->root,
                               comm);
        case G_ALLREDUCE:
            return MPI_Allreduce(s, r, k->c, dt, g_sum, comm);
        default:
            return MPI_ERR_ARG;
    }
}

static int call_nonblocking(const call_t* k, const void* s, void* r, MPI_Comm comm,
                            MPI_Request* req) {
    const MPI_Datatype dt = k->dt;
    switch (k->coll) {
        case G_ALLGATHER:
            return MPI_Iallgather(s, k->c, dt, r, k->c, dt, comm, req);
        case G_ALLGATHER_IN_PLACE:
            return MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, k->c, dt, comm, req);
        case G_ALLGATHERV:
            return MPI_Iallgatherv(s, k->sb.counts[0], dt, r, k->rcounts, k->rdispls, dt, comm,
                                   req);
        case G_ALLTOALLV:
            return MPI_Ialltoallv(s, k->scounts, k->sdispls, dt, r, k->rcounts, k->rdispls, dt,
                                  comm, req);
        case G_GATHERV:
            return MPI_Igatherv(s, k->sb.counts[0], dt, r, k->rcounts, k->rdispls, dt, k->root,
                                comm, req);
        case G_ALLREDUCE:
            return MPI_Iallreduce(s, r, k->c, dt, g_sum, comm, req);
        default:
            return MPI_ERR_ARG;
    }
}

static int call_init(const call_t* k, const void* s, void* r, MPI_Comm comm, MPI_Request* req) {
    const MPI_Datatype dt = k->dt;
    MPI_Info info = MPI_INFO_NULL;
    switch (k->coll) {
        case G_ALLGATHER:
            return MPI_Allgather_init(s, k->c, dt, r, k->c, dt, comm, info, req);
        case G_ALLGATHER_IN_PLACE:
            return MPI_Allgather_init(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, k->c, dt, comm, info,
                                      req);
        case G_ALLGATHERV:
            return MPI_Allgatherv_init(s, k->sb.counts[0], dt, r, k->rcounts, k->rdispls, dt, comm,
                                       info, req);
        case G_ALLTOALLV:
            return MPI_Alltoallv_init(s, k->scounts, k->sdispls, dt, r, k->rcounts, k->rdispls, dt,
                                      comm, info, req);
        case G_GATHERV:
            return MPI_Gatherv_init(s, k->sb.counts[0], dt, r, k->rcounts, k->rdispls, dt, k->root,
                                    comm, info, req);
        case G_ALLREDUCE:
            return MPI_Allreduce_init(s, r, k->c, dt, g_sum, comm, info, req);
        default:
            return MPI_ERR_ARG;
    }
}

/* Rank by rank: waits for the previous rank's token, runs step, passes the
 * token on. */
static void in_turn(void (*step)(void*), void* arg) {
    int token = 0;
    if (g_rank > 0)
        MPI_Recv(&token, 1, MPI_INT, g_rank - 1, TOKEN_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    step(arg);
    if (g_rank < g_size - 1) MPI_Send(&token, 1, MPI_INT, g_rank + 1, TOKEN_TAG, MPI_COMM_WORLD);
}

typedef struct running {
    const call_t* k;
    gbuf_t *s, *r;
    MPI_Comm comm;
    MPI_Request* req;
    int form;
    const unsigned char* fresh; /* what the gaps get while the call runs */
    int rc;
} running_t;

static void start_and_write(void* arg) {
    running_t* x = arg;
    const void* s = x->s->dev != NULL ? gbuf_ptr(x->s) : NULL;
    if (x->form == F_NONBLOCKING)
        x->rc = call_nonblocking(x->k, s, gbuf_ptr(x->r), x->comm, x->req);
    else
        x->rc = MPI_Start(x->req);
    if (x->rc == MPI_SUCCESS) write_gaps(x->r, x->fresh);
}

/* Bytes of the send buffer's span the staged call copies in. */
static size_t send_span(const call_t* k, const gbuf_t* s) { return k->sb.n > 0 ? s->span : 0; }

static void run_one(const gtype_t* t, gcoll_t coll, int form, MPI_Comm comm, uint32_t seed) {
    call_t k;
    make_call(&k, coll, t->dt);
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s %s on %s (%d ranks)", form_names[form], gcoll_names[coll],
             t->name, g_size);
    gbuf_t s = {0}, r = {0};
    if (k.sb.n > 0) gbuf_make(&s, &k.sb, t->dt);
    gbuf_make(&r, k.rb.n > 0 ? &k.rb : &k.sb, t->dt); /* gatherv off the root: not significant */
    if (k.rb.n == 0) memset(r.covered, 0, r.total);
    /* inputs: small bytes so that the sum over the ranks cannot overflow */
    for (size_t b = 0; b < s.total; b++)
        s.img[b] = (unsigned char)(tu_hash(seed, g_rank, b) & (t->reducible ? 0x1F : 0xFF));
    for (size_t b = 0; b < r.total; b++) r.img[b] = tu_sentinel(seed, b);
    if (is_in_place(&k)) /* the own block is the input */
        for (size_t b = 0; b < r.total; b++)
            if (r.covered[b]) r.img[b] = (unsigned char)tu_hash(seed, g_rank, b);
    if (k.sb.n > 0) copy(s.dev, s.img, s.total);
    copy(r.dev, r.img, r.total);

    /* the oracle: Open MPI's own call on host copies */
    unsigned char* hs = tu_xmalloc(s.total + 1);
    unsigned char* hr = tu_xmalloc(r.total);
    if (k.sb.n > 0) memcpy(hs, s.img, s.total);
    memcpy(hr, r.img, r.total);
    if (call_blocking(&k, k.sb.n > 0 ? hs + s.off : NULL, hr + r.off, comm) != MPI_SUCCESS)
        TU_DIE("%s: the host call failed", ctx);

    unsigned char* fresh = tu_xmalloc(r.total);
    for (size_t b = 0; b < r.total; b++) fresh[b] = (unsigned char)~tu_sentinel(seed, b);
    gpucoll_counters_t before, after;
    const int starts = form == F_PERSISTENT ? 2 : 1;
    MPI_Request req = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    if (form == F_PERSISTENT)
        rc = call_init(&k, k.sb.n > 0 ? gbuf_ptr(&s) : NULL, gbuf_ptr(&r), comm, &req);
    for (int start = 0; start < starts && rc == MPI_SUCCESS; start++) {
        if (start > 0) { /* new bytes in the gaps, the receive buffer back to its image */
            for (size_t b = 0; b < r.total; b++) fresh[b] = (unsigned char)(fresh[b] * 7 + 1);
            copy(r.dev, r.img, r.total);
        }
        tu_counters(&before);
        if (form == F_BLOCKING) {
            rc = call_blocking(&k, k.sb.n > 0 ? gbuf_ptr(&s) : NULL, gbuf_ptr(&r), comm);
        } else {
            running_t x = {&k, &s, &r, comm, &req, form, fresh, MPI_SUCCESS};
            in_turn(start_and_write, &x);
            rc = x.rc;
            if (rc == MPI_SUCCESS) rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        if (!TU_CHECK(rc == MPI_SUCCESS, "%s: returned %d", ctx, rc)) break;
        tu_check_path(&before, gcoll_ids[coll], TU_PATH_BIT(GPUCOLL_PATH_STAGED), ctx);
        /* staged bytes: nothing of a receive buffer the call does not read
         * is copied in; a blocking call copies its covered bytes back (a
         * nonblocking call counts at its start) */
        tu_counters(&after);
        const int significant = k.rb.n > 0 || is_in_place(&k);
        const size_t want = t->whole ? send_span(&k, &s) + (significant ? r.span : 0) +
                                           (form == F_BLOCKING && significant ? r.span : 0)
                                     : send_span(&k, &s) + (is_in_place(&k) ? r.span : 0) +
                                           (form == F_BLOCKING ? gbuf_covered_bytes(&r) : 0);
        TU_CHECK(after.bytes_staged - before.bytes_staged == want,
                 "%s: %" PRIu64
                 " bytes staged, expected %zu (send span %zu, receive span %zu, "
                 "%zu bytes covered)",
                 ctx, after.bytes_staged - before.bytes_staged, want, send_span(&k, &s), r.span,
                 gbuf_covered_bytes(&r));

        unsigned char* out = tu_xmalloc(r.total);
        copy(out, r.dev, r.total);
        long bad = 0;
        for (size_t b = 0; b < r.total; b++) {
            /* the whole span copied back: a gap written during the call
             * holds the new bytes or, if the copy back came after the
             * write, the old ones; the guards are never touched */
            const long at = (long)b - (long)r.off;
            const int either = t->whole && significant && form != F_BLOCKING && !r.covered[b] &&
                               at >= r.lo && at < r.lo + (long)r.span;
            const unsigned char want_b = r.covered[b]         ? hr[b]
                                         : form == F_BLOCKING ? r.img[b]
                                                              : fresh[b];
            if (either && out[b] == r.img[b]) continue;
            if (out[b] != want_b && bad++ < 3)
                tu_fail("%s, start %d: byte %ld from the pointer (%s) is 0x%02x, expected 0x%02x%s",
                        ctx, start, (long)b - (long)r.off, r.covered[b] ? "covered" : "gap", out[b],
                        want_b,
                        r.covered[b]         ? ""
                        : out[b] == r.img[b] ? " (what it held when the call started)"
                                             : "");
        }
        tu.checks++;
        free(out);
    }
    if (form == F_PERSISTENT && req != MPI_REQUEST_NULL) MPI_Request_free(&req);
    free(fresh);
    free(hs);
    free(hr);
    if (k.sb.n > 0) gbuf_free(&s);
    gbuf_free(&r);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    tu_init("test_gaps");
    for (int i = 1; i < argc; i++) {
        const int p = tu_parse_option(argc, argv, &i);
        if (p <= 0) {
            if (tu.world_rank == 0) {
                fprintf(stderr, "usage: test_gaps [options]\n");
                tu_usage_common();
            }
            MPI_Finalize();
            return 2;
        }
    }
    tu_require_device_backend();
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    if (g_size > MAXP) TU_DIE("at most %d ranks", MAXP);
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);

    /* 4 blocks of 2 ints, stride 3: one int of gap after each of the first three */
    MPI_Datatype vec;
    MPI_Type_vector(4, 2, 3, MPI_INT, &vec);
    MPI_Type_commit(&vec);
    /* an int 8 bytes below the pointer, two ints from byte 4; extent 24 from
     * lb -8: gaps at [-4, 4) and [12, 16) */
    MPI_Datatype neg0, neg;
    const int nlens[2] = {1, 2};
    const MPI_Aint ndisp[2] = {-8, 4};
    MPI_Type_create_hindexed(2, nlens, ndisp, MPI_INT, &neg0);
    MPI_Type_create_resized(neg0, -8, 24, &neg);
    MPI_Type_commit(&neg);
    /* struct { char; (3 bytes of hole) int; double; } and 8 bytes of tail */
    MPI_Datatype st0, st;
    const int slens[3] = {1, 1, 1};
    const MPI_Aint sdisp[3] = {0, 4, 8};
    const MPI_Datatype stypes[3] = {MPI_CHAR, MPI_INT, MPI_DOUBLE};
    MPI_Type_create_struct(3, slens, sdisp, stypes, &st0);
    MPI_Type_create_resized(st0, 0, 24, &st);
    MPI_Type_commit(&st);
    /* a column of a 4 x 256 matrix of ints, resized to one int: element k is
     * column k (the copy back of 2 columns per rank is one 2D copy) */
    MPI_Datatype col0, col;
    MPI_Type_vector(4, 1, 256, MPI_INT, &col0);
    MPI_Type_create_resized(col0, 0, 4, &col);
    MPI_Type_commit(&col);
    /* two ints listed high one first: no gap, yet not contiguous (one copy
     * back, not two runs of 4-byte rows) */
    MPI_Datatype swapped;
    const int one_each[2] = {1, 1}, swapped_at[2] = {1, 0};
    MPI_Type_indexed(2, one_each, swapped_at, MPI_INT, &swapped);
    MPI_Type_commit(&swapped);
    /* 1100 ints with gaps of one and two ints in turn: too many small runs
     * for an exact copy back (the whole span instead) */
    enum { IRREGULAR = 1100 };
    static int irr_len[IRREGULAR], irr_at[IRREGULAR];
    for (int i = 0; i < IRREGULAR; i++) {
        irr_len[i] = 1;
        irr_at[i] = i == 0 ? 0 : irr_at[i - 1] + (i % 2 ? 2 : 3);
    }
    MPI_Datatype irregular;
    MPI_Type_indexed(IRREGULAR, irr_len, irr_at, MPI_INT, &irregular);
    MPI_Type_commit(&irregular);
    const MPI_Aint vec_at[8] = {0, 4, 12, 16, 24, 28, 36, 40}, neg_at[3] = {-8, 4, 8},
                   col_at[4] = {0, 1024, 2048, 3072}, swapped_bytes[2] = {4, 0};
    learn_int_layout(vec, 8, vec_at);
    learn_int_layout(neg, 3, neg_at);
    learn_int_layout(col, 4, col_at);
    learn_int_layout(swapped, 2, swapped_bytes);
    MPI_Op_create(sum_ints, 1, &g_sum);
    const gtype_t types[] = {{"vector(4, 2, 3) of MPI_INT", vec, 1, 0},
                             {"hindexed with lb -8, resized", neg, 1, 0},
                             {"struct with holes, resized", st, 0, 0},
                             {"column of a 4 x 256 int matrix", col, 1, 0},
                             {"two ints, the second first", swapped, 1, 0},
                             {"1100 ints, gaps of 1 and 2 in turn", irregular, 0, 1}};

    uint32_t seed = 100;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (int coll = 0; coll < G_COUNT; coll++) {
            if (coll == G_ALLREDUCE && !types[t].reducible) continue;
            for (int form = 0; form < F_COUNT; form++) {
                if (tu.verbose && g_rank == 0)
                    printf("%s %s on %s\n", form_names[form], gcoll_names[coll], types[t].name);
                run_one(&types[t], (gcoll_t)coll, form, comm, seed++);
            }
        }

    MPI_Op_free(&g_sum);
    MPI_Type_free(&vec);
    MPI_Type_free(&neg0);
    MPI_Type_free(&neg);
    MPI_Type_free(&st0);
    MPI_Type_free(&st);
    MPI_Type_free(&col0);
    MPI_Type_free(&col);
    MPI_Type_free(&swapped);
    MPI_Type_free(&irregular);
    MPI_Comm_free(&comm);
    const int status = tu_finalize();
    MPI_Finalize();
    return status;
}
