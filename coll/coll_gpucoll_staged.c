/*
 * coll_gpucoll_staged.c - collectives on device buffers through host memory.
 *
 * For each buffer that is significant on this rank: a host buffer is passed
 * as it is; a device buffer is replaced by a host staging copy of its whole
 * span (true extent, so derived datatypes with gaps, negative lower bounds
 * and user-defined ops work unchanged). The saved host function then runs
 * on host buffers only, and the result is copied back to the device.
 *
 * A device buffer is copied in when the collective reads it (send buffers,
 * MPI_IN_PLACE, the root's bcast buffer, reduce_local's inout); an output
 * buffer is not. The copy back writes only the bytes the collective writes:
 * the whole span where its blocks fill it (one copy), else the bytes their
 * datatypes cover (coll_gpucoll_layout.c: merged, 2D runs for strided
 * blocks, one gpucoll_memcpy_runs): the gaps belong to the application,
 * which may write them while a nonblocking call is in flight.
 *
 * Staging buffers are the library's pinned slots while this thread holds
 * them; a concurrent staged call in another thread, or a failed pinned
 * allocation, falls back to ordinary heap memory (never to waiting: a thread
 * that waited here inside a collective could deadlock against a peer).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "coll_gpucoll.h"

/* ---------------------------------------------------------------------------
 * Spans and staged buffers
 * ------------------------------------------------------------------------- */

/* The bytes that count elements of dtype touch: [user + *lo, + *bytes). */
void mca_coll_gpucoll_span(size_t count, const struct ompi_datatype_t* dtype, ptrdiff_t* lo,
                           size_t* bytes) {
    ptrdiff_t lb, extent, true_lb, true_extent;
    *lo = 0;
    *bytes = 0;
    if (0 == count) return;
    ompi_datatype_get_extent(dtype, &lb, &extent);
    ompi_datatype_get_true_extent(dtype, &true_lb, &true_extent);
    ptrdiff_t stride = (ptrdiff_t)(count - 1) * extent; /* negative extents are legal */
    ptrdiff_t first = true_lb + (stride < 0 ? stride : 0);
    ptrdiff_t last = true_lb + true_extent + (stride > 0 ? stride : 0);
    *lo = first;
    *bytes = (size_t)(last - first);
}

const void* mca_coll_gpucoll_bottom_span(ptrdiff_t lo, size_t bytes) {
    if (0 == bytes) return NULL;
    /* A type that begins in host memory and reaches device memory: device
     * (staging refuses it), never Open MPI's */
    const void* first = (const void*)(uintptr_t)lo;
    const void* last = (const void*)(uintptr_t)(lo + (ptrdiff_t)bytes - 1);
    if (bytes > 1 && !mca_coll_gpucoll_is_device(first) && mca_coll_gpucoll_is_device(last))
        return last;
    return first;
}

const void* mca_coll_gpucoll_bottom(size_t count, const struct ompi_datatype_t* dtype) {
    ptrdiff_t lo = 0;
    size_t bytes = 0;
    /* The first element's bytes: every element of a valid buffer lies in
     * the same allocation (and a huge count cannot overflow here). */
    if (count > 0) mca_coll_gpucoll_span(1, dtype, &lo, &bytes);
    return mca_coll_gpucoll_bottom_span(lo, bytes);
}

/* True when a collective that writes count elements of dtype leaves no byte
 * of their span untouched. */
bool mca_coll_gpucoll_fills_span(size_t count, const struct ompi_datatype_t* dtype) {
    return mca_coll_gpucoll_contiguous(dtype, count);
}

static atomic_flag gpucoll_slots_busy = ATOMIC_FLAG_INIT;

/* base + off, in integers: with MPI_BOTTOM, base is NULL and off an
 * absolute address, and a staged copy's base (copy - lo) lies anywhere. */
static inline char* gpucoll_at(const char* base, ptrdiff_t off) {
    return (char*)((uintptr_t)base + (uintptr_t)off);
}

/* Any host address: what a device buffer with an empty span becomes. */
static char gpucoll_empty_span[1];

