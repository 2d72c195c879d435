/*
 * mpi_test_util.h - shared helpers of the MPI test programs (test/mpi/test_*.c).
 *
 * - buffers in host or "device" memory (gpucoll_malloc_device: emu memory that
 *   the host cannot touch), initialised from and read back into host images
 *   through gpucoll_memcpy, with guard bytes around every buffer;
 * - a table of predefined datatypes with, per type, a deterministic generator
 *   of each rank's contribution, the reference reduction (computed locally,
 *   without MPI) and a value comparison;
 * - one engine that runs a described collective call (tu_run_case) and checks
 *   the result, the untouched bytes (guards, send buffers, gaps) and the path
 *   the counters say the call took;
 * - failure reports that name rank, collective, type, op, count, offsets and
 *   the element; a final collective AND so that every rank agrees on the exit
 *   status (tu_finalize).
 *
 * Options understood by every program (tu_parse_option):
 *   --expect staged|accelerated|any   path of device-buffer calls (default staged)
 *   --algorithm [COLL=]NAME           last_algorithm of accelerated calls (of
 *                                     collective COLL, e.g. allreduce=ring;
 *                                     repeatable)
 *   --expect-host delegated|none      path of host-buffer calls (none: the
 *                                     component must not count them, i.e. it is
 *                                     not loaded or not selected)
 *   --verbose                         print every case on rank 0
 */
#ifndef GPUCOLL_MPI_TEST_UTIL_H
#define GPUCOLL_MPI_TEST_UTIL_H

#include <complex.h>
#include <inttypes.h>
#include <limits.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpucoll.h"

/* ------------------------------------------------------------------------
 * Global state and reporting
 * ---------------------------------------------------------------------- */

#define TU_PATH_BIT(p) (1u << (p))
#define TU_MASK_DEVICE_ANY \
    (TU_PATH_BIT(GPUCOLL_PATH_ACCELERATED) | TU_PATH_BIT(GPUCOLL_PATH_STAGED))
#define TU_MASK_ALL (TU_MASK_DEVICE_ANY | TU_PATH_BIT(GPUCOLL_PATH_DELEGATED))
/* Expectation "the call is not counted at all" (component absent). */
#define TU_MASK_UNCOUNTED 0u
/* Flag: the call may also not be counted at all (zero counts: Open MPI's
 * MPI layer returns before the coll framework for most of them). */
#define TU_MASK_MAY_SKIP (1u << 8)
/* Flag: calls on the delegated path besides this one are not counted
 * (Open MPI's own, started by its progress engine inside the call). */
#define TU_MASK_EXTRA_DELEGATED (1u << 9)
/* tu_case_t.expect_mask: derive from the buffers and the options. */
#define TU_MASK_DEFAULT (~0u)

#define TU_MAX_REPORTS 40 /* failure lines per rank */

typedef struct tu_state {
    int world_rank, world_size;
    long checks, failures, reported;
    unsigned expect_device;                   /* allowed paths of device-buffer calls */
    unsigned expect_coll[GPUCOLL_COLL_COUNT]; /* per collective, if nonzero (--expect COLL=PATH) */
    unsigned expect_host;                     /* allowed paths of host-buffer calls */
    /* expected last_algorithm of accelerated calls per collective, or NULL */
    const char* algorithm[GPUCOLL_COLL_COUNT];
    int verbose;
    int pool_memory; /* device buffers of even ranks from gpucoll_malloc_device_pool */
    const char* program;
} tu_state_t;

static tu_state_t tu = {.world_size = 1,
                        .expect_device = TU_PATH_BIT(GPUCOLL_PATH_STAGED),
                        .expect_host = TU_PATH_BIT(GPUCOLL_PATH_DELEGATED),
                        .program = "test"};

static inline void tu_fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void tu_fail(const char* fmt, ...) {
    tu.failures++;
    if (tu.reported++ >= TU_MAX_REPORTS) {
        if (tu.reported == TU_MAX_REPORTS + 1)
            fprintf(stderr, "[rank %d] FAIL: further failures not shown\n", tu.world_rank);
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "[rank %d] FAIL: %s\n", tu.world_rank, msg);
    fflush(stderr);
}

/* Counts a check; reports fmt... when cond is false. Returns cond. */
#define TU_CHECK(cond, ...) (tu.checks++, (cond) ? 1 : (tu_fail(__VA_ARGS__), 0))

/* Unrecoverable setup errors (allocation failures): abort the whole job
 * rather than leave the other ranks waiting in a collective. */
#define TU_DIE(...)                                          \
    do {                                                     \
        fprintf(stderr, "[rank %d] FATAL: ", tu.world_rank); \
        fprintf(stderr, __VA_ARGS__);                        \
        fprintf(stderr, " (%s:%d)\n", __FILE__, __LINE__);   \
        fflush(stderr);                                      \
        MPI_Abort(MPI_COMM_WORLD, 2);                        \
        exit(2);                                             \
    } while (0)

static inline void tu_usage_common(void) {
    fprintf(stderr,
            "common options:\n"
            "  --expect staged|accelerated|any  path of device-buffer calls (default staged)\n"
            "  --expect COLL=PATH               the same, for one collective\n"
            "  --algorithm [COLL=]NAME          last_algorithm of accelerated calls (of COLL)\n"
            "  --expect-host delegated|none     path of host-buffer calls (default delegated)\n"
            "  --pool-memory                    even ranks' device buffers are pool memory\n"
            "                                   (IPC cannot export it: scratch-copy fallback)\n"
            "  --verbose                        print every case\n");
}

/* Consumes argv[*i] (and its value) if it is a common option: returns 1.
 * Returns 0 if the option is not a common one, -1 on a bad value. */
static inline int tu_parse_option(int argc, char** argv, int* i) {
    const char* a = argv[*i];
    const char* v = (*i + 1 < argc) ? argv[*i + 1] : NULL;
    if (strcmp(a, "--expect") == 0 && v && strchr(v, '=')) { /* COLL=PATH */
        const char* eq = strchr(v, '=');
        unsigned mask = strcmp(eq + 1, "staged") == 0        ? TU_PATH_BIT(GPUCOLL_PATH_STAGED)
                        : strcmp(eq + 1, "accelerated") == 0 ? TU_PATH_BIT(GPUCOLL_PATH_ACCELERATED)
                        : strcmp(eq + 1, "any") == 0         ? TU_MASK_DEVICE_ANY
                                                             : 0;
        int matched = 0;
        for (int c = 0; c < GPUCOLL_COLL_COUNT && mask; c++) {
            const char* name = gpucoll_coll_name((gpucoll_coll_t)c);
            if (strlen(name) == (size_t)(eq - v) && strncmp(v, name, strlen(name)) == 0) {
                tu.expect_coll[c] = mask;
                matched = 1;
            }
        }
        if (!matched) return -1;
        ++*i;
        return 1;
    }
    if (strcmp(a, "--expect") == 0 && v) {
        if (strcmp(v, "staged") == 0)
            tu.expect_device = TU_PATH_BIT(GPUCOLL_PATH_STAGED);
        else if (strcmp(v, "accelerated") == 0)
            tu.expect_device = TU_PATH_BIT(GPUCOLL_PATH_ACCELERATED);
        else if (strcmp(v, "any") == 0)
            tu.expect_device = TU_MASK_DEVICE_ANY;
        else
            return -1;
        ++*i;
        return 1;
    }
    if (strcmp(a, "--expect-host") == 0 && v) {
        if (strcmp(v, "delegated") == 0)
            tu.expect_host = TU_PATH_BIT(GPUCOLL_PATH_DELEGATED);
        else if (strcmp(v, "none") == 0)
            tu.expect_host = TU_MASK_UNCOUNTED;
        else
            return -1;
        ++*i;
        return 1;
    }
    if (strcmp(a, "--algorithm") == 0 && v) {
        const char* eq = strchr(v, '=');
        int matched = 0;
        for (int c = 0; c < GPUCOLL_COLL_COUNT; c++) {
            const char* name = gpucoll_coll_name((gpucoll_coll_t)c);
            if (!eq) {
                if (c != GPUCOLL_COLL_REDUCE_LOCAL) tu.algorithm[c] = v;
                matched = 1;
            } else if (strlen(name) == (size_t)(eq - v) && strncmp(v, name, strlen(name)) == 0) {
                tu.algorithm[c] = eq + 1;
                matched = 1;
            }
        }
        if (!matched) return -1;
        ++*i;
        return 1;
    }
    if (strcmp(a, "--verbose") == 0) {
        tu.verbose = 1;
        return 1;
    }
    if (strcmp(a, "--pool-memory") == 0) {
        tu.pool_memory = 1;
        return 1;
    }
    return 0;
}

