/*
 * coll_gpucoll_layout.c - the bytes a datatype covers, as copies.
 *
 * The staged path copies a receive buffer back from its host copy. Where
 * the written blocks leave gaps (a vector's stride, a struct's holes, a
 * resized type's tail, the space between the blocks of a v-collective),
 * those bytes belong to the application during the call, so only the
 * covered bytes may be written: this file turns the blocks into copy runs
 * (gpucoll_copy_run_t) for gpucoll_memcpy_runs.
 *
 * The segments of one element come from Open MPI's convertor
 * (opal_convertor_raw: addresses computed from the type description, no
 * memory touched, as osc/rdma and io/ompio use it). Runs stay few:
 *  - adjacent segments merge into one block;
 *  - equal blocks at a constant stride form one 2D run (one cudaMemcpy2D);
 *  - count elements of a type with k segments each are copied either
 *    element by element (each element's runs) or segment by segment (k
 *    runs of count rows, one element's extent apart), whichever needs fewer
 *    runs: a column type (vector resized to one element) is one 2D run per
 *    call, not one per column.
 * A vector of N blocks is one run; an irregular layout pays one run per
 * segment.
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "coll_gpucoll.h"
#include "opal/datatype/opal_convertor.h"

/* A segment of one element: len bytes at off from the element's pointer. */
typedef struct gpucoll_seg {
    ptrdiff_t off;
    size_t len;
} gpucoll_seg_t;

/* Collects runs, extending the last one while blocks continue it. dry: only
 * counts them (n), to compare two orders. */
typedef struct gpucoll_runs_builder {
    bool dry;
    bool failed; /* out of memory */
    gpucoll_copy_run_t* runs;
    size_t n, cap;
    size_t bytes;
    /* the open run: height blocks of width bytes from off, step apart
     * (negative: descending; height 0: none) */
    ptrdiff_t off, step;
    size_t width, height;
} gpucoll_runs_builder_t;

static void builder_push(gpucoll_runs_builder_t* b) {
    if (0 == b->height) return;
    if (!b->dry && !b->failed) {
        if (b->n == b->cap) {
            const size_t cap = 0 == b->cap ? 8 : 2 * b->cap;
            gpucoll_copy_run_t* grown = realloc(b->runs, cap * sizeof *grown);
            if (NULL == grown) {
                b->failed = true;
                return;
            }
            b->runs = grown;
            b->cap = cap;
        }
        ptrdiff_t off = b->off;
        size_t pitch = 0;
        if (b->height > 1 && b->step < 0) { /* the same rows, ascending */
            off += (ptrdiff_t)(b->height - 1) * b->step;
            pitch = (size_t)-b->step;
        } else if (b->height > 1) {
            pitch = (size_t)b->step;
        }
        b->runs[b->n] = (gpucoll_copy_run_t){off, b->width, b->height, pitch};
    }
    b->n++;
    b->height = 0;
}

static ptrdiff_t magnitude(ptrdiff_t v) { return v < 0 ? -v : v; }

/* Adds height blocks of width bytes, the first at off, each step after the
 * previous (height 1: one block, step ignored). */
static void builder_add(gpucoll_runs_builder_t* b, ptrdiff_t off, size_t width, size_t height,
                        ptrdiff_t step) {
    if (0 == width || 0 == height) return;
    b->bytes += width * height;
    if (height > 1 && magnitude(step) == (ptrdiff_t)width) { /* rows that touch: one block */
        if (step < 0) off += (ptrdiff_t)(height - 1) * step;
        width *= height;
        height = 1;
    }
    if (1 == height) step = 0;
    if (0 != b->height) {
        /* a block right after or right before a single open block: longer */
        if (1 == height && 1 == b->height && b->off + (ptrdiff_t)b->width == off) {
            b->width += width;
            return;
        }
        if (1 == height && 1 == b->height && off + (ptrdiff_t)width == b->off) {
            b->off = off;
            b->width += width;
            return;
        }
        /* more rows of the open run, as far apart as its own */
        if (width == b->width && 1 == b->height) {
            const ptrdiff_t d = off - b->off;
            if ((1 == height || d == step) && magnitude(d) >= (ptrdiff_t)width) {
                b->step = d;
                b->height += height;
                return;
            }
        } else if (width == b->width && (1 == height || step == b->step) &&
                   off == b->off + (ptrdiff_t)b->height * b->step) {
            b->height += height;
            return;
        }
        builder_push(b);
    }
    b->off = off;
    b->width = width;
    b->height = height;
    b->step = step;
}

/* The segments of one element of dtype at base (adjacent ones merged), in
 * the convertor's order, relative to base, into *segs (grown as needed). */
