/*
 * gpucoll_bench - latency and bandwidth of MPI collectives on device (or host)
 * buffers, OSU-style per size, with nccl-tests bus bandwidth and the path,
 * algorithm, peer bytes and synchronisation rounds that gpucoll reports.
 *
 *   mpirun -np 4 --mca coll_gpucoll_device emu gpucoll_bench allreduce -d emu
 *
 * Run `gpucoll_bench -h` for the options. Tables go to stdout (rank 0); rows
 * are the lines that do not start with '#', one per size, fixed columns.
 * --csv FILE writes the same results as CSV (contrib/plot-bench.py plots them).
 */
#include <complex.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpucoll.h"
/* MPI_*_init on every Open MPI series */
#include "mpi4_names.h"

/* ------------------------------------------------------------------ tables */

typedef enum bench_coll {
    B_ALLREDUCE = 0,
    B_BCAST,
    B_ALLGATHER,
    B_REDUCE_SCATTER,
    B_REDUCE_SCATTER_BLOCK,
    B_REDUCE,
    B_NCOLL
} bench_coll_t;

static const char* const coll_names[B_NCOLL] = {
    "allreduce", "bcast", "allgather", "reduce_scatter", "reduce_scatter_block", "reduce"};

static int coll_reduces(bench_coll_t c) { return c != B_BCAST && c != B_ALLGATHER; }

/* nccl-tests bus bandwidth factors. */
static double busbw_factor(bench_coll_t c, int n) {
    switch (c) {
        case B_ALLREDUCE:
            return 2.0 * (n - 1) / n;
        case B_ALLGATHER:
        case B_REDUCE_SCATTER:
        case B_REDUCE_SCATTER_BLOCK:
            return (double)(n - 1) / n;
        default:
            return 1.0;
    }
}

typedef enum elem_kind { K_SINT, K_UINT, K_FLOAT, K_CPLX, K_BOOL, K_BYTE } elem_kind_t;

typedef struct dtype_info {
    const char* name;
    gpucoll_dtype_t id;
    elem_kind_t kind;
    size_t size;
} dtype_info_t;

static const dtype_info_t dtypes[] = {
    {"int8", GPUCOLL_INT8, K_SINT, 1},
    {"int16", GPUCOLL_INT16, K_SINT, 2},
    {"int32", GPUCOLL_INT32, K_SINT, 4},
    {"int64", GPUCOLL_INT64, K_SINT, 8},
    {"uint8", GPUCOLL_UINT8, K_UINT, 1},
    {"uint16", GPUCOLL_UINT16, K_UINT, 2},
    {"uint32", GPUCOLL_UINT32, K_UINT, 4},
    {"uint64", GPUCOLL_UINT64, K_UINT, 8},
    {"float", GPUCOLL_FLOAT, K_FLOAT, sizeof(float)},
    {"double", GPUCOLL_DOUBLE, K_FLOAT, sizeof(double)},
    {"long_double", GPUCOLL_LONG_DOUBLE, K_FLOAT, sizeof(long double)},
    {"c_float_complex", GPUCOLL_C_FLOAT_COMPLEX, K_CPLX, sizeof(float _Complex)},
    {"c_double_complex", GPUCOLL_C_DOUBLE_COMPLEX, K_CPLX, sizeof(double _Complex)},
    {"c_long_double_complex", GPUCOLL_C_LONG_DOUBLE_COMPLEX, K_CPLX, sizeof(long double _Complex)},
    {"bool", GPUCOLL_BOOL, K_BOOL, sizeof(_Bool)},
    {"byte", GPUCOLL_BYTE, K_BYTE, 1},
};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

static MPI_Datatype mpi_dtype(gpucoll_dtype_t id) {
    switch (id) {
        case GPUCOLL_INT8:
            return MPI_INT8_T;
        case GPUCOLL_INT16:
            return MPI_INT16_T;
        case GPUCOLL_INT32:
            return MPI_INT32_T;
        case GPUCOLL_INT64:
            return MPI_INT64_T;
        case GPUCOLL_UINT8:
            return MPI_UINT8_T;
        case GPUCOLL_UINT16:
            return MPI_UINT16_T;
        case GPUCOLL_UINT32:
            return MPI_UINT32_T;
        case GPUCOLL_UINT64:
            return MPI_UINT64_T;
        case GPUCOLL_FLOAT:
            return MPI_FLOAT;
        case GPUCOLL_DOUBLE:
            return MPI_DOUBLE;
        case GPUCOLL_LONG_DOUBLE:
            return MPI_LONG_DOUBLE;
        case GPUCOLL_C_FLOAT_COMPLEX:
            return MPI_C_FLOAT_COMPLEX;
        case GPUCOLL_C_DOUBLE_COMPLEX:
            return MPI_C_DOUBLE_COMPLEX;
        case GPUCOLL_C_LONG_DOUBLE_COMPLEX:
            return MPI_C_LONG_DOUBLE_COMPLEX;
        case GPUCOLL_BOOL:
            return MPI_C_BOOL;
        default:
            return MPI_BYTE;
    }
}

typedef struct op_info {
    const char* name;
    gpucoll_op_t id;
} op_info_t;

static const op_info_t ops[] = {
    {"sum", GPUCOLL_OP_SUM},   {"prod", GPUCOLL_OP_PROD}, {"min", GPUCOLL_OP_MIN},
    {"max", GPUCOLL_OP_MAX},   {"land", GPUCOLL_OP_LAND}, {"lor", GPUCOLL_OP_LOR},
    {"lxor", GPUCOLL_OP_LXOR}, {"band", GPUCOLL_OP_BAND}, {"bor", GPUCOLL_OP_BOR},
    {"bxor", GPUCOLL_OP_BXOR},
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))

static MPI_Op mpi_op(gpucoll_op_t id) {
    switch (id) {
        case GPUCOLL_OP_PROD:
            return MPI_PROD;
        case GPUCOLL_OP_MIN:
            return MPI_MIN;
        case GPUCOLL_OP_MAX:
            return MPI_MAX;
        case GPUCOLL_OP_LAND:
            return MPI_LAND;
        case GPUCOLL_OP_LOR:
            return MPI_LOR;
        case GPUCOLL_OP_LXOR:
            return MPI_LXOR;
        case GPUCOLL_OP_BAND:
            return MPI_BAND;
        case GPUCOLL_OP_BOR:
            return MPI_BOR;
        case GPUCOLL_OP_BXOR:
            return MPI_BXOR;
        default:
            return MPI_SUM;
    }
}

/* ------------------------------------------------------------------ options */

typedef enum buf_kind { BUF_HOST, BUF_EMU, BUF_CUDA } buf_kind_t;
static const char* const buf_names[] = {"host", "emu", "cuda"};

typedef struct options {
    int colls[B_NCOLL];
    int ncolls;
    buf_kind_t buf;
    int buf_given;
    size_t min_bytes, max_bytes;
    long iters, warmup; /* -1: scaled by size */
    double time_cap;    /* seconds of timed calls per size when iterations are scaled */
    const dtype_info_t* dtype;
    const op_info_t* op;
    int check;
    int root;
    int in_place;
    int form;             /* F_BLOCKING, F_NONBLOCKING, F_PERSISTENT */
    int overlap;          /* nonblocking: measure overlap with a compute phase (OSU) */
    const char* csv_path; /* --csv: one row per collective and size (rank 0 writes) */
    const char* label;    /* --label: the variant column (NULL: from buffers and component) */
    const char* commit;   /* --commit: the commit column (e.g. git describe of the source) */
} options_t;