/* ---------------------------------------------------------------------------
 * Host copies of nonblocking calls: a small pool of pinned buffers, reused
 * call after call (a fresh allocation of megabytes per call costs page
 * faults on every call). At most GPUCOLL_POOL_ENTRIES buffers and
 * GPUCOLL_POOL_MAX_BYTES are kept; what does not fit is freed.
 * ------------------------------------------------------------------------- */

enum { GPUCOLL_POOL_ENTRIES = 8 };
#define GPUCOLL_POOL_MAX_BYTES ((size_t)256 << 20)

static struct {
    void* ptr;
    size_t cap;
    bool pinned;
} gpucoll_pool[GPUCOLL_POOL_ENTRIES];
static size_t gpucoll_pool_bytes;
static atomic_flag gpucoll_pool_lock = ATOMIC_FLAG_INIT;

static void pool_lock(void) {
    while (atomic_flag_test_and_set_explicit(&gpucoll_pool_lock, memory_order_acquire)) {
    }
}
static void pool_unlock(void) {
    atomic_flag_clear_explicit(&gpucoll_pool_lock, memory_order_release);
}

static void pool_free_one(void* p, bool pinned) {
    if (pinned) {
        gpucoll_free_host(p);
    } else {
        free(p);
    }
}

/* The smallest pooled buffer of at least bytes, or a new one (pinned if the
 * backend can, rounded up to a power of two so that sizes that grow reuse). */
static void* pool_get(size_t bytes, size_t* cap, bool* pinned) {
    pool_lock();
    int best = -1;
    for (int k = 0; k < GPUCOLL_POOL_ENTRIES; ++k) {
        if (NULL != gpucoll_pool[k].ptr && gpucoll_pool[k].cap >= bytes &&
            (best < 0 || gpucoll_pool[k].cap < gpucoll_pool[best].cap))
            best = k;
    }
    void* p = NULL;
    if (best >= 0) {
        p = gpucoll_pool[best].ptr;
        *cap = gpucoll_pool[best].cap;
        *pinned = gpucoll_pool[best].pinned;
        gpucoll_pool_bytes -= *cap;
        gpucoll_pool[best].ptr = NULL;
    }
    pool_unlock();
    if (NULL != p) return p;
    size_t want = 64 << 10;
    while (want < bytes && want < ((size_t)1 << 62)) want <<= 1;
    *cap = want;
    *pinned = GPUCOLL_SUCCESS == gpucoll_malloc_host(&p, want);
    if (!*pinned) p = malloc(want);
    return p;
}

/* Keeps p for reuse. When the pool is full, smaller buffers make room for a
 * larger one (sizes grow in a benchmark or a solver's first steps; the
 * largest are the ones that cost to allocate). */
static void pool_put(void* p, size_t cap, bool pinned) {
    if (NULL == p) return;
    void* evicted[GPUCOLL_POOL_ENTRIES];
    bool evicted_pinned[GPUCOLL_POOL_ENTRIES];
    int nevicted = 0;
    pool_lock();
    while (NULL != p) {
        int slot = -1, smallest = -1;
        for (int k = 0; k < GPUCOLL_POOL_ENTRIES; ++k) {
            if (NULL == gpucoll_pool[k].ptr) {
                if (slot < 0) slot = k;
            } else if (smallest < 0 || gpucoll_pool[k].cap < gpucoll_pool[smallest].cap) {
                smallest = k;
            }
        }
        if (slot >= 0 && gpucoll_pool_bytes + cap <= GPUCOLL_POOL_MAX_BYTES) {
            gpucoll_pool[slot].ptr = p;
            gpucoll_pool[slot].cap = cap;
            gpucoll_pool[slot].pinned = pinned;
            gpucoll_pool_bytes += cap;
            p = NULL;
        } else if (smallest >= 0 && gpucoll_pool[smallest].cap < cap &&
                   cap <= GPUCOLL_POOL_MAX_BYTES) {
            evicted[nevicted] = gpucoll_pool[smallest].ptr;
            evicted_pinned[nevicted++] = gpucoll_pool[smallest].pinned;
            gpucoll_pool_bytes -= gpucoll_pool[smallest].cap;
            gpucoll_pool[smallest].ptr = NULL;
        } else {
            break; /* larger than what the pool keeps: freed below */
        }
    }
    pool_unlock();
    if (NULL != p) pool_free_one(p, pinned);
    for (int k = 0; k < nevicted; ++k) pool_free_one(evicted[k], evicted_pinned[k]);
}

