/*
 * test_forms.c - every collective of the standard on device buffers, in its
 * blocking, nonblocking and persistent forms (MPI_Allreduce, MPI_Iallreduce,
 * MPI_Allreduce_init, ... and the neighborhood collectives on a ring
 * topology), on device, host and mixed memory kinds.
 *
 * The oracle: the same call with host buffers holding the same initial
 * bytes, which gpucoll hands untouched to Open MPI's own module. After the
 * device call, every byte of both allocations (payload, gaps between
 * blocks, guards) must equal what the host call left, and the counters must
 * show that the device call was staged (host calls delegated).
 *
 * Also: several nonblocking calls outstanding, completed in reverse order
 * while the device copies other data; persistent requests started 100 times
 * with new inputs between starts; persistent requests that outlive the
 * communicator they were made on; MPI_Exscan with a device receive buffer
 * on rank 0 too small for the count (not significant there: never checked).
 *
 * Options: the common ones (mpi_test_util.h), --quick (fewer sizes) and
 * --between-nodes (the ranks span faked nodes: persistent starts unplanned).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpi_test_util.h"
/* MPI_*_init on every Open MPI series */
#include "mpi4_names.h"

enum { F_BLOCKING = 0, F_NONBLOCKING, F_PERSISTENT, F_COUNT };
static const char* const form_names[F_COUNT] = {"blocking", "nonblocking", "persistent"};

typedef struct spec {
    gpucoll_coll_t coll;
    int count; /* elements per block */
    int root;
    int in_place;
    int strided;   /* a vector datatype with gaps instead of MPI_INT */
    MPI_Comm comm; /* world, or the ring topology for neighborhood collectives */
} spec_t;

/* Per call: the datatype, per-rank counts and displacements (v and w), the
 * size of both allocations in bytes. */
typedef struct layout {
    MPI_Datatype dt;
    int n, rank;
    int counts[64], displs[64], bdispls[64];
    MPI_Aint adispls[64];
    MPI_Datatype types[64];
    size_t sbytes, rbytes;
} layout_t;

static MPI_Datatype strided_int;
/* --between-nodes: the ranks are on several (faked) nodes; persistent
 * starts there set their call up each time (no plan). */
static int between_nodes;
/* Nonblocking and persistent calls of the accelerated set on device memory
 * take the accelerated path: always on one node; between nodes unless the
 * progress thread is off (then they are staged). */
static int nonblocking_accelerated = 1; /* int, hole, int, hole: extent 4 ints */

static int is_neighbor(gpucoll_coll_t c) {
    return c >= GPUCOLL_COLL_NEIGHBOR_ALLGATHER && c <= GPUCOLL_COLL_NEIGHBOR_ALLTOALLW;
}
static int is_reduction(gpucoll_coll_t c) {
    return c == GPUCOLL_COLL_ALLREDUCE || c == GPUCOLL_COLL_REDUCE ||
           c == GPUCOLL_COLL_REDUCE_SCATTER || c == GPUCOLL_COLL_REDUCE_SCATTER_BLOCK ||
           c == GPUCOLL_COLL_SCAN || c == GPUCOLL_COLL_EXSCAN;
}
static int has_in_place(gpucoll_coll_t c) { return !is_neighbor(c) && c != GPUCOLL_COLL_BCAST; }

static void make_layout(const spec_t* s, layout_t* L) {
    memset(L, 0, sizeof *L); /* reduce_scatter sums into sbytes */
    MPI_Comm_size(s->comm, &L->n);
    MPI_Comm_rank(s->comm, &L->rank);
    if (is_neighbor(s->coll)) L->n = 2; /* ring: left and right neighbors */
    L->dt = s->strided && !is_reduction(s->coll) ? strided_int : MPI_INT;
    MPI_Aint lb, ext;
    MPI_Type_get_extent(L->dt, &lb, &ext);
    const int n = L->n, c = s->count;
    /* v/w layouts: counts vary, one element of gap between blocks. Counts
     * of rank i's block (allgatherv, gatherv, scatterv); of the pair
     * (rank, i), the same both ways (alltoallv/w); equal (neighbors). */
    const int pairwise = s->coll == GPUCOLL_COLL_ALLTOALLV || s->coll == GPUCOLL_COLL_ALLTOALLW;
    int at = 0;
    for (int i = 0; i < n; i++) {
        L->counts[i] = is_neighbor(s->coll) ? c : c + ((pairwise ? L->rank + i : i) % 2);
        L->displs[i] = at;
        L->bdispls[i] = at * (int)ext;
        L->adispls[i] = (MPI_Aint)at * ext;
        L->types[i] = L->dt;
        at += L->counts[i] + 1;
    }
    const size_t e = (size_t)ext, block = (size_t)c * e, vspan = (size_t)at * e;
    switch (s->coll) {
        case GPUCOLL_COLL_ALLREDUCE:
        case GPUCOLL_COLL_REDUCE:
        case GPUCOLL_COLL_SCAN:
        case GPUCOLL_COLL_EXSCAN:
        case GPUCOLL_COLL_BCAST:
            L->sbytes = L->rbytes = block;
            break;
        case GPUCOLL_COLL_ALLGATHER:
        case GPUCOLL_COLL_GATHER:
            L->sbytes = block;
            L->rbytes = block * (size_t)n;
            break;
        case GPUCOLL_COLL_SCATTER:
            L->sbytes = block * (size_t)n;
            L->rbytes = block;
            break;
        case GPUCOLL_COLL_ALLTOALL:
        case GPUCOLL_COLL_NEIGHBOR_ALLTOALL:
            L->sbytes = L->rbytes = block * (size_t)n;
            break;
        case GPUCOLL_COLL_NEIGHBOR_ALLGATHER:
            L->sbytes = block;
            L->rbytes = block * (size_t)n;
            break;
        case GPUCOLL_COLL_REDUCE_SCATTER:
            for (int i = 0; i < n; i++) L->sbytes += (size_t)L->counts[i] * e;
            L->rbytes = L->sbytes; /* in place: the whole input */
            break;
        case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK:
            L->sbytes = L->rbytes = block * (size_t)n;
            break;
        case GPUCOLL_COLL_ALLGATHERV:
        case GPUCOLL_COLL_GATHERV:
        case GPUCOLL_COLL_NEIGHBOR_ALLGATHERV:
            L->sbytes = (size_t)L->counts[L->rank % n] * e;
            L->rbytes = vspan;
            break;
        case GPUCOLL_COLL_SCATTERV:
            L->sbytes = vspan;
            L->rbytes = (size_t)L->counts[L->rank % n] * e;
            break;
        default: /* alltoallv/w and their neighborhood forms */
            L->sbytes = L->rbytes = vspan;
    }
}