enum { F_BLOCKING = 0, F_NONBLOCKING, F_PERSISTENT };
static const char* const form_names[] = {"blocking", "nonblocking", "persistent"};

static int rank, nranks;

static void usage(FILE* f) {
    fprintf(f,
            "usage: gpucoll_bench COLL [options]\n"
            "  COLL: allreduce|bcast|allgather|reduce_scatter|reduce_scatter_block|reduce|all\n"
            "  -d cuda|emu|host  buffer kind (default: device memory of the active backend,\n"
            "                    host when the backend is none); the backend comes from\n"
            "                    --mca coll_gpucoll_device KIND or GPUCOLL_DEVICE=KIND\n"
            "  -m MIN:MAX        sizes in bytes, doubling, suffixes K M G (default 4:64M);\n"
            "                    for allgather and reduce_scatter(_block) the size is the full\n"
            "                    buffer (np blocks)\n"
            "  -i ITERS          timed iterations per size (default: 1000 up to 8K, 100 up to\n"
            "                    1M, 20 above, reduced to fit -T)\n"
            "  -w WARMUP         warmup iterations per size (default: ITERS/10, at least 2)\n"
            "  -T SECONDS        time cap per size for scaled iteration counts (default 1)\n"
            "  -t TYPE           datatype (default float): int8 int16 int32 int64 uint8 uint16\n"
            "                    uint32 uint64 float double long_double c_float_complex\n"
            "                    c_double_complex c_long_double_complex bool byte\n"
            "  -o OP             sum prod min max land lor lxor band bor bxor (default sum)\n"
            "  -c                validate: rank-dependent data, results checked on every rank\n"
            "                    after the timed loop; PASS/FAIL per size, exit 1 on failure\n"
            "  -r ROOT           root of bcast and reduce (default 0)\n"
            "  --in-place        MPI_IN_PLACE where the collective allows it\n"
            "  -f FORM           blocking (MPI_Allreduce, default), nonblocking (MPI_Iallreduce\n"
            "                    + MPI_Wait) or persistent (MPI_Allreduce_init once per size,\n"
            "                    then MPI_Start + MPI_Wait)\n"
            "  --overlap         nonblocking: after the pure-communication loop, OSU's overlap\n"
            "                    test: start, compute on the CPU for as long as the call took\n"
            "                    (max over ranks), wait; columns compute(us), total(us) and\n"
            "                    overlap(%%) = 100 * (1 - (total - compute) / pure)\n"
            "  --csv FILE        also write the results to FILE as CSV (rank 0; replaced if it\n"
            "                    exists): a header line, then one row per collective and\n"
            "                    size, the table's figures plus the median over ranks\n"
            "                    (docs/tuning.md, \"Result files and plots\", lists the columns)\n"
            "  --label TEXT      --csv: the variant column (default: the buffer kind; host\n"
            "                    buffers: host,gpucoll or host,off, the component on or off)\n"
            "  --commit TEXT     --csv: the commit column (contrib/bench.sh passes git describe)\n"
            "  -h                this help\n"
            "Columns: avg/min/max over ranks of each rank's mean latency; algbw = size/avg;\n"
            "busbw = algbw * f (nccl-tests: allreduce 2(n-1)/n, allgather and reduce_scatter\n"
            "(n-1)/n, bcast and reduce 1); path/algorithm of the last call, peer bytes and sync\n"
            "rounds per call and rank (gpucoll counters; \"off\": the component is not active).\n");
}

static void die_usage(const char* fmt, ...) {
    if (rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "gpucoll_bench: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n(gpucoll_bench -h for help)\n");
        va_end(ap);
    }
    MPI_Finalize();
    exit(2);
}

static int parse_size(const char* s, size_t* out) {
    char* end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno) return -1;
    unsigned long long mult = 1;
    switch (*end) {
        case 'k':
        case 'K':
            mult = 1ULL << 10;
            end++;
            break;
        case 'm':
        case 'M':
            mult = 1ULL << 20;
            end++;
            break;
        case 'g':
        case 'G':
            mult = 1ULL << 30;
            end++;
            break;
        default:
            break;
    }
    if (*end == 'B' || *end == 'b') end++;
    if (*end != '\0') return -1;
    if (v > ULLONG_MAX / mult) return -1;
    *out = (size_t)(v * mult);
    return 0;
}

static long parse_long(const char* opt, const char* s, long min) {
    char* end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < min) die_usage("bad value '%s' for %s", s, opt);
    return v;
}

static const char* need_arg(int argc, char** argv, int* i) {
    if (*i + 1 >= argc) die_usage("option %s needs a value", argv[*i]);
    return argv[++*i];
}

static void parse_options(int argc, char** argv, options_t* o) {
    memset(o, 0, sizeof(*o));
    o->buf = BUF_HOST;
    o->min_bytes = 4;
    o->max_bytes = 64u << 20;
    o->iters = -1;
    o->warmup = -1;
    o->time_cap = 1.0;
    o->dtype = &dtypes[8]; /* float */
    o->op = &ops[0];       /* sum */
    const char* coll = NULL;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            if (rank == 0) usage(stdout);
            MPI_Finalize();
            exit(0);
        } else if (!strcmp(a, "-d")) {
            const char* v = need_arg(argc, argv, &i);
            int found = 0;
            for (int k = 0; k < 3; k++)
                if (!strcmp(v, buf_names[k])) {
                    o->buf = (buf_kind_t)k;
                    found = 1;
                }
            if (!found) die_usage("unknown buffer kind '%s' (cuda, emu or host)", v);
            o->buf_given = 1;
        } else if (!strcmp(a, "-m")) {
            const char* v = need_arg(argc, argv, &i);
            char lo[64];
            const char* colon = strchr(v, ':');
            if (colon) {
                size_t len = (size_t)(colon - v);
                if (len >= sizeof(lo)) die_usage("bad size range '%s'", v);
                memcpy(lo, v, len);
                lo[len] = '\0';
                if (parse_size(lo, &o->min_bytes) || parse_size(colon + 1, &o->max_bytes))
                    die_usage("bad size range '%s' (MIN:MAX, e.g. 4K:64M)", v);
            } else {
                if (parse_size(v, &o->min_bytes)) die_usage("bad size '%s'", v);
                o->max_bytes = o->min_bytes;
            }
            if (o->min_bytes == 0) o->min_bytes = 1;
            if (o->max_bytes < o->min_bytes) die_usage("size range '%s': MAX < MIN", v);
        } else if (!strcmp(a, "-i")) {
            o->iters = parse_long("-i", need_arg(argc, argv, &i), 1);
        } else if (!strcmp(a, "-w")) {
            o->warmup = parse_long("-w", need_arg(argc, argv, &i), 0);
        } else if (!strcmp(a, "-T")) {
            const char* v = need_arg(argc, argv, &i);
            char* end;
            o->time_cap = strtod(v, &end);
            if (end == v || *end || !(o->time_cap > 0)) die_usage("bad value '%s' for -T", v);
        } else if (!strcmp(a, "-t")) {
            const char* v = need_arg(argc, argv, &i);
            o->dtype = NULL;
            for (size_t k = 0; k < NDTYPES; k++)
                if (!strcmp(v, dtypes[k].name)) o->dtype = &dtypes[k];
            if (!o->dtype) die_usage("unknown datatype '%s'", v);
        } else if (!strcmp(a, "-o")) {
            const char* v = need_arg(argc, argv, &i);
            o->op = NULL;
            for (size_t k = 0; k < NOPS; k++)
                if (!strcmp(v, ops[k].name)) o->op = &ops[k];
            if (!o->op) die_usage("unknown op '%s'", v);
        } else if (!strcmp(a, "-c")) {
            o->check = 1;
        } else if (!strcmp(a, "-r")) {
            o->root = (int)parse_long("-r", need_arg(argc, argv, &i), 0);
        } else if (!strcmp(a, "-f")) {
            const char* v = need_arg(argc, argv, &i);
            o->form = -1;
            for (int f = 0; f < 3; f++)
                if (!strcmp(v, form_names[f])) o->form = f;
            if (o->form < 0) die_usage("unknown form '%s' (blocking, nonblocking, persistent)", v);
        } else if (!strcmp(a, "--overlap")) {
            o->overlap = 1;
        } else if (!strcmp(a, "--csv")) {
            o->csv_path = need_arg(argc, argv, &i);
        } else if (!strcmp(a, "--label")) {
            o->label = need_arg(argc, argv, &i);
        } else if (!strcmp(a, "--commit")) {
            o->commit = need_arg(argc, argv, &i);
        } else if (!strcmp(a, "--in-place")) {
            o->in_place = 1;
        } else if (a[0] == '-') {
            die_usage("unknown option '%s'", a);
        } else if (coll) {
            die_usage("more than one collective given ('%s', '%s')", coll, a);
        } else {
            coll = a;
        }
    }
    if (!coll) die_usage("no collective given");
    if (o->overlap && o->form != F_NONBLOCKING) die_usage("--overlap needs -f nonblocking");
    if (!strcmp(coll, "all")) {
        for (int c = 0; c < B_NCOLL; c++) o->colls[o->ncolls++] = c;
    } else {
        for (int c = 0; c < B_NCOLL; c++)
            if (!strcmp(coll, coll_names[c])) o->colls[o->ncolls++] = c;
        if (o->ncolls == 0) die_usage("unknown collective '%s'", coll);
    }
    if (o->root >= nranks) die_usage("root %d out of range (np %d)", o->root, nranks);
}