void mca_coll_gpucoll_staging_pool_release(void) {
    pool_lock();
    for (int k = 0; k < GPUCOLL_POOL_ENTRIES; ++k) {
        if (NULL != gpucoll_pool[k].ptr) pool_free_one(gpucoll_pool[k].ptr, gpucoll_pool[k].pinned);
        gpucoll_pool[k].ptr = NULL;
    }
    gpucoll_pool_bytes = 0;
    pool_unlock();
}

/* ---------------------------------------------------------------------------
 * The reserve of zeros. A rank that cannot stage a device buffer (no host
 * memory; or, with thousands of communicators, no mapping left under
 * vm.max_map_count) must still take part in the host collective, or every
 * other rank waits in it forever (issue #40, defect 2). It takes part on
 * zeros: an anonymous mapping made for the call, or where none can be made,
 * this one made in MPI_Init (MAP_NORESERVE: address space only; the pages
 * the host module touches are given back after the call). One call at a
 * time holds it.
 * ------------------------------------------------------------------------- */

static char* gpucoll_reserve_base;
static size_t gpucoll_reserve_bytes;
static atomic_flag gpucoll_reserve_busy = ATOMIC_FLAG_INIT;
static size_t gpucoll_reserve_used; /* by the call that holds it */

void mca_coll_gpucoll_staging_reserve(void) {
    if (NULL != gpucoll_reserve_base) return;
    /* 64 GiB of address space, at most 1/16 of an address-space limit. */
    size_t want = (size_t)64 << 30;
    struct rlimit as;
    if (0 == getrlimit(RLIMIT_AS, &as) && RLIM_INFINITY != as.rlim_cur && as.rlim_cur / 16 < want)
        want = (size_t)as.rlim_cur / 16;
    for (; want >= ((size_t)1 << 24); want >>= 1) {
        void* p = mmap(NULL, want, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (MAP_FAILED != p) {
            gpucoll_reserve_base = p;
            gpucoll_reserve_bytes = want;
            return;
        }
    }
}

void mca_coll_gpucoll_staging_unreserve(void) {
    if (NULL != gpucoll_reserve_base) munmap(gpucoll_reserve_base, gpucoll_reserve_bytes);
    gpucoll_reserve_base = NULL;
    gpucoll_reserve_bytes = 0;
}

/* bytes of zeros from the reserve for c (held until staging_free), or NULL. */
static void* gpucoll_reserve_get(mca_coll_gpucoll_staging_t* c, size_t bytes) {
    if (NULL == gpucoll_reserve_base) return NULL;
    if (!c->holds_reserve) {
        if (atomic_flag_test_and_set_explicit(&gpucoll_reserve_busy, memory_order_acquire))
            return NULL; /* another thread's call holds it */
        c->holds_reserve = true;
        gpucoll_reserve_used = 0;
    }
    const size_t page = 4096, at = (gpucoll_reserve_used + page - 1) / page * page;
    if (at > gpucoll_reserve_bytes || bytes > gpucoll_reserve_bytes - at) return NULL;
    gpucoll_reserve_used = at + bytes;
    return gpucoll_reserve_base + at;
}

/* Zeros again, and the touched pages back to the system (no new mapping). */
static void gpucoll_reserve_put(void) {
    if (gpucoll_reserve_used > 0)
        madvise(gpucoll_reserve_base, gpucoll_reserve_used, MADV_DONTNEED);
    gpucoll_reserve_used = 0;
    atomic_flag_clear_explicit(&gpucoll_reserve_busy, memory_order_release);
}

/* Test hooks, read in MPI_Init. GPUCOLL_TEST_STAGING_FAIL=N: this
 * process's N-th and later host allocations for staging fail, as they do
 * when the process runs out of memory. GPUCOLL_TEST_STAGING_NOMAP=1: so do
 * the mappings of zeros, as when it runs out of mappings (vm.max_map_count):
 * the reserve serves. */
static atomic_long gpucoll_stage_fail_countdown;
static bool gpucoll_stage_nomap;

void mca_coll_gpucoll_staging_test_hook(void) {
    const char* v = getenv("GPUCOLL_TEST_STAGING_FAIL");
    atomic_store(&gpucoll_stage_fail_countdown, NULL != v ? atol(v) : 0);
    v = getenv("GPUCOLL_TEST_STAGING_NOMAP");
    gpucoll_stage_nomap = NULL != v && 0 != strcmp(v, "0");
}

static bool gpucoll_stage_alloc_fails(void) {
    const long left = atomic_load_explicit(&gpucoll_stage_fail_countdown, memory_order_relaxed);
    if (left <= 0) return false; /* off */
    if (1 == left) return true;  /* failing from now on */
    atomic_fetch_sub_explicit(&gpucoll_stage_fail_countdown, 1, memory_order_relaxed);
    return false;
}

void mca_coll_gpucoll_staging_free(mca_coll_gpucoll_staging_t* c) {
    for (int i = 0; i < MCA_COLL_GPUCOLL_STAGE_MAX; ++i) {
        free(c->buf[i].runs);
        c->buf[i].runs = NULL;
        c->buf[i].nruns = 0;
        if (c->buf[i].reserved) {
            c->buf[i].reserved = false; /* given back below, with the whole reserve */
        } else if (c->buf[i].mapped) {
            munmap(c->buf[i].heap, c->buf[i].bytes);
            c->buf[i].mapped = false;
        } else if (c->buf[i].pooled) {
            pool_put(c->buf[i].heap, c->buf[i].cap, c->buf[i].pinned);
            c->buf[i].pooled = false;
        } else if (c->buf[i].pinned) {
            gpucoll_free_host(c->buf[i].heap);
        } else {
            free(c->buf[i].heap);
        }
        c->buf[i].heap = NULL;
        c->buf[i].pinned = false;
    }
    if (c->own_slots) atomic_flag_clear_explicit(&gpucoll_slots_busy, memory_order_release);
    c->own_slots = false;
    if (c->holds_reserve) gpucoll_reserve_put();
    c->holds_reserve = false;
}

/* Whether buffer i's staged span lies in one device allocation (the one
 * that holds the buffer pointer: with a negative lower bound the span
 * begins below it, and a lookup there would find none); with MPI_BOTTOM,
 * the one that holds the span's first byte, which must be device memory
 * (a datatype that begins in host memory and reaches device memory is
 * refused, never staged in part). Says why not (GPUCOLL_ERROR) once per
 * call. */
static bool gpucoll_stage_fits(mca_coll_gpucoll_staging_t* c, const mca_coll_gpucoll_sbuf_t* s) {
    const bool bottom = NULL == s->user;
    const char* anchor = bottom ? gpucoll_at(NULL, s->lo) : s->user;
    const char* why = NULL;
    char mixed[160];
    if (bottom && GPUCOLL_MEM_DEVICE != gpucoll_mem_type(anchor)) {
        snprintf(mixed, sizeof mixed,
                 "MPI_BOTTOM datatype begins in host memory (%p) and reaches device memory: "
                 "not supported",
                 (const void*)anchor);
        why = mixed;
    } else if (GPUCOLL_SUCCESS !=
               gpucoll_check_span(anchor, bottom ? 0 : s->lo, s->bytes,
                                  bottom ? "device buffer (MPI_BOTTOM)" : "device buffer")) {
        why = gpucoll_last_error();
    }
    if (NULL == why) return true;
    if (!c->refused) {
        c->refused_error = MPI_ERR_BUFFER;
        GPUCOLL_ERROR("%s: %s; %s", gpucoll_coll_name(c->coll), why,
                      GPUCOLL_COLL_REDUCE_LOCAL == c->coll
                          ? "MPI_ERR_BUFFER"
                          : "this rank takes part on zeros and returns MPI_ERR_BUFFER");
    }
    c->refused = true;
    return false;
}

/* Zeros for the host module in place of buffer i's span, in pages it
 * touches only (with MPI_BOTTOM the span may run between unrelated
 * allocations): a mapping of its own, else the reserve. False (errno: the
 * mapping's) when neither can be had. */
static bool gpucoll_stage_zeros(mca_coll_gpucoll_staging_t* c, mca_coll_gpucoll_sbuf_t* s) {
    errno = ENOMEM; /* the test hook's "mapping" */
    void* p = gpucoll_stage_nomap ? MAP_FAILED
                                  : mmap(NULL, s->bytes, PROT_READ | PROT_WRITE,
                                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    const int map_errno = errno;
    if (MAP_FAILED != p) {
        s->heap = p;
        s->mapped = true;
    } else if (NULL != (p = gpucoll_reserve_get(c, s->bytes))) {
        s->heap = p;
        s->mapped = s->reserved = true;
    } else {
        errno = map_errno;
        return false;
    }
    s->host = gpucoll_at(p, -s->lo);
    return true;
}

/* Host memory of this rank's own for buffer i's span, or NULL. */
static void* gpucoll_stage_memory(mca_coll_gpucoll_staging_t* c, int i) {
    mca_coll_gpucoll_sbuf_t* s = &c->buf[i];
    if (gpucoll_stage_alloc_fails()) return NULL;
    if (c->persistent && GPUCOLL_SUCCESS == gpucoll_malloc_host(&s->heap, s->bytes)) {
        s->pinned = true;
        return s->heap;
    }
    if (c->pooled) {
        void* p = s->heap = pool_get(s->bytes, &s->cap, &s->pinned);
        s->pooled = NULL != p;
        return p;
    }
    void* p = NULL;
    if (c->own_slots && GPUCOLL_SUCCESS == gpucoll_staging_buffer(i, s->bytes, &p)) return p;
    if (c->own_slots) {
        GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_CALL,
                        "no pinned staging buffer of %zu bytes (%s): using heap memory", s->bytes,
                        gpucoll_last_error());
    }
    return s->heap = malloc(s->bytes);
}

/* Host memory for the staged span of buffer i (already described). A span
 * this rank cannot stage (refused, or no memory) becomes zeros: the rank
 * still takes part, and returns the error at the end. */
static int gpucoll_stage_alloc(mca_coll_gpucoll_staging_t* c, int i) {
    mca_coll_gpucoll_sbuf_t* s = &c->buf[i];
    if (0 == s->bytes) {
        s->host = gpucoll_at(gpucoll_empty_span, -s->lo); /* never dereferenced */
        return OMPI_SUCCESS;
    }
    if (gpucoll_stage_fits(c, s)) {
        void* p = gpucoll_stage_memory(c, i);
        if (NULL != p) {
            s->host = gpucoll_at(p, -s->lo);
            return OMPI_SUCCESS;
        }
        if (!c->refused)
            GPUCOLL_ERROR(
                "%s: out of host memory staging %zu bytes; this rank takes part on "
                "zeros and returns MPI_ERR_NO_MEM",
                gpucoll_coll_name(c->coll), s->bytes);
        if (!c->refused) c->refused_error = MPI_ERR_NO_MEM;
        c->refused = true;
    }
    if (gpucoll_stage_zeros(c, s)) return OMPI_SUCCESS;
    /* Not even zeros (the reserve is smaller than the span, or another
     * thread's call holds it): this rank cannot take part; its peers wait.
     * The span may run between unrelated allocations: a process may have no
     * hole that large (seen under Open MPI 6.0, for a span of 46 TB from a
     * host block to a device one). */
    const int map_errno = errno;
    GPUCOLL_ERROR(
        "%s: no memory even for %zu bytes of zeros to take part with (mmap: %s; the "
        "reserve holds %zu bytes); the other ranks of this call will wait for this one",
        gpucoll_coll_name(c->coll), s->bytes, strerror(map_errno), gpucoll_reserve_bytes);
    return c->refused_error;
}

/* Exact copy-back while it stays cheap: at most this many runs, or runs of
 * this many bytes on average (a column of a large matrix is one 2D run;
 * an irregular indexed type of a million 4-byte pieces is not worth it). */
#define GPUCOLL_EXACT_MAX_RUNS 1024
#define GPUCOLL_EXACT_MIN_RUN_BYTES 4096

/* The copy runs of buffer i's written bytes, when they have gaps. Without
 * them (out of memory, a datatype the convertor cannot walk), the whole
 * span goes back, its gaps copied in first: as before, correct unless the
 * application writes a gap during the call. */
static void gpucoll_stage_runs(mca_coll_gpucoll_staging_t* c, int i) {
    mca_coll_gpucoll_sbuf_t* s = &c->buf[i];
    if (!s->out_exact || 0 == s->out_bytes || c->refused) return;
    const int rc =
        mca_coll_gpucoll_layout_runs(s->user, &s->out_blocks, &s->runs, &s->nruns, &s->out_covered);
    /* From the written span's first byte (copy_out's bases): with
     * MPI_BOTTOM, s->user is NULL and the offsets are addresses. */
    for (size_t k = 0; OMPI_SUCCESS == rc && k < s->nruns; ++k) s->runs[k].offset -= s->out_lo;
    if (OMPI_SUCCESS == rc && s->out_covered == s->out_bytes) {
        /* No gap after all (a type listing its pieces out of address order
         * is not contiguous, yet covers its span): one copy, not runs. */
        GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_CALL,
                        "%s: buffer %d covers its %zu bytes: copied back whole",
                        gpucoll_coll_name(c->coll), i, s->out_bytes);
        free(s->runs);
        s->runs = NULL;
        s->nruns = 0;
        s->out_exact = false;
        return;
    }
    if (OMPI_SUCCESS == rc && s->nruns > GPUCOLL_EXACT_MAX_RUNS &&
        s->nruns > s->out_covered / GPUCOLL_EXACT_MIN_RUN_BYTES) {
        /* Each run is a copy the GPU's engines start on their own (a few
         * microseconds on CUDA): a million small pieces would take seconds.
         * The whole span instead, gaps copied in first. */
        GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_CALL,
                        "%s: buffer %d would be %zu runs of %zu bytes on average: the whole span "
                        "is copied back (a write into its gaps during the call is not kept)",
                        gpucoll_coll_name(c->coll), i, s->nruns, s->out_covered / s->nruns);
        free(s->runs);
        s->runs = NULL;
        s->nruns = 0;
        s->out_exact = false;
        s->copy_in = true;
        return;
    }
    if (OMPI_SUCCESS == rc) {
        GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_CALL,
                        "%s: buffer %d copied back as %zu run(s), %zu of its %zu bytes",
                        gpucoll_coll_name(c->coll), i, s->nruns, s->out_covered, s->out_bytes);
        return;
    }
    GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_CALL,
                    "%s: no layout of the receive datatype (%d): the whole span is copied back",
                    gpucoll_coll_name(c->coll), rc);
    s->out_exact = false;
    s->copy_in = true;
}

