/*
 * test_bigcount.c - MPI-4 large-count calls with more than 2^31 elements on
 * device buffers: MPI_Allreduce_c (in place, MPI_INT8_T SUM, wrapping) and
 * MPI_Bcast_c (MPI_BYTE) of 2^31 + 37 elements, about 2 GiB per rank and
 * buffer. Checks every element on every rank (read back in 64 MiB pieces)
 * and the path (--expect, default accelerated). An MPI without the _c
 * calls (MPI_VERSION < 4: Open MPI 4.1 and 5.0) prints "no large-count
 * calls" and exits 0 (bigcount.sh skips).
 *
 * usage: test_bigcount [common options] [--count N]
 */
#include "mpi_test_util.h"

#if MPI_VERSION < 4
int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) printf("test_bigcount: no large-count calls in this MPI\n");
    MPI_Finalize();
    return 0;
}
#else

#define PIECE ((size_t)64 << 20)

/* Rank r's element i (as an int8) and the wrapped sum over n ranks. */
static int8_t gen(int rank, size_t i) {
    return (int8_t)(uint8_t)((i * 7u + (i >> 20) + (size_t)rank * 13u) & 0xffu);
}
static int8_t sum(int n, size_t i) {
    unsigned s = 0;
    for (int r = 0; r < n; r++) s += (uint8_t)gen(r, i);
    return (int8_t)(uint8_t)(s & 0xffu);
}
static uint8_t bcast_byte(size_t i) { return (uint8_t)((i * 31u) ^ (i >> 24)); }

/* Fills dev[0..count) piece by piece from gen(rank, .) (or bcast_byte). */
static void upload(unsigned char* dev, size_t count, int rank, int bcast, unsigned char* piece) {
    for (size_t at = 0; at < count; at += PIECE) {
        const size_t n = count - at < PIECE ? count - at : PIECE;
        for (size_t i = 0; i < n; i++)
            piece[i] = bcast ? bcast_byte(at + i) : (unsigned char)gen(rank, at + i);
        if (gpucoll_memcpy(dev + at, piece, n) != GPUCOLL_SUCCESS)
            TU_DIE("upload: %s", gpucoll_last_error());
    }
}

/* Number of elements of dev[0..count) that differ from the expectation. */
static size_t verify(const unsigned char* dev, size_t count, int nranks, int bcast,
                     unsigned char* piece, const char* what) {
    size_t bad = 0;
    for (size_t at = 0; at < count; at += PIECE) {
        const size_t n = count - at < PIECE ? count - at : PIECE;
        if (gpucoll_memcpy(piece, dev + at, n) != GPUCOLL_SUCCESS)
            TU_DIE("download: %s", gpucoll_last_error());
        for (size_t i = 0; i < n; i++) {
            const unsigned char want =
                bcast ? bcast_byte(at + i) : (unsigned char)sum(nranks, at + i);
            if (piece[i] != want && bad++ < 3)
                tu_fail("%s: element %zu of %zu: got %u, expected %u", what, at + i, count,
                        piece[i], want);
        }
    }
    tu.checks++;
    return bad;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    tu_init("test_bigcount");
    tu.expect_device = TU_PATH_BIT(GPUCOLL_PATH_ACCELERATED);
    size_t count = ((size_t)1 << 31) + 37;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
            count = strtoull(argv[++i], NULL, 0);
        } else if (tu_parse_option(argc, argv, &i) != 1) {
            if (tu.world_rank == 0) fprintf(stderr, "test_bigcount: bad option '%s'\n", argv[i]);
            MPI_Finalize();
            return 2;
        }
    }
    tu_require_device_backend();
    const int rank = tu.world_rank, size = tu.world_size;
    void* p = NULL;
    if (gpucoll_malloc_device(&p, count) != GPUCOLL_SUCCESS)
        TU_DIE("gpucoll_malloc_device(%zu): %s", count, gpucoll_last_error());
    unsigned char* buf = p;
    unsigned char* piece = tu_xmalloc(PIECE);
    char what[128];

    /* allreduce, in place */
    upload(buf, count, rank, 0, piece);
    snprintf(what, sizeof what, "MPI_Allreduce_c in place, %zu x MPI_INT8_T SUM", count);
    gpucoll_counters_t before;
    tu_counters(&before);
    double t = MPI_Wtime();
    int rc =
        MPI_Allreduce_c(MPI_IN_PLACE, buf, (MPI_Count)count, MPI_INT8_T, MPI_SUM, MPI_COMM_WORLD);
    t = MPI_Wtime() - t;
    TU_CHECK(rc == MPI_SUCCESS, "%s: returned %d", what, rc);
    tu_check_path(&before, GPUCOLL_COLL_ALLREDUCE, tu.expect_device, what);
    const size_t bad_ar = verify(buf, count, size, 0, piece, what);
    if (rank == 0) printf("%s: %.1f s, %zu wrong\n", what, t, bad_ar);

    /* bcast from the last rank */
    const int root = size - 1;
    if (rank == root) upload(buf, count, rank, 1, piece);
    snprintf(what, sizeof what, "MPI_Bcast_c, %zu x MPI_BYTE from rank %d", count, root);
    tu_counters(&before);
    t = MPI_Wtime();
    rc = MPI_Bcast_c(buf, (MPI_Count)count, MPI_BYTE, root, MPI_COMM_WORLD);
    t = MPI_Wtime() - t;
    TU_CHECK(rc == MPI_SUCCESS, "%s: returned %d", what, rc);
    /* one rank: Open MPI's binding returns before the component sees a bcast */
    if (size > 1) tu_check_path(&before, GPUCOLL_COLL_BCAST, tu.expect_device, what);
    const size_t bad_bc = verify(buf, count, size, 1, piece, what);
    if (rank == 0) printf("%s: %.1f s, %zu wrong\n", what, t, bad_bc);

    free(piece);
    if (gpucoll_free_device(buf) != GPUCOLL_SUCCESS) tu_fail("free: %s", gpucoll_last_error());
    int ret = tu_finalize();
    MPI_Finalize();
    return ret;
}
#endif