/* ------------------------------------------------------------------ data pattern
 * Element i of rank r's input is a small integer val(r, i), chosen per op so
 * that every reduction is exact in every type (wrap-around included: the
 * expected value is computed in int64 and converted to the type, as MPI's own
 * C loops do). */

static int64_t pattern(int nonreduce, gpucoll_op_t op, int r, size_t i) {
    if (nonreduce) return (int64_t)(((uint64_t)r * 131u + i * 7u) % 97u) + 1;
    switch (op) {
        case GPUCOLL_OP_PROD:
            return ((r + i) % 4 == 0) ? 2 : 1;
        case GPUCOLL_OP_LAND:
        case GPUCOLL_OP_LOR:
        case GPUCOLL_OP_LXOR:
            return ((r + 2 * i) % 3 == 0) ? 0 : 1;
        case GPUCOLL_OP_BAND:
        case GPUCOLL_OP_BOR:
        case GPUCOLL_OP_BXOR:
            return (int64_t)((1u << ((r + i) % 7)) | ((i & 8) ? 1u : 0u));
        default: /* sum, min, max */
            return (int64_t)(((uint64_t)r * 5u + i * 3u) % 11u) + 1;
    }
}

static int64_t combine(gpucoll_op_t op, int64_t a, int64_t b) {
    switch (op) {
        case GPUCOLL_OP_PROD:
            return a * b;
        case GPUCOLL_OP_MIN:
            return a < b ? a : b;
        case GPUCOLL_OP_MAX:
            return a > b ? a : b;
        case GPUCOLL_OP_LAND:
            return a && b;
        case GPUCOLL_OP_LOR:
            return a || b;
        case GPUCOLL_OP_LXOR:
            return !a != !b;
        case GPUCOLL_OP_BAND:
            return a & b;
        case GPUCOLL_OP_BOR:
            return a | b;
        case GPUCOLL_OP_BXOR:
            return a ^ b;
        default:
            return a + b;
    }
}

/* Imaginary part of complex elements: -v for sum and data movement, 0 for
 * prod (so that products stay real and exact). */
static int64_t imag_of(int64_t v, int nonreduce, gpucoll_op_t op) {
    return (nonreduce || op == GPUCOLL_OP_SUM) ? -v : 0;
}

static void put_elem(const dtype_info_t* t, void* buf, size_t i, int64_t v, int64_t im) {
    char* p = (char*)buf + i * t->size;
    switch (t->id) {
        case GPUCOLL_INT8: {
            int8_t x = (int8_t)v;
            memcpy(p, &x, 1);
            break;
        }
        case GPUCOLL_INT16: {
            int16_t x = (int16_t)v;
            memcpy(p, &x, 2);
            break;
        }
        case GPUCOLL_INT32: {
            int32_t x = (int32_t)v;
            memcpy(p, &x, 4);
            break;
        }
        case GPUCOLL_INT64: {
            memcpy(p, &v, 8);
            break;
        }
        case GPUCOLL_UINT8:
        case GPUCOLL_BYTE: {
            uint8_t x = (uint8_t)v;
            memcpy(p, &x, 1);
            break;
        }
        case GPUCOLL_UINT16: {
            uint16_t x = (uint16_t)v;
            memcpy(p, &x, 2);
            break;
        }
        case GPUCOLL_UINT32: {
            uint32_t x = (uint32_t)v;
            memcpy(p, &x, 4);
            break;
        }
        case GPUCOLL_UINT64: {
            uint64_t x = (uint64_t)v;
            memcpy(p, &x, 8);
            break;
        }
        case GPUCOLL_FLOAT: {
            float x = (float)v;
            memcpy(p, &x, sizeof(x));
            break;
        }
        case GPUCOLL_DOUBLE: {
            double x = (double)v;
            memcpy(p, &x, sizeof(x));
            break;
        }
        case GPUCOLL_LONG_DOUBLE: {
            long double x = (long double)v;
            memcpy(p, &x, sizeof(x));
            break;
        }
        case GPUCOLL_C_FLOAT_COMPLEX: {
            float x[2] = {(float)v, (float)im};
            memcpy(p, x, sizeof(x));
            break;
        }
        case GPUCOLL_C_DOUBLE_COMPLEX: {
            double x[2] = {(double)v, (double)im};
            memcpy(p, x, sizeof(x));
            break;
        }
        case GPUCOLL_C_LONG_DOUBLE_COMPLEX: {
            long double x[2] = {(long double)v, (long double)im};
            memcpy(p, x, sizeof(x));
            break;
        }
        case GPUCOLL_BOOL: {
            _Bool x = (_Bool)(v & 1);
            memcpy(p, &x, sizeof(x));
            break;
        }
        default:
            break;
    }
}

/* Compares element i of buf with (v, im) converted to the type; value
 * comparison, so padding bytes of long double do not matter. */