/* After MPI_Init. */
static inline void tu_init(const char* program) {
    tu.program = program;
    MPI_Comm_rank(MPI_COMM_WORLD, &tu.world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &tu.world_size);
}

/* Requires a device backend (the scripts run with coll_gpucoll_device=emu). */
static inline void tu_require_device_backend(void) {
    const char* b = gpucoll_backend();
    if (strcmp(b, "emu") != 0 && strcmp(b, "cuda") != 0)
        TU_DIE(
            "no device backend (gpucoll_backend() = \"%s\"): run with "
            "--mca coll_gpucoll_device emu or GPUCOLL_DEVICE=emu",
            b);
    /* One GPU per local rank, as applications do (GPUCOLL_LOCAL_GPU overrides). */
    if (gpucoll_select_local_device() < 0)
        TU_DIE("cannot select this rank's GPU: %s", gpucoll_last_error());
}

/* Collective over MPI_COMM_WORLD (host buffers only): every rank learns
 * whether any rank failed. Returns the exit status for main(). */
static inline int tu_finalize(void) {
    int mine = tu.failures > 0 ? 1 : 0, any = 1;
    long checks = tu.checks, all_checks = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Reduce(&checks, &all_checks, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (tu.world_rank == 0) {
        printf("%s: %s (%d ranks, %ld checks, backend %s)\n", tu.program, any ? "FAIL" : "PASS",
               tu.world_size, all_checks, gpucoll_backend());
        fflush(stdout);
    }
    if (mine) fprintf(stderr, "[rank %d] %ld failure(s)\n", tu.world_rank, tu.failures);
    return any ? 1 : 0;
}

/* ------------------------------------------------------------------------
 * Deterministic data
 * ---------------------------------------------------------------------- */

static inline uint64_t tu_mix(uint64_t x) { /* splitmix64 finaliser */
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
static inline uint64_t tu_hash(uint32_t seed, int rank, size_t i) {
    return tu_mix(tu_mix(((uint64_t)seed << 20) ^ (uint64_t)(unsigned)rank) ^ (uint64_t)i);
}
/* Byte k of the initial contents of buffers (what must survive where MPI
 * may not write). */
static inline unsigned char tu_sentinel(uint32_t seed, size_t k) {
    return (unsigned char)(0xA5u ^ (unsigned)(k * 13u) ^ seed);
}

/* ------------------------------------------------------------------------
 * Operations and datatypes
 * ---------------------------------------------------------------------- */

typedef enum tu_op {
    TU_OP_SUM = 0,
    TU_OP_PROD,
    TU_OP_MIN,
    TU_OP_MAX,
    TU_OP_LAND,
    TU_OP_LOR,
    TU_OP_LXOR,
    TU_OP_BAND,
    TU_OP_BOR,
    TU_OP_BXOR,
    TU_OP_MAXLOC,
    TU_OP_MINLOC,
    TU_OP_COUNT,
    TU_OP_NONE = TU_OP_COUNT /* data movement: any bit pattern */
} tu_op_t;

static inline const char* tu_op_name(int op) {
    static const char* const names[] = {"SUM",  "PROD", "MIN", "MAX",  "LAND",   "LOR",
                                        "LXOR", "BAND", "BOR", "BXOR", "MAXLOC", "MINLOC"};
    return (op >= 0 && op < TU_OP_COUNT) ? names[op] : "-";
}
static inline MPI_Op tu_mpi_op(int op) {
    switch (op) {
        case TU_OP_SUM:
            return MPI_SUM;
        case TU_OP_PROD:
            return MPI_PROD;
        case TU_OP_MIN:
            return MPI_MIN;
        case TU_OP_MAX:
            return MPI_MAX;
        case TU_OP_LAND:
            return MPI_LAND;
        case TU_OP_LOR:
            return MPI_LOR;
        case TU_OP_LXOR:
            return MPI_LXOR;
        case TU_OP_BAND:
            return MPI_BAND;
        case TU_OP_BOR:
            return MPI_BOR;
        case TU_OP_BXOR:
            return MPI_BXOR;
        case TU_OP_MAXLOC:
            return MPI_MAXLOC;
        case TU_OP_MINLOC:
            return MPI_MINLOC;
        default:
            return MPI_OP_NULL;
    }
}

/* MPI's groups of predefined types (MPI 4.1, 6.9.2). */
typedef enum tu_class {
    TU_CLS_SINT,    /* C integer, signed */
    TU_CLS_UINT,    /* C integer, unsigned */
    TU_CLS_FLOAT,   /* floating point */
    TU_CLS_COMPLEX, /* complex */
    TU_CLS_BOOL,    /* logical */
    TU_CLS_BYTE,    /* byte */
    TU_CLS_PAIR,    /* MINLOC/MAXLOC pairs (some with padding) */
    TU_CLS_MOVE,    /* not reducible (MPI_CHAR): data movement only */
    TU_CLS_USER     /* reduced by a user-defined op (apply implements it) */
} tu_class_t;

static inline int tu_op_valid(tu_class_t cls, int op) {
    switch (cls) {
        case TU_CLS_SINT:
        case TU_CLS_UINT:
            return op <= TU_OP_BXOR;
        case TU_CLS_FLOAT:
            return op <= TU_OP_MAX;
        case TU_CLS_COMPLEX:
            return op == TU_OP_SUM || op == TU_OP_PROD;
        case TU_CLS_BOOL:
            return op == TU_OP_LAND || op == TU_OP_LOR || op == TU_OP_LXOR;
        case TU_CLS_BYTE:
            return op == TU_OP_BAND || op == TU_OP_BOR || op == TU_OP_BXOR;
        case TU_CLS_PAIR:
            return op == TU_OP_MAXLOC || op == TU_OP_MINLOC;
        case TU_CLS_MOVE:
        case TU_CLS_USER:
            return 0;
    }
    return 0;
}

typedef struct tu_type {
    const char* name;
    MPI_Datatype dt;
    size_t size; /* == MPI extent */
    tu_class_t cls;
    /* contribution of `rank` at element i for op (TU_OP_NONE: movement) */
    void (*gen)(void* dst, size_t i, int rank, int op, uint32_t seed);
    /* acc = acc op in (acc: the partial result of the lower ranks) */
    void (*apply)(void* acc, const void* in, int op);
    int (*eq)(const void* a, const void* b);
    void (*fmt)(char* buf, size_t n, const void* v);
} tu_type_t;

/* Values keep every reduction exact and free of overflow for up to 6 ranks:
 * SUM small integers (quarters for floating point), PROD mostly 1 with some
 * 2, -1 (and 0.5), MIN/MAX and bitwise ops wide ranges, logical ops a mix
 * of zeros and non-zeros (different non-zero values, negative ones too). */
#define TU_DEF_INT(NAME, T, SIGNED, PRI, PCAST)                                              \
    static inline void tu_gen_##NAME(void* dst, size_t i, int rank, int op, uint32_t seed) { \
        uint64_t h = tu_hash(seed, rank, i);                                                 \
        T v;                                                                                 \
        switch (op) {                                                                        \
            case TU_OP_SUM:                                                                  \
                v = SIGNED ? (T)((int)(h % 21u) - 10) : (T)(h % 21u);                        \
                break;                                                                       \
            case TU_OP_PROD: {                                                               \
                unsigned r = (unsigned)(h % 8u);                                             \
                v = (r == 0 && rank < 6) ? (T)2 : (r == 1 && SIGNED) ? (T)(-1) : (T)1;       \
                break;                                                                       \
            }                                                                                \
            case TU_OP_LAND:                                                                 \
            case TU_OP_LOR:                                                                  \
            case TU_OP_LXOR: {                                                               \
                unsigned zeros = op == TU_OP_LAND ? 1u : op == TU_OP_LOR ? 3u : 2u;          \
                int mag = (int)((h >> 8) % 5u) + 1;                                          \
                v = (h % 4u) < zeros ? (T)0 : (T)((SIGNED && (h & 64u)) ? -mag : mag);       \
                break;                                                                       \
            }                                                                                \
            default:                                                                         \
                v = (T)h;                                                                    \
                break;                                                                       \
        }                                                                                    \
        memcpy(dst, &v, sizeof v);                                                           \
    }                                                                                        \
    static inline void tu_apply_##NAME(void* acc, const void* in, int op) {                  \
        T a, b;                                                                              \
        memcpy(&a, acc, sizeof a);                                                           \
        memcpy(&b, in, sizeof b);                                                            \
        switch (op) {                                                                        \
            case TU_OP_SUM:                                                                  \
                a = (T)(a + b);                                                              \
                break;                                                                       \
            case TU_OP_PROD:                                                                 \
                a = (T)(a * b);                                                              \
                break;                                                                       \
            case TU_OP_MIN:                                                                  \
                a = b < a ? b : a;                                                           \
                break;                                                                       \
            case TU_OP_MAX:                                                                  \
                a = b > a ? b : a;                                                           \
                break;                                                                       \
            case TU_OP_LAND:                                                                 \
                a = (T)(a && b);                                                             \
                break;                                                                       \
            case TU_OP_LOR:                                                                  \
                a = (T)(a || b);                                                             \
                break;                                                                       \
            case TU_OP_LXOR:                                                                 \
                a = (T)(!a != !b);                                                           \
                break;                                                                       \
            case TU_OP_BAND:                                                                 \
                a = (T)(a & b);                                                              \
                break;                                                                       \
            case TU_OP_BOR:                                                                  \
                a = (T)(a | b);                                                              \
                break;                                                                       \
            case TU_OP_BXOR:                                                                 \
                a = (T)(a ^ b);                                                              \
                break;                                                                       \
            default:                                                                         \
                break;                                                                       \
        }                                                                                    \
        memcpy(acc, &a, sizeof a);                                                           \
    }                                                                                        \
    static inline int tu_eq_##NAME(const void* pa, const void* pb) {                         \
        T a, b;                                                                              \
        memcpy(&a, pa, sizeof a);                                                            \
        memcpy(&b, pb, sizeof b);                                                            \
        return a == b;                                                                       \
    }                                                                                        \
    static inline void tu_fmt_##NAME(char* buf, size_t n, const void* p) {                   \
        T a;                                                                                 \
        memcpy(&a, p, sizeof a);                                                             \
        snprintf(buf, n, "%" PRI, (PCAST)a);                                                 \
    }

