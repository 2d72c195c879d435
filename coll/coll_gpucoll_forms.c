/*
 * coll_gpucoll_forms.c - entry points of the collectives the staged path
 * serves: every form (blocking, nonblocking, persistent) of the
 * collectives without an accelerated path, and the nonblocking and
 * persistent forms of those with one.
 *
 * A call in which no buffer significant on this rank is device memory goes
 * to the saved function untouched; otherwise the device buffers are staged
 * through host memory around the saved function (coll_gpucoll_staged.c,
 * coll_gpucoll_request.c). The choice is rank-local and every rank runs the
 * saved module's algorithm in the application's order, so no agreement
 * between ranks is needed.
 */
#include "coll_gpucoll.h"

#define GPUCOLL_UNPACK(...) __VA_ARGS__

/* The saved function's buffers: host copies where staged, else the user's. */
#define S0 (st->buf[0].host)
#define S1 (st->buf[1].host)

/* Blocking form of a collective only the staged path serves. DECL: its
 * parameters before comm; ARGS: their names; HOST_ARGS: the same with the
 * buffers replaced by S0/S1. */
#define GPUCOLL_DEFINE_BLOCKING(name, id, DECL, ARGS, HOST_ARGS)                          \
    static int coll_gpucoll_##name(GPUCOLL_UNPACK DECL, struct ompi_communicator_t* comm, \
                                   mca_coll_base_module_t* module) {                      \
        mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;                \
        if (mca_coll_gpucoll_in_host(m))                                                  \
            return m->prev_##name(GPUCOLL_UNPACK ARGS, comm, m->prev_##name##_module);    \
        mca_coll_gpucoll_staging_t stage, *st = &stage;                                   \
        int rc = mca_coll_gpucoll_describe_##name(st, GPUCOLL_UNPACK ARGS, comm);         \
        if (MCA_COLL_GPUCOLL_DESCRIBE_ERROR == rc) return st->error;                      \
        if (MCA_COLL_GPUCOLL_DESCRIBE_HOST == rc) {                                       \
            mca_coll_gpucoll_record_delegated(id, GPUCOLL_FORM_BLOCKING);                 \
            mca_coll_gpucoll_enter_host(m);                                               \
            rc = m->prev_##name(GPUCOLL_UNPACK ARGS, comm, m->prev_##name##_module);      \
            mca_coll_gpucoll_leave_host(m);                                               \
            return rc;                                                                    \
        }                                                                                 \
        rc = mca_coll_gpucoll_staging_begin(st);                                          \
        if (OMPI_SUCCESS == rc) {                                                         \
            mca_coll_gpucoll_enter_host(m);                                               \
            rc = m->prev_##name(GPUCOLL_UNPACK HOST_ARGS, comm, m->prev_##name##_module); \
            mca_coll_gpucoll_leave_host(m);                                               \
        }                                                                                 \
        return mca_coll_gpucoll_staging_end(st, rc);                                      \
    }

/* Nonblocking form i<name>, staged (FNAME: the function's name). */
#define GPUCOLL_DEFINE_I(FNAME, name, id, DECL, ARGS, HOST_ARGS)                                  \
    int FNAME(GPUCOLL_UNPACK DECL, struct ompi_communicator_t* comm, ompi_request_t** request,    \
              mca_coll_base_module_t* module) {                                                   \
        mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;                        \
        if (mca_coll_gpucoll_in_host(m))                                                          \
            return m->prev_i##name(GPUCOLL_UNPACK ARGS, comm, request, m->prev_i##name##_module); \
        mca_coll_gpucoll_staging_t stage, *st = &stage;                                           \
        int rc = mca_coll_gpucoll_describe_##name(st, GPUCOLL_UNPACK ARGS, comm);                 \
        if (MCA_COLL_GPUCOLL_DESCRIBE_ERROR == rc) return st->error;                              \
        if (MCA_COLL_GPUCOLL_DESCRIBE_HOST == rc) {                                               \
            mca_coll_gpucoll_record_delegated(id, GPUCOLL_FORM_NONBLOCKING);                      \
            mca_coll_gpucoll_enter_host(m);                                                       \
            rc = m->prev_i##name(GPUCOLL_UNPACK ARGS, comm, request, m->prev_i##name##_module);   \
            mca_coll_gpucoll_leave_host(m);                                                       \
            return rc;                                                                            \
        }                                                                                         \
        mca_coll_gpucoll_request_t* r = NULL;                                                     \
        rc = mca_coll_gpucoll_request_new(comm, st, false, &r);                                   \
        if (OMPI_SUCCESS != rc) return rc;                                                        \
        st = &r->staging;                                                                         \
        ompi_request_t* inner = NULL;                                                             \
        mca_coll_gpucoll_enter_host(m);                                                           \
        rc = m->prev_i##name(GPUCOLL_UNPACK HOST_ARGS, comm, &inner, m->prev_i##name##_module);   \
        mca_coll_gpucoll_leave_host(m);                                                           \
        return mca_coll_gpucoll_request_launch(r, rc, inner, request);                            \
    }

