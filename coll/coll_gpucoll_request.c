/*
 * coll_gpucoll_request.c - nonblocking and persistent collectives on device
 * buffers, staged: the request Open MPI returns to the application wraps the
 * saved module's request on host copies.
 *
 *  - nonblocking: the device inputs are copied to host memory when the call
 *    starts, then the saved module's nonblocking function runs on the copies;
 *  - persistent: host memory (pinned) is set aside at init, together with the
 *    saved module's persistent request on it; each MPI_Start copies the
 *    inputs in and starts that request.
 *
 * The saved request's completion callback (run by whatever progresses it,
 * inside Open MPI's progress engine) copies the results back to the device
 * and completes ours: no progress function of our own, and the initiating
 * call never waits for a peer. The ordering of collectives on a
 * communicator is the saved module's: every rank starts its saved request
 * in the call that the application made, in the application's order.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_gpucoll.h"

static void gpucoll_request_construct(mca_coll_gpucoll_request_t* r) {
    r->inner = NULL;
    r->comm = NULL;
    memset(&r->staging, 0, sizeof r->staging);
    r->pending = NULL;
    r->nbc_tag = 0;
    r->module = NULL;
    memset(&r->args, 0, sizeof r->args);
    r->next = NULL;
    memset(&r->call, 0, sizeof r->call);
    r->plan = NULL;
    r->accelerated = false;
    r->post_decline = false;
}

OBJ_CLASS_INSTANCE(mca_coll_gpucoll_request_t, ompi_coll_base_nbc_request_t,
                   gpucoll_request_construct, NULL);

/* Ends the current run of r with status rc: results back on success. */
static void gpucoll_request_finish(mca_coll_gpucoll_request_t* r, int rc) {
    ompi_request_t* req = &r->super.super;
    if (OMPI_SUCCESS == rc) rc = mca_coll_gpucoll_staging_copy_out(&r->staging);
    if (OMPI_SUCCESS == rc && r->staging.refused) rc = r->staging.refused_error;
    if (!req->req_persistent) {
        /* Nothing reads the host copies any more: give them back now rather
         * than when the application frees the request. */
        mca_coll_gpucoll_staging_free(&r->staging);
    }
    req->req_status.MPI_ERROR = rc;
    ompi_request_complete(req, true);
}

/* The saved request completed (its callback: the saved request is not
 * marked complete yet, so it is freed with ours, not here). */
static int gpucoll_inner_complete(ompi_request_t* inner) {
    mca_coll_gpucoll_request_t* r = (mca_coll_gpucoll_request_t*)inner->req_complete_cb_data;
    if (inner->req_persistent) inner->req_state = OMPI_REQUEST_INACTIVE; /* as MPI_Wait would */
    gpucoll_request_finish(r, inner->req_status.MPI_ERROR);
    return 0;
}

static void gpucoll_request_release(mca_coll_gpucoll_request_t* r) {
    free(r->args.counts); /* persistent accelerated requests keep theirs */
    r->args.counts = NULL;
    if (NULL != r->pending) gpucoll_pending_free(r->pending);
    r->pending = NULL;
    gpucoll_plan_free(r->plan);
    r->plan = NULL;
    if (NULL != r->inner) ompi_request_free(&r->inner);
    r->inner = NULL;
    mca_coll_gpucoll_staging_free(&r->staging);
    if (NULL != r->comm) OBJ_RELEASE(r->comm);
    r->comm = NULL;
    OMPI_REQUEST_FINI(&r->super.super);
    OBJ_RELEASE(r);
}

static int gpucoll_request_free(ompi_request_t** request) {
    mca_coll_gpucoll_request_t* r = (mca_coll_gpucoll_request_t*)*request;
    if (!REQUEST_COMPLETE(&r->super.super)) {
        /* MPI: freeing an active collective request is erroneous. */
        GPUCOLL_ERROR("%s", "MPI_Request_free on an active gpucoll collective request");
        return MPI_ERR_REQUEST;
    }
    gpucoll_request_release(r);
    *request = MPI_REQUEST_NULL;
    return OMPI_SUCCESS;
}

static int gpucoll_request_cancel(ompi_request_t* request, int complete) {
    (void)request;
    (void)complete;
    return MPI_ERR_REQUEST; /* collectives cannot be cancelled */
}