#define TU_DEF_FLOAT(NAME, T)                                                                \
    static inline void tu_gen_##NAME(void* dst, size_t i, int rank, int op, uint32_t seed) { \
        uint64_t h = tu_hash(seed, rank, i);                                                 \
        T v;                                                                                 \
        switch (op) {                                                                        \
            case TU_OP_SUM:                                                                  \
                v = (T)((int)(h % 41u) - 20) * (T)0.25;                                      \
                break;                                                                       \
            case TU_OP_PROD: {                                                               \
                unsigned r = (unsigned)(h % 8u);                                             \
                v = (r == 0 && rank < 6) ? (T)2 : r == 1 ? (T)(-1) : r == 2 ? (T)0.5 : (T)1; \
                break;                                                                       \
            }                                                                                \
            case TU_OP_MIN:                                                                  \
            case TU_OP_MAX:                                                                  \
                v = (T)((int)(h % 2001u) - 1000) * (T)0.125;                                 \
                break;                                                                       \
            default:                                                                         \
                v = (T)((double)(int64_t)(h >> 11) / 1048576.0);                             \
                break;                                                                       \
        }                                                                                    \
        memcpy(dst, &v, sizeof v);                                                           \
    }                                                                                        \
    static inline void tu_apply_##NAME(void* acc, const void* in, int op) {                  \
        T a, b;                                                                              \
        memcpy(&a, acc, sizeof a);                                                           \
        memcpy(&b, in, sizeof b);                                                            \
        switch (op) {                                                                        \
            case TU_OP_SUM:                                                                  \
                a = a + b;                                                                   \
                break;                                                                       \
            case TU_OP_PROD:                                                                 \
                a = a * b;                                                                   \
                break;                                                                       \
            case TU_OP_MIN:                                                                  \
                a = b < a ? b : a;                                                           \
                break;                                                                       \
            case TU_OP_MAX:                                                                  \
                a = b > a ? b : a;                                                           \
                break;                                                                       \
            default:                                                                         \
                break;                                                                       \
        }                                                                                    \
        memcpy(acc, &a, sizeof a);                                                           \
    }                                                                                        \
    static inline int tu_eq_##NAME(const void* pa, const void* pb) {                         \
        T a, b;                                                                              \
        memcpy(&a, pa, sizeof a);                                                            \
        memcpy(&b, pb, sizeof b);                                                            \
        return a == b;                                                                       \
    }                                                                                        \
    static inline void tu_fmt_##NAME(char* buf, size_t n, const void* p) {                   \
        T a;                                                                                 \
        memcpy(&a, p, sizeof a);                                                             \
        snprintf(buf, n, "%.21Lg", (long double)a);                                          \
    }