/* Persistent form <name>_init, staged (FNAME: the function's name). */
#define GPUCOLL_DEFINE_INIT_F(FNAME, name, id, DECL, ARGS, HOST_ARGS)                          \
    int FNAME(GPUCOLL_UNPACK DECL, struct ompi_communicator_t* comm, struct ompi_info_t* info, \
              ompi_request_t** request, mca_coll_base_module_t* module) {                      \
        mca_coll_gpucoll_module_t* m = (mca_coll_gpucoll_module_t*)module;                     \
        if (mca_coll_gpucoll_in_host(m))                                                       \
            return m->prev_##name##_init(GPUCOLL_UNPACK ARGS, comm, info, request,             \
                                         m->prev_##name##_init_module);                        \
        mca_coll_gpucoll_staging_t stage, *st = &stage;                                        \
        int rc = mca_coll_gpucoll_describe_##name(st, GPUCOLL_UNPACK ARGS, comm);              \
        if (MCA_COLL_GPUCOLL_DESCRIBE_ERROR == rc) return st->error;                           \
        if (MCA_COLL_GPUCOLL_DESCRIBE_HOST == rc) {                                            \
            mca_coll_gpucoll_record_delegated(id, GPUCOLL_FORM_PERSISTENT);                    \
            mca_coll_gpucoll_enter_host(m);                                                    \
            rc = m->prev_##name##_init(GPUCOLL_UNPACK ARGS, comm, info, request,               \
                                       m->prev_##name##_init_module);                          \
            mca_coll_gpucoll_leave_host(m);                                                    \
            return rc;                                                                         \
        }                                                                                      \
        mca_coll_gpucoll_request_t* r = NULL;                                                  \
        rc = mca_coll_gpucoll_request_new(comm, st, true, &r);                                 \
        if (OMPI_SUCCESS != rc) return rc;                                                     \
        st = &r->staging;                                                                      \
        ompi_request_t* inner = NULL;                                                          \
        mca_coll_gpucoll_enter_host(m);                                                        \
        rc = m->prev_##name##_init(GPUCOLL_UNPACK HOST_ARGS, comm, info, &inner,               \
                                   m->prev_##name##_init_module);                              \
        mca_coll_gpucoll_leave_host(m);                                                        \
        return mca_coll_gpucoll_request_launch(r, rc, inner, request);                         \
    }

#define GPUCOLL_DEFINE_NONBLOCKING(name, id, DECL, ARGS, HOST_ARGS)                             \
    static GPUCOLL_DEFINE_I(coll_gpucoll_i##name, name, id, DECL, ARGS,                         \
                            HOST_ARGS) static GPUCOLL_DEFINE_INIT_F(coll_gpucoll_##name##_init, \
                                                                    name, id, DECL, ARGS,       \
                                                                    HOST_ARGS)
/* The collectives with an accelerated path: the staged i<name> is called by
 * mca_coll_gpucoll_accel_i<name> (coll_gpucoll_nonblocking.c). */