static int elem_equal(const dtype_info_t* t, const void* buf, size_t i, int64_t v, int64_t im,
                      char* got, size_t gotlen) {
    const char* p = (const char*)buf + i * t->size;
    switch (t->id) {
        case GPUCOLL_FLOAT: {
            float x;
            memcpy(&x, p, sizeof(x));
            snprintf(got, gotlen, "%g", (double)x);
            return x == (float)v;
        }
        case GPUCOLL_DOUBLE: {
            double x;
            memcpy(&x, p, sizeof(x));
            snprintf(got, gotlen, "%g", x);
            return x == (double)v;
        }
        case GPUCOLL_LONG_DOUBLE: {
            long double x;
            memcpy(&x, p, sizeof(x));
            snprintf(got, gotlen, "%Lg", x);
            return x == (long double)v;
        }
        case GPUCOLL_C_FLOAT_COMPLEX: {
            float x[2];
            memcpy(x, p, sizeof(x));
            snprintf(got, gotlen, "(%g,%g)", (double)x[0], (double)x[1]);
            return x[0] == (float)v && x[1] == (float)im;
        }
        case GPUCOLL_C_DOUBLE_COMPLEX: {
            double x[2];
            memcpy(x, p, sizeof(x));
            snprintf(got, gotlen, "(%g,%g)", x[0], x[1]);
            return x[0] == (double)v && x[1] == (double)im;
        }
        case GPUCOLL_C_LONG_DOUBLE_COMPLEX: {
            long double x[2];
            memcpy(x, p, sizeof(x));
            snprintf(got, gotlen, "(%Lg,%Lg)", x[0], x[1]);
            return x[0] == (long double)v && x[1] == (long double)im;
        }
        default: {
            /* integers, bool, byte: compare the bytes of the converted value */
            char want[16];
            put_elem(t, want, 0, v, im);
            int64_t s = 0;
            uint64_t u = 0;
            switch (t->size) {
                case 1:
                    u = *(const uint8_t*)p;
                    s = (int8_t)u;
                    break;
                case 2: {
                    uint16_t x;
                    memcpy(&x, p, 2);
                    u = x;
                    s = (int16_t)x;
                    break;
                }
                case 4: {
                    uint32_t x;
                    memcpy(&x, p, 4);
                    u = x;
                    s = (int32_t)x;
                    break;
                }
                default:
                    memcpy(&u, p, 8);
                    s = (int64_t)u;
                    break;
            }
            if (t->kind == K_SINT)
                snprintf(got, gotlen, "%lld", (long long)s);
            else
                snprintf(got, gotlen, "%llu", (unsigned long long)u);
            return memcmp(want, p, t->size) == 0;
        }
    }
}

/* ------------------------------------------------------------------ buffers */