/* Issues the call (blocking: returns done; nonblocking: *req; persistent:
 * the inactive request in *req). */
static int issue(const spec_t* s, const layout_t* L, int form, void* sb, void* rb,
                 MPI_Request* req) {
    const int c = s->count, root = s->root;
    MPI_Comm comm = s->comm;
    MPI_Datatype dt = L->dt;
    const void* sbuf = s->in_place ? MPI_IN_PLACE : sb;
    const int mine = L->counts[L->rank % L->n];
    /* In-place scatter(v) passes MPI_IN_PLACE as the root's receive buffer. */
    void* rbuf_scatter = (s->in_place && L->rank == root) ? MPI_IN_PLACE : rb;
    const void* sbuf_rooted = (s->in_place && L->rank != root) ? sb : sbuf;
    /* With MPI_IN_PLACE the send count and datatype of allgather(v) and
     * alltoall are ignored: garbage here (a count out of range, a handle
     * that points nowhere), as an application may pass. Not for the
     * nonblocking and persistent alltoall: Open MPI 4.1's libnbc reads that
     * datatype even in place. */
    const int scount = s->in_place ? -7 : c, smine = s->in_place ? -7 : mine;
    MPI_Datatype sdt = s->in_place ? (MPI_Datatype)(uintptr_t)0x18 : dt;
    MPI_Info info = MPI_INFO_NULL;
#define FORMS(blocking, nonblocking, persistent)                   \
    (form == F_BLOCKING      ? (*req = MPI_REQUEST_NULL, blocking) \
     : form == F_NONBLOCKING ? nonblocking                         \
                             : persistent)
    switch (s->coll) {
        case GPUCOLL_COLL_ALLREDUCE:
            return FORMS(MPI_Allreduce(sbuf, rb, c, dt, MPI_SUM, comm),
                         MPI_Iallreduce(sbuf, rb, c, dt, MPI_SUM, comm, req),
                         MPI_Allreduce_init(sbuf, rb, c, dt, MPI_SUM, comm, info, req));
        case GPUCOLL_COLL_BCAST:
            return FORMS(MPI_Bcast(sb, c, dt, root, comm), MPI_Ibcast(sb, c, dt, root, comm, req),
                         MPI_Bcast_init(sb, c, dt, root, comm, info, req));
        case GPUCOLL_COLL_ALLGATHER:
            return FORMS(MPI_Allgather(sbuf, scount, sdt, rb, c, dt, comm),
                         MPI_Iallgather(sbuf, scount, sdt, rb, c, dt, comm, req),
                         MPI_Allgather_init(sbuf, scount, sdt, rb, c, dt, comm, info, req));
        case GPUCOLL_COLL_REDUCE_SCATTER:
            return FORMS(
                MPI_Reduce_scatter(sbuf, rb, L->counts, dt, MPI_SUM, comm),
                MPI_Ireduce_scatter(sbuf, rb, L->counts, dt, MPI_SUM, comm, req),
                MPI_Reduce_scatter_init(sbuf, rb, L->counts, dt, MPI_SUM, comm, info, req));
        case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK:
            return FORMS(MPI_Reduce_scatter_block(sbuf, rb, c, dt, MPI_SUM, comm),
                         MPI_Ireduce_scatter_block(sbuf, rb, c, dt, MPI_SUM, comm, req),
                         MPI_Reduce_scatter_block_init(sbuf, rb, c, dt, MPI_SUM, comm, info, req));
        case GPUCOLL_COLL_REDUCE:
            return FORMS(MPI_Reduce(sbuf_rooted, rb, c, dt, MPI_SUM, root, comm),
                         MPI_Ireduce(sbuf_rooted, rb, c, dt, MPI_SUM, root, comm, req),
                         MPI_Reduce_init(sbuf_rooted, rb, c, dt, MPI_SUM, root, comm, info, req));
        case GPUCOLL_COLL_ALLGATHERV:
            return FORMS(MPI_Allgatherv(sbuf, smine, sdt, rb, L->counts, L->displs, dt, comm),
                         MPI_Iallgatherv(sbuf, smine, sdt, rb, L->counts, L->displs, dt, comm, req),
                         MPI_Allgatherv_init(sbuf, smine, sdt, rb, L->counts, L->displs, dt, comm,
                                             info, req));
        case GPUCOLL_COLL_ALLTOALL:
            return FORMS(MPI_Alltoall(sbuf, scount, sdt, rb, c, dt, comm),
                         MPI_Ialltoall(sbuf, c, dt, rb, c, dt, comm, req),
                         MPI_Alltoall_init(sbuf, c, dt, rb, c, dt, comm, info, req));
        case GPUCOLL_COLL_ALLTOALLV:
            return FORMS(
                MPI_Alltoallv(sbuf, L->counts, L->displs, dt, rb, L->counts, L->displs, dt, comm),
                MPI_Ialltoallv(sbuf, L->counts, L->displs, dt, rb, L->counts, L->displs, dt, comm,
                               req),
                MPI_Alltoallv_init(sbuf, L->counts, L->displs, dt, rb, L->counts, L->displs, dt,
                                   comm, info, req));
        case GPUCOLL_COLL_ALLTOALLW:
            return FORMS(MPI_Alltoallw(sbuf, L->counts, L->bdispls, L->types, rb, L->counts,
                                       L->bdispls, L->types, comm),
                         MPI_Ialltoallw(sbuf, L->counts, L->bdispls, L->types, rb, L->counts,
                                        L->bdispls, L->types, comm, req),
                         MPI_Alltoallw_init(sbuf, L->counts, L->bdispls, L->types, rb, L->counts,
                                            L->bdispls, L->types, comm, info, req));
        case GPUCOLL_COLL_GATHER:
            return FORMS(MPI_Gather(sbuf_rooted, c, dt, rb, c, dt, root, comm),
                         MPI_Igather(sbuf_rooted, c, dt, rb, c, dt, root, comm, req),
                         MPI_Gather_init(sbuf_rooted, c, dt, rb, c, dt, root, comm, info, req));
        case GPUCOLL_COLL_GATHERV:
            return FORMS(
                MPI_Gatherv(sbuf_rooted, mine, dt, rb, L->counts, L->displs, dt, root, comm),
                MPI_Igatherv(sbuf_rooted, mine, dt, rb, L->counts, L->displs, dt, root, comm, req),
                MPI_Gatherv_init(sbuf_rooted, mine, dt, rb, L->counts, L->displs, dt, root, comm,
                                 info, req));
        case GPUCOLL_COLL_SCATTER:
            return FORMS(MPI_Scatter(sb, c, dt, rbuf_scatter, c, dt, root, comm),
                         MPI_Iscatter(sb, c, dt, rbuf_scatter, c, dt, root, comm, req),
                         MPI_Scatter_init(sb, c, dt, rbuf_scatter, c, dt, root, comm, info, req));
        case GPUCOLL_COLL_SCATTERV:
            return FORMS(
                MPI_Scatterv(sb, L->counts, L->displs, dt, rbuf_scatter, mine, dt, root, comm),
                MPI_Iscatterv(sb, L->counts, L->displs, dt, rbuf_scatter, mine, dt, root, comm,
                              req),
                MPI_Scatterv_init(sb, L->counts, L->displs, dt, rbuf_scatter, mine, dt, root, comm,
                                  info, req));
        case GPUCOLL_COLL_SCAN:
            return FORMS(MPI_Scan(sbuf, rb, c, dt, MPI_SUM, comm),
                         MPI_Iscan(sbuf, rb, c, dt, MPI_SUM, comm, req),
                         MPI_Scan_init(sbuf, rb, c, dt, MPI_SUM, comm, info, req));
        case GPUCOLL_COLL_EXSCAN:
            return FORMS(MPI_Exscan(sbuf, rb, c, dt, MPI_SUM, comm),
                         MPI_Iexscan(sbuf, rb, c, dt, MPI_SUM, comm, req),
                         MPI_Exscan_init(sbuf, rb, c, dt, MPI_SUM, comm, info, req));
        case GPUCOLL_COLL_NEIGHBOR_ALLGATHER:
            return FORMS(MPI_Neighbor_allgather(sb, c, dt, rb, c, dt, comm),
                         MPI_Ineighbor_allgather(sb, c, dt, rb, c, dt, comm, req),
                         MPI_Neighbor_allgather_init(sb, c, dt, rb, c, dt, comm, info, req));
        case GPUCOLL_COLL_NEIGHBOR_ALLGATHERV:
            return FORMS(
                MPI_Neighbor_allgatherv(sb, mine, dt, rb, L->counts, L->displs, dt, comm),
                MPI_Ineighbor_allgatherv(sb, mine, dt, rb, L->counts, L->displs, dt, comm, req),
                MPI_Neighbor_allgatherv_init(sb, mine, dt, rb, L->counts, L->displs, dt, comm, info,
                                             req));
        case GPUCOLL_COLL_NEIGHBOR_ALLTOALL:
            return FORMS(MPI_Neighbor_alltoall(sb, c, dt, rb, c, dt, comm),
                         MPI_Ineighbor_alltoall(sb, c, dt, rb, c, dt, comm, req),
                         MPI_Neighbor_alltoall_init(sb, c, dt, rb, c, dt, comm, info, req));
        case GPUCOLL_COLL_NEIGHBOR_ALLTOALLV:
            return FORMS(MPI_Neighbor_alltoallv(sb, L->counts, L->displs, dt, rb, L->counts,
                                                L->displs, dt, comm),
                         MPI_Ineighbor_alltoallv(sb, L->counts, L->displs, dt, rb, L->counts,
                                                 L->displs, dt, comm, req),
                         MPI_Neighbor_alltoallv_init(sb, L->counts, L->displs, dt, rb, L->counts,
                                                     L->displs, dt, comm, info, req));
        case GPUCOLL_COLL_NEIGHBOR_ALLTOALLW:
            return FORMS(
                MPI_Neighbor_alltoallw(sb, L->counts, L->adispls, L->types, rb, L->counts,
                                       L->adispls, L->types, comm),
                MPI_Ineighbor_alltoallw(sb, L->counts, L->adispls, L->types, rb, L->counts,
                                        L->adispls, L->types, comm, req),
                MPI_Neighbor_alltoallw_init(sb, L->counts, L->adispls, L->types, rb, L->counts,
                                            L->adispls, L->types, comm, info, req));
        default:
            TU_DIE("no such collective %d", (int)s->coll);
    }
#undef FORMS
    return MPI_ERR_OTHER;
}

