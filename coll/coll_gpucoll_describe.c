/*
 * coll_gpucoll_describe.c - which bytes of which buffer each collective
 * reads and writes on this rank, as the staged path needs them: per buffer
 * significant here, the span to stage (true extents, any displacements and
 * datatypes), whether it is read (copied in) and the part written (copied
 * back). Roots, MPI_IN_PLACE and intercommunicators (MPI_ROOT,
 * MPI_PROC_NULL, the remote group's blocks) follow the standard.
 *
 * Each describe_<coll> fills a staging description and returns
 * MCA_COLL_GPUCOLL_DESCRIBE_STAGE when a significant buffer of this rank is
 * device memory, _HOST when none is (delegate untouched), or _ERROR (refuse:
 * the MPI error code in c->error).
 */
#include <string.h>

#include "coll_gpucoll.h"
#include "ompi/mca/topo/base/base.h"

/* ---------------------------------------------------------------------------
 * Spans: the union of blocks [disp + span(count, dtype)]
 * ------------------------------------------------------------------------- */

typedef struct gpucoll_extent {
    ptrdiff_t lo, hi;
    bool any;
    bool gaps;                        /* the blocks may leave bytes of [lo, hi) unwritten */
    mca_coll_gpucoll_blocks_t blocks; /* what [lo, hi) is made of */
} gpucoll_extent_t;

static void extent_add(gpucoll_extent_t* e, ptrdiff_t disp, size_t count,
                       const struct ompi_datatype_t* dtype) {
    ptrdiff_t lo;
    size_t bytes;
    mca_coll_gpucoll_span(count, dtype, &lo, &bytes);
    if (0 == bytes) return;
    lo += disp;
    ptrdiff_t hi = lo + (ptrdiff_t)bytes;
    if (!e->any) {
        e->lo = lo;
        e->hi = hi;
        e->any = true;
        e->gaps = !mca_coll_gpucoll_fills_span(count, dtype);
        return;
    }
    e->gaps = true; /* several blocks: copied back block by block (tiled ones merge) */
    if (lo < e->lo) e->lo = lo;
    if (hi > e->hi) e->hi = hi;
}

static gpucoll_extent_t extent_block(size_t count, struct ompi_datatype_t* dtype) {
    gpucoll_extent_t e = {.blocks = {.n = 1, .count = count, .dtype = dtype}};
    extent_add(&e, 0, count, dtype);
    return e;
}

static ptrdiff_t dtype_extent(const struct ompi_datatype_t* dtype) {
    ptrdiff_t lb = 0, extent = 0;
    ompi_datatype_get_extent(dtype, &lb, &extent);
    return extent;
}

/* n blocks of counts[i] elements at displs[i] x extent (the v-collectives). */
static gpucoll_extent_t extent_v(int n, mca_coll_gpucoll_counts_t counts,
                                 mca_coll_gpucoll_displs_t displs, struct ompi_datatype_t* dtype) {
    const ptrdiff_t extent = dtype_extent(dtype);
    gpucoll_extent_t e = {
        .blocks = {.n = n, .counts = counts, .displs = displs, .unit = extent, .dtype = dtype}};
    for (int i = 0; i < n; ++i) {
        const size_t k = mca_coll_gpucoll_count_at(counts, (size_t)i);
        if (k > 0) extent_add(&e, mca_coll_gpucoll_displ_at(displs, (size_t)i) * extent, k, dtype);
    }
    return e;
}

/* alltoallw: displacements in bytes, a datatype per block. */
static gpucoll_extent_t extent_w(int n, mca_coll_gpucoll_counts_t counts,
                                 mca_coll_gpucoll_displs_t displs,
                                 struct ompi_datatype_t* const* dtypes) {
    gpucoll_extent_t e = {
        .blocks = {.n = n, .counts = counts, .displs = displs, .unit = 1, .dtypes = dtypes}};
    for (int i = 0; i < n; ++i) {
        const size_t k = mca_coll_gpucoll_count_at(counts, (size_t)i);
        if (k > 0) extent_add(&e, mca_coll_gpucoll_displ_at(displs, (size_t)i), k, dtypes[i]);
    }
    return e;
}