#define TU_DEF_COMPLEX(NAME, T, R, MAKE)                                                     \
    static inline void tu_gen_##NAME(void* dst, size_t i, int rank, int op, uint32_t seed) { \
        uint64_t h = tu_hash(seed, rank, i);                                                 \
        R re, im;                                                                            \
        switch (op) {                                                                        \
            case TU_OP_SUM:                                                                  \
                re = (R)((int)(h % 21u) - 10);                                               \
                im = (R)((int)((h >> 8) % 21u) - 10);                                        \
                break;                                                                       \
            case TU_OP_PROD: { /* 1+i, -1, i, -i, 1: exact products */                       \
                unsigned r = (unsigned)(h % 8u);                                             \
                re = (r == 0 && rank < 6) ? (R)1                                             \
                     : r == 1             ? (R)(-1)                                          \
                     : r == 2 || r == 3   ? (R)0                                             \
                                          : (R)1;                                              \
                im = (r == 0 && rank < 6) ? (R)1 : r == 2 ? (R)1 : r == 3 ? (R)(-1) : (R)0;  \
                break;                                                                       \
            }                                                                                \
            default:                                                                         \
                re = (R)((double)(int64_t)(h >> 11) / 1048576.0);                            \
                im = (R)((double)(int64_t)(tu_mix(h) >> 11) / 1048576.0);                    \
                break;                                                                       \
        }                                                                                    \
        T v = MAKE(re, im);                                                                  \
        memcpy(dst, &v, sizeof v);                                                           \
    }                                                                                        \
    static inline void tu_apply_##NAME(void* acc, const void* in, int op) {                  \
        T a, b;                                                                              \
        memcpy(&a, acc, sizeof a);                                                           \
        memcpy(&b, in, sizeof b);                                                            \
        if (op == TU_OP_SUM) a = a + b;                                                      \
        if (op == TU_OP_PROD) a = a * b;                                                     \
        memcpy(acc, &a, sizeof a);                                                           \
    }                                                                                        \
    static inline int tu_eq_##NAME(const void* pa, const void* pb) {                         \
        T a, b;                                                                              \
        memcpy(&a, pa, sizeof a);                                                            \
        memcpy(&b, pb, sizeof b);                                                            \
        return a == b;                                                                       \
    }                                                                                        \
    static inline void tu_fmt_##NAME(char* buf, size_t n, const void* p) {                   \
        T a;                                                                                 \
        memcpy(&a, p, sizeof a);                                                             \
        long double _Complex l = (long double _Complex)a;                                    \
        snprintf(buf, n, "(%.21Lg,%.21Lg)", creall(l), cimagl(l));                           \
    }

/* MINLOC/MAXLOC pairs: few distinct values so that ties (lowest index wins)
 * occur. */
#define TU_DEF_PAIR(NAME, V)                                                                 \
    typedef struct {                                                                         \
        V v;                                                                                 \
        int i;                                                                               \
    } tu_pair_##NAME##_t;                                                                    \
    static inline void tu_gen_##NAME(void* dst, size_t i, int rank, int op, uint32_t seed) { \
        uint64_t h = tu_hash(seed, rank, i);                                                 \
        tu_pair_##NAME##_t p;                                                                \
        memset(&p, 0, sizeof p);                                                             \
        if (op == TU_OP_MAXLOC || op == TU_OP_MINLOC)                                        \
            p.v = (V)((int)(h % 7u) - 3);                                                    \
        else                                                                                 \
            p.v = (V)((int)(h % 20001u) - 10000);                                            \
        p.i = (int)((h >> 20) % 100000u) - 50000;                                            \
        memcpy(dst, &p, sizeof p);                                                           \
    }                                                                                        \
    static inline void tu_apply_##NAME(void* acc, const void* in, int op) {                  \
        tu_pair_##NAME##_t a, b;                                                             \
        memcpy(&a, acc, sizeof a);                                                           \
        memcpy(&b, in, sizeof b);                                                            \
        int better = op == TU_OP_MAXLOC ? b.v > a.v : b.v < a.v;                             \
        if (better)                                                                          \
            a = b;                                                                           \
        else if (b.v == a.v && b.i < a.i)                                                    \
            a.i = b.i;                                                                       \
        memcpy(acc, &a, sizeof a);                                                           \
    }                                                                                        \
    static inline int tu_eq_##NAME(const void* pa, const void* pb) {                         \
        tu_pair_##NAME##_t a, b;                                                             \
        memcpy(&a, pa, sizeof a);                                                            \
        memcpy(&b, pb, sizeof b);                                                            \
        return a.v == b.v && a.i == b.i;                                                     \
    }                                                                                        \
    static inline void tu_fmt_##NAME(char* buf, size_t n, const void* p) {                   \
        tu_pair_##NAME##_t a;                                                                \
        memcpy(&a, p, sizeof a);                                                             \
        snprintf(buf, n, "{%.21Lg,%d}", (long double)a.v, a.i);                              \
    }

TU_DEF_INT(int8, int8_t, 1, "lld", long long)
TU_DEF_INT(schar, signed char, 1, "lld", long long)
TU_DEF_INT(uint8, uint8_t, 0, "llu", unsigned long long)
TU_DEF_INT(uchar, unsigned char, 0, "llu", unsigned long long)
TU_DEF_INT(short, short, 1, "lld", long long)
TU_DEF_INT(ushort, unsigned short, 0, "llu", unsigned long long)
TU_DEF_INT(int, int, 1, "lld", long long)
TU_DEF_INT(int32, int32_t, 1, "lld", long long)
TU_DEF_INT(uint32, uint32_t, 0, "llu", unsigned long long)
TU_DEF_INT(long, long, 1, "lld", long long)
TU_DEF_INT(ulong, unsigned long, 0, "llu", unsigned long long)
TU_DEF_INT(int64, int64_t, 1, "lld", long long)
TU_DEF_INT(uint64, uint64_t, 0, "llu", unsigned long long)
TU_DEF_INT(llong, long long, 1, "lld", long long)
TU_DEF_INT(ullong, unsigned long long, 0, "llu", unsigned long long)
TU_DEF_INT(byte, unsigned char, 0, "llu", unsigned long long)
TU_DEF_INT(char, char, 1, "lld", long long)
TU_DEF_FLOAT(float, float)
TU_DEF_FLOAT(double, double)
TU_DEF_FLOAT(ldouble, long double)
TU_DEF_COMPLEX(cfloat, float _Complex, float, CMPLXF)
TU_DEF_COMPLEX(cdouble, double _Complex, double, CMPLX)
TU_DEF_COMPLEX(cldouble, long double _Complex, long double, CMPLXL)
TU_DEF_PAIR(2int, int)
TU_DEF_PAIR(float_int, float)
TU_DEF_PAIR(double_int, double)
TU_DEF_PAIR(long_int, long)
TU_DEF_PAIR(short_int, short)
TU_DEF_PAIR(ldouble_int, long double)

/* Open MPI 4.1.2-4.1.4 computes MIN/MAX of MPI_UNSIGNED_LONG as signed long
 * (open-mpi/ompi#10525, fixed in 4.1.5): values below 2^63 keep the host
 * reference valid for Debian 12's 4.1.4 (uint64_t and unsigned long long
 * still cover the full range). */
static inline void tu_gen_ulong_ompi(void* dst, size_t i, int rank, int op, uint32_t seed) {
    tu_gen_ulong(dst, i, rank, op, seed);
    if (op == TU_OP_MIN || op == TU_OP_MAX) {
        unsigned long v;
        memcpy(&v, dst, sizeof v);
        v >>= 1;
        memcpy(dst, &v, sizeof v);
    }
}
#define tu_apply_ulong_ompi tu_apply_ulong
#define tu_eq_ulong_ompi tu_eq_ulong
#define tu_fmt_ulong_ompi tu_fmt_ulong

/* C _Bool: the logical ops produce 0/1; inputs are 0/1 too. */
static inline void tu_gen_bool(void* dst, size_t i, int rank, int op, uint32_t seed) {
    uint64_t h = tu_hash(seed, rank, i);
    unsigned zeros = op == TU_OP_LAND ? 1u : op == TU_OP_LOR ? 3u : 2u;
    _Bool v = (h % 4u) >= zeros;
    memcpy(dst, &v, sizeof v);
}
static inline void tu_apply_bool(void* acc, const void* in, int op) {
    _Bool a, b;
    memcpy(&a, acc, sizeof a);
    memcpy(&b, in, sizeof b);
    if (op == TU_OP_LAND) a = a && b;
    if (op == TU_OP_LOR) a = a || b;
    if (op == TU_OP_LXOR) a = a != b;
    memcpy(acc, &a, sizeof a);
}
static inline int tu_eq_bool(const void* pa, const void* pb) {
    return *(const unsigned char*)pa == *(const unsigned char*)pb;
}
static inline void tu_fmt_bool(char* buf, size_t n, const void* p) {
    snprintf(buf, n, "%u", (unsigned)*(const unsigned char*)p);
}

