/*
 * test_host_passthrough.c - plain MPI on host buffers, knowing nothing of
 * gpucoll: the six intercepted collectives and MPI_Reduce_local, with
 * MPI_IN_PLACE forms and several roots, each checked against a locally
 * computed reference. host_passthrough.sh runs it with the component on and
 * off; the two runs must pass and print the same lines (stdout holds only
 * deterministic lines from rank 0).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_rank, g_size;
static long g_fail;

static int val(int rank, int i) { return (rank * 7919 + i * 31) % 1000 - 500; }
static int sum_of(int i) {
    int s = 0;
    for (int r = 0; r < g_size; r++) s += val(r, i);
    return s;
}
static int max_of(int i) {
    int m = val(0, i);
    for (int r = 1; r < g_size; r++)
        if (val(r, i) > m) m = val(r, i);
    return m;
}

static void check(int ok, const char* what, int i, int got, int want) {
    if (!ok) {
        if (g_fail < 20)
            fprintf(stderr, "[rank %d] FAIL %s: element %d = %d, expected %d\n", g_rank, what, i,
                    got, want);
        g_fail++;
    }
}

/* Prints on rank 0 whether every rank passed `what` so far. */
static void report(const char* what) {
    long mine = g_fail, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("%-44s %s\n", what, all ? "FAIL" : "ok");
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    const int counts[] = {0, 1, 7, 1000, 100000};
    const int roots[] = {0, g_size - 1, g_size / 2};
    const int ncounts = 5;
    int maxn = 100000 * g_size;
    int *a = malloc(sizeof(int) * (size_t)maxn), *b = malloc(sizeof(int) * (size_t)maxn);
    double* d = malloc(sizeof(double) * 1000);
    if (!a || !b || !d) MPI_Abort(MPI_COMM_WORLD, 2);
    char what[128];

    for (int ci = 0; ci < ncounts; ci++) {
        int n = counts[ci];
        for (int ip = 0; ip < 2; ip++) {
            /* allreduce SUM / MAX */
            for (int i = 0; i < n; i++) a[i] = val(g_rank, i), b[i] = -1;
            if (ip) memcpy(b, a, sizeof(int) * (size_t)n);
            MPI_Allreduce(ip ? MPI_IN_PLACE : a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            for (int i = 0; i < n; i++)
                check(b[i] == sum_of(i), "allreduce sum", i, b[i], sum_of(i));
            for (int i = 0; i < n; i++) a[i] = val(g_rank, i), b[i] = -1;
            if (ip) memcpy(b, a, sizeof(int) * (size_t)n);
            MPI_Allreduce(ip ? MPI_IN_PLACE : a, b, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            for (int i = 0; i < n; i++)
                check(b[i] == max_of(i), "allreduce max", i, b[i], max_of(i));
            snprintf(what, sizeof what, "allreduce int n=%d%s", n, ip ? " in_place" : "");
            report(what);

            /* allgather */
            for (int i = 0; i < n * g_size; i++) b[i] = -1;
            for (int i = 0; i < n; i++) a[i] = val(g_rank, i);
            if (ip) memcpy(b + (size_t)g_rank * (size_t)n, a, sizeof(int) * (size_t)n);
            MPI_Allgather(ip ? MPI_IN_PLACE : a, n, MPI_INT, b, n, MPI_INT, MPI_COMM_WORLD);
            for (int r = 0; r < g_size; r++)
                for (int i = 0; i < n; i++)
                    check(b[r * n + i] == val(r, i), "allgather", r * n + i, b[r * n + i],
                          val(r, i));
            snprintf(what, sizeof what, "allgather int n=%d%s", n, ip ? " in_place" : "");
            report(what);

            /* reduce_scatter_block and reduce_scatter (uneven counts) */
            for (int i = 0; i < n * g_size; i++) a[i] = val(g_rank, i), b[i] = -1;
            if (ip) memcpy(b, a, sizeof(int) * (size_t)n * (size_t)g_size);
            MPI_Reduce_scatter_block(ip ? MPI_IN_PLACE : a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            for (int i = 0; i < n; i++)
                check(b[i] == sum_of(g_rank * n + i), "reduce_scatter_block", i, b[i],
                      sum_of(g_rank * n + i));
            int *rc = malloc(sizeof(int) * (size_t)g_size), total = 0, mine = 0;
            for (int r = 0; r < g_size; r++) {
                rc[r] = n ? n + (r % 3) - 1 : 0;
                if (r == g_rank) mine = total;
                total += rc[r];
            }
            for (int i = 0; i < total; i++) a[i] = val(g_rank, i), b[i] = -1;
            if (ip) memcpy(b, a, sizeof(int) * (size_t)total);
            MPI_Reduce_scatter(ip ? MPI_IN_PLACE : a, b, rc, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            for (int i = 0; i < rc[g_rank]; i++)
                check(b[i] == sum_of(mine + i), "reduce_scatter", i, b[i], sum_of(mine + i));
            free(rc);
            snprintf(what, sizeof what, "reduce_scatter(_block) int n=%d%s", n,
                     ip ? " in_place" : "");
            report(what);

            /* reduce and bcast at three roots */
            for (int ri = 0; ri < 3; ri++) {
                int root = roots[ri];
                for (int i = 0; i < n; i++) a[i] = val(g_rank, i), b[i] = -1;
                int inplace_here = ip && g_rank == root;
                if (inplace_here) memcpy(b, a, sizeof(int) * (size_t)n);
                MPI_Reduce(inplace_here ? MPI_IN_PLACE : a, b, n, MPI_INT, MPI_SUM, root,
                           MPI_COMM_WORLD);
                for (int i = 0; i < n; i++) {
                    int want = g_rank == root ? sum_of(i) : -1; /* non-root: untouched */
                    check(b[i] == want, "reduce", i, b[i], want);
                }
                for (int i = 0; i < n; i++) b[i] = g_rank == root ? val(root, i) : -1;
                MPI_Bcast(b, n, MPI_INT, root, MPI_COMM_WORLD);
                for (int i = 0; i < n; i++)
                    check(b[i] == val(root, i), "bcast", i, b[i], val(root, i));
            }
            snprintf(what, sizeof what, "reduce+bcast int n=%d%s roots 0,last,mid", n,
                     ip ? " in_place" : "");
            report(what);
        }
        /* reduce_local (double, PROD of small values) */
        int m = n < 1000 ? n : 1000;
        double* e = malloc(sizeof(double) * 1000);
        for (int i = 0; i < m; i++) d[i] = (double)(i % 5) - 2.0, e[i] = 0.5 * (i % 3);
        MPI_Reduce_local(d, e, m, MPI_DOUBLE, MPI_PROD);
        for (int i = 0; i < m; i++) {
            double want = ((double)(i % 5) - 2.0) * 0.5 * (i % 3);
            check(e[i] == want, "reduce_local", i, (int)e[i], (int)want);
        }
        free(e);
        snprintf(what, sizeof what, "reduce_local double n=%d", m);
        report(what);
    }
    long mine = g_fail, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("test_host_passthrough: %s\n", all ? "FAIL" : "PASS");
    free(a);
    free(b);
    free(d);
    MPI_Finalize();
    return all ? 1 : 0;
}