#define GPUCOLL_DEFINE_STAGED_NONBLOCKING(name, id, DECL, ARGS, HOST_ARGS)             \
    GPUCOLL_DEFINE_I(mca_coll_gpucoll_staged_i##name, name, id, DECL, ARGS, HOST_ARGS) \
    GPUCOLL_DEFINE_INIT_F(mca_coll_gpucoll_staged_##name##_init, name, id, DECL, ARGS, HOST_ARGS)

#define GPUCOLL_DEFINE_ALL_FORMS(name, id, DECL, ARGS, HOST_ARGS) \
    GPUCOLL_DEFINE_BLOCKING(name, id, DECL, ARGS, HOST_ARGS)      \
    GPUCOLL_DEFINE_NONBLOCKING(name, id, DECL, ARGS, HOST_ARGS)

/* Parameter lists shared by several collectives. */
#define GPUCOLL_DECL_REDUCE_ALL                                                                   \
    (const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count, struct ompi_datatype_t* dtype, \
     struct ompi_op_t* op)
#define GPUCOLL_DECL_GATHER_ALL                                                         \
    (const void* sbuf, mca_coll_gpucoll_count_t scount, struct ompi_datatype_t* sdtype, \
     void* rbuf, mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* rdtype)
#define GPUCOLL_ARGS_GATHER_ALL (sbuf, scount, sdtype, rbuf, rcount, rdtype)
#define GPUCOLL_HOST_GATHER_ALL (S0, scount, sdtype, S1, rcount, rdtype)
#define GPUCOLL_DECL_GATHERV_ALL                                                        \
    (const void* sbuf, mca_coll_gpucoll_count_t scount, struct ompi_datatype_t* sdtype, \
     void* rbuf, mca_coll_gpucoll_counts_t rcounts, mca_coll_gpucoll_displs_t displs,   \
     struct ompi_datatype_t* rdtype)
#define GPUCOLL_ARGS_GATHERV_ALL (sbuf, scount, sdtype, rbuf, rcounts, displs, rdtype)
#define GPUCOLL_HOST_GATHERV_ALL (S0, scount, sdtype, S1, rcounts, displs, rdtype)
#define GPUCOLL_DECL_ALLTOALLV                                                               \
    (const void* sbuf, mca_coll_gpucoll_counts_t scounts, mca_coll_gpucoll_displs_t sdispls, \
     struct ompi_datatype_t* sdtype, void* rbuf, mca_coll_gpucoll_counts_t rcounts,          \
     mca_coll_gpucoll_displs_t rdispls, struct ompi_datatype_t* rdtype)
#define GPUCOLL_ARGS_ALLTOALLV (sbuf, scounts, sdispls, sdtype, rbuf, rcounts, rdispls, rdtype)
#define GPUCOLL_HOST_ALLTOALLV (S0, scounts, sdispls, sdtype, S1, rcounts, rdispls, rdtype)

/* ---------------------------------------------------------------------------
 * Nonblocking and persistent forms of the accelerated collectives (their
 * blocking forms are in coll_gpucoll_module.c)
 * ------------------------------------------------------------------------- */

GPUCOLL_DEFINE_STAGED_NONBLOCKING(allreduce, GPUCOLL_COLL_ALLREDUCE, GPUCOLL_DECL_REDUCE_ALL,
                                  (sbuf, rbuf, count, dtype, op), (S0, S1, count, dtype, op))
GPUCOLL_DEFINE_STAGED_NONBLOCKING(bcast, GPUCOLL_COLL_BCAST,
                                  (void* buf, mca_coll_gpucoll_count_t count,
                                   struct ompi_datatype_t* dtype, int root),
                                  (buf, count, dtype, root), (S0, count, dtype, root))
GPUCOLL_DEFINE_STAGED_NONBLOCKING(allgather, GPUCOLL_COLL_ALLGATHER, GPUCOLL_DECL_GATHER_ALL,
                                  GPUCOLL_ARGS_GATHER_ALL, GPUCOLL_HOST_GATHER_ALL)
GPUCOLL_DEFINE_STAGED_NONBLOCKING(reduce_scatter, GPUCOLL_COLL_REDUCE_SCATTER,
                                  (const void* sbuf, void* rbuf, mca_coll_gpucoll_counts_t rcounts,
                                   struct ompi_datatype_t* dtype, struct ompi_op_t* op),
                                  (sbuf, rbuf, rcounts, dtype, op), (S0, S1, rcounts, dtype, op))
GPUCOLL_DEFINE_STAGED_NONBLOCKING(reduce_scatter_block, GPUCOLL_COLL_REDUCE_SCATTER_BLOCK,
                                  (const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t rcount,
                                   struct ompi_datatype_t* dtype, struct ompi_op_t* op),
                                  (sbuf, rbuf, rcount, dtype, op), (S0, S1, rcount, dtype, op))
GPUCOLL_DEFINE_STAGED_NONBLOCKING(reduce, GPUCOLL_COLL_REDUCE,
                                  (const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                                   struct ompi_datatype_t* dtype, struct ompi_op_t* op, int root),
                                  (sbuf, rbuf, count, dtype, op, root),
                                  (S0, S1, count, dtype, op, root))

/* ---------------------------------------------------------------------------
 * Collectives only the staged path serves
 * ------------------------------------------------------------------------- */

GPUCOLL_DEFINE_ALL_FORMS(allgatherv, GPUCOLL_COLL_ALLGATHERV, GPUCOLL_DECL_GATHERV_ALL,
                         GPUCOLL_ARGS_GATHERV_ALL, GPUCOLL_HOST_GATHERV_ALL)
GPUCOLL_DEFINE_ALL_FORMS(alltoall, GPUCOLL_COLL_ALLTOALL, GPUCOLL_DECL_GATHER_ALL,
                         GPUCOLL_ARGS_GATHER_ALL, GPUCOLL_HOST_GATHER_ALL)
GPUCOLL_DEFINE_ALL_FORMS(alltoallv, GPUCOLL_COLL_ALLTOALLV, GPUCOLL_DECL_ALLTOALLV,
                         GPUCOLL_ARGS_ALLTOALLV, GPUCOLL_HOST_ALLTOALLV)
GPUCOLL_DEFINE_ALL_FORMS(alltoallw, GPUCOLL_COLL_ALLTOALLW,
                         (const void* sbuf, mca_coll_gpucoll_counts_t scounts,
                          mca_coll_gpucoll_displs_t sdispls, struct ompi_datatype_t* const* sdtypes,
                          void* rbuf, mca_coll_gpucoll_counts_t rcounts,
                          mca_coll_gpucoll_displs_t rdispls,
                          struct ompi_datatype_t* const* rdtypes),
                         (sbuf, scounts, sdispls, sdtypes, rbuf, rcounts, rdispls, rdtypes),
                         (S0, scounts, sdispls, sdtypes, S1, rcounts, rdispls, rdtypes))
GPUCOLL_DEFINE_ALL_FORMS(gather, GPUCOLL_COLL_GATHER,
                         (const void* sbuf, mca_coll_gpucoll_count_t scount,
                          struct ompi_datatype_t* sdtype, void* rbuf,
                          mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* rdtype,
                          int root),
                         (sbuf, scount, sdtype, rbuf, rcount, rdtype, root),
                         (S0, scount, sdtype, S1, rcount, rdtype, root))
GPUCOLL_DEFINE_ALL_FORMS(gatherv, GPUCOLL_COLL_GATHERV,
                         (const void* sbuf, mca_coll_gpucoll_count_t scount,
                          struct ompi_datatype_t* sdtype, void* rbuf,
                          mca_coll_gpucoll_counts_t rcounts, mca_coll_gpucoll_displs_t displs,
                          struct ompi_datatype_t* rdtype, int root),
                         (sbuf, scount, sdtype, rbuf, rcounts, displs, rdtype, root),
                         (S0, scount, sdtype, S1, rcounts, displs, rdtype, root))
GPUCOLL_DEFINE_ALL_FORMS(scatter, GPUCOLL_COLL_SCATTER,
                         (const void* sbuf, mca_coll_gpucoll_count_t scount,
                          struct ompi_datatype_t* sdtype, void* rbuf,
                          mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* rdtype,
                          int root),
                         (sbuf, scount, sdtype, rbuf, rcount, rdtype, root),
                         (S0, scount, sdtype, S1, rcount, rdtype, root))
GPUCOLL_DEFINE_ALL_FORMS(scatterv, GPUCOLL_COLL_SCATTERV,
                         (const void* sbuf, mca_coll_gpucoll_counts_t scounts,
                          mca_coll_gpucoll_displs_t displs, struct ompi_datatype_t* sdtype,
                          void* rbuf, mca_coll_gpucoll_count_t rcount,
                          struct ompi_datatype_t* rdtype, int root),
                         (sbuf, scounts, displs, sdtype, rbuf, rcount, rdtype, root),
                         (S0, scounts, displs, sdtype, S1, rcount, rdtype, root))
GPUCOLL_DEFINE_ALL_FORMS(scan, GPUCOLL_COLL_SCAN, GPUCOLL_DECL_REDUCE_ALL,
                         (sbuf, rbuf, count, dtype, op), (S0, S1, count, dtype, op))
GPUCOLL_DEFINE_ALL_FORMS(exscan, GPUCOLL_COLL_EXSCAN, GPUCOLL_DECL_REDUCE_ALL,
                         (sbuf, rbuf, count, dtype, op), (S0, S1, count, dtype, op))
GPUCOLL_DEFINE_ALL_FORMS(neighbor_allgather, GPUCOLL_COLL_NEIGHBOR_ALLGATHER,
                         GPUCOLL_DECL_GATHER_ALL, GPUCOLL_ARGS_GATHER_ALL, GPUCOLL_HOST_GATHER_ALL)
GPUCOLL_DEFINE_ALL_FORMS(neighbor_allgatherv, GPUCOLL_COLL_NEIGHBOR_ALLGATHERV,
                         GPUCOLL_DECL_GATHERV_ALL, GPUCOLL_ARGS_GATHERV_ALL,
                         GPUCOLL_HOST_GATHERV_ALL)
GPUCOLL_DEFINE_ALL_FORMS(neighbor_alltoall, GPUCOLL_COLL_NEIGHBOR_ALLTOALL, GPUCOLL_DECL_GATHER_ALL,
                         GPUCOLL_ARGS_GATHER_ALL, GPUCOLL_HOST_GATHER_ALL)
GPUCOLL_DEFINE_ALL_FORMS(neighbor_alltoallv, GPUCOLL_COLL_NEIGHBOR_ALLTOALLV,
                         GPUCOLL_DECL_ALLTOALLV, GPUCOLL_ARGS_ALLTOALLV, GPUCOLL_HOST_ALLTOALLV)
GPUCOLL_DEFINE_ALL_FORMS(neighbor_alltoallw, GPUCOLL_COLL_NEIGHBOR_ALLTOALLW,
                         (const void* sbuf, mca_coll_gpucoll_counts_t scounts,
                          mca_coll_gpucoll_adispls_t sdispls,
                          struct ompi_datatype_t* const* sdtypes, void* rbuf,
                          mca_coll_gpucoll_counts_t rcounts, mca_coll_gpucoll_adispls_t rdispls,
                          struct ompi_datatype_t* const* rdtypes),
                         (sbuf, scounts, sdispls, sdtypes, rbuf, rcounts, rdispls, rdtypes),
                         (S0, scounts, sdispls, sdtypes, S1, rcounts, rdispls, rdtypes))

/* ---------------------------------------------------------------------------
 * Installation into a module
 * ------------------------------------------------------------------------- */

#define GPUCOLL_INSTALL_FORMS(name, type, id)     \
    m->super.coll_i##name = coll_gpucoll_i##name; \
    m->super.coll_##name##_init = coll_gpucoll_##name##_init;
#define GPUCOLL_INSTALL_ACCEL_FORMS(name, type, id)         \
    m->super.coll_i##name = mca_coll_gpucoll_accel_i##name; \
    m->super.coll_##name##_init = mca_coll_gpucoll_accel_##name##_init;
#define GPUCOLL_INSTALL_ALL(name, type, id)     \
    m->super.coll_##name = coll_gpucoll_##name; \
    GPUCOLL_INSTALL_FORMS(name, type, id)

void mca_coll_gpucoll_install_forms(mca_coll_gpucoll_module_t* m) {
    MCA_COLL_GPUCOLL_FOREACH_ACCEL_FORMS(GPUCOLL_INSTALL_ACCEL_FORMS)
    MCA_COLL_GPUCOLL_FOREACH_STAGED(GPUCOLL_INSTALL_ALL)
}