/* Fills both allocations with small ints (payload, gaps and guards alike). */
static void fill(tu_buf_t* b, int rank, int salt) {
    for (size_t k = 0; k + 4 <= b->total; k += 4) {
        int v = rank * 1000 + (int)(k / 4) % 997 + salt * 7;
        memcpy(b->img + k, &v, 4);
    }
    tu_buf_upload(b);
}

/* Which memory each of this rank's buffers is in, per memory mode. */
enum { M_DEVICE = 0, M_MIXED, M_HOST, M_COUNT };
static const char* const mode_names[M_COUNT] = {"device", "mixed", "host"};
static tu_mem_t mem_of(int mode, int rank) {
    return mode == M_HOST ? TU_HOST : mode == M_DEVICE ? TU_DEVICE : rank % 2 ? TU_HOST : TU_DEVICE;
}

static void desc(char* buf, size_t n, const spec_t* s, int form, int mode) {
    snprintf(buf, n, "%s %s %s count %d root %d%s%s", gpucoll_coll_name(s->coll), form_names[form],
             mode_names[mode], s->count, s->root, s->in_place ? " in_place" : "",
             s->strided ? " strided" : "");
}

static void wait_ok(MPI_Request* req, const char* ctx) {
    int rc = MPI_Wait(req, MPI_STATUS_IGNORE);
    TU_CHECK(rc == MPI_SUCCESS, "%s: MPI_Wait returned %d", ctx, rc);
}