/* MPI_Start / MPI_Startall of persistent requests (several at once from
 * MPI_Startall). */
static int gpucoll_request_start(size_t count, ompi_request_t** requests) {
    int first_error = OMPI_SUCCESS;
    for (size_t i = 0; i < count; ++i) {
        mca_coll_gpucoll_request_t* r = (mca_coll_gpucoll_request_t*)requests[i];
        ompi_request_t* req = &r->super.super;
        req->req_state = OMPI_REQUEST_ACTIVE;
        req->req_complete = REQUEST_PENDING;
        req->req_status.MPI_ERROR = OMPI_SUCCESS;
        r->staging.copied = 0;
        if (r->accelerated) {
            const int arc = mca_coll_gpucoll_nonblocking_start_persistent(r);
            if (OMPI_SUCCESS != arc && OMPI_SUCCESS == first_error) first_error = arc;
            continue;
        }
        if (r->post_decline && NULL != r->module && 1 == r->module->core_state) {
            /* the device ranks' starts wait for every rank's post */
            const int drc = gpucoll_comm_start_decline(r->module->core);
            if (GPUCOLL_SUCCESS != drc) {
                gpucoll_request_finish(r, mca_coll_gpucoll_core_error("decline", drc));
                if (OMPI_SUCCESS == first_error) first_error = OMPI_ERROR;
                continue;
            }
        }
        int rc = mca_coll_gpucoll_staging_copy_in(&r->staging);
        if (OMPI_SUCCESS == rc)
            mca_coll_gpucoll_staging_record(&r->staging, GPUCOLL_FORM_PERSISTENT);
        if (OMPI_SUCCESS != rc || NULL == r->inner || NULL == r->inner->req_start) {
            /* A failed copy, or nothing to communicate (a no-op request). */
            gpucoll_request_finish(r, rc);
        } else {
            r->inner->req_complete_cb = gpucoll_inner_complete;
            r->inner->req_complete_cb_data = r;
            rc = r->inner->req_start(1, &r->inner);
            if (OMPI_SUCCESS != rc) {
                r->inner->req_complete_cb = NULL;
                gpucoll_request_finish(r, rc);
            }
        }
        if (OMPI_SUCCESS != rc && OMPI_SUCCESS == first_error) first_error = rc;
    }
    return first_error;
}

/* A request on comm with the staging description copied in, nothing
 * allocated yet. */
static mca_coll_gpucoll_request_t* gpucoll_request_create(struct ompi_communicator_t* comm,
                                                          const mca_coll_gpucoll_staging_t* staging,
                                                          bool persistent) {
    mca_coll_gpucoll_request_t* r = OBJ_NEW(mca_coll_gpucoll_request_t);
    if (NULL == r) return NULL;
    ompi_request_t* req = &r->super.super;
    OMPI_REQUEST_INIT(req, persistent);
    req->req_type = OMPI_REQUEST_COLL;
    req->req_state = persistent ? OMPI_REQUEST_INACTIVE : OMPI_REQUEST_ACTIVE;
    req->req_mpi_object.comm = comm;
    req->req_free = gpucoll_request_free;
    req->req_cancel = gpucoll_request_cancel;
    req->req_start = persistent ? gpucoll_request_start : NULL;
    /* A persistent request may outlive MPI_Comm_free (and a nonblocking one
     * its communicator's handle): the saved module's request uses both. */
    r->comm = comm;
    OBJ_RETAIN(comm);
    r->staging = *staging;
    r->staging.persistent = persistent;
    r->staging.pooled = !persistent;
    return r;
}

int mca_coll_gpucoll_request_new(struct ompi_communicator_t* comm,
                                 const mca_coll_gpucoll_staging_t* staging, bool persistent,
                                 mca_coll_gpucoll_request_t** out) {
    mca_coll_gpucoll_request_t* r = gpucoll_request_create(comm, staging, persistent);
    if (NULL == r) return OMPI_ERR_OUT_OF_RESOURCE;
    int rc = mca_coll_gpucoll_staging_alloc(&r->staging, false);
    if (OMPI_SUCCESS == rc && !persistent) {
        rc = mca_coll_gpucoll_staging_copy_in(&r->staging);
        if (OMPI_SUCCESS == rc)
            mca_coll_gpucoll_staging_record(&r->staging, GPUCOLL_FORM_NONBLOCKING);
    }
    if (OMPI_SUCCESS != rc) {
        gpucoll_request_release(r);
        return rc;
    }
    *out = r;
    return OMPI_SUCCESS;
}