static gpucoll_extent_t extent_w_aint(int n, mca_coll_gpucoll_counts_t counts,
                                      mca_coll_gpucoll_adispls_t displs,
                                      struct ompi_datatype_t* const* dtypes) {
    gpucoll_extent_t e = {
        .blocks = {
            .n = n, .counts = counts, .adispls = displs, .has_adispls = true, .dtypes = dtypes}};
    for (int i = 0; i < n; ++i) {
        const size_t k = mca_coll_gpucoll_count_at(counts, (size_t)i);
        if (k > 0) extent_add(&e, mca_coll_gpucoll_adispl_at(displs, (size_t)i), k, dtypes[i]);
    }
    return e;
}

/* ---------------------------------------------------------------------------
 * Buffers
 * ------------------------------------------------------------------------- */

/* Buffer i: user, staged over e; read: the collective reads it; written:
 * the part it writes (NULL: nothing). A written span with gaps is copied
 * back block by block (the gaps are the application's, which may write
 * them during the call), so it need not be copied in. */
static bool set_buf(mca_coll_gpucoll_staging_t* c, int i, const void* user,
                    const gpucoll_extent_t* e, bool read, const gpucoll_extent_t* written) {
    mca_coll_gpucoll_sbuf_t* s = &c->buf[i];
    *s = (mca_coll_gpucoll_sbuf_t){.user = (char*)user, .host = (char*)user};
    /* MPI_BOTTOM: the datatype's addresses are absolute, the span's first
     * byte tells where the data lie (or its last, which staging refuses) */
    if (NULL != user) {
        s->device = mca_coll_gpucoll_is_device(user);
    } else if (e->any) {
        s->device = mca_coll_gpucoll_is_device(
            mca_coll_gpucoll_bottom_span(e->lo, (size_t)(e->hi - e->lo)));
    }
    if (!s->device) return false;
    if (e->any) {
        s->lo = e->lo;
        s->bytes = (size_t)(e->hi - e->lo);
    }
    if (NULL != written && written->any) {
        s->out_lo = written->lo;
        s->out_bytes = (size_t)(written->hi - written->lo);
        s->out_exact = written->gaps;
        s->out_blocks = written->blocks;
    }
    s->copy_in = read || (NULL != written && (written->lo != e->lo || written->hi != e->hi));
    return true;
}

static void begin(mca_coll_gpucoll_staging_t* c, gpucoll_coll_t coll) {
    *c = (mca_coll_gpucoll_staging_t){.coll = coll};
}

/* Before its extent is known: NULL may be MPI_BOTTOM, whose datatype holds
 * device addresses. */
static bool maybe_device(const void* p) { return NULL == p || mca_coll_gpucoll_is_device(p); }

/* A buffer that is not significant on this rank: host pointers pass
 * through, a device pointer becomes NULL (the host module must never get
 * one, even where it should not look). */
static void pass(mca_coll_gpucoll_staging_t* c, int i, const void* user) {
    if (mca_coll_gpucoll_is_device(user)) user = NULL;
    c->buf[i] = (mca_coll_gpucoll_sbuf_t){.user = (char*)user, .host = (char*)user};
}

static int remote_or_local_size(struct ompi_communicator_t* comm) {
    return OMPI_COMM_IS_INTER(comm) ? ompi_comm_remote_size(comm) : ompi_comm_size(comm);
}

static bool is_root(int root, struct ompi_communicator_t* comm) {
    return OMPI_COMM_IS_INTER(comm) ? MPI_ROOT == root : ompi_comm_rank(comm) == root;
}