/* Device -> host: the whole staged span of buffer i. */
static int gpucoll_copy_in(mca_coll_gpucoll_staging_t* c, int i) {
    mca_coll_gpucoll_sbuf_t* s = &c->buf[i];
    if (!s->device || 0 == s->bytes) return OMPI_SUCCESS;
    if (c->refused) { /* read nothing past the allocation: zeros instead */
        if (!s->mapped) memset(gpucoll_at(s->host, s->lo), 0, s->bytes); /* mapped: zeros */
        return OMPI_SUCCESS;
    }
    int rc = gpucoll_memcpy(gpucoll_at(s->host, s->lo), gpucoll_at(s->user, s->lo), s->bytes);
    if (GPUCOLL_SUCCESS != rc) return mca_coll_gpucoll_core_error("staging copy to host", rc);
    c->copied += s->bytes;
    return OMPI_SUCCESS;
}

/* ---------------------------------------------------------------------------
 * Generic staging over described buffers (nonblocking, persistent, and the
 * collectives only the staged path serves)
 * ------------------------------------------------------------------------- */

int mca_coll_gpucoll_staging_alloc(mca_coll_gpucoll_staging_t* c, bool use_slots) {
    c->own_slots = use_slots && !c->persistent &&
                   !atomic_flag_test_and_set_explicit(&gpucoll_slots_busy, memory_order_acquire);
    for (int i = 0; i < MCA_COLL_GPUCOLL_STAGE_MAX; ++i) {
        mca_coll_gpucoll_sbuf_t* s = &c->buf[i];
        s->host = s->user;
        if (!s->device) continue;
        int rc = gpucoll_stage_alloc(c, i);
        if (OMPI_SUCCESS != rc) return rc;
        gpucoll_stage_runs(c, i);
    }
    return OMPI_SUCCESS;
}

