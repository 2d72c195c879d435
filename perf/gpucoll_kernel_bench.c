/*
 * gpucoll_kernel_bench - the device reduction kernel against a device-to-device
 * copy, in one process and one run (no MPI).
 *
 * Both are measured as memory traffic: a copy of S bytes moves 2S (read S,
 * write S), a two-source reduction dst = a op b moves 3S. A reduction kernel
 * that keeps up with the memory system reaches the copy's traffic rate; the
 * table prints the ratio. Each figure is the median of the iterations, each
 * iteration one synchronous call (gpucoll_memcpy / gpucoll_reduce), so small
 * sizes include the launch and synchronisation cost.
 *
 *   gpucoll_kernel_bench [-d cuda|emu] [-m MIN:MAX] [-i ITERATIONS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpucoll.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void* a, const void* b) {
    const double x = *(const double*)a, y = *(const double*)b;
    return (x > y) - (x < y);
}

static size_t parse_size(const char* s) {
    char* end = NULL;
    double v = strtod(s, &end);
    switch (end && *end ? *end : ' ') {
        case 'K':
        case 'k':
            v *= 1024;
            break;
        case 'M':
        case 'm':
            v *= 1024 * 1024;
            break;
        case 'G':
        case 'g':
            v *= 1024.0 * 1024 * 1024;
            break;
        default:
            break;
    }
    return (size_t)v;
}

static void die(const char* what) {
    fprintf(stderr, "gpucoll_kernel_bench: %s: %s\n", what, gpucoll_last_error());
    exit(1);
}

int main(int argc, char** argv) {
    const char* backend = "auto";
    size_t min = 1 << 20, max = (size_t)1 << 30;
    int iterations = 20;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-d") && i + 1 < argc) {
            backend = argv[++i];
        } else if (!strcmp(argv[i], "-m") && i + 1 < argc) {
            const char* v = argv[++i];
            const char* colon = strchr(v, ':');
            min = parse_size(v);
            max = colon ? parse_size(colon + 1) : min;
        } else if (!strcmp(argv[i], "-i") && i + 1 < argc) {
            iterations = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [-d cuda|emu] [-m MIN:MAX] [-i ITERATIONS]\n", argv[0]);
            return 2;
        }
    }
    if (iterations < 1 || min < 1 || max < min) {
        fprintf(stderr, "gpucoll_kernel_bench: bad arguments\n");
        return 2;
    }
    if (gpucoll_init_backend(backend) != GPUCOLL_SUCCESS) die("no device backend");

    void *a = NULL, *b = NULL, *dst = NULL;
    if (gpucoll_malloc_device(&a, max) != GPUCOLL_SUCCESS ||
        gpucoll_malloc_device(&b, max) != GPUCOLL_SUCCESS ||
        gpucoll_malloc_device(&dst, max) != GPUCOLL_SUCCESS)
        die("allocating the buffers");
    /* Defined contents (zeros are fine for timing; NaN-free for float ops). */
    char* zeros = calloc(1, max);
    if (!zeros) die("allocating host memory");
    if (gpucoll_memcpy(a, zeros, max) != GPUCOLL_SUCCESS ||
        gpucoll_memcpy(b, zeros, max) != GPUCOLL_SUCCESS)
        die("initialising the buffers");
    free(zeros);

    static const struct {
        gpucoll_dtype_t dtype;
        gpucoll_op_t op;
    } kinds[] = {{GPUCOLL_FLOAT, GPUCOLL_OP_SUM},
                 {GPUCOLL_DOUBLE, GPUCOLL_OP_SUM},
                 {GPUCOLL_INT8, GPUCOLL_OP_SUM},
                 {GPUCOLL_FLOAT, GPUCOLL_OP_MAX}};
    const int nkinds = (int)(sizeof kinds / sizeof kinds[0]);
    double* t = malloc(sizeof(double) * (size_t)iterations);
    if (!t) die("allocating host memory");

    printf("# gpucoll_kernel_bench: backend %s, %d iterations per figure (median)\n",
           gpucoll_backend(), iterations);
    printf("# traffic GB/s: copy 2S/t, reduction dst = a op b 3S/t; ratio = reduction / copy\n");
    printf("%12s %12s", "size(B)", "copy GB/s");
    for (int k = 0; k < nkinds; ++k) {
        char name[48];
        snprintf(name, sizeof name, "%s %s", gpucoll_dtype_name(kinds[k].dtype),
                 gpucoll_op_name(kinds[k].op));
        printf(" %16s %6s", name, "ratio");
    }
    printf("\n");
    for (size_t s = min; s <= max; s *= 4) {
        for (int i = 0; i <= iterations; ++i) { /* i == 0: warm-up */
            const double t0 = now_s();
            if (gpucoll_memcpy(dst, a, s) != GPUCOLL_SUCCESS) die("copy");
            if (i > 0) t[i - 1] = now_s() - t0;
        }
        qsort(t, (size_t)iterations, sizeof *t, cmp_double);
        const double copy = 2.0 * (double)s / t[iterations / 2] / 1e9;
        printf("%12zu %12.1f", s, copy);
        for (int k = 0; k < nkinds; ++k) {
            const size_t count = s / gpucoll_dtype_size(kinds[k].dtype);
            for (int i = 0; i <= iterations; ++i) {
                const double t0 = now_s();
                if (gpucoll_reduce(dst, a, b, count, kinds[k].dtype, kinds[k].op) !=
                    GPUCOLL_SUCCESS)
                    die("reduce");
                if (i > 0) t[i - 1] = now_s() - t0;
            }
            qsort(t, (size_t)iterations, sizeof *t, cmp_double);
            const double red = 3.0 * (double)s / t[iterations / 2] / 1e9;
            printf(" %16.1f %6.2f", red, red / copy);
        }
        printf("\n");
        fflush(stdout);
        if (s > max / 4) break;
    }
    free(t);
    gpucoll_free_device(a);
    gpucoll_free_device(b);
    gpucoll_free_device(dst);
    return 0;
}