/* Runs s on buffers of kind mem (after filling them with salt), completing
 * it in the given form; persistent: starts the request `starts` times,
 * refilling the send side with salt + i before each start, and compares
 * each run against the host oracle. */
static void run_case(const spec_t* s, int form, int mode, int starts) {
    layout_t L;
    make_layout(s, &L);
    char ctx[200];
    desc(ctx, sizeof ctx, s, form, mode);
    const tu_mem_t mem = mem_of(mode, L.rank);
    tu_buf_t hs, hr, ds, dr; /* host oracle and the buffers under test */
    tu_buf_alloc(&hs, TU_HOST, L.sbytes, 8, 1);
    tu_buf_alloc(&hr, TU_HOST, L.rbytes, 8, 2);
    tu_buf_alloc(&ds, mem, L.sbytes, 8, 1);
    tu_buf_alloc(&dr, mem, L.rbytes, 8, 2);
    MPI_Request req = MPI_REQUEST_NULL, oreq = MPI_REQUEST_NULL;
    if (form == F_PERSISTENT) {
        int rc = issue(s, &L, F_PERSISTENT, ds.ptr, dr.ptr, &req);
        TU_CHECK(rc == MPI_SUCCESS && req != MPI_REQUEST_NULL, "%s: init returned %d", ctx, rc);
    }
    for (int it = 0; it < starts; it++) {
        fill(&hs, L.rank, it);
        fill(&hr, L.rank, 50 + it);
        fill(&ds, L.rank, it);
        fill(&dr, L.rank, 50 + it);
        /* The oracle: host buffers, Open MPI's own module, the same family
         * of algorithms (blocking, or libnbc's; they may differ where the
         * standard leaves the order open: a ring of 2 whose left and right
         * neighbor are the same rank). */
        int rc =
            issue(s, &L, form == F_BLOCKING ? F_BLOCKING : F_NONBLOCKING, hs.ptr, hr.ptr, &oreq);
        if (oreq != MPI_REQUEST_NULL) MPI_Wait(&oreq, MPI_STATUS_IGNORE);
        TU_CHECK(rc == MPI_SUCCESS, "%s: host oracle returned %d", ctx, rc);
        gpucoll_counters_t before, after;
        tu_counters(&before);
        if (form == F_PERSISTENT) {
            rc = MPI_Start(&req);
            TU_CHECK(rc == MPI_SUCCESS, "%s: MPI_Start %d returned %d", ctx, it, rc);
            wait_ok(&req, ctx);
        } else {
            rc = issue(s, &L, form, ds.ptr, dr.ptr, &req);
            TU_CHECK(rc == MPI_SUCCESS, "%s: call returned %d", ctx, rc);
            if (form == F_NONBLOCKING) wait_ok(&req, ctx);
        }
        tu_counters(&after);
        tu_buf_read(&hs);
        tu_buf_read(&hr);
        tu_buf_read(&ds);
        tu_buf_read(&dr);
        char what[240];
        snprintf(what, sizeof what, "%s (run %d)", ctx, it);
        if (TU_CHECK(memcmp(hr.out, dr.out, hr.total) == 0, "%s: receive buffer differs", what) &&
            TU_CHECK(memcmp(hs.out, ds.out, hs.total) == 0, "%s: send buffer differs", what)) {
        }
        if (memcmp(hr.out, dr.out, hr.total) != 0) {
            for (size_t k = 0; k < hr.total; k++)
                if (hr.out[k] != dr.out[k]) {
                    tu_fail("%s: first difference at byte %ld of the receive buffer", what,
                            (long)k - (long)hr.off);
                    break;
                }
        }
        /* The path: staged where this rank passed device memory, delegated
         * otherwise (persistent host requests are counted at init). */
        /* Nonblocking and persistent allreduce, bcast, allgather,
         * reduce_scatter(_block) and reduce with every rank on device memory
         * and a plain datatype: the accelerated path. Mixed kinds: declined
         * on every rank, staged. */
        /* Nonblocking allreduce, reduce and bcast of at most 8 bytes go to
         * Open MPI's module on every rank (what MPI_Comm_idup starts from the
         * progress engine looks like that): staged on device memory. */
        int type_bytes = 0;
        MPI_Type_size(L.dt, &type_bytes);
        const int tiny = form == F_NONBLOCKING &&
                         (s->coll == GPUCOLL_COLL_ALLREDUCE || s->coll == GPUCOLL_COLL_REDUCE ||
                          s->coll == GPUCOLL_COLL_BCAST) &&
                         (long)s->count * type_bytes <= 8;
        const int accelerated = form != F_BLOCKING && nonblocking_accelerated && !tiny &&
                                s->coll < GPUCOLL_COLL_REDUCE_LOCAL &&
                                (mode == M_DEVICE || (mode == M_MIXED && L.n == 1)) && !s->strided;
        const gpucoll_path_t want = accelerated        ? GPUCOLL_PATH_ACCELERATED
                                    : mem == TU_DEVICE ? GPUCOLL_PATH_STAGED
                                                       : GPUCOLL_PATH_DELEGATED;
        const int gform = form == F_BLOCKING      ? GPUCOLL_FORM_BLOCKING
                          : form == F_NONBLOCKING ? GPUCOLL_FORM_NONBLOCKING
                                                  : GPUCOLL_FORM_PERSISTENT;
        /* One rank: Open MPI answers MPI_Ibcast and MPI_Bcast_init itself. */
        const int unseen = L.n == 1 && s->coll == GPUCOLL_COLL_BCAST && form != F_BLOCKING;
        if (!(form == F_PERSISTENT && want == GPUCOLL_PATH_DELEGATED) && !unseen) {
            uint64_t d = after.forms[gform][want] - before.forms[gform][want];
            uint64_t dc = after.calls[s->coll][want] - before.calls[s->coll][want];
            TU_CHECK(d == 1 && dc == 1,
                     "%s: expected one %s %s call of %s, counters show %llu (%llu of it)", what,
                     gpucoll_form_name(gform), gpucoll_path_name(want), gpucoll_coll_name(s->coll),
                     (unsigned long long)d, (unsigned long long)dc);
        }
        /* Persistent starts on the accelerated path reuse the setup made at
         * init (gpucoll_plan_create): algorithm, buffers described. Pool
         * memory IPC cannot export is copied at each start instead. */
        if (form == F_PERSISTENT && want == GPUCOLL_PATH_ACCELERATED) {
            const uint64_t planned = after.planned_starts - before.planned_starts;
            const uint64_t expect = between_nodes || (tu.pool_memory && L.rank % 2 == 0) ? 0 : 1;
            TU_CHECK(planned == expect, "%s: %llu planned starts, expected %llu", what,
                     (unsigned long long)planned, (unsigned long long)expect);
        }
    }
    if (form == F_PERSISTENT) MPI_Request_free(&req);
    tu_buf_free(&hs);
    tu_buf_free(&hr);
    tu_buf_free(&ds);
    tu_buf_free(&dr);
}