int mca_coll_gpucoll_staging_copy_in(mca_coll_gpucoll_staging_t* c) {
    for (int i = 0; i < MCA_COLL_GPUCOLL_STAGE_MAX; ++i) {
        if (!c->buf[i].copy_in) continue;
        int rc = gpucoll_copy_in(c, i);
        if (OMPI_SUCCESS != rc) return rc;
    }
    return OMPI_SUCCESS;
}

int mca_coll_gpucoll_staging_copy_out(mca_coll_gpucoll_staging_t* c) {
    if (c->refused) return OMPI_SUCCESS; /* refused: nothing is written */
    for (int i = 0; i < MCA_COLL_GPUCOLL_STAGE_MAX; ++i) {
        mca_coll_gpucoll_sbuf_t* s = &c->buf[i];
        if (!s->device || 0 == s->out_bytes) continue;
        int rc = s->out_exact
                     ? gpucoll_memcpy_runs(gpucoll_at(s->user, s->out_lo),
                                           gpucoll_at(s->host, s->out_lo), s->runs, s->nruns)
                     : gpucoll_memcpy(gpucoll_at(s->user, s->out_lo),
                                      gpucoll_at(s->host, s->out_lo), s->out_bytes);
        if (GPUCOLL_SUCCESS != rc) return mca_coll_gpucoll_core_error("staging copy to device", rc);
        c->copied += s->out_exact ? s->out_covered : s->out_bytes;
    }
    return OMPI_SUCCESS;
}