static int refuse(mca_coll_gpucoll_staging_t* c, int error) {
    c->error = error;
    return MCA_COLL_GPUCOLL_DESCRIBE_ERROR;
}

/* Neighborhood degrees; MCA_COLL_GPUCOLL_DESCRIBE_ERROR without a topology. */
static int neighbors(mca_coll_gpucoll_staging_t* c, struct ompi_communicator_t* comm, int* indegree,
                     int* outdegree) {
    *indegree = *outdegree = 0;
    if (OMPI_SUCCESS != mca_topo_base_neighbor_count(comm, indegree, outdegree))
        return refuse(c, MPI_ERR_TOPOLOGY);
    return 0;
}

/* Buffer 0: the send buffer of count elements of sdtype, read. With
 * MPI_IN_PLACE count and sdtype are ignored (they may be garbage): the
 * datatype is not looked at. */
static void send_block(mca_coll_gpucoll_staging_t* c, const void* sbuf, size_t count,
                       struct ompi_datatype_t* sdtype) {
    if (MPI_IN_PLACE == sbuf) {
        pass(c, 0, sbuf);
        return;
    }
    const gpucoll_extent_t s = extent_block(count, sdtype);
    set_buf(c, 0, sbuf, &s, true, NULL);
}

#define DONE(c)                                                                         \
    return ((c)->buf[0].device || (c)->buf[1].device) ? MCA_COLL_GPUCOLL_DESCRIBE_STAGE \
                                                      : MCA_COLL_GPUCOLL_DESCRIBE_HOST

/* ---------------------------------------------------------------------------
 * The collectives of the accelerated path (their nonblocking and persistent
 * forms are staged)
 * ------------------------------------------------------------------------- */

int mca_coll_gpucoll_describe_allreduce(mca_coll_gpucoll_staging_t* c, const void* sbuf, void* rbuf,
                                        mca_coll_gpucoll_count_t count,
                                        struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                        struct ompi_communicator_t* comm) {
    (void)op;
    (void)comm;
    begin(c, GPUCOLL_COLL_ALLREDUCE);
    const gpucoll_extent_t e = extent_block((size_t)count, dtype);
    set_buf(c, 0, sbuf, &e, true, NULL);
    set_buf(c, 1, rbuf, &e, MPI_IN_PLACE == sbuf, &e);
    DONE(c);
}

int mca_coll_gpucoll_describe_bcast(mca_coll_gpucoll_staging_t* c, void* buf,
                                    mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                                    int root, struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_BCAST);
    const bool at_root = is_root(root, comm);
    const bool receives = OMPI_COMM_IS_INTER(comm) ? root >= 0 : !at_root;
    const gpucoll_extent_t e = extent_block((size_t)count, dtype);
    if (at_root || receives) {
        set_buf(c, 0, buf, &e, at_root, receives ? &e : NULL);
    } else {
        pass(c, 0, buf);
    }
    pass(c, 1, NULL);
    DONE(c);
}

int mca_coll_gpucoll_describe_allgather(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                        mca_coll_gpucoll_count_t scount,
                                        struct ompi_datatype_t* sdtype, void* rbuf,
                                        mca_coll_gpucoll_count_t rcount,
                                        struct ompi_datatype_t* rdtype,
                                        struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_ALLGATHER);
    const bool in_place = MPI_IN_PLACE == sbuf;
    const gpucoll_extent_t r =
        extent_block((size_t)remote_or_local_size(comm) * (size_t)rcount, rdtype);
    send_block(c, sbuf, (size_t)scount, sdtype);
    set_buf(c, 1, rbuf, &r, in_place, &r);
    DONE(c);
}