#define TU_TYPE(NAME, DT, CTYPE, CLS) \
    { #DT, DT, sizeof(CTYPE), CLS, tu_gen_##NAME, tu_apply_##NAME, tu_eq_##NAME, tu_fmt_##NAME }

/* Every predefined type the tests use (MPI handles are not constant
 * expressions in every MPI: the table is built at run time). */
static inline const tu_type_t* tu_types(int* n) {
    static tu_type_t table[40];
    static int count = 0;
    if (count == 0) {
        const tu_type_t all[] = {
            TU_TYPE(int8, MPI_INT8_T, int8_t, TU_CLS_SINT),
            TU_TYPE(schar, MPI_SIGNED_CHAR, signed char, TU_CLS_SINT),
            TU_TYPE(uint8, MPI_UINT8_T, uint8_t, TU_CLS_UINT),
            TU_TYPE(uchar, MPI_UNSIGNED_CHAR, unsigned char, TU_CLS_UINT),
            TU_TYPE(short, MPI_SHORT, short, TU_CLS_SINT),
            TU_TYPE(ushort, MPI_UNSIGNED_SHORT, unsigned short, TU_CLS_UINT),
            TU_TYPE(int, MPI_INT, int, TU_CLS_SINT),
            TU_TYPE(int32, MPI_INT32_T, int32_t, TU_CLS_SINT),
            TU_TYPE(uint32, MPI_UNSIGNED, uint32_t, TU_CLS_UINT),
            TU_TYPE(long, MPI_LONG, long, TU_CLS_SINT),
            TU_TYPE(ulong_ompi, MPI_UNSIGNED_LONG, unsigned long, TU_CLS_UINT),
            TU_TYPE(int64, MPI_INT64_T, int64_t, TU_CLS_SINT),
            TU_TYPE(uint64, MPI_UINT64_T, uint64_t, TU_CLS_UINT),
            TU_TYPE(llong, MPI_LONG_LONG, long long, TU_CLS_SINT),
            TU_TYPE(ullong, MPI_UNSIGNED_LONG_LONG, unsigned long long, TU_CLS_UINT),
            TU_TYPE(float, MPI_FLOAT, float, TU_CLS_FLOAT),
            TU_TYPE(double, MPI_DOUBLE, double, TU_CLS_FLOAT),
            TU_TYPE(ldouble, MPI_LONG_DOUBLE, long double, TU_CLS_FLOAT),
            TU_TYPE(cfloat, MPI_C_FLOAT_COMPLEX, float _Complex, TU_CLS_COMPLEX),
            TU_TYPE(cdouble, MPI_C_DOUBLE_COMPLEX, double _Complex, TU_CLS_COMPLEX),
            TU_TYPE(cldouble, MPI_C_LONG_DOUBLE_COMPLEX, long double _Complex, TU_CLS_COMPLEX),
            TU_TYPE(bool, MPI_C_BOOL, _Bool, TU_CLS_BOOL),
            TU_TYPE(byte, MPI_BYTE, unsigned char, TU_CLS_BYTE),
            /* reduced as the platform's char (x86-64: signed) */
            TU_TYPE(char, MPI_CHAR, char, CHAR_MIN < 0 ? TU_CLS_SINT : TU_CLS_UINT),
            TU_TYPE(2int, MPI_2INT, tu_pair_2int_t, TU_CLS_PAIR),
            TU_TYPE(float_int, MPI_FLOAT_INT, tu_pair_float_int_t, TU_CLS_PAIR),
            TU_TYPE(double_int, MPI_DOUBLE_INT, tu_pair_double_int_t, TU_CLS_PAIR),
            TU_TYPE(long_int, MPI_LONG_INT, tu_pair_long_int_t, TU_CLS_PAIR),
            TU_TYPE(short_int, MPI_SHORT_INT, tu_pair_short_int_t, TU_CLS_PAIR),
            TU_TYPE(ldouble_int, MPI_LONG_DOUBLE_INT, tu_pair_ldouble_int_t, TU_CLS_PAIR),
        };
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
            MPI_Aint lb, extent;
            MPI_Type_get_extent(all[k].dt, &lb, &extent);
            if (lb != 0 || (size_t)extent != all[k].size)
                TU_DIE("%s: MPI extent %ld (lb %ld) differs from the C type's size %zu",
                       all[k].name, (long)extent, (long)lb, all[k].size);
            table[count++] = all[k];
        }
    }
    *n = count;
    return table;
}
static inline const tu_type_t* tu_type_by_dt(MPI_Datatype dt) {
    int n;
    const tu_type_t* t = tu_types(&n);
    for (int k = 0; k < n; k++)
        if (t[k].dt == dt) return &t[k];
    TU_DIE("datatype not in the test table");
    return NULL;
}

/* ------------------------------------------------------------------------
 * Buffers: host or device memory with guard bytes around the payload
 * ---------------------------------------------------------------------- */

typedef enum tu_mem {
    TU_HOST = 0,   /* malloc */
    TU_DEVICE = 1, /* gpucoll_malloc_device */
    TU_NULLBUF = 2 /* pass NULL (only where the buffer is not significant) */
} tu_mem_t;

static inline const char* tu_mem_name(tu_mem_t m) {
    return m == TU_HOST ? "host" : m == TU_DEVICE ? "device" : "null";
}

#define TU_GUARD 64

typedef struct tu_buf {
    tu_mem_t mem;
    unsigned char* base; /* allocation (NULL for TU_NULLBUF) */
    size_t total;        /* off + bytes + TU_GUARD */
    size_t off, bytes;   /* payload [off, off + bytes) */
    void* ptr;           /* base + off: what MPI sees */
    unsigned char* img;  /* host image of the initial contents (total bytes) */
    unsigned char* out;  /* contents read back by tu_buf_read (total bytes) */
} tu_buf_t;

static inline void* tu_xmalloc(size_t n) {
    void* p = malloc(n ? n : 1);
    if (!p) TU_DIE("out of host memory (%zu bytes)", n);
    return p;
}

/* Allocates; the whole allocation holds sentinel bytes (seed) until
 * tu_buf_upload. */
static inline void tu_buf_alloc(tu_buf_t* b, tu_mem_t mem, size_t bytes, size_t off,
                                uint32_t seed) {
    memset(b, 0, sizeof *b);
    b->mem = mem;
    if (mem == TU_NULLBUF) return;
    b->off = off;
    b->bytes = bytes;
    b->total = off + bytes + TU_GUARD;
    b->img = tu_xmalloc(b->total);
    b->out = tu_xmalloc(b->total);
    for (size_t k = 0; k < b->total; k++) b->img[k] = tu_sentinel(seed, k);
    if (mem == TU_DEVICE) {
        void* p = NULL;
        int rc = tu.pool_memory && tu.world_rank % 2 == 0 ? gpucoll_malloc_device_pool(&p, b->total)
                                                          : gpucoll_malloc_device(&p, b->total);
        if (rc != GPUCOLL_SUCCESS || !p)
            TU_DIE("gpucoll_malloc_device(%zu) failed: %d %s", b->total, rc, gpucoll_last_error());
        b->base = p;
    } else {
        b->base = tu_xmalloc(b->total);
    }
    b->ptr = b->base + off;
}