void mca_coll_gpucoll_staging_record(mca_coll_gpucoll_staging_t* c, gpucoll_form_t form) {
    if (!c->buf[0].device && !c->buf[1].device) { /* a host request that posts declines */
        gpucoll_counters_record_form(c->coll, GPUCOLL_PATH_DELEGATED, form, 0, "delegated");
        return;
    }
    gpucoll_counters_record_form(c->coll, GPUCOLL_PATH_STAGED, form, c->copied, "staged");
    GPUCOLL_VERBOSE(MCA_COLL_GPUCOLL_VERBOSE_CALL,
                    "%s (%s): staged (buffer 0: %s %zu B, buffer 1: %s %zu B), %llu B copied in",
                    gpucoll_coll_name(c->coll), gpucoll_form_name(form),
                    c->buf[0].device ? "device" : "host", c->buf[0].bytes,
                    c->buf[1].device ? "device" : "host", c->buf[1].bytes,
                    (unsigned long long)c->copied);
}

int mca_coll_gpucoll_staging_begin(mca_coll_gpucoll_staging_t* c) {
    int rc = mca_coll_gpucoll_staging_alloc(c, true);
    return OMPI_SUCCESS == rc ? mca_coll_gpucoll_staging_copy_in(c) : rc;
}

int mca_coll_gpucoll_staging_end(mca_coll_gpucoll_staging_t* c, int rc) {
    if (OMPI_SUCCESS == rc) rc = mca_coll_gpucoll_staging_copy_out(c);
    if (OMPI_SUCCESS == rc && c->refused) rc = c->refused_error;
    if (OMPI_SUCCESS == rc) mca_coll_gpucoll_staging_record(c, GPUCOLL_FORM_BLOCKING);
    mca_coll_gpucoll_staging_free(c);
    return rc;
}