int mca_coll_gpucoll_describe_reduce_scatter(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                             void* rbuf, mca_coll_gpucoll_counts_t rcounts,
                                             struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                             struct ompi_communicator_t* comm) {
    (void)op;
    begin(c, GPUCOLL_COLL_REDUCE_SCATTER);
    size_t total = 0;
    for (int i = 0, n = ompi_comm_size(comm); i < n; ++i)
        total += mca_coll_gpucoll_count_at(rcounts, (size_t)i);
    const size_t mine = mca_coll_gpucoll_count_at(rcounts, (size_t)ompi_comm_rank(comm));
    const bool in_place = MPI_IN_PLACE == sbuf;
    const gpucoll_extent_t all = extent_block(total, dtype);
    const gpucoll_extent_t out = extent_block(mine, dtype);
    set_buf(c, 0, sbuf, &all, true, NULL);
    set_buf(c, 1, rbuf, in_place ? &all : &out, in_place, &out);
    DONE(c);
}

/* Intercommunicators (no MPI_IN_PLACE there): each rank sends the vector its
 * group reduces for the other group, as long as the sum of its own group's
 * counts (the standard makes both groups' sums equal; Open MPI's basic and
 * libnbc algorithms read that many elements), and receives its own count. */
int mca_coll_gpucoll_describe_reduce_scatter_block(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                                   void* rbuf, mca_coll_gpucoll_count_t rcount,
                                                   struct ompi_datatype_t* dtype,
                                                   struct ompi_op_t* op,
                                                   struct ompi_communicator_t* comm) {
    (void)op;
    begin(c, GPUCOLL_COLL_REDUCE_SCATTER_BLOCK);
    const bool in_place = MPI_IN_PLACE == sbuf;
    const gpucoll_extent_t all = extent_block((size_t)ompi_comm_size(comm) * (size_t)rcount, dtype);
    const gpucoll_extent_t out = extent_block((size_t)rcount, dtype);
    set_buf(c, 0, sbuf, &all, true, NULL);
    set_buf(c, 1, rbuf, in_place ? &all : &out, in_place, &out);
    DONE(c);
}

int mca_coll_gpucoll_describe_reduce(mca_coll_gpucoll_staging_t* c, const void* sbuf, void* rbuf,
                                     mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                                     struct ompi_op_t* op, int root,
                                     struct ompi_communicator_t* comm) {
    (void)op;
    begin(c, GPUCOLL_COLL_REDUCE);
    const bool at_root = is_root(root, comm);
    const bool sends = OMPI_COMM_IS_INTER(comm) ? root >= 0 : true;
    const gpucoll_extent_t e = extent_block((size_t)count, dtype);
    if (sends) {
        set_buf(c, 0, sbuf, &e, true, NULL);
    } else {
        pass(c, 0, sbuf);
    }
    if (at_root) {
        set_buf(c, 1, rbuf, &e, MPI_IN_PLACE == sbuf, &e);
    } else {
        pass(c, 1, rbuf); /* not significant: never dereferenced */
    }
    DONE(c);
}

/* reduce_local: inoutbuf = inbuf op inoutbuf. */
int mca_coll_gpucoll_describe_reduce_local(mca_coll_gpucoll_staging_t* c, const void* inbuf,
                                           void* inoutbuf, mca_coll_gpucoll_count_t count,
                                           struct ompi_datatype_t* dtype) {
    begin(c, GPUCOLL_COLL_REDUCE_LOCAL);
    const gpucoll_extent_t e = extent_block((size_t)count, dtype);
    set_buf(c, 0, inbuf, &e, true, NULL);
    set_buf(c, 1, inoutbuf, &e, true, &e);
    DONE(c);
}

/* ---------------------------------------------------------------------------
 * Collectives only the staged path serves
 * ------------------------------------------------------------------------- */