/* Several nonblocking calls outstanding, completed in reverse order while
 * the device copies other data. mode M_DEVICE: every buffer on the device;
 * M_MIXED: odd ranks pass host memory, so the accelerated collectives are
 * declined and the device ranks start Open MPI's call late (after the later
 * calls), under the tag they reserved when the call started. */
static void run_outstanding(MPI_Comm world, int mode) {
    const gpucoll_coll_t colls[] = {GPUCOLL_COLL_ALLREDUCE,  GPUCOLL_COLL_ALLTOALLV,
                                    GPUCOLL_COLL_GATHER,     GPUCOLL_COLL_BCAST,
                                    GPUCOLL_COLL_ALLGATHERV, GPUCOLL_COLL_REDUCE_SCATTER_BLOCK,
                                    GPUCOLL_COLL_ALLREDUCE};
    enum { K = sizeof colls / sizeof colls[0] };
    spec_t s[K];
    layout_t L[K];
    tu_buf_t hs[K], hr[K], ds[K], dr[K];
    MPI_Request req[K], oreq;
    for (int k = 0; k < K; k++) {
        s[k] = (spec_t){
            .coll = colls[k], .count = 1000 + 17 * k, .root = k % tu.world_size, .comm = world};
        make_layout(&s[k], &L[k]);
        tu_buf_alloc(&hs[k], TU_HOST, L[k].sbytes, 8, 1);
        tu_buf_alloc(&hr[k], TU_HOST, L[k].rbytes, 8, 2);
        tu_buf_alloc(&ds[k], mem_of(mode, L[k].rank), L[k].sbytes, 8, 1);
        tu_buf_alloc(&dr[k], mem_of(mode, L[k].rank), L[k].rbytes, 8, 2);
        fill(&hs[k], L[k].rank, k);
        fill(&hr[k], L[k].rank, 9 + k);
        fill(&ds[k], L[k].rank, k);
        fill(&dr[k], L[k].rank, 9 + k);
        issue(&s[k], &L[k], F_NONBLOCKING, hs[k].ptr, hr[k].ptr, &oreq);
        MPI_Wait(&oreq, MPI_STATUS_IGNORE);
    }
    for (int k = 0; k < K; k++) {
        int rc = issue(&s[k], &L[k], F_NONBLOCKING, ds[k].ptr, dr[k].ptr, &req[k]);
        TU_CHECK(rc == MPI_SUCCESS, "outstanding %s: returned %d", gpucoll_coll_name(colls[k]), rc);
    }
    /* device work while the collectives are in flight */
    tu_buf_t a, b;
    tu_buf_alloc(&a, TU_DEVICE, 1 << 20, 0, 3);
    tu_buf_alloc(&b, TU_DEVICE, 1 << 20, 0, 4);
    fill(&a, L[0].rank, 1);
    for (int i = 0; i < 8; i++) gpucoll_memcpy(b.base, a.base, a.total);
    for (int k = K - 1; k >= 0; k--) wait_ok(&req[k], "outstanding");
    tu_buf_read(&b);
    TU_CHECK(memcmp(b.out, a.img, a.total) == 0, "outstanding: overlapped device copy wrong");
    for (int k = 0; k < K; k++) {
        tu_buf_read(&hr[k]);
        tu_buf_read(&dr[k]);
        TU_CHECK(memcmp(hr[k].out, dr[k].out, hr[k].total) == 0,
                 "outstanding %s (%s, completed in reverse order): receive buffer differs",
                 gpucoll_coll_name(colls[k]), mode_names[mode]);
        tu_buf_free(&hs[k]);
        tu_buf_free(&hr[k]);
        tu_buf_free(&ds[k]);
        tu_buf_free(&dr[k]);
    }
    tu_buf_free(&a);
    tu_buf_free(&b);
}

/* Persistent requests on device buffers outlive their communicator: freed
 * while inactive, then started once more and freed. */