/* ---------------------------------------------------------------------------
 * The blocking collectives of the accelerated path, staged
 * ------------------------------------------------------------------------- */

/* Describes the call (describe_<name>), stages it and runs the saved host
 * function name on the host copies: buffer 0 and 1 are B0 and B1. */
#define GPUCOLL_STAGED(name, DESCRIBE, ...)                                \
    do {                                                                   \
        mca_coll_gpucoll_staging_t c;                                      \
        if (MCA_COLL_GPUCOLL_DESCRIBE_ERROR == (DESCRIBE)) return c.error; \
        int rc = mca_coll_gpucoll_staging_begin(&c);                       \
        if (OMPI_SUCCESS == rc) {                                          \
            mca_coll_gpucoll_enter_host(m);                                \
            rc = m->prev_##name(__VA_ARGS__, m->prev_##name##_module);     \
            mca_coll_gpucoll_leave_host(m);                                \
        }                                                                  \
        return mca_coll_gpucoll_staging_end(&c, rc);                       \
    } while (0)
#define B0 c.buf[0].host
#define B1 c.buf[1].host

int mca_coll_gpucoll_staged_allreduce(const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                                      struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                      struct ompi_communicator_t* comm,
                                      mca_coll_gpucoll_module_t* m) {
    GPUCOLL_STAGED(allreduce,
                   mca_coll_gpucoll_describe_allreduce(&c, sbuf, rbuf, count, dtype, op, comm), B0,
                   B1, count, dtype, op, comm);
}