int mca_coll_gpucoll_describe_allgatherv(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                         mca_coll_gpucoll_count_t scount,
                                         struct ompi_datatype_t* sdtype, void* rbuf,
                                         mca_coll_gpucoll_counts_t rcounts,
                                         mca_coll_gpucoll_displs_t displs,
                                         struct ompi_datatype_t* rdtype,
                                         struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_ALLGATHERV);
    if (!maybe_device(sbuf) && !maybe_device(rbuf)) return MCA_COLL_GPUCOLL_DESCRIBE_HOST;
    const bool in_place = MPI_IN_PLACE == sbuf;
    const gpucoll_extent_t r = extent_v(remote_or_local_size(comm), rcounts, displs, rdtype);
    send_block(c, sbuf, (size_t)scount, sdtype);
    set_buf(c, 1, rbuf, &r, in_place, &r);
    DONE(c);
}

int mca_coll_gpucoll_describe_alltoall(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                       mca_coll_gpucoll_count_t scount,
                                       struct ompi_datatype_t* sdtype, void* rbuf,
                                       mca_coll_gpucoll_count_t rcount,
                                       struct ompi_datatype_t* rdtype,
                                       struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_ALLTOALL);
    const size_t n = (size_t)remote_or_local_size(comm);
    const bool in_place = MPI_IN_PLACE == sbuf;
    const gpucoll_extent_t r = extent_block(n * (size_t)rcount, rdtype);
    send_block(c, sbuf, n * (size_t)scount, sdtype);
    set_buf(c, 1, rbuf, &r, in_place, &r);
    DONE(c);
}

int mca_coll_gpucoll_describe_alltoallv(
    mca_coll_gpucoll_staging_t* c, const void* sbuf, mca_coll_gpucoll_counts_t scounts,
    mca_coll_gpucoll_displs_t sdispls, struct ompi_datatype_t* sdtype, void* rbuf,
    mca_coll_gpucoll_counts_t rcounts, mca_coll_gpucoll_displs_t rdispls,
    struct ompi_datatype_t* rdtype, struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_ALLTOALLV);
    if (!maybe_device(sbuf) && !maybe_device(rbuf)) return MCA_COLL_GPUCOLL_DESCRIBE_HOST;
    const int n = remote_or_local_size(comm);
    const bool in_place = MPI_IN_PLACE == sbuf;
    const gpucoll_extent_t r = extent_v(n, rcounts, rdispls, rdtype);
    if (in_place) {
        pass(c, 0, sbuf);
    } else {
        const gpucoll_extent_t s = extent_v(n, scounts, sdispls, sdtype);
        set_buf(c, 0, sbuf, &s, true, NULL);
    }
    set_buf(c, 1, rbuf, &r, in_place, &r);
    DONE(c);
}

int mca_coll_gpucoll_describe_alltoallw(
    mca_coll_gpucoll_staging_t* c, const void* sbuf, mca_coll_gpucoll_counts_t scounts,
    mca_coll_gpucoll_displs_t sdispls, struct ompi_datatype_t* const* sdtypes, void* rbuf,
    mca_coll_gpucoll_counts_t rcounts, mca_coll_gpucoll_displs_t rdispls,
    struct ompi_datatype_t* const* rdtypes, struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_ALLTOALLW);
    if (!maybe_device(sbuf) && !maybe_device(rbuf)) return MCA_COLL_GPUCOLL_DESCRIBE_HOST;
    const int n = remote_or_local_size(comm);
    const bool in_place = MPI_IN_PLACE == sbuf;
    const gpucoll_extent_t r = extent_w(n, rcounts, rdispls, rdtypes);
    if (in_place) {
        pass(c, 0, sbuf);
    } else {
        const gpucoll_extent_t s = extent_w(n, scounts, sdispls, sdtypes);
        set_buf(c, 0, sbuf, &s, true, NULL);
    }
    set_buf(c, 1, rbuf, &r, in_place, &r);
    DONE(c);
}

/* gather(v): every rank but MPI_PROC_NULL sends (the root too, unless in
 * place); the root receives n blocks. */