static int element_segments(const void* base, struct ompi_datatype_t* dtype, gpucoll_seg_t** segs,
                            size_t* cap, size_t* nsegs) {
    opal_convertor_t conv;
    OBJ_CONSTRUCT(&conv, opal_convertor_t);
    int rc = opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor, &dtype->super, 1,
                                                      base, 0, &conv);
    *nsegs = 0;
    size_t total = 0;
    for (bool done = false; OPAL_SUCCESS == rc && !done;) {
        struct iovec iov[64];
        uint32_t n = 64;
        size_t length = 0;
        done = 0 != opal_convertor_raw(&conv, iov, &n, &length);
        if (0 == n && !done) rc = OMPI_ERROR; /* no progress: never loop forever */
        for (uint32_t k = 0; k < n && OPAL_SUCCESS == rc; ++k) {
            const size_t len = iov[k].iov_len;
            const ptrdiff_t off = (ptrdiff_t)((uintptr_t)iov[k].iov_base - (uintptr_t)base);
            total += len;
            if (0 == len) continue;
            gpucoll_seg_t* last = 0 == *nsegs ? NULL : &(*segs)[*nsegs - 1];
            if (NULL != last && last->off + (ptrdiff_t)last->len == off) {
                last->len += len;
                continue;
            }
            if (*nsegs == *cap) {
                const size_t grown_cap = 0 == *cap ? 16 : 2 * *cap;
                gpucoll_seg_t* grown = realloc(*segs, grown_cap * sizeof *grown);
                if (NULL == grown) {
                    rc = OMPI_ERR_OUT_OF_RESOURCE;
                    break;
                }
                *segs = grown;
                *cap = grown_cap;
            }
            (*segs)[(*nsegs)++] = (gpucoll_seg_t){off, len};
        }
    }
    opal_convertor_cleanup(&conv);
    OBJ_DESTRUCT(&conv);
    size_t size = 0;
    ompi_datatype_type_size(dtype, &size);
    /* every byte of the type's signature, once: else the caller copies the
     * whole span as before rather than trust a partial layout */
    if (OPAL_SUCCESS == rc && total != size) rc = OMPI_ERROR;
    return rc;
}

/* Feeds count elements (the segments of one, each element extent bytes
 * after the previous) at disp: element by element, or segment by segment. */
static void add_elements(gpucoll_runs_builder_t* b, ptrdiff_t disp, size_t count, ptrdiff_t extent,
                         const gpucoll_seg_t* segs, size_t nsegs) {
    bool by_segment = count > 1;
    for (size_t j = 0; j < nsegs && by_segment; ++j)
        by_segment = magnitude(extent) >= (ptrdiff_t)segs[j].len; /* rows must not overlap */
    if (by_segment) {
        gpucoll_runs_builder_t per_element = {.dry = true}, per_segment = {.dry = true};
        for (size_t j = 0; j < nsegs; ++j) {
            builder_add(&per_element, segs[j].off, segs[j].len, 1, 0);
            builder_add(&per_segment, segs[j].off, segs[j].len, count, extent);
        }
        builder_push(&per_element);
        builder_push(&per_segment);
        /* per element: at most count times one element's runs */
        by_segment = per_segment.n <= per_element.n ||
                     count > per_segment.n / (0 == per_element.n ? 1 : per_element.n);
    }
    if (by_segment) {
        for (size_t j = 0; j < nsegs; ++j)
            builder_add(b, disp + segs[j].off, segs[j].len, count, extent);
        return;
    }
    for (size_t e = 0; e < count; ++e)
        for (size_t j = 0; j < nsegs; ++j)
            builder_add(b, disp + (ptrdiff_t)e * extent + segs[j].off, segs[j].len, 1, 0);
}

int mca_coll_gpucoll_layout_runs(const void* user, const mca_coll_gpucoll_blocks_t* blocks,
                                 gpucoll_copy_run_t** runs, size_t* nruns, size_t* bytes) {
    *runs = NULL;
    *nruns = 0;
    *bytes = 0;
    gpucoll_runs_builder_t b = {.dry = false};
    gpucoll_seg_t* segs = NULL;
    size_t cap = 0, nsegs = 0;
    struct ompi_datatype_t* segs_of = NULL; /* the datatype segs describes */
    int rc = OMPI_SUCCESS;
    for (int i = 0; i < blocks->n && OMPI_SUCCESS == rc && !b.failed; ++i) {
        const size_t count = !mca_coll_gpucoll_has_counts(blocks->counts)
                                 ? blocks->count
                                 : mca_coll_gpucoll_count_at(blocks->counts, (size_t)i);
        struct ompi_datatype_t* dtype = NULL != blocks->dtypes ? blocks->dtypes[i] : blocks->dtype;
        if (0 == count || NULL == dtype) continue;
        if (dtype != segs_of) {
            rc = element_segments(user, dtype, &segs, &cap, &nsegs);
            segs_of = OMPI_SUCCESS == rc ? dtype : NULL;
            if (OMPI_SUCCESS != rc) break;
        }
        ptrdiff_t disp = 0;
        if (blocks->has_adispls) {
            disp = mca_coll_gpucoll_adispl_at(blocks->adispls, (size_t)i);
        } else if (mca_coll_gpucoll_has_displs(blocks->displs)) {
            disp = mca_coll_gpucoll_displ_at(blocks->displs, (size_t)i) * blocks->unit;
        }
        ptrdiff_t lb = 0, extent = 0;
        ompi_datatype_get_extent(dtype, &lb, &extent);
        add_elements(&b, disp, count, extent, segs, nsegs);
    }
    builder_push(&b);
    free(segs);
    if (OMPI_SUCCESS == rc && b.failed) rc = OMPI_ERR_OUT_OF_RESOURCE;
    if (OMPI_SUCCESS != rc) {
        free(b.runs);
        return rc;
    }
    *runs = b.runs;
    *nruns = b.n;
    *bytes = b.bytes;
    return OMPI_SUCCESS;
}