int mca_coll_gpucoll_staged_bcast(void* buf, mca_coll_gpucoll_count_t count,
                                  struct ompi_datatype_t* dtype, int root,
                                  struct ompi_communicator_t* comm, mca_coll_gpucoll_module_t* m) {
    GPUCOLL_STAGED(bcast, mca_coll_gpucoll_describe_bcast(&c, buf, count, dtype, root, comm), B0,
                   count, dtype, root, comm);
}

int mca_coll_gpucoll_staged_allgather(const void* sbuf, mca_coll_gpucoll_count_t scount,
                                      struct ompi_datatype_t* sdtype, void* rbuf,
                                      mca_coll_gpucoll_count_t rcount,
                                      struct ompi_datatype_t* rdtype,
                                      struct ompi_communicator_t* comm,
                                      mca_coll_gpucoll_module_t* m) {
    GPUCOLL_STAGED(
        allgather,
        mca_coll_gpucoll_describe_allgather(&c, sbuf, scount, sdtype, rbuf, rcount, rdtype, comm),
        B0, scount, sdtype, B1, rcount, rdtype, comm);
}

int mca_coll_gpucoll_staged_reduce_scatter(const void* sbuf, void* rbuf,
                                           mca_coll_gpucoll_counts_t rcounts,
                                           struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                           struct ompi_communicator_t* comm,
                                           mca_coll_gpucoll_module_t* m) {
    GPUCOLL_STAGED(
        reduce_scatter,
        mca_coll_gpucoll_describe_reduce_scatter(&c, sbuf, rbuf, rcounts, dtype, op, comm), B0, B1,
        rcounts, dtype, op, comm);
}

int mca_coll_gpucoll_staged_reduce_scatter_block(
    const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t rcount, struct ompi_datatype_t* dtype,
    struct ompi_op_t* op, struct ompi_communicator_t* comm, mca_coll_gpucoll_module_t* m) {
    GPUCOLL_STAGED(
        reduce_scatter_block,
        mca_coll_gpucoll_describe_reduce_scatter_block(&c, sbuf, rbuf, rcount, dtype, op, comm), B0,
        B1, rcount, dtype, op, comm);
}

int mca_coll_gpucoll_staged_reduce(const void* sbuf, void* rbuf, mca_coll_gpucoll_count_t count,
                                   struct ompi_datatype_t* dtype, struct ompi_op_t* op, int root,
                                   struct ompi_communicator_t* comm, mca_coll_gpucoll_module_t* m) {
    GPUCOLL_STAGED(reduce,
                   mca_coll_gpucoll_describe_reduce(&c, sbuf, rbuf, count, dtype, op, root, comm),
                   B0, B1, count, dtype, op, root, comm);
}

int mca_coll_gpucoll_staged_reduce_local(const void* inbuf, void* inoutbuf,
                                         mca_coll_gpucoll_count_t count,
                                         struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                                         mca_coll_gpucoll_module_t* m) {
    /* Not GPUCOLL_STAGED: reduce_local leaves host_depth alone (threads call
     * it at once, coll_gpucoll_module.c). */
    mca_coll_gpucoll_staging_t c;
    if (MCA_COLL_GPUCOLL_DESCRIBE_ERROR ==
        mca_coll_gpucoll_describe_reduce_local(&c, inbuf, inoutbuf, count, dtype))
        return c.error;
    int rc = mca_coll_gpucoll_staging_begin(&c);
    /* Refused: no peer waits for a local reduction, so nothing runs (Open
     * MPI's would write a host inoutbuf, reducing zeros into it). */
    if (OMPI_SUCCESS == rc && !c.refused)
        rc = m->prev_reduce_local(B0, B1, count, dtype, op, m->prev_reduce_local_module);
    return mca_coll_gpucoll_staging_end(&c, rc);
}