static int describe_gather_common(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                  mca_coll_gpucoll_count_t scount, struct ompi_datatype_t* sdtype,
                                  void* rbuf, const gpucoll_extent_t* r, int root,
                                  struct ompi_communicator_t* comm) {
    const bool at_root = is_root(root, comm);
    const bool in_place = MPI_IN_PLACE == sbuf;
    const bool sends = OMPI_COMM_IS_INTER(comm) ? root >= 0 : !(at_root && in_place);
    if (sends) {
        const gpucoll_extent_t s = extent_block((size_t)scount, sdtype);
        set_buf(c, 0, sbuf, &s, true, NULL);
    } else {
        pass(c, 0, sbuf);
    }
    if (at_root) {
        set_buf(c, 1, rbuf, r, in_place, r);
    } else {
        pass(c, 1, rbuf);
    }
    DONE(c);
}

int mca_coll_gpucoll_describe_gather(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                     mca_coll_gpucoll_count_t scount,
                                     struct ompi_datatype_t* sdtype, void* rbuf,
                                     mca_coll_gpucoll_count_t rcount,
                                     struct ompi_datatype_t* rdtype, int root,
                                     struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_GATHER);
    gpucoll_extent_t r = {0};
    if (is_root(root, comm))
        r = extent_block((size_t)remote_or_local_size(comm) * (size_t)rcount, rdtype);
    return describe_gather_common(c, sbuf, scount, sdtype, rbuf, &r, root, comm);
}

int mca_coll_gpucoll_describe_gatherv(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                      mca_coll_gpucoll_count_t scount,
                                      struct ompi_datatype_t* sdtype, void* rbuf,
                                      mca_coll_gpucoll_counts_t rcounts,
                                      mca_coll_gpucoll_displs_t displs,
                                      struct ompi_datatype_t* rdtype, int root,
                                      struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_GATHERV);
    gpucoll_extent_t r = {0};
    if (is_root(root, comm) && maybe_device(rbuf))
        r = extent_v(remote_or_local_size(comm), rcounts, displs, rdtype);
    return describe_gather_common(c, sbuf, scount, sdtype, rbuf, &r, root, comm);
}

/* scatter(v): the root sends n blocks; every rank but MPI_PROC_NULL
 * receives (the root too, unless in place). */
static int describe_scatter_common(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                   const gpucoll_extent_t* s, void* rbuf,
                                   mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* rdtype,
                                   int root, struct ompi_communicator_t* comm) {
    const bool at_root = is_root(root, comm);
    const bool in_place = MPI_IN_PLACE == rbuf;
    const bool receives = OMPI_COMM_IS_INTER(comm) ? root >= 0 : !(at_root && in_place);
    if (at_root) {
        set_buf(c, 0, sbuf, s, true, NULL);
    } else {
        pass(c, 0, sbuf);
    }
    if (receives) {
        const gpucoll_extent_t r = extent_block((size_t)rcount, rdtype);
        set_buf(c, 1, rbuf, &r, false, &r);
    } else {
        pass(c, 1, rbuf);
    }
    DONE(c);
}

int mca_coll_gpucoll_describe_scatter(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                      mca_coll_gpucoll_count_t scount,
                                      struct ompi_datatype_t* sdtype, void* rbuf,
                                      mca_coll_gpucoll_count_t rcount,
                                      struct ompi_datatype_t* rdtype, int root,
                                      struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_SCATTER);
    gpucoll_extent_t s = {0};
    if (is_root(root, comm))
        s = extent_block((size_t)remote_or_local_size(comm) * (size_t)scount, sdtype);
    return describe_scatter_common(c, sbuf, &s, rbuf, rcount, rdtype, root, comm);
}

int mca_coll_gpucoll_describe_scatterv(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                       mca_coll_gpucoll_counts_t scounts,
                                       mca_coll_gpucoll_displs_t displs,
                                       struct ompi_datatype_t* sdtype, void* rbuf,
                                       mca_coll_gpucoll_count_t rcount,
                                       struct ompi_datatype_t* rdtype, int root,
                                       struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_SCATTERV);
    gpucoll_extent_t s = {0};
    if (is_root(root, comm) && maybe_device(sbuf))
        s = extent_v(remote_or_local_size(comm), scounts, displs, sdtype);
    return describe_scatter_common(c, sbuf, &s, rbuf, rcount, rdtype, root, comm);
}