/* Payload pointer of the host image (fill it, then tu_buf_upload). */
static inline unsigned char* tu_buf_payload(tu_buf_t* b) { return b->img + b->off; }

static inline void tu_buf_upload(tu_buf_t* b) {
    if (b->mem == TU_NULLBUF) return;
    int rc = gpucoll_memcpy(b->base, b->img, b->total);
    if (rc != GPUCOLL_SUCCESS)
        TU_DIE("gpucoll_memcpy upload of %zu bytes failed: %s", b->total, gpucoll_last_error());
}

static inline void tu_buf_read(tu_buf_t* b) {
    if (b->mem == TU_NULLBUF) return;
    int rc = gpucoll_memcpy(b->out, b->base, b->total);
    if (rc != GPUCOLL_SUCCESS)
        TU_DIE("gpucoll_memcpy download of %zu bytes failed: %s", b->total, gpucoll_last_error());
}

static inline void tu_buf_free(tu_buf_t* b) {
    if (b->mem == TU_DEVICE) {
        int rc = gpucoll_free_device(b->base);
        if (rc != GPUCOLL_SUCCESS) tu_fail("gpucoll_free_device failed: %s", gpucoll_last_error());
    } else if (b->mem == TU_HOST) {
        free(b->base);
    }
    free(b->img);
    free(b->out);
    memset(b, 0, sizeof *b);
}

/* After tu_buf_read: bytes [from, to) of the allocation (relative to base)
 * must equal the initial image. Reports the first difference. */
static inline int tu_buf_check_unchanged(const tu_buf_t* b, size_t from, size_t to,
                                         const char* what, const char* ctx) {
    if (b->mem == TU_NULLBUF) return 1;
    if (to > b->total) to = b->total;
    for (size_t k = from; k < to; k++) {
        if (b->out[k] != b->img[k]) {
            return TU_CHECK(0,
                            "%s: %s modified at byte %ld relative to the buffer pointer "
                            "(0x%02x, was 0x%02x)",
                            ctx, what, (long)k - (long)b->off, b->out[k], b->img[k]);
        }
    }
    tu.checks++;
    return 1;
}

/* ------------------------------------------------------------------------
 * Counters: which path a call took
 * ---------------------------------------------------------------------- */

static inline void tu_counters(gpucoll_counters_t* c) {
    if (gpucoll_counters_get(c) != GPUCOLL_SUCCESS)
        TU_DIE("gpucoll_counters_get failed: %s", gpucoll_last_error());
}

static inline const char* tu_mask_name(unsigned mask, char* buf, size_t n) {
    if ((mask & ~TU_MASK_MAY_SKIP) == TU_MASK_UNCOUNTED) {
        snprintf(buf, n, "not counted");
        return buf;
    }
    buf[0] = 0;
    for (int p = 0; p < GPUCOLL_PATH_COUNT; p++) {
        if (mask & TU_PATH_BIT(p)) {
            size_t l = strlen(buf);
            snprintf(buf + l, n - l, "%s%s", l ? "|" : "", gpucoll_path_name((gpucoll_path_t)p));
        }
    }
    if (mask & TU_MASK_MAY_SKIP) {
        size_t l = strlen(buf);
        snprintf(buf + l, n - l, " (or not counted)");
    }
    return buf;
}

/* The calls between `before` and now must be exactly one call of coll on a
 * path in mask (or none at all if mask is TU_MASK_UNCOUNTED), with a
 * consistent last_* record. Returns 1 if so. */
static inline int tu_check_path(const gpucoll_counters_t* before, gpucoll_coll_t coll,
                                unsigned mask, const char* ctx) {
    gpucoll_counters_t after;
    tu_counters(&after);
    char want[64];
    tu_mask_name(mask, want, sizeof want);
    uint64_t total = 0, mine = 0, extra = 0;
    int path = -1;
    const int skip_delegated = (mask & TU_MASK_EXTRA_DELEGATED) != 0;
    mask &= ~TU_MASK_EXTRA_DELEGATED;
    for (int c = 0; c < GPUCOLL_COLL_COUNT; c++) {
        for (int p = 0; p < GPUCOLL_PATH_COUNT; p++) {
            uint64_t d = after.calls[c][p] - before->calls[c][p];
            if (skip_delegated && p == GPUCOLL_PATH_DELEGATED) {
                extra += d;
                continue;
            }
            total += d;
            if (c == (int)coll && d) {
                mine += d;
                path = p;
            }
        }
    }
    if (total == 0 && (mask & TU_MASK_MAY_SKIP)) {
        tu.checks++;
        return 1;
    }
    mask &= ~TU_MASK_MAY_SKIP;
    if (mask == TU_MASK_UNCOUNTED)
        return TU_CHECK(total == 0,
                        "%s: expected the call not to be counted, but %" PRIu64
                        " call(s) were (last: %s on path %s)",
                        ctx, total, gpucoll_coll_name(after.last_coll),
                        gpucoll_path_name(after.last_path));
    if (!TU_CHECK(total == 1 && mine == 1,
                  "%s: expected exactly one counted %s call on path %s, counters moved by %" PRIu64
                  " (%" PRIu64 " of them %s)%s",
                  ctx, gpucoll_coll_name(coll), want, total, mine, gpucoll_coll_name(coll),
                  total == 0 ? " - is coll/gpucoll loaded and selected?" : ""))
        return 0;
    if (!TU_CHECK(mask & TU_PATH_BIT(path), "%s: took path %s, expected %s (algorithm \"%s\")", ctx,
                  gpucoll_path_name((gpucoll_path_t)path), want, after.last_algorithm))
        return 0;
    if (extra == 0 &&
        !TU_CHECK(after.last_coll == coll && (int)after.last_path == path,
                  "%s: last_coll/last_path (%s/%s) disagree with the calls[][] delta (%s/%s)", ctx,
                  gpucoll_coll_name(after.last_coll), gpucoll_path_name(after.last_path),
                  gpucoll_coll_name(coll), gpucoll_path_name((gpucoll_path_t)path)))
        return 0;
    const char* algo = NULL;
    if (path == GPUCOLL_PATH_STAGED) algo = "staged";
    if (path == GPUCOLL_PATH_DELEGATED) algo = "delegated";
    if (path == GPUCOLL_PATH_ACCELERATED)
        algo = tu.algorithm[coll]                  ? tu.algorithm[coll]
               : coll == GPUCOLL_COLL_REDUCE_LOCAL ? "device-reduce"
                                                   : NULL;
    if (algo && extra == 0) /* the last call's record: ours */
        return TU_CHECK(strcmp(after.last_algorithm, algo) == 0,
                        "%s: last_algorithm \"%s\", expected \"%s\"", ctx, after.last_algorithm,
                        algo);
    return 1;
}

/* ------------------------------------------------------------------------
 * One collective call, checked
 * ---------------------------------------------------------------------- */

typedef struct tu_case {
    gpucoll_coll_t coll;
    const tu_type_t* type;
    int op;                      /* TU_OP_*; ignored by bcast and allgather */
    size_t count;                /* elements per rank (reduce_scatter: base of recvcounts) */
    int in_place;                /* MPI_IN_PLACE in the form the collective allows */
    int root;                    /* bcast, reduce */
    tu_mem_t send_mem, recv_mem; /* this rank's buffers (bcast: recv_mem) */
    size_t send_off, recv_off;   /* bytes added to the allocation's address */
    uint32_t seed;
    MPI_Comm comm;
    unsigned expect_mask; /* TU_MASK_DEFAULT: from the buffers and the options */
    int extra_delegated;  /* Open MPI's own host calls may run inside this one */
    int has_user_op;      /* reduce with user_op (type->apply computes it) */
    MPI_Op user_op;
} tu_case_t;