static void run_comm_free(void) {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    spec_t s = {.coll = GPUCOLL_COLL_ALLREDUCE, .count = 4096, .comm = dup};
    spec_t g = {.coll = GPUCOLL_COLL_ALLTOALL, .count = 300, .comm = dup};
    layout_t L, G;
    make_layout(&s, &L);
    make_layout(&g, &G);
    tu_buf_t sb, rb, gs, gr;
    tu_buf_alloc(&sb, TU_DEVICE, L.sbytes, 0, 1);
    tu_buf_alloc(&rb, TU_DEVICE, L.rbytes, 0, 2);
    tu_buf_alloc(&gs, TU_DEVICE, G.sbytes, 0, 1);
    tu_buf_alloc(&gr, TU_DEVICE, G.rbytes, 0, 2);
    fill(&sb, L.rank, 0);
    fill(&gs, G.rank, 0);
    MPI_Request r1, r2;
    TU_CHECK(issue(&s, &L, F_PERSISTENT, sb.ptr, rb.ptr, &r1) == MPI_SUCCESS, "comm_free: init");
    TU_CHECK(issue(&g, &G, F_PERSISTENT, gs.ptr, gr.ptr, &r2) == MPI_SUCCESS, "comm_free: init");
    MPI_Start(&r1);
    wait_ok(&r1, "comm_free: first run");
    MPI_Comm_free(&dup); /* both requests inactive, not freed */
    MPI_Request_free(&r2);
    MPI_Start(&r1);
    wait_ok(&r1, "comm_free: run after MPI_Comm_free");
    tu_buf_read(&rb);
    int n = L.n, ok = 1;
    for (int i = 0; i < s.count && ok; i++) {
        int want = 0, got;
        for (int r = 0; r < n; r++) want += r * 1000 + i % 997;
        memcpy(&got, rb.out + 4 * (size_t)i, 4);
        ok = TU_CHECK(got == want, "comm_free: element %d is %d, want %d", i, got, want);
    }
    MPI_Request_free(&r1);

    /* A communicator with an accelerated path, freed with a nonblocking call
     * outstanding and a persistent request that the ranks free at different
     * points: rank 0 before a barrier on MPI_COMM_WORLD, the others after it.
     * The core's teardown must happen in MPI_Comm_free, not when the last
     * request lets the communicator go (rank 0 would wait there for peers
     * that wait for it in the barrier). */
    MPI_Comm dup2;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup2);
    s.comm = dup2;
    make_layout(&s, &L);
    MPI_Request p, nb;
    TU_CHECK(issue(&s, &L, F_BLOCKING, sb.ptr, rb.ptr, &p) == MPI_SUCCESS, "comm_free: allreduce");
    TU_CHECK(issue(&s, &L, F_PERSISTENT, sb.ptr, rb.ptr, &p) == MPI_SUCCESS, "comm_free: init");
    MPI_Start(&p);
    wait_ok(&p, "comm_free: persistent run");
    tu_buf_t nr;
    tu_buf_alloc(&nr, TU_DEVICE, L.rbytes, 0, 5);
    TU_CHECK(issue(&s, &L, F_NONBLOCKING, sb.ptr, nr.ptr, &nb) == MPI_SUCCESS,
             "comm_free: iallreduce");
    MPI_Comm_free(&dup2); /* the nonblocking call still outstanding */
    wait_ok(&nb, "comm_free: iallreduce completed after MPI_Comm_free");
    tu_buf_read(&nr);
    for (int i = 0, ok = 1; i < s.count && ok; i++) {
        int want = 0, got;
        for (int r = 0; r < n; r++) want += r * 1000 + i % 997;
        memcpy(&got, nr.out + 4 * (size_t)i, 4);
        ok = TU_CHECK(got == want, "comm_free: iallreduce element %d is %d, want %d", i, got, want);
    }
    if (L.rank == 0) MPI_Request_free(&p);
    MPI_Barrier(MPI_COMM_WORLD);
    if (L.rank != 0) MPI_Request_free(&p);
    tu_buf_free(&nr);
    tu_buf_free(&sb);
    tu_buf_free(&rb);
    tu_buf_free(&gs);
    tu_buf_free(&gr);
}

/* MPI_Exscan not in place: rank 0's receive buffer is not significant. A
 * device allocation of one int there (count 1000) must be neither checked,
 * nor read, nor written, in any form: every rank succeeds, the others get
 * the prefixes of the ranks before them (rank 0's data included). */
static void run_exscan_rank0_small_recvbuf(void) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    const spec_t s = {.coll = GPUCOLL_COLL_EXSCAN, .count = 1000, .comm = comm};
    layout_t L;
    make_layout(&s, &L);
    for (int form = F_BLOCKING; form < F_COUNT; form++) {
        char ctx[120];
        snprintf(ctx, sizeof ctx, "exscan %s, a 1-int device receive buffer on rank 0",
                 form_names[form]);
        tu_buf_t sb, rb;
        tu_buf_alloc(&sb, TU_DEVICE, L.sbytes, 0, 1);
        tu_buf_alloc(&rb, TU_DEVICE, L.rank == 0 ? sizeof(int) : L.rbytes, 0, 2);
        fill(&sb, L.rank, form);
        fill(&rb, L.rank, 50);
        MPI_Request req = MPI_REQUEST_NULL;
        int rc = issue(&s, &L, form, sb.ptr, rb.ptr, &req);
        TU_CHECK(rc == MPI_SUCCESS, "%s: the call returned %d", ctx, rc);
        if (form == F_PERSISTENT && req != MPI_REQUEST_NULL) {
            rc = MPI_Start(&req);
            TU_CHECK(rc == MPI_SUCCESS, "%s: MPI_Start returned %d", ctx, rc);
        }
        if (req != MPI_REQUEST_NULL) {
            rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
            TU_CHECK(rc == MPI_SUCCESS, "%s: MPI_Wait returned %d", ctx, rc);
            if (req != MPI_REQUEST_NULL) MPI_Request_free(&req);
        }
        tu_buf_read(&rb);
        if (L.rank == 0) {
            tu_buf_check_unchanged(&rb, 0, rb.total, "rank 0's receive buffer", ctx);
        } else {
            for (int i = 0; i < s.count; i++) { /* fill(): rank * 1000 + i % 997 + salt * 7 */
                const int want = 1000 * L.rank * (L.rank - 1) / 2 + L.rank * (i % 997 + form * 7);
                int got;
                memcpy(&got, rb.out + 4 * (size_t)i, 4);
                if (!TU_CHECK(got == want, "%s: element %d is %d, want %d", ctx, i, got, want))
                    break;
            }
        }
        tu_buf_free(&sb);
        tu_buf_free(&rb);
    }
    MPI_Comm_free(&comm);
}