int mca_coll_gpucoll_request_new_deferred(struct ompi_communicator_t* comm,
                                          const mca_coll_gpucoll_staging_t* staging,
                                          mca_coll_gpucoll_request_t** out) {
    *out = gpucoll_request_create(comm, staging, false);
    return NULL == *out ? OMPI_ERR_OUT_OF_RESOURCE : OMPI_SUCCESS;
}

int mca_coll_gpucoll_request_new_accelerated(struct ompi_communicator_t* comm,
                                             const mca_coll_gpucoll_staging_t* staging,
                                             mca_coll_gpucoll_request_t** out) {
    mca_coll_gpucoll_request_t* r = gpucoll_request_create(comm, staging, true);
    if (NULL == r) return OMPI_ERR_OUT_OF_RESOURCE;
    r->accelerated = true;
    *out = r;
    return OMPI_SUCCESS;
}

/* A persistent saved request (the fallback of an accelerated one) restarts
 * after r's host copies are filled: run it, completing r after it. */
int mca_coll_gpucoll_request_restart_inner(mca_coll_gpucoll_request_t* r) {
    int rc = mca_coll_gpucoll_staging_copy_in(&r->staging);
    if (OMPI_SUCCESS != rc) return rc;
    mca_coll_gpucoll_staging_record(&r->staging, GPUCOLL_FORM_PERSISTENT);
    if (NULL == r->inner || NULL == r->inner->req_start) {
        gpucoll_request_finish(r, OMPI_SUCCESS);
        return OMPI_SUCCESS;
    }
    r->inner->req_complete_cb = gpucoll_inner_complete;
    r->inner->req_complete_cb_data = r;
    rc = r->inner->req_start(1, &r->inner);
    if (OMPI_SUCCESS != rc) r->inner->req_complete_cb = NULL;
    return rc;
}

void mca_coll_gpucoll_request_attach(mca_coll_gpucoll_request_t* r, ompi_request_t* inner) {
    r->inner = inner;
    if (NULL == inner || MPI_REQUEST_NULL == inner) {
        gpucoll_request_finish(r, OMPI_SUCCESS);
    } else if (REQUEST_COMPLETE(inner)) {
        gpucoll_request_finish(r, inner->req_status.MPI_ERROR);
    } else {
        ompi_request_set_callback(inner, gpucoll_inner_complete, r);
    }
}

void mca_coll_gpucoll_request_complete(mca_coll_gpucoll_request_t* r, int rc) {
    ompi_request_t* req = &r->super.super;
    req->req_status.MPI_ERROR = rc;
    ompi_request_complete(req, true);
}

void mca_coll_gpucoll_request_discard(mca_coll_gpucoll_request_t* r) { gpucoll_request_release(r); }

int mca_coll_gpucoll_request_launch(mca_coll_gpucoll_request_t* r, int rc, ompi_request_t* inner,
                                    ompi_request_t** request) {
    if (OMPI_SUCCESS != rc) {
        if (NULL != inner && MPI_REQUEST_NULL != inner) ompi_request_free(&inner);
        gpucoll_request_release(r);
        return rc;
    }
    r->inner = inner;
    *request = &r->super.super;
    if (r->super.super.req_persistent) return OMPI_SUCCESS; /* MPI_Start runs it */
    if (NULL == inner || MPI_REQUEST_NULL == inner) {
        gpucoll_request_finish(r, OMPI_SUCCESS); /* nothing to wait for */
    } else if (REQUEST_COMPLETE(inner)) {
        /* Done already (e.g. Open MPI's shared empty request): its callback
         * fields are not ours to set. */
        gpucoll_request_finish(r, inner->req_status.MPI_ERROR);
    } else {
        ompi_request_set_callback(inner, gpucoll_inner_complete, r);
    }
    return OMPI_SUCCESS;
}
