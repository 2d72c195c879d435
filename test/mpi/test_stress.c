/*
 * test_stress.c - random sequences of the six collectives on one
 * communicator: random sizes, uneven reduce_scatter counts (zeros too), roots,
 * in place or not, two buffer pairs, ranks that pass host buffers for a call
 * while the others pass device memory, pool memory (IPC cannot export it),
 * random delays before and after each call, and inputs clobbered right after
 * each call (a peer that still reads them would see garbage). Every rank
 * checks every result against values computed locally.
 *
 * usage: test_stress [ITERATIONS [HOSTMIX [MAX_DELAY_US [POOL]]]]
 *   HOSTMIX 1: now and then one rank passes host buffers (agreement: all stage)
 *   POOL 1: even buffers of even ranks come from gpucoll_malloc_device_pool
 * Exit status 0 when all results are right and, without HOSTMIX, at least one
 * call ran accelerated.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpucoll.h"

static int rank, size;
static uint32_t f(int r, int it, size_t i) {
    return (uint32_t)(r * 1000003u + it * 7919u + i * 31u + 1);
}
static uint32_t lcg(uint32_t* s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 500;
    int hostmix = argc > 2 ? atoi(argv[2]) : 0;
    int maxdelay = argc > 3 ? atoi(argv[3]) : 300;
    const size_t maxc = 70000;
    size_t maxbytes = maxc * size * 4 + 64;
    void* dbuf[4];
    for (int k = 0; k < 4; ++k)
        if ((argc > 4 && atoi(argv[4]) && k % 2 == rank % 2
                 ? gpucoll_malloc_device_pool(&dbuf[k], maxbytes)
                 : gpucoll_malloc_device(&dbuf[k], maxbytes))) {
            printf("alloc fail\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    uint32_t *hs = malloc(maxbytes), *hr = malloc(maxbytes), *hbs = malloc(maxbytes),
             *hbr = malloc(maxbytes);
    uint32_t lseed = 12345 + rank * 777;
    int errors = 0;
    static const size_t counts[] = {1, 3, 17, 100, 1000, 4097, 20000, 70000};
    for (int it = 0; it < iters; ++it) {
        uint32_t s = 99 + it * 2654435761u;
        int coll = lcg(&s) % 6;
        size_t count = counts[lcg(&s) % 8];
        int inplace = lcg(&s) % 2;
        int root = lcg(&s) % size;
        int pair = lcg(&s) % 2;
        int hostrank = hostmix ? (int)(lcg(&s) % (size * 3)) : -1; /* this rank uses host buffers */
        int* rc = malloc(sizeof(int) * size);
        for (int r = 0; r < size; ++r)
            rc[r] = (int)(lcg(&s) % 4 == 0 ? 0 : count / (1 + lcg(&s) % 3));
        int host = hostrank == rank;
        void *sb = host ? (void*)hbs : dbuf[pair * 2], *rb = host ? (void*)hbr : dbuf[pair * 2 + 1];
        size_t sendn = 0, recvn = 0;
        size_t tot = 0;
        for (int r = 0; r < size; ++r) tot += rc[r];
        /* fill */
        switch (coll) {
            case 0:
            case 5:
                sendn = count;
                recvn = count;
                break;
            case 1:
                sendn = 0;
                recvn = count;
                break;
            case 2:
                sendn = count;
                recvn = count * size;
                break;
            case 3:
                sendn = tot;
                recvn = inplace ? tot : (size_t)rc[rank];
                break;
            case 4:
                sendn = count * size;
                recvn = inplace ? count * size : count;
                break;
        }
        for (size_t i = 0; i < sendn; ++i) hs[i] = f(rank, it, i);
        for (size_t i = 0; i < recvn; ++i) hr[i] = 0xdeadbeef;
        if (coll == 1 && rank == root)
            for (size_t i = 0; i < recvn; ++i) hr[i] = f(root, it, i);
        if (coll == 2 && inplace)
            for (size_t i = 0; i < count; ++i) hr[rank * count + i] = f(rank, it, i);
        if ((coll == 0 || coll == 3 || coll == 4 || (coll == 5 && rank == root)) && inplace)
            memcpy(hr, hs, sendn * 4);
        if (sendn) gpucoll_memcpy(sb, hs, sendn * 4);
        if (recvn) gpucoll_memcpy(rb, hr, recvn * 4);
        if (maxdelay) usleep(lcg(&lseed) % maxdelay);
        const void* sarg = inplace ? MPI_IN_PLACE : sb;
        int ret = 0;
        switch (coll) {
            case 0:
                ret = MPI_Allreduce(sarg, rb, (int)count, MPI_UINT32_T, MPI_SUM, MPI_COMM_WORLD);
                break;
            case 1:
                ret = MPI_Bcast(rb, (int)count, MPI_UINT32_T, root, MPI_COMM_WORLD);
                break;
            case 2:
                ret = MPI_Allgather(sarg, (int)count, MPI_UINT32_T, rb, (int)count, MPI_UINT32_T,
                                    MPI_COMM_WORLD);
                break;
            case 3:
                ret = MPI_Reduce_scatter(sarg, rb, rc, MPI_UINT32_T, MPI_SUM, MPI_COMM_WORLD);
                break;
            case 4:
                ret = MPI_Reduce_scatter_block(sarg, rb, (int)count, MPI_UINT32_T, MPI_SUM,
                                               MPI_COMM_WORLD);
                break;
            case 5:
                ret = MPI_Reduce((inplace && rank == root) ? MPI_IN_PLACE : sb, rb, (int)count,
                                 MPI_UINT32_T, MPI_SUM, root, MPI_COMM_WORLD);
                break;
        }
        if (ret) {
            printf("[%d] it %d ret %d\n", rank, it, ret);
            errors++;
        }
        /* immediately clobber inputs to catch late readers */
        if (maxdelay && lcg(&lseed) % 2) usleep(lcg(&lseed) % maxdelay);
        size_t outn = recvn;
        if (coll == 3) outn = rc[rank];
        if (coll == 4) outn = count;
        if (coll == 5 && rank != root) outn = 0;
        if (outn) gpucoll_memcpy(hr, rb, outn * 4);
        /* clobber */
        memset(hbs, 0x55, sendn * 4 + 4);
        if (sendn) gpucoll_memcpy(sb, hbs, sendn * 4);
        if (recvn) gpucoll_memcpy(rb, hbs, recvn * 4);
        size_t bad = 0, first = (size_t)-1;
        for (size_t i = 0; i < outn; ++i) {
            uint32_t want = 0;
            switch (coll) {
                case 0:
                case 5:
                    for (int r = 0; r < size; ++r) want += f(r, it, i);
                    break;
                case 1:
                    want = f(root, it, i);
                    break;
                case 2:
                    want = f((int)(i / count), it, i % count);
                    break;
                case 3: {
                    size_t d = 0;
                    for (int r = 0; r < rank; ++r) d += rc[r];
                    for (int r = 0; r < size; ++r) want += f(r, it, d + i);
                } break;
                case 4:
                    for (int r = 0; r < size; ++r) want += f(r, it, rank * count + i);
                    break;
            }
            if (hr[i] != want) {
                if (!bad) first = i;
                bad++;
            }
        }
        if (bad) {
            errors++;
            if (errors < 20)
                printf(
                    "[%d] it %d coll %d count %zu inplace %d root %d host %d: %zu bad, first %zu\n",
                    rank, it, coll, count, inplace, root, hostrank, bad, first);
        }
        free(rc);
    }
    int all = 0;
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    gpucoll_counters_t c;
    gpucoll_counters_get(&c);
    if (rank == 0) {
        printf("errors %d; accel calls:", all);
        for (int k = 0; k < 6; ++k)
            printf(" %llu/%llu", (unsigned long long)c.calls[k][0],
                   (unsigned long long)c.calls[k][1]);
        printf("\n");
    }
    for (int k = 0; k < 4; ++k) gpucoll_free_device(dbuf[k]);
    free(hs);
    free(hr);
    free(hbs);
    free(hbr);
    MPI_Finalize();
    unsigned long long accelerated = 0;
    for (int k = 0; k < 6; ++k) accelerated += c.calls[k][GPUCOLL_PATH_ACCELERATED];
    if (!hostmix && accelerated == 0) {
        printf("[%d] no call ran accelerated\n", rank);
        all++;
    }
    return all != 0;
}