/* Device buffers for an allreduce (int sum) of count on comm, the send side
 * filled with fill(rank, salt). */
static void allreduce_setup(spec_t* s, layout_t* L, tu_buf_t* a, tu_buf_t* b, MPI_Comm comm,
                            int count, int salt) {
    *s = (spec_t){.coll = GPUCOLL_COLL_ALLREDUCE, .count = count, .comm = comm};
    make_layout(s, L);
    tu_buf_alloc(a, TU_DEVICE, L->sbytes, 0, 1);
    tu_buf_alloc(b, TU_DEVICE, L->rbytes, 0, 2);
    fill(a, L->rank, salt);
}

/* The first int of b (every step-th) that is not the sum over the ranks of
 * fill(rank, salt), or -1; b is read back from the device first. */
static int allreduce_wrong(tu_buf_t* b, const layout_t* L, int count, int salt, int step) {
    tu_buf_read(b); /* fill(): rank * 1000 + i % 997 + salt * 7 at int i */
    for (int i = 0; i < count; i += step) {
        int got, want = 1000 * L->n * (L->n - 1) / 2 + L->n * (i % 997 + salt * 7);
        memcpy(&got, b->out + b->off + 4 * (size_t)i, 4);
        if (got != want) return i;
    }
    return -1;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    tu_init("test_forms");
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        int r = tu_parse_option(argc, argv, &i);
        if (r == 1) continue;
        if (strcmp(argv[i], "--quick") == 0) {
            quick = 1;
            continue;
        }
        if (strcmp(argv[i], "--between-nodes") == 0) {
            between_nodes = 1;
            continue;
        }
        if (tu.world_rank == 0) tu_usage_common();
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    tu_require_device_backend();
    {
        const char* pt = getenv("OMPI_MCA_coll_gpucoll_progress_thread");
        if (between_nodes && pt != NULL && (strcmp(pt, "off") == 0 || strcmp(pt, "0") == 0))
            nonblocking_accelerated = 0;
    }
    if (tu.world_size > 64) TU_DIE("at most 64 ranks");
    MPI_Type_vector(2, 1, 2, MPI_INT, &strided_int); /* int, hole, int */
    MPI_Datatype tmp = strided_int;
    MPI_Type_create_resized(tmp, 0, 4 * (MPI_Aint)sizeof(int), &strided_int); /* hole */
    MPI_Type_free(&tmp);
    MPI_Type_commit(&strided_int);

    /* The accelerated path of a communicator is set up (collectively) by its
     * first blocking call of the accelerated set, or by the first MPI_Barrier
     * after a nonblocking call of that set, never by a nonblocking call
     * itself: before that, nonblocking calls are staged. how 0: a blocking
     * allreduce on host memory sets it up; 1: a barrier does (OSU's osu_i*
     * benchmarks make no blocking call of the set); 2: a barrier before any
     * call of the set does not, the later blocking call does. */
    for (int how = 0; how < 3; how++) {
        MPI_Comm fresh;
        MPI_Comm_dup(MPI_COMM_WORLD, &fresh);
        spec_t s;
        layout_t L;
        tu_buf_t a, b;
        allreduce_setup(&s, &L, &a, &b, fresh, 64, 0);
        if (how == 2) MPI_Barrier(fresh);
        for (int k = 0; k < 2; k++) {
            gpucoll_counters_t before, after;
            tu_counters(&before);
            MPI_Request req;
            issue(&s, &L, F_NONBLOCKING, a.ptr, b.ptr, &req);
            wait_ok(&req, "first nonblocking call");
            tu_counters(&after);
            /* One rank: Open MPI's MPI_Barrier returns without calling any
             * coll module. */
            const int set_up = k == 1 && !(how == 1 && L.n == 1) && nonblocking_accelerated;
            const gpucoll_path_t want = set_up ? GPUCOLL_PATH_ACCELERATED : GPUCOLL_PATH_STAGED;
            TU_CHECK(after.forms[GPUCOLL_FORM_NONBLOCKING][want] ==
                         before.forms[GPUCOLL_FORM_NONBLOCKING][want] + 1,
                     "nonblocking allreduce %s the setup (by %s): expected %s",
                     k == 0 ? "before" : "after", how == 1 ? "a barrier" : "a blocking call",
                     gpucoll_path_name(want));
            if (k == 0) { /* sets the accelerated path up */
                if (how == 1) {
                    MPI_Barrier(fresh);
                } else {
                    int one = 1, sum = 0;
                    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, fresh);
                }
            }
        }
        const int bad = allreduce_wrong(&b, &L, s.count, 0, 1);
        TU_CHECK(bad < 0, "allreduce after the setup (how %d): int %d is wrong", how, bad);
        tu_buf_free(&a);
        tu_buf_free(&b);
        MPI_Comm_free(&fresh);
    }
    {
        int one = 1, sum = 0; /* the same for MPI_COMM_WORLD, before the cases below */
        MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }

    /* The progress thread (coll_gpucoll_progress_thread on; forms.sh sets
     * it for some runs): an accelerated MPI_Iallreduce completes while no
     * rank is inside MPI (the result is read from the device before
     * MPI_Wait, which only this test may do). */
    {
        const char* pt = getenv("OMPI_MCA_coll_gpucoll_progress_thread");
        const int agent = pt != NULL && (strcmp(pt, "on") == 0 || strcmp(pt, "1") == 0);
        spec_t s;
        layout_t L;
        tu_buf_t a, b;
        allreduce_setup(&s, &L, &a, &b, MPI_COMM_WORLD, 70000, 3);
        MPI_Barrier(MPI_COMM_WORLD);
        gpucoll_counters_t before, after;
        tu_counters(&before);
        MPI_Request req;
        issue(&s, &L, F_NONBLOCKING, a.ptr, b.ptr, &req);
        int done = 0;
        for (int ms = 0; ms < 10000 && !done && agent && L.n > 1; ms++) {
            usleep(1000); /* no MPI call: only the progress thread advances it */
            done = allreduce_wrong(&b, &L, s.count, 3, 997) < 0;
        }
        if (agent && L.n > 1)
            TU_CHECK(done,
                     "the progress thread did not complete an MPI_Iallreduce in 10 s "
                     "without MPI calls");
        wait_ok(&req, "MPI_Iallreduce advanced by the progress thread");
        tu_counters(&after);
        const int bad = allreduce_wrong(&b, &L, s.count, 3, 1);
        TU_CHECK(bad < 0, "MPI_Iallreduce for the progress thread: int %d is wrong", bad);
        TU_CHECK(after.forms[GPUCOLL_FORM_NONBLOCKING][GPUCOLL_PATH_ACCELERATED] ==
                     before.forms[GPUCOLL_FORM_NONBLOCKING][GPUCOLL_PATH_ACCELERATED] +
                         (uint64_t)nonblocking_accelerated,
                 "MPI_Iallreduce for the progress thread: %s",
                 nonblocking_accelerated ? "not accelerated" : "accelerated, expected staged");
        tu_buf_free(&a);
        tu_buf_free(&b);
    }

    /* Nonblocking calls on two communicators, started in opposite orders on
     * even and odd ranks (legal MPI), completed with one MPI_Waitall: each
     * rank's progress may run one communicator's call while a peer runs the
     * other's. The progress threads (on or lazy; auto is one of them) keep
     * them from waiting for each other. Skipped with the threads off, where
     * this can hang (test_intra's IntraNonblocking hangs without them; here,
     * on emu, the calls happened to end inside the initiating calls each
     * time it was tried). */
    {
        const char* pt = getenv("OMPI_MCA_coll_gpucoll_progress_thread");
        const int threads = pt == NULL || (strcmp(pt, "off") != 0 && strcmp(pt, "0") != 0);
        MPI_Comm two[2];
        spec_t s[2];
        layout_t L[2];
        tu_buf_t a[2], b[2];
        for (int c = 0; c < 2 && threads; c++) {
            MPI_Comm_dup(MPI_COMM_WORLD, &two[c]);
            int one = 1, sum = 0; /* sets the accelerated path up */
            MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, two[c]);
            allreduce_setup(&s[c], &L[c], &a[c], &b[c], two[c], 70000, 5 + c);
        }
        for (int iter = 0; iter < 3 && threads; iter++) {
            MPI_Request req[2];
            for (int k = 0; k < 2; k++) {
                const int c = tu.world_rank % 2 == 0 ? k : 1 - k;
                issue(&s[c], &L[c], F_NONBLOCKING, a[c].ptr, b[c].ptr, &req[c]);
            }
            const int rc = MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
            TU_CHECK(rc == MPI_SUCCESS, "opposite orders: MPI_Waitall returned %d", rc);
            for (int c = 0; c < 2; c++) {
                const int bad = allreduce_wrong(&b[c], &L[c], s[c].count, 5 + c, 1);
                TU_CHECK(bad < 0, "opposite orders, communicator %d: int %d is wrong", c, bad);
            }
        }
        for (int c = 0; c < 2 && threads; c++) {
            tu_buf_free(&a[c]);
            tu_buf_free(&b[c]);
            MPI_Comm_free(&two[c]);
        }
    }

    MPI_Comm ring; /* left and right neighbors (itself twice on one rank) */
    {
        int dims[1] = {tu.world_size}, periods[1] = {1};
        MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
    }
    run_exscan_rank0_small_recvbuf();

    const int counts[] = {1, 1000, 70000};
    const int ncounts = quick ? 2 : 3;
    for (int c = 0; c < GPUCOLL_COLL_COUNT; c++) {
        if (c == GPUCOLL_COLL_REDUCE_LOCAL) continue;
        const gpucoll_coll_t coll = (gpucoll_coll_t)c;
        const int accelerated = c < GPUCOLL_COLL_REDUCE_LOCAL;
        for (int form = accelerated ? F_NONBLOCKING : F_BLOCKING; form < F_COUNT; form++)
            for (int mode = 0; mode < M_COUNT; mode++)
                for (int k = 0; k < ncounts; k++)
                    for (int variant = 0; variant < 3; variant++) {
                        /* 0: plain; 1: in place (where the collective has it);
                         * 2: strided datatype, root 1 */
                        if (variant == 1 && !has_in_place(coll)) continue;
                        if (variant == 2 && is_reduction(coll)) continue;
                        spec_t s = {.coll = coll,
                                    .count = counts[k],
                                    .root = variant == 2 ? 1 % tu.world_size : 0,
                                    .in_place = variant == 1,
                                    .strided = variant == 2,
                                    .comm = is_neighbor(coll) ? ring : MPI_COMM_WORLD};
                        run_case(&s, form, mode, form == F_PERSISTENT ? 3 : 1);
                    }
    }
    /* persistent: 100 starts, new inputs before each */
    {
        const gpucoll_coll_t colls[] = {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_COLL_ALLTOALLV,
                                        GPUCOLL_COLL_GATHER};
        for (int k = 0; k < 3; k++) {
            spec_t s = {.coll = colls[k], .count = 513, .comm = MPI_COMM_WORLD};
            run_case(&s, F_PERSISTENT, M_DEVICE, quick ? 20 : 100);
        }
    }
    run_outstanding(MPI_COMM_WORLD, M_DEVICE);
    run_outstanding(MPI_COMM_WORLD, M_MIXED);
    run_comm_free();
    MPI_Comm_free(&ring);
    MPI_Type_free(&strided_int);
    int rc = tu_finalize();
    MPI_Finalize();
    return rc;
}