static void* buf_alloc(buf_kind_t kind, size_t bytes) {
    void* p = NULL;
    if (kind == BUF_HOST) {
        if (posix_memalign(&p, 4096, bytes ? bytes : 1)) p = NULL;
    } else if (gpucoll_malloc_device(&p, bytes) != GPUCOLL_SUCCESS) {
        fprintf(stderr, "gpucoll_bench: rank %d: gpucoll_malloc_device(%zu): %s\n", rank, bytes,
                gpucoll_last_error());
        p = NULL;
    }
    if (!p) {
        fprintf(stderr, "gpucoll_bench: rank %d: cannot allocate %zu bytes of %s memory\n", rank,
                bytes, buf_names[kind]);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    return p;
}

static void buf_free(buf_kind_t kind, void* p) {
    if (kind == BUF_HOST)
        free(p);
    else
        gpucoll_free_device(p);
}

static void copy_bytes(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return;
    if (gpucoll_memcpy(dst, src, bytes) != GPUCOLL_SUCCESS) {
        fprintf(stderr, "gpucoll_bench: rank %d: gpucoll_memcpy(%zu): %s\n", rank, bytes,
                gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
}

/* ------------------------------------------------------------------ one size */

typedef struct call {
    bench_coll_t coll;
    MPI_Datatype dt;
    MPI_Op op;
    size_t esize;
    size_t total;  /* elements of the full buffer (what "size" measures) */
    size_t block;  /* allgather / reduce_scatter_block: elements per rank */
    int* rcounts;  /* reduce_scatter */
    size_t* displ; /* reduce_scatter: first element of each rank's block */
    void* send;
    void* recv;
    int in_place;
    int root;
    int form;
    MPI_Request preq; /* persistent: the request of this size */
} call_t;

/* Splits total elements into nranks counts, the first total % n one larger. */
static void rs_counts(call_t* c) {
    size_t base = c->total / (size_t)nranks, extra = c->total % (size_t)nranks, off = 0;
    for (int r = 0; r < nranks; r++) {
        c->rcounts[r] = (int)(base + ((size_t)r < extra ? 1 : 0));
        c->displ[r] = off;
        off += (size_t)c->rcounts[r];
    }
}

/* Starts the nonblocking form (persistent: creates the request). */
static void start_call(const call_t* c, int persistent, MPI_Request* req) {
    const void* sb = c->in_place ? MPI_IN_PLACE : c->send;
    const void* rsb = (c->in_place && rank != c->root) ? c->send : sb;
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Info ni = MPI_INFO_NULL;
    int n = (int)c->total, b = (int)c->block;
    switch (c->coll) {
        case B_ALLREDUCE:
            persistent ? MPI_Allreduce_init(sb, c->recv, n, c->dt, c->op, w, ni, req)
                       : MPI_Iallreduce(sb, c->recv, n, c->dt, c->op, w, req);
            break;
        case B_BCAST:
            persistent ? MPI_Bcast_init(c->recv, n, c->dt, c->root, w, ni, req)
                       : MPI_Ibcast(c->recv, n, c->dt, c->root, w, req);
            break;
        case B_ALLGATHER:
            persistent ? MPI_Allgather_init(sb, b, c->dt, c->recv, b, c->dt, w, ni, req)
                       : MPI_Iallgather(sb, b, c->dt, c->recv, b, c->dt, w, req);
            break;
        case B_REDUCE_SCATTER:
            persistent ? MPI_Reduce_scatter_init(sb, c->recv, c->rcounts, c->dt, c->op, w, ni, req)
                       : MPI_Ireduce_scatter(sb, c->recv, c->rcounts, c->dt, c->op, w, req);
            break;
        case B_REDUCE_SCATTER_BLOCK:
            persistent ? MPI_Reduce_scatter_block_init(sb, c->recv, b, c->dt, c->op, w, ni, req)
                       : MPI_Ireduce_scatter_block(sb, c->recv, b, c->dt, c->op, w, req);
            break;
        case B_REDUCE:
            persistent ? MPI_Reduce_init(rsb, c->recv, n, c->dt, c->op, c->root, w, ni, req)
                       : MPI_Ireduce(rsb, c->recv, n, c->dt, c->op, c->root, w, req);
            break;
        default:
            break;
    }
}

static void run_calls(call_t* c, long n) {
    void* sb = c->in_place ? MPI_IN_PLACE : c->send;
    if (c->form != F_BLOCKING) {
        for (long k = 0; k < n; k++) {
            MPI_Request req;
            if (c->form == F_PERSISTENT) {
                MPI_Start(&c->preq);
                MPI_Wait(&c->preq, MPI_STATUS_IGNORE);
            } else {
                start_call(c, 0, &req);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
        }
        return;
    }
    for (long k = 0; k < n; k++) {
        switch (c->coll) {
            case B_ALLREDUCE:
                MPI_Allreduce(sb, c->recv, (int)c->total, c->dt, c->op, MPI_COMM_WORLD);
                break;
            case B_BCAST:
                MPI_Bcast(c->recv, (int)c->total, c->dt, c->root, MPI_COMM_WORLD);
                break;
            case B_ALLGATHER:
                MPI_Allgather(sb, (int)c->block, c->dt, c->recv, (int)c->block, c->dt,
                              MPI_COMM_WORLD);
                break;
            case B_REDUCE_SCATTER:
                MPI_Reduce_scatter(sb, c->recv, c->rcounts, c->dt, c->op, MPI_COMM_WORLD);
                break;
            case B_REDUCE_SCATTER_BLOCK:
                MPI_Reduce_scatter_block(sb, c->recv, (int)c->block, c->dt, c->op, MPI_COMM_WORLD);
                break;
            case B_REDUCE:
                MPI_Reduce((c->in_place && rank != c->root) ? c->send : sb, c->recv, (int)c->total,
                           c->dt, c->op, c->root, MPI_COMM_WORLD);
                break;
            default:
                break;
        }
    }
}

/* Elements of the full buffer that a size in bytes can carry for this
 * collective on nranks ranks (0: too small). */
static size_t elems_for(bench_coll_t coll, size_t bytes, size_t esize) {
    size_t e = bytes / esize;
    if (coll == B_ALLGATHER || coll == B_REDUCE_SCATTER_BLOCK)
        e = e / (size_t)nranks * (size_t)nranks;
    if (coll == B_REDUCE_SCATTER && e < (size_t)nranks) e = 0; /* every rank gets >= 1 */
    return e > (size_t)INT_MAX ? 0 : e;
}

typedef struct bench_ctx {
    const options_t* o;
    const dtype_info_t* t;
    gpucoll_op_t op;
    unsigned char* host; /* staging for fill and check, max bytes */
    unsigned char* host2;
} bench_ctx_t;

/* Fills the inputs (and a sentinel in the output) for one call. */
static void fill_inputs(bench_ctx_t* x, call_t* c) {
    const dtype_info_t* t = x->t;
    const int nonred = !coll_reduces(c->coll);
    size_t full = c->total * c->esize;
    /* sentinel in the whole receive buffer first */
    size_t recv_bytes = full;
    if (c->coll == B_REDUCE_SCATTER_BLOCK && !c->in_place) recv_bytes = c->block * c->esize;
    if (c->coll == B_REDUCE_SCATTER && !c->in_place)
        recv_bytes = (size_t)c->rcounts[rank] * c->esize;
    memset(x->host, 0xA5, recv_bytes);
    /* this rank's input */
    size_t in_elems = c->total;
    if (c->coll == B_ALLGATHER) in_elems = c->block;
    for (size_t i = 0; i < in_elems; i++) {
        int64_t v = pattern(nonred, x->op, rank, i);
        put_elem(t, x->host2, i, v, imag_of(v, nonred, x->op));
    }
    switch (c->coll) {
        case B_BCAST:
            if (rank == c->root) memcpy(x->host, x->host2, full);
            copy_bytes(c->recv, x->host, full);
            break;
        case B_ALLGATHER:
            if (c->in_place)
                memcpy(x->host + (size_t)rank * c->block * c->esize, x->host2, c->block * c->esize);
            else
                copy_bytes(c->send, x->host2, c->block * c->esize);
            copy_bytes(c->recv, x->host, recv_bytes);
            break;
        default: /* reductions: input of the full size */
            if (c->in_place && (c->coll != B_REDUCE || rank == c->root)) {
                copy_bytes(c->recv, x->host2, full);
            } else {
                copy_bytes(c->send, x->host2, full);
                if (c->coll != B_REDUCE || rank == c->root)
                    copy_bytes(c->recv, x->host, recv_bytes);
            }
            break;
    }
}

/* Checks this rank's result; returns the number of wrong elements and prints
 * the first few. */
static long check_result(bench_ctx_t* x, const call_t* c) {
    const dtype_info_t* t = x->t;
    size_t first = 0, n = 0;
    switch (c->coll) {
        case B_ALLREDUCE:
        case B_BCAST:
        case B_ALLGATHER:
            n = c->total;
            break;
        case B_REDUCE:
            n = rank == c->root ? c->total : 0;
            break;
        case B_REDUCE_SCATTER_BLOCK:
            first = (size_t)rank * c->block;
            n = c->block;
            break;
        case B_REDUCE_SCATTER:
            first = c->displ[rank];
            n = (size_t)c->rcounts[rank];
            break;
        default:
            break;
    }
    if (n == 0) return 0;
    copy_bytes(x->host, c->recv, n * c->esize);
    long bad = 0;
    char got[96];
    for (size_t j = 0; j < n; j++) {
        size_t gi = first + j; /* index in the full buffer */
        int64_t v, im;
        if (c->coll == B_BCAST) {
            v = pattern(1, x->op, c->root, gi);
            im = imag_of(v, 1, x->op);
        } else if (c->coll == B_ALLGATHER) {
            v = pattern(1, x->op, (int)(gi / c->block), gi % c->block);
            im = imag_of(v, 1, x->op);
        } else {
            v = pattern(0, x->op, 0, gi);
            im = imag_of(v, 0, x->op);
            for (int r = 1; r < nranks; r++) {
                int64_t w = pattern(0, x->op, r, gi);
                v = combine(x->op, v, w);
                im = combine(x->op, im, imag_of(w, 0, x->op));
            }
        }
        if (!elem_equal(t, x->host, j, v, im, got, sizeof(got))) {
            if (bad < 3)
                fprintf(stderr,
                        "gpucoll_bench: rank %d: %s %zu B: element %zu is %s, expected %lld"
                        "%s\n",
                        rank, coll_names[c->coll], c->total * c->esize, gi, got, (long long)v,
                        t->kind == K_CPLX ? " (real part)" : "");
            bad++;
        }
    }
    return bad;
}

/* Path and algorithm of the last call: "off" when no collective was counted
 * (the component is not active on this communicator). */
static int counters_active(const gpucoll_counters_t* k) {
    for (int c = 0; c < GPUCOLL_COLL_COUNT; c++)
        for (int p = 0; p < GPUCOLL_PATH_COUNT; p++)
            if (k->calls[c][p]) return 1;
    return 0;
}

static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static void default_iters(size_t bytes, long* iters, long* warmup) {
    if (bytes <= 8192)
        *iters = 1000;
    else if (bytes <= (1u << 20))
        *iters = 100;
    else
        *iters = 20;
    *warmup = *iters / 10 < 2 ? 2 : *iters / 10;
}

#define NAME_LEN 32

typedef struct row_info {
    double t_sum, t_min, t_median, t_max; /* over the ranks' mean latencies */
    double peer, syncs;                   /* summed over ranks, per call */
    char path[NAME_LEN], alg[NAME_LEN];
    int mixed;
    long bad;
    long iters;
    double t_compute, t_total; /* --overlap: averages over ranks */
} row_info_t;

/* CPU work, no MPI call (MPI_Wtime only reads a clock): OSU's compute phase. */
static void compute_for(double seconds) {
    volatile double x = 0;
    double t0 = MPI_Wtime();
    while (MPI_Wtime() - t0 < seconds)
        for (int i = 0; i < 200; i++) x += i * 0.5;
    (void)x;
}

/* OSU's overlap test at this size: iters x (start, compute for the pure
 * time, wait), against the compute phase alone. */
static void measure_overlap(call_t* c, double pure, long iters, row_info_t* row) {
    double target;
    MPI_Allreduce(&pure, &target, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long k = 0; k < iters; k++) compute_for(target);
    double t_compute = (MPI_Wtime() - t0) / (double)iters;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (long k = 0; k < iters; k++) {
        MPI_Request req;
        start_call(c, 0, &req);
        compute_for(target);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    double t_total = (MPI_Wtime() - t0) / (double)iters;
    double local[2] = {t_compute, t_total}, sums[2];
    MPI_Reduce(local, sums, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    row->t_compute = sums[0] / nranks;
    row->t_total = sums[1] / nranks;
}

static int bench_size(bench_ctx_t* x, call_t* c, row_info_t* row) {
    const options_t* o = x->o;
    size_t bytes = c->total * c->esize;
    if (c->coll == B_REDUCE_SCATTER) rs_counts(c);
    if (c->coll == B_ALLGATHER || c->coll == B_REDUCE_SCATTER_BLOCK)
        c->block = c->total / (size_t)nranks;
    fill_inputs(x, c);
    if (c->form == F_PERSISTENT) start_call(c, 1, &c->preq);

    long iters, warmup;
    default_iters(bytes, &iters, &warmup);
    int scaled = o->iters < 0;
    if (!scaled) iters = o->iters;
    if (o->warmup >= 0)
        warmup = o->warmup;
    else if (!scaled)
        warmup = iters / 10 < 2 ? 2 : iters / 10;

    /* Warmup in doubling batches (1, 2, 4, ...), each timed and agreed on
     * (max over ranks), until the warmup count is done or a fifth of the time
     * cap is spent. The last batch after the first call (which may pay for
     * first-touch setup) gives the time per call that fits the iterations into
     * the cap. */
    MPI_Barrier(MPI_COMM_WORLD);
    long done = 0, batch = 1;
    double per_call = 0, spent = 0;
    while (done < warmup) {
        long b = batch < warmup - done ? batch : warmup - done;
        double t0 = MPI_Wtime();
        run_calls(c, b);
        double dt = MPI_Wtime() - t0, dmax;
        MPI_Allreduce(&dt, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        done += b;
        spent += dmax;
        if (done > 1 || per_call == 0) per_call = dmax / (double)b;
        if (scaled && spent > 0.2 * o->time_cap) break;
        batch *= 2;
    }
    if (scaled && per_call > 0) {
        double fit = o->time_cap / per_call;
        if (fit < (double)iters) iters = fit < 3 ? 3 : (long)fit;
    }

    gpucoll_counters_reset();
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    run_calls(c, iters);
    double t = (MPI_Wtime() - t0) / (double)iters;
    gpucoll_counters_t k;
    memset(&k, 0, sizeof(k));
    gpucoll_counters_get(&k);
    /* everything below is host-buffer MPI, after the counters were read */

    char mine[2 * NAME_LEN];
    memset(mine, 0, sizeof(mine));
    if (counters_active(&k)) {
        snprintf(mine, NAME_LEN, "%s", gpucoll_path_name(k.last_path));
        snprintf(mine + NAME_LEN, NAME_LEN, "%s", k.last_algorithm[0] ? k.last_algorithm : "-");
    } else {
        snprintf(mine, NAME_LEN, "off");
        snprintf(mine + NAME_LEN, NAME_LEN, "off");
    }
    double local[3] = {t, (double)k.bytes_peer / (double)iters,
                       (double)k.sync_rounds / (double)iters};
    double sums[3];
    MPI_Reduce(local, sums, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    double* times = NULL;
    char* all = NULL;
    if (rank == 0) {
        times = malloc((size_t)nranks * sizeof(double));
        all = malloc((size_t)nranks * sizeof(mine));
        if (!times || !all) MPI_Abort(MPI_COMM_WORLD, 3);
    }
    MPI_Gather(&t, 1, MPI_DOUBLE, times, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(mine, (int)sizeof(mine), MPI_CHAR, all, (int)sizeof(mine), MPI_CHAR, 0,
               MPI_COMM_WORLD);
    if (rank == 0) {
        qsort(times, (size_t)nranks, sizeof(double), cmp_double);
        row->t_min = times[0];
        row->t_max = times[nranks - 1];
        row->t_median =
            nranks % 2 ? times[nranks / 2] : (times[nranks / 2 - 1] + times[nranks / 2]) / 2;
        free(times);
        row->t_sum = sums[0];
        row->peer = sums[1];
        row->syncs = sums[2];
        memcpy(row->path, all, NAME_LEN);
        memcpy(row->alg, all + NAME_LEN, NAME_LEN);
        row->path[NAME_LEN - 1] = row->alg[NAME_LEN - 1] = '\0';
        row->mixed = 0;
        for (int r = 1; r < nranks; r++)
            if (memcmp(all, all + (size_t)r * sizeof(mine), sizeof(mine))) row->mixed = 1;
        free(all);
    }
    row->iters = iters;
    if (o->overlap) measure_overlap(c, t, iters, row);

    row->bad = 0;
    if (o->check) {
        long bad;
        if (c->in_place && c->coll != B_BCAST) {
            /* the timed loop overwrote the inputs: fresh inputs, one more call */
            fill_inputs(x, c);
            MPI_Barrier(MPI_COMM_WORLD);
            run_calls(c, 1);
        }
        bad = check_result(x, c);
        MPI_Reduce(&bad, &row->bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    }
    if (c->form == F_PERSISTENT) MPI_Request_free(&c->preq);
    return 0;
}

/* ------------------------------------------------------------------ driver */

static void fmt_bytes(char* out, size_t len, size_t b) {
    if (b >= (1u << 30) && b % (1u << 30) == 0)
        snprintf(out, len, "%zuG", b >> 30);
    else if (b >= (1u << 20) && b % (1u << 20) == 0)
        snprintf(out, len, "%zuM", b >> 20);
    else if (b >= 1024 && b % 1024 == 0)
        snprintf(out, len, "%zuK", b >> 10);
    else
        snprintf(out, len, "%zu", b);
}

static int count_nodes(void) {
    MPI_Comm node;
    int node_rank, leaders = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &node_rank);
    int leader = node_rank == 0;
    MPI_Allreduce(&leader, &leaders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_free(&node);
    return leaders;
}

/* Nodes as gpucoll tells them apart (src/intra/node_comm.cc): GPUCOLL_HOSTID
 * where set (nodes faked on one machine), else the boot id and host name.
 * The result on rank 0. */
static int count_node_ids(void) {
    char mine[256];
    memset(mine, 0, sizeof(mine));
    const char* forced = getenv("GPUCOLL_HOSTID");
    if (forced && *forced) {
        snprintf(mine, sizeof(mine), "hostid:%s", forced);
    } else {
        char boot[64] = "", host[128] = "";
        FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
        if (f) {
            if (!fgets(boot, sizeof(boot), f)) boot[0] = '\0';
            fclose(f);
        }
        gethostname(host, sizeof(host) - 1);
        snprintf(mine, sizeof(mine), "%s/%s", boot, host);
    }
    char* all = NULL;
    if (rank == 0 && !(all = malloc((size_t)nranks * sizeof(mine)))) MPI_Abort(MPI_COMM_WORLD, 3);
    MPI_Gather(mine, (int)sizeof(mine), MPI_CHAR, all, (int)sizeof(mine), MPI_CHAR, 0,
               MPI_COMM_WORLD);
    int n = 0;
    if (rank == 0) {
        for (int r = 0; r < nranks; r++) {
            int seen = 0;
            for (int q = 0; q < r && !seen; q++)
                seen = !memcmp(all + (size_t)q * sizeof(mine), all + (size_t)r * sizeof(mine),
                               sizeof(mine));
            n += !seen;
        }
        free(all);
    }
    return n;
}

/* ------------------------------------------------------------------ result file
 * --csv FILE: rank 0 writes a header line and one row per collective and size
 * with the figures of the printed table (same measurement, more digits), the
 * median over ranks of their mean latencies, and what the run was. Columns:
 * docs/tuning.md, "Result files and plots"; contrib/plot-bench.py reads them. */

static const char csv_header[] =
    "collective,bytes,count,datatype,op,form,in_place,root,variant,backend,path,algorithm,"
    "paths_agree,ranks,nodes,runs,lat_avg_us,lat_min_us,lat_median_us,lat_max_us,algbw_GBps,"
    "busbw_GBps,busbw_factor,iterations,peer_bytes_per_call,syncs_per_call,check,version,commit,"
    "date,host,source";

static struct {
    FILE* f;           /* rank 0, NULL without --csv */
    char variant[128]; /* --label, or the buffer kind (host: and the component's state) */
    char date[32];     /* the run's start, UTC */
    char host[256];    /* rank 0's host name */
    int nodes;         /* count_node_ids() */
} csv;

/* One field and its separator; quoted (RFC 4180) when it holds , " or a line break. */
static void csv_text(const char* s, int last) {
    if (strpbrk(s, ",\"\r\n")) {
        fputc('"', csv.f);
        for (; *s; s++) {
            if (*s == '"') fputc('"', csv.f);
            fputc(*s, csv.f);
        }
        fputc('"', csv.f);
    } else {
        fputs(s, csv.f);
    }
    fputc(last ? '\n' : ',', csv.f);
}

/* Collective: every rank; rank 0 opens the file. Exits (2) when it cannot. */
static void csv_open(const options_t* o, int component_on) {
    int nodes = count_node_ids(); /* collective */
    int ok = 1;
    if (rank == 0) {
        csv.nodes = nodes;
        if (o->label)
            snprintf(csv.variant, sizeof(csv.variant), "%s", o->label);
        else
            snprintf(csv.variant, sizeof(csv.variant), "%s%s", buf_names[o->buf],
                     o->buf != BUF_HOST ? ""
                     : component_on     ? ",gpucoll"
                                        : ",off");
        time_t now = time(NULL);
        strftime(csv.date, sizeof(csv.date), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        gethostname(csv.host, sizeof(csv.host) - 1);
        csv.f = fopen(o->csv_path, "w");
        if (!csv.f) {
            fprintf(stderr, "gpucoll_bench: --csv %s: %s\n", o->csv_path, strerror(errno));
            ok = 0;
        } else {
            fprintf(csv.f, "%s\n", csv_header);
        }
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (!ok) {
        MPI_Finalize();
        exit(2);
    }
}

/* Rank 0: the row of one size, as printed in the table. */
static void csv_row(const options_t* o, bench_coll_t coll, size_t bytes, size_t count,
                    const row_info_t* row) {
    if (!csv.f) return;
    double avg = row->t_sum / nranks;
    double algbw = avg > 0 ? (double)bytes / avg / 1e9 : 0.0;
    double factor = busbw_factor(coll, nranks);
    char root[16] = "";
    if (coll == B_BCAST || coll == B_REDUCE) snprintf(root, sizeof(root), "%d", o->root);
    csv_text(coll_names[coll], 0);
    fprintf(csv.f, "%zu,%zu,", bytes, count);
    csv_text(o->dtype->name, 0);
    csv_text(coll_reduces(coll) ? o->op->name : "", 0);
    csv_text(form_names[o->form], 0);
    csv_text(coll == B_BCAST ? "" : o->in_place ? "yes" : "no", 0);
    csv_text(root, 0);
    csv_text(csv.variant, 0);
    csv_text(buf_names[o->buf], 0);
    csv_text(row->path, 0);
    csv_text(row->alg, 0);
    csv_text(row->mixed ? "no" : "yes", 0);
    fprintf(csv.f, "%d,%d,1,%.3f,%.3f,%.3f,%.3f,%.6g,%.6g,%.6g,%ld,%.0f,%.2f,", nranks, csv.nodes,
            avg * 1e6, row->t_min * 1e6, row->t_median * 1e6, row->t_max * 1e6, algbw,
            algbw * factor, factor, row->iters, row->peer / nranks, row->syncs / nranks);
    csv_text(o->check ? (row->bad ? "FAIL" : "PASS") : "", 0);
    csv_text(gpucoll_version(), 0);
    csv_text(o->commit ? o->commit : "", 0);
    csv_text(csv.date, 0);
    csv_text(csv.host, 0);
    csv_text("gpucoll_bench", 1);
    fflush(csv.f);
}

/* Rank 0: 0, or 1 when the file could not be written whole. */
static int csv_close(const options_t* o) {
    if (!csv.f) return 0;
    int bad = ferror(csv.f) != 0;
    if (fclose(csv.f) != 0) bad = 1;
    csv.f = NULL;
    if (bad) fprintf(stderr, "gpucoll_bench: --csv %s: write failed\n", o->csv_path);
    return bad;
}

static int bench_coll(const options_t* o, bench_coll_t coll, const char* backend, int component_on,
                      int nodes, unsigned char* host, unsigned char* host2, void* send,
                      void* recv) {
    bench_ctx_t x = {o, o->dtype, o->op->id, host, host2};
    const size_t esize = o->dtype->size;
    int failed = 0;
    call_t c;
    memset(&c, 0, sizeof(c));
    c.coll = coll;
    c.dt = mpi_dtype(o->dtype->id);
    c.op = mpi_op(o->op->id);
    c.esize = esize;
    c.send = send;
    c.recv = recv;
    c.in_place = o->in_place && coll != B_BCAST;
    c.root = o->root;
    c.form = o->form;
    c.rcounts = calloc((size_t)nranks, sizeof(int));
    c.displ = calloc((size_t)nranks, sizeof(size_t));

    if (rank == 0) {
        char host_name[256] = "?", date[64] = "?", lo[32], hi[32];
        gethostname(host_name, sizeof(host_name));
        host_name[sizeof(host_name) - 1] = '\0';
        time_t now = time(NULL);
        strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S %Z", localtime(&now));
        fmt_bytes(lo, sizeof(lo), o->min_bytes);
        fmt_bytes(hi, sizeof(hi), o->max_bytes);
        printf("# gpucoll_bench %s: %s, np %d (%d node%s), buffers %s, backend %s, component %s\n",
               gpucoll_version(), coll_names[coll], nranks, nodes, nodes == 1 ? "" : "s",
               buf_names[o->buf], backend, component_on ? "on" : "off");
        printf(
            "# dtype %s, op %s, root %d, in-place %s, sizes %s:%s B, iterations %s, "
            "validation %s\n",
            o->dtype->name, coll_reduces(coll) ? o->op->name : "-",
            (coll == B_BCAST || coll == B_REDUCE) ? o->root : 0,
            coll == B_BCAST ? "n/a" : (o->in_place ? "yes" : "no"), lo, hi,
            o->iters < 0 ? "auto" : "fixed", o->check ? "on" : "off");
        printf("# date %s, host %s, busbw factor %.4g, form %s%s\n", date, host_name,
               busbw_factor(coll, nranks), form_names[o->form],
               o->overlap ? ", overlap test (OSU)" : "");
        printf("#%11s %11s %10s %10s %10s %11s %11s %6s %-11s %-16s %12s %9s%s\n", "size(B)",
               "count", "avg(us)", "min(us)", "max(us)", "algbw(GB/s)", "busbw(GB/s)", "iters",
               "path", "algorithm", "peer_B/call", "syncs", o->check ? "  check" : "");
        if (o->overlap)
            printf("#%11s %12s %10s %10s %10s\n", "size(B)", "pure(us)", "compute(us)", "total(us)",
                   "overlap(%)");
        fflush(stdout);
    }

    for (size_t s = o->min_bytes; s <= o->max_bytes; s *= 2) {
        c.total = elems_for(coll, s, esize);
        if (c.total == 0) {
            if (s > o->max_bytes / 2) break;
            continue;
        }
        row_info_t row;
        memset(&row, 0, sizeof(row));
        bench_size(&x, &c, &row);
        if (rank == 0) {
            size_t bytes = c.total * esize;
            double avg = row.t_sum / nranks;
            double algbw = avg > 0 ? (double)bytes / avg / 1e9 : 0.0;
            char alg[NAME_LEN + 2];
            snprintf(alg, sizeof(alg), "%s%s", row.alg, row.mixed ? "*" : "");
            printf(" %11zu %11zu %10.2f %10.2f %10.2f %11.3f %11.3f %6ld %-11s %-16s %12.0f %9.2f",
                   bytes, c.total, avg * 1e6, row.t_min * 1e6, row.t_max * 1e6, algbw,
                   algbw * busbw_factor(coll, nranks), row.iters, row.path, alg, row.peer / nranks,
                   row.syncs / nranks);
            if (o->check) printf("  %s", row.bad ? "FAIL" : "PASS");
            printf("\n");
            csv_row(o, coll, bytes, c.total, &row);
            if (o->overlap) {
                double ov = 100.0 * (1.0 - (row.t_total - row.t_compute) / avg);
                printf("#%11zu %12.2f %10.2f %10.2f %10.1f\n", bytes, avg * 1e6,
                       row.t_compute * 1e6, row.t_total * 1e6, ov < 0 ? 0.0 : ov);
            }
            fflush(stdout);
            if (row.mixed) printf("# ranks disagree on path/algorithm (rank 0 shown)\n");
            if (row.bad) {
                printf("# FAIL: %ld wrong elements over all ranks\n", row.bad);
                failed = 1;
            }
        }
        if (s > o->max_bytes / 2) break; /* no overflow of s *= 2 */
    }
    free(c.rcounts);
    free(c.displ);
    MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return failed;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    options_t o;
    parse_options(argc, argv, &o);
    const char* backend = gpucoll_backend();

    if (!o.buf_given)
        o.buf = !strcmp(backend, "cuda") ? BUF_CUDA : !strcmp(backend, "emu") ? BUF_EMU : BUF_HOST;

    /* Device buffers need the matching backend in this process (the same one
     * the component uses). */
    int bad_backend = o.buf != BUF_HOST && strcmp(backend, buf_names[o.buf]) != 0;
    int first_bad = bad_backend ? rank : nranks, any_bad; /* the lowest such rank reports */
    MPI_Allreduce(&first_bad, &any_bad, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (any_bad < nranks) {
        if (rank == any_bad)
            fprintf(stderr,
                    "gpucoll_bench: rank %d: -d %s needs the '%s' device backend, but this "
                    "process has '%s'.\n  Pass --mca coll_gpucoll_device %s to mpirun (or set "
                    "GPUCOLL_DEVICE=%s in the environment of every rank).\n",
                    rank, buf_names[o.buf], buf_names[o.buf], backend, buf_names[o.buf],
                    buf_names[o.buf]);
        MPI_Finalize();
        return 2;
    }
    /* One GPU per local rank (GPUCOLL_LOCAL_GPU overrides): the component
     * works on the device that holds the buffers. */
    if (o.buf != BUF_HOST && gpucoll_select_local_device() < 0) {
        fprintf(stderr, "gpucoll_bench: rank %d: cannot select a GPU: %s\n", rank,
                gpucoll_last_error());
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    if (!gpucoll_op_valid(o.dtype->id, o.op->id)) {
        int reducing = 0;
        for (int i = 0; i < o.ncolls; i++) reducing |= coll_reduces((bench_coll_t)o.colls[i]);
        if (reducing) die_usage("MPI does not define op %s on %s", o.op->name, o.dtype->name);
    }

    /* Is the component active on MPI_COMM_WORLD? It counts host-buffer calls
     * too (path "delegated"). A device buffer without it would reach Open
     * MPI's own code, which is not CUDA-aware: refuse instead of crashing. */
    gpucoll_counters_reset();
    int probe = 1, probe_out = 0;
    MPI_Allreduce(&probe, &probe_out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    gpucoll_counters_t k;
    memset(&k, 0, sizeof(k));
    gpucoll_counters_get(&k);
    int on = counters_active(&k), all_on;
    MPI_Allreduce(&on, &all_on, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (o.buf != BUF_HOST && !all_on) {
        if (rank == 0)
            fprintf(stderr,
                    "gpucoll_bench: -d %s: the gpucoll component is not active on "
                    "MPI_COMM_WORLD, so device buffers would reach Open MPI's own collectives "
                    "(not CUDA-aware).\n  Check that mca_coll_gpucoll.so is found (installed, "
                    "or OMPI_MCA_mca_base_component_path=DIR:SYS_DEFAULT:USER_DEFAULT), that "
                    "'--mca coll' does not exclude it, and --mca coll_base_verbose 10.\n",
                    buf_names[o.buf]);
        MPI_Finalize();
        return 2;
    }
    int nodes = count_nodes();
    if (o.csv_path) csv_open(&o, all_on);

    size_t max_bytes = o.max_bytes;
    unsigned char* host = malloc(max_bytes ? max_bytes : 1);
    unsigned char* host2 = malloc(max_bytes ? max_bytes : 1);
    if (!host || !host2) {
        fprintf(stderr, "gpucoll_bench: rank %d: out of host memory (%zu B)\n", rank, max_bytes);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    void* send = buf_alloc(o.buf, max_bytes);
    void* recv = buf_alloc(o.buf, max_bytes);

    int failed = 0;
    for (int i = 0; i < o.ncolls; i++) {
        if (i > 0 && rank == 0) printf("\n");
        failed |= bench_coll(&o, (bench_coll_t)o.colls[i], backend, all_on, nodes, host, host2,
                             send, recv);
    }
    if (rank == 0 && o.check) printf("# validation: %s\n", failed ? "FAILED" : "all sizes passed");
    int csv_failed = rank == 0 ? csv_close(&o) : 0;

    buf_free(o.buf, send);
    buf_free(o.buf, recv);
    free(host);
    free(host2);
    MPI_Finalize();
    return failed || csv_failed ? 1 : 0;
}