static inline const char* tu_case_desc(const tu_case_t* c, char* buf, size_t n) {
    snprintf(buf, n, "%s %s %s count=%zu%s root=%d send=%s+%zu recv=%s+%zu seed=%u",
             gpucoll_coll_name(c->coll), c->type->name,
             (c->coll == GPUCOLL_COLL_BCAST || c->coll == GPUCOLL_COLL_ALLGATHER) ? "-"
             : c->has_user_op                                                     ? "user-op"
                              : tu_op_name(c->op),
             c->count, c->in_place ? " in_place" : "", c->root, tu_mem_name(c->send_mem),
             c->send_off, tu_mem_name(c->recv_mem), c->recv_off, c->seed);
    return buf;
}

/* recvcounts of reduce_scatter: uneven, some 0. */
static inline void tu_rs_counts(const tu_case_t* c, int size, int* counts) {
    for (int r = 0; r < size; r++) {
        if (c->count == 0 && (c->seed & 1u))
            counts[r] = 0;
        else
            counts[r] = (int)c->count + (int)((unsigned)(r + (int)c->seed) % 3u) - 1;
        if (counts[r] < 0) counts[r] = 0;
    }
}

/* Reference: element idx reduced over `nranks` contributions. */
static inline void tu_reference(const tu_type_t* t, int op, size_t idx, int nranks, uint32_t seed,
                                void* out) {
    unsigned char in[64];
    t->gen(out, idx, 0, op, seed);
    for (int r = 1; r < nranks; r++) {
        t->gen(in, idx, r, op, seed);
        t->apply(out, in, op);
    }
}

/* Collectives that combine values (the others only move bytes). */
static inline int tu_reduces(gpucoll_coll_t coll) {
    return coll == GPUCOLL_COLL_ALLREDUCE || coll == GPUCOLL_COLL_REDUCE ||
           coll == GPUCOLL_COLL_REDUCE_SCATTER || coll == GPUCOLL_COLL_REDUCE_SCATTER_BLOCK ||
           coll == GPUCOLL_COLL_REDUCE_LOCAL;
}

/* Whether the active device backend reduces dt on the device: a GPU has no
 * long double, so the cuda backend stages those reductions. */
static inline int tu_backend_reduces(MPI_Datatype dt) {
    if (strcmp(gpucoll_backend(), "cuda") != 0) return 1;
    return dt != MPI_LONG_DOUBLE && dt != MPI_C_LONG_DOUBLE_COMPLEX;
}

/* Compares n elements at b->out + b->off against expect(i). */
typedef void (*tu_expect_fn)(const tu_case_t* c, size_t i, void* out, const void* ctx);

static inline int tu_check_elements(const tu_case_t* c, const tu_buf_t* b, size_t n,
                                    tu_expect_fn expect, const void* ectx, const char* what,
                                    const char* desc) {
    const tu_type_t* t = c->type;
    unsigned char want[64], got[64];
    int shown = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        expect(c, i, want, ectx);
        memcpy(got, b->out + b->off + i * t->size, t->size);
        if (!t->eq(got, want)) {
            bad++;
            if (shown < 3) {
                char g[96], w[96];
                t->fmt(g, sizeof g, got);
                t->fmt(w, sizeof w, want);
                tu_fail("%s: %s element %zu: got %s, expected %s", desc, what, i, g, w);
                shown++;
            }
        }
    }
    tu.checks++;
    if (bad > 1) tu_fail("%s: %s: %zu of %zu elements wrong", desc, what, bad, n);
    return bad == 0;
}

typedef struct tu_expect_ctx {
    int nranks;
    size_t base; /* global index of element 0 */
    int src;     /* bcast root, allgather block size unit */
} tu_expect_ctx_t;

static inline void tu_expect_reduced(const tu_case_t* c, size_t i, void* out, const void* p) {
    const tu_expect_ctx_t* e = p;
    tu_reference(c->type, c->op, e->base + i, e->nranks, c->seed, out);
}
static inline void tu_expect_bcast(const tu_case_t* c, size_t i, void* out, const void* p) {
    const tu_expect_ctx_t* e = p;
    c->type->gen(out, i, e->src, TU_OP_NONE, c->seed);
}
static inline void tu_expect_allgather(const tu_case_t* c, size_t i, void* out, const void* p) {
    (void)p;
    c->type->gen(out, i % c->count, (int)(i / c->count), TU_OP_NONE, c->seed);
}
/* reduce_local: inoutbuf holds "rank" 2*me+1, inbuf "rank" 2*me;
 * inoutbuf = inbuf op inoutbuf. */
static inline void tu_expect_local(const tu_case_t* c, size_t i, void* out, const void* p) {
    const tu_expect_ctx_t* e = p;
    unsigned char inout[64];
    c->type->gen(out, i, 2 * e->src, c->op, c->seed);
    c->type->gen(inout, i, 2 * e->src + 1, c->op, c->seed);
    c->type->apply(out, inout, c->op);
}

static inline void tu_fill(const tu_case_t* c, unsigned char* dst, size_t n, size_t base, int rank,
                           int op) {
    for (size_t i = 0; i < n; i++)
        c->type->gen(dst + i * c->type->size, base + i, rank, op, c->seed);
}

/* Runs the call described by c on c->comm (collective: every rank of the
 * communicator calls it with the same coll/type/op/count/root/in_place) and
 * checks results, untouched bytes and path. Returns 1 if all checks pass. */