int mca_coll_gpucoll_describe_scan(mca_coll_gpucoll_staging_t* c, const void* sbuf, void* rbuf,
                                   mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                                   struct ompi_op_t* op, struct ompi_communicator_t* comm) {
    (void)op;
    (void)comm;
    begin(c, GPUCOLL_COLL_SCAN);
    const gpucoll_extent_t e = extent_block((size_t)count, dtype);
    set_buf(c, 0, sbuf, &e, true, NULL);
    set_buf(c, 1, rbuf, &e, MPI_IN_PLACE == sbuf, &e);
    DONE(c);
}

int mca_coll_gpucoll_describe_exscan(mca_coll_gpucoll_staging_t* c, const void* sbuf, void* rbuf,
                                     mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype,
                                     struct ompi_op_t* op, struct ompi_communicator_t* comm) {
    (void)op;
    begin(c, GPUCOLL_COLL_EXSCAN);
    const bool first = 0 == ompi_comm_rank(comm);
    const bool in_place = MPI_IN_PLACE == sbuf;
    const gpucoll_extent_t e = extent_block((size_t)count, dtype);
    set_buf(c, 0, sbuf, &e, true, NULL);
    if (!first) {
        set_buf(c, 1, rbuf, &e, in_place, &e);
    } else if (in_place) { /* rank 0's input; undefined after exscan: left as it was */
        set_buf(c, 1, rbuf, &e, true, NULL);
    } else { /* not significant at rank 0: neither checked nor copied (may be too small) */
        pass(c, 1, rbuf);
    }
    DONE(c);
}

/* Neighborhood collectives: indegree receive blocks, outdegree send blocks.
 * A neighbor that is MPI_PROC_NULL (Cartesian borders) leaves its block as
 * it was, so receive buffers are always copied in. */
int mca_coll_gpucoll_describe_neighbor_allgather(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                                 mca_coll_gpucoll_count_t scount,
                                                 struct ompi_datatype_t* sdtype, void* rbuf,
                                                 mca_coll_gpucoll_count_t rcount,
                                                 struct ompi_datatype_t* rdtype,
                                                 struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_NEIGHBOR_ALLGATHER);
    if (!maybe_device(sbuf) && !maybe_device(rbuf)) return MCA_COLL_GPUCOLL_DESCRIBE_HOST;
    int in = 0, out = 0;
    if (0 != neighbors(c, comm, &in, &out)) return MCA_COLL_GPUCOLL_DESCRIBE_ERROR;
    const gpucoll_extent_t s = extent_block((size_t)scount, sdtype);
    const gpucoll_extent_t r = extent_block((size_t)in * (size_t)rcount, rdtype);
    set_buf(c, 0, sbuf, &s, true, NULL);
    set_buf(c, 1, rbuf, &r, true, &r);
    DONE(c);
}

int mca_coll_gpucoll_describe_neighbor_allgatherv(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                                  mca_coll_gpucoll_count_t scount,
                                                  struct ompi_datatype_t* sdtype, void* rbuf,
                                                  mca_coll_gpucoll_counts_t rcounts,
                                                  mca_coll_gpucoll_displs_t displs,
                                                  struct ompi_datatype_t* rdtype,
                                                  struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_NEIGHBOR_ALLGATHERV);
    if (!maybe_device(sbuf) && !maybe_device(rbuf)) return MCA_COLL_GPUCOLL_DESCRIBE_HOST;
    int in = 0, out = 0;
    if (0 != neighbors(c, comm, &in, &out)) return MCA_COLL_GPUCOLL_DESCRIBE_ERROR;
    const gpucoll_extent_t s = extent_block((size_t)scount, sdtype);
    const gpucoll_extent_t r = extent_v(in, rcounts, displs, rdtype);
    set_buf(c, 0, sbuf, &s, true, NULL);
    set_buf(c, 1, rbuf, &r, true, &r);
    DONE(c);
}

int mca_coll_gpucoll_describe_neighbor_alltoall(mca_coll_gpucoll_staging_t* c, const void* sbuf,
                                                mca_coll_gpucoll_count_t scount,
                                                struct ompi_datatype_t* sdtype, void* rbuf,
                                                mca_coll_gpucoll_count_t rcount,
                                                struct ompi_datatype_t* rdtype,
                                                struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_NEIGHBOR_ALLTOALL);
    if (!maybe_device(sbuf) && !maybe_device(rbuf)) return MCA_COLL_GPUCOLL_DESCRIBE_HOST;
    int in = 0, out = 0;
    if (0 != neighbors(c, comm, &in, &out)) return MCA_COLL_GPUCOLL_DESCRIBE_ERROR;
    const gpucoll_extent_t s = extent_block((size_t)out * (size_t)scount, sdtype);
    const gpucoll_extent_t r = extent_block((size_t)in * (size_t)rcount, rdtype);
    set_buf(c, 0, sbuf, &s, true, NULL);
    set_buf(c, 1, rbuf, &r, true, &r);
    DONE(c);
}

int mca_coll_gpucoll_describe_neighbor_alltoallv(
    mca_coll_gpucoll_staging_t* c, const void* sbuf, mca_coll_gpucoll_counts_t scounts,
    mca_coll_gpucoll_displs_t sdispls, struct ompi_datatype_t* sdtype, void* rbuf,
    mca_coll_gpucoll_counts_t rcounts, mca_coll_gpucoll_displs_t rdispls,
    struct ompi_datatype_t* rdtype, struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_NEIGHBOR_ALLTOALLV);
    if (!maybe_device(sbuf) && !maybe_device(rbuf)) return MCA_COLL_GPUCOLL_DESCRIBE_HOST;
    int in = 0, out = 0;
    if (0 != neighbors(c, comm, &in, &out)) return MCA_COLL_GPUCOLL_DESCRIBE_ERROR;
    const gpucoll_extent_t s = extent_v(out, scounts, sdispls, sdtype);
    const gpucoll_extent_t r = extent_v(in, rcounts, rdispls, rdtype);
    set_buf(c, 0, sbuf, &s, true, NULL);
    set_buf(c, 1, rbuf, &r, true, &r);
    DONE(c);
}

int mca_coll_gpucoll_describe_neighbor_alltoallw(
    mca_coll_gpucoll_staging_t* c, const void* sbuf, mca_coll_gpucoll_counts_t scounts,
    mca_coll_gpucoll_adispls_t sdispls, struct ompi_datatype_t* const* sdtypes, void* rbuf,
    mca_coll_gpucoll_counts_t rcounts, mca_coll_gpucoll_adispls_t rdispls,
    struct ompi_datatype_t* const* rdtypes, struct ompi_communicator_t* comm) {
    begin(c, GPUCOLL_COLL_NEIGHBOR_ALLTOALLW);
    if (!maybe_device(sbuf) && !maybe_device(rbuf)) return MCA_COLL_GPUCOLL_DESCRIBE_HOST;
    int in = 0, out = 0;
    if (0 != neighbors(c, comm, &in, &out)) return MCA_COLL_GPUCOLL_DESCRIBE_ERROR;
    const gpucoll_extent_t s = extent_w_aint(out, scounts, sdispls, sdtypes);
    const gpucoll_extent_t r = extent_w_aint(in, rcounts, rdispls, rdtypes);
    set_buf(c, 0, sbuf, &s, true, NULL);
    set_buf(c, 1, rbuf, &r, true, &r);
    DONE(c);
}