static inline int tu_run_case(const tu_case_t* c) {
    int rank, size;
    MPI_Comm_rank(c->comm, &rank);
    MPI_Comm_size(c->comm, &size);
    const tu_type_t* t = c->type;
    const size_t es = t->size;
    const int reducing = c->coll != GPUCOLL_COLL_BCAST && c->coll != GPUCOLL_COLL_ALLGATHER;
    const int op = reducing ? c->op : TU_OP_NONE;
    char desc[256];
    tu_case_desc(c, desc, sizeof desc);
    if (tu.verbose && rank == 0 && c->comm == MPI_COMM_WORLD) printf("case: %s\n", desc);
    long failures_before = tu.failures;

    int* rcounts = NULL;
    size_t send_n = 0, recv_n = 0, result_n = 0, result_base = 0, writable_n = 0;
    int send_used = 1, recv_sig = 1, total_zero = c->count == 0;
    const int is_root = rank == c->root;
    switch (c->coll) {
        case GPUCOLL_COLL_ALLREDUCE:
            send_n = recv_n = result_n = writable_n = c->count;
            send_used = !c->in_place;
            break;
        case GPUCOLL_COLL_BCAST:
            recv_n = result_n = writable_n = c->count;
            send_used = 0;
            break;
        case GPUCOLL_COLL_ALLGATHER:
            send_n = c->count;
            recv_n = result_n = writable_n = c->count * (size_t)size;
            send_used = !c->in_place;
            break;
        case GPUCOLL_COLL_REDUCE_SCATTER:
        case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK: {
            rcounts = tu_xmalloc(sizeof(int) * (size_t)size);
            if (c->coll == GPUCOLL_COLL_REDUCE_SCATTER)
                tu_rs_counts(c, size, rcounts);
            else
                for (int r = 0; r < size; r++) rcounts[r] = (int)c->count;
            size_t total = 0;
            for (int r = 0; r < size; r++) {
                if (r == rank) result_base = total;
                total += (size_t)rcounts[r];
            }
            total_zero = total == 0;
            send_n = total;
            result_n = (size_t)rcounts[rank];
            recv_n = c->in_place ? total : result_n;
            writable_n = recv_n; /* in place: MPI may use the rest of the input */
            send_used = !c->in_place;
            break;
        }
        case GPUCOLL_COLL_REDUCE:
            send_n = c->count;
            send_used = !(c->in_place && is_root);
            recv_sig = is_root;
            recv_n = c->count;
            result_n = writable_n = is_root ? c->count : 0;
            break;
        case GPUCOLL_COLL_REDUCE_LOCAL:
            send_n = recv_n = result_n = writable_n = c->count;
            break;
        default:
            TU_DIE("bad collective %d", (int)c->coll);
    }

    tu_buf_t sb, rb;
    tu_buf_alloc(&sb, send_used ? c->send_mem : TU_NULLBUF, send_n * es, c->send_off, c->seed);
    tu_buf_alloc(&rb, c->recv_mem, recv_n * es, c->recv_off, c->seed ^ 0x5555u);

    /* contents */
    switch (c->coll) {
        case GPUCOLL_COLL_ALLREDUCE:
        case GPUCOLL_COLL_REDUCE_SCATTER:
        case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK:
        case GPUCOLL_COLL_REDUCE:
            if (send_used) tu_fill(c, tu_buf_payload(&sb), send_n, 0, rank, op);
            if (!send_used) tu_fill(c, tu_buf_payload(&rb), send_n, 0, rank, op);
            break;
        case GPUCOLL_COLL_BCAST:
            if (is_root) tu_fill(c, tu_buf_payload(&rb), c->count, 0, rank, op);
            break;
        case GPUCOLL_COLL_ALLGATHER:
            if (send_used)
                tu_fill(c, tu_buf_payload(&sb), c->count, 0, rank, op);
            else
                tu_fill(c, tu_buf_payload(&rb) + (size_t)rank * c->count * es, c->count, 0, rank,
                        op);
            break;
        case GPUCOLL_COLL_REDUCE_LOCAL:
            tu_fill(c, tu_buf_payload(&sb), c->count, 0, 2 * rank, op);
            tu_fill(c, tu_buf_payload(&rb), c->count, 0, 2 * rank + 1, op);
            break;
        default:
            break;
    }
    tu_buf_upload(&sb);
    tu_buf_upload(&rb);

    /* expected path */
    unsigned mask = c->expect_mask;
    if (mask == TU_MASK_DEFAULT) {
        int dev = (send_used && sb.mem == TU_DEVICE) || (recv_sig && rb.mem == TU_DEVICE);
        int all_dev = (!send_used || sb.mem == TU_DEVICE) && rb.mem == TU_DEVICE;
        if (!dev)
            mask = tu.expect_host;
        else if (c->has_user_op)
            mask = tu.expect_device;
        else if (t->cls == TU_CLS_PAIR) /* MINLOC/MAXLOC: staged today */
            mask = TU_MASK_DEVICE_ANY;
        else if (tu_reduces(c->coll) && !tu_backend_reduces(t->dt))
            /* the backend has no device reduction for it (cuda: long double) */
            mask = TU_PATH_BIT(GPUCOLL_PATH_STAGED);
        else if (c->coll == GPUCOLL_COLL_REDUCE_LOCAL) /* device reduction kernel */
            mask = all_dev ? TU_PATH_BIT(GPUCOLL_PATH_ACCELERATED) : TU_MASK_DEVICE_ANY;
        else
            mask = tu.expect_coll[c->coll] ? tu.expect_coll[c->coll] : tu.expect_device;
    }
    /* Nothing to move anywhere (every rank's counts are 0): Open MPI returns
     * before the coll framework for most collectives, and a component that
     * sees the call may take any path; it must not crash or write. */
    if (total_zero && mask != TU_MASK_UNCOUNTED) mask = TU_MASK_ALL | TU_MASK_MAY_SKIP;
    /* MPI_Bcast on one rank returns in Open MPI's MPI layer. */
    if (c->coll == GPUCOLL_COLL_BCAST && size == 1) mask |= TU_MASK_MAY_SKIP;
    if (c->extra_delegated) mask |= TU_MASK_EXTRA_DELEGATED;

    gpucoll_counters_t before;
    tu_counters(&before);
    const void* sp = send_used ? sb.ptr : MPI_IN_PLACE;
    MPI_Datatype dt = t->dt;
    MPI_Op mop = c->has_user_op ? c->user_op : tu_mpi_op(op);
    int n = (int)c->count, rc = MPI_ERR_OTHER;
    switch (c->coll) {
        case GPUCOLL_COLL_ALLREDUCE:
            rc = MPI_Allreduce(sp, rb.ptr, n, dt, mop, c->comm);
            break;
        case GPUCOLL_COLL_BCAST:
            rc = MPI_Bcast(rb.ptr, n, dt, c->root, c->comm);
            break;
        case GPUCOLL_COLL_ALLGATHER:
            rc = MPI_Allgather(sp, n, dt, rb.ptr, n, dt, c->comm);
            break;
        case GPUCOLL_COLL_REDUCE_SCATTER:
            rc = MPI_Reduce_scatter(sp, rb.ptr, rcounts, dt, mop, c->comm);
            break;
        case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK:
            rc = MPI_Reduce_scatter_block(sp, rb.ptr, n, dt, mop, c->comm);
            break;
        case GPUCOLL_COLL_REDUCE:
            rc = MPI_Reduce(sp, rb.ptr, n, dt, mop, c->root, c->comm);
            break;
        case GPUCOLL_COLL_REDUCE_LOCAL:
            rc = MPI_Reduce_local(sb.ptr, rb.ptr, n, dt, mop);
            break;
        default:
            break;
    }
    TU_CHECK(rc == MPI_SUCCESS, "%s: returned %d", desc, rc);
    tu_check_path(&before, c->coll, mask, desc);

    /* results */
    tu_buf_read(&sb);
    tu_buf_read(&rb);
    tu_buf_check_unchanged(&sb, 0, sb.total, "send buffer", desc);
    tu_expect_ctx_t e = {size, result_base, c->root};
    if (rb.mem != TU_NULLBUF) {
        tu_buf_check_unchanged(&rb, 0, rb.off, "bytes before the receive buffer", desc);
        tu_buf_check_unchanged(&rb, rb.off + writable_n * es, rb.total,
                               c->coll == GPUCOLL_COLL_REDUCE && !is_root
                                   ? "non-root receive buffer (not significant)"
                                   : "bytes after the result",
                               desc);
        switch (c->coll) {
            case GPUCOLL_COLL_BCAST:
                tu_check_elements(c, &rb, result_n, tu_expect_bcast, &e, "buffer", desc);
                break;
            case GPUCOLL_COLL_ALLGATHER:
                tu_check_elements(c, &rb, result_n, tu_expect_allgather, &e, "recvbuf", desc);
                break;
            case GPUCOLL_COLL_REDUCE_LOCAL:
                e.src = rank;
                tu_check_elements(c, &rb, result_n, tu_expect_local, &e, "inoutbuf", desc);
                break;
            default:
                tu_check_elements(c, &rb, result_n, tu_expect_reduced, &e, "recvbuf", desc);
                break;
        }
    }
    tu_buf_free(&sb);
    tu_buf_free(&rb);
    free(rcounts);
    return tu.failures == failures_before;
}

#endif /* GPUCOLL_MPI_TEST_UTIL_H */
