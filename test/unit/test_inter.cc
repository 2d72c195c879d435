// The path between nodes through the bootstrap seam, without MPI: ranks are
// forked processes (each with its own UCX worker), put on fake nodes with
// GPUCOLL_HOSTID, talking over UCX's tcp loopback, on the emu device. Every
// composition (rails, leaders) and inter-node algorithm (ring, direct,
// binomial bcast) against a host reference, with odd node counts and
// uneven nodes; nonblocking calls between nodes advanced by the progress
// threads; and the topology computed from node identities.
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "calls.h"
#include "common/sanitizers.h"
#include "config.h"
#include "core/runtime.h"
#include "device/host_page_cache.h"
#include "device/host_ranges.h"
#include "fork_bootstrap.h"
#include "gpucoll.h"
#include "inter/bcast_plan.h"
#include "inter/group_algorithms.h"
#include "inter/hierarchy.h"
#include "inter/transport.h"
#include "inter_helpers.h"

namespace {

TEST(Topology, FromIdentities) {
    const auto t = gpucoll::inter::Topology::from_identities({"b", "a", "b", "c", "a"}, 2);
    EXPECT_EQ(t.nodes(), 3);
    EXPECT_EQ(t.node, 0);   // "b": the node of rank 0 comes first
    EXPECT_EQ(t.local, 1);  // rank 2 is the second rank on it
    EXPECT_EQ(t.members[1], (std::vector<int>{1, 4}));
    EXPECT_EQ(t.min_ppn, 1);
    EXPECT_EQ(t.max_ppn, 2);
    EXPECT_FALSE(t.equal_ppn());
    EXPECT_EQ(t.node_of, (std::vector<int>{0, 1, 0, 2, 1}));
    EXPECT_EQ(t.local_of, (std::vector<int>{0, 0, 1, 0, 1}));
}

// A ring step's tag must never be a reserved one (hello, verdict, abort
// notice): at 2048 members the ring's last step would be the hello's and the
// next the verdicts' and the abort listener's, which match any call and
// sender; the allreduce then goes direct (one step).
TEST(InterTags, RingStepsStayBelowTheReservedOnes) {
    using namespace gpucoll::inter;
    EXPECT_LT(kDataSteps, kVerdictStep);
    EXPECT_LT(kVerdictStep, kControlStep);
    for (int n : {2, 3, 1000, 2046, 2047, 2048, 2049, 4095, 4096}) {
        const int64_t last_step = 2 * (int64_t{n} - 1) - 1;  // steps 0 .. 2(n-1)-1
        EXPECT_EQ(ring_fits(n), last_step < int64_t{kDataSteps}) << n << " members";
    }
    EXPECT_TRUE(ring_fits(2047));
    EXPECT_FALSE(ring_fits(2048));
}

// Between nodes, bcast pipelines a chain where its K + N - 2 rounds of one
// segment beat the binomial tree's ceil(log2 N) whole transfers.
TEST(BcastPlan, ChainWhereItBeatsTheTree) {
    using gpucoll::inter::bcast_plan;
    const size_t mib = size_t{1} << 20;
    EXPECT_FALSE(bcast_plan(2, 1024 * mib, mib, 4).chain);  // two members: one transfer either way
    EXPECT_FALSE(bcast_plan(3, 4 * mib, mib, 4).chain);     // one segment: 2 rounds = 2 levels
    const auto p3 = bcast_plan(3, 8 * mib + 1, mib, 4);
    EXPECT_TRUE(p3.chain);
    EXPECT_EQ(p3.segment, 4 * mib);
    EXPECT_EQ(p3.segments, 3u);
    EXPECT_FALSE(bcast_plan(8, 12 * mib, mib, 4).chain);  // 3 + 6 rounds against 3 levels of 3
    EXPECT_TRUE(bcast_plan(8, 16 * mib, mib, 4).chain);   // 4 + 6 rounds of 1/4: 2.5 against 3
    EXPECT_FALSE(bcast_plan(8, 0, mib, 4).chain);
    // coll_gpucoll_inter_bcast: tree always the tree, chain on 3+ members
    EXPECT_FALSE(bcast_plan(8, 1024 * mib, mib, 4, 1).chain);
    const auto forced = bcast_plan(3, 100, mib, 4, 2);
    EXPECT_TRUE(forced.chain);
    EXPECT_EQ(forced.segments, 1u);
    EXPECT_FALSE(bcast_plan(2, 1024 * mib, mib, 4, 2).chain);
}

// coll_gpucoll_inter_chunk_size is an unbounded size_t: near 2^62 the
// segment (slots x chunk) wrapped to 0 and the plan divided by it (SIGFPE
// in a bcast across 3+ nodes). The product saturates; groups bound the
// chunk itself.
TEST(BcastPlan, HugeChunksSaturate) {
    using gpucoll::inter::bcast_plan;
    using gpucoll::inter::group_chunk_bytes;
    const size_t huge = size_t{1} << 62, most = std::numeric_limits<size_t>::max();
    EXPECT_FALSE(bcast_plan(3, size_t{1} << 30, huge, 4).chain);  // one segment: the tree
    const auto forced = bcast_plan(3, size_t{1} << 30, huge, 4, 2);
    EXPECT_TRUE(forced.chain);
    EXPECT_EQ(forced.segment, most);
    EXPECT_EQ(forced.segments, 1u);
    EXPECT_EQ(bcast_plan(5, most, most, 4, 2).segments, 1u);
    EXPECT_TRUE(bcast_plan(1 << 30, most, 4096, 4).chain);  // no overflow in k x levels
    EXPECT_EQ(group_chunk_bytes(huge), GPUCOLL_INTER_CHUNK_MAX_BYTES);
    EXPECT_EQ(group_chunk_bytes(0), GPUCOLL_INTER_CHUNK_MIN_BYTES);
    EXPECT_EQ(group_chunk_bytes(size_t{1} << 20), size_t{1} << 20);
}

struct Case {
    std::vector<int> nodes;  // ranks per fake node, in rank order
    int inter_algorithm;     // 0 auto, 1 ring, 2 direct
    const char* allreduce;   // expected composition
};

std::string name_of(const ::testing::TestParamInfo<Case>& info) {
    std::string n;
    for (int c : info.param.nodes) n += (n.empty() ? "" : "_") + std::to_string(c);
    static const char* algos[] = {"auto", "ring", "direct"};
    return "nodes_" + n + "_" + algos[info.param.inter_algorithm];
}

int node_of(const std::vector<int>& nodes, int rank) {
    int n = 0;
    for (int c : nodes) {
        if (rank < c) return n;
        rank -= c;
        ++n;
    }
    return -1;
}


void* dalloc(size_t bytes) {
    void* p = nullptr;
    return gpucoll_malloc_device(&p, bytes) == 0 ? p : nullptr;
}

int run_rank(const Case& c, int rank, gpucoll_bootstrap_t& bs) {
    Checker k{rank};
    const std::string host = "u" + std::to_string(node_of(c.nodes, rank));
    setenv("GPUCOLL_HOSTID", host.c_str(), 1);
    if (gpucoll_init_backend("emu") != 0) return 100;
    gpucoll_comm_config_t config;
    gpucoll_comm_config_init(&config);
    config.inter_algorithm = c.inter_algorithm;
    config.inter_chunk_bytes = 64 << 10;  // several chunks in flight for the larger cases
    gpucoll_comm_t* comm = nullptr;
    if (gpucoll_comm_create(&bs, &config, &comm) != 0 || comm == nullptr) {
        std::fprintf(stderr, "[rank %d] no communicator: %s\n", rank, gpucoll_last_error());
        return 101;
    }
    const int n = bs.size;
    auto run = [&](const gpucoll_call_t& call, const std::string& what, const char* algo) {
        const int rc = gpucoll_comm_run(comm, &call);
        k.check(rc == 0, "%s: gpucoll_comm_run failed", what + ": " + gpucoll_last_error());
        gpucoll_counters_t ctr;
        gpucoll_counters_get(&ctr);
        k.check(std::strcmp(ctr.last_algorithm, algo) == 0, "%s: wrong algorithm",
                what + " ran " + ctr.last_algorithm);
    };
    // allreduce: float sums of small integers (exact), in place and not
    for (size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{300000}}) {
        for (int in_place = 0; in_place < 2; ++in_place) {
            const size_t bytes = count * sizeof(float);
            std::vector<float> h(count);
            for (size_t i = 0; i < count; ++i) h[i] = float((i * 3 + size_t(rank)) % 29);
            void* s = dalloc(bytes);
            void* r = dalloc(bytes);
            gpucoll_memcpy(in_place ? r : s, h.data(), bytes);
            const gpucoll_call_t call = sum_allreduce_call(in_place ? nullptr : s, r, count);
            const std::string what =
                "allreduce of " + std::to_string(count) + (in_place ? " in place" : "");
            run(call, what, c.allreduce);
            gpucoll_memcpy(h.data(), r, bytes);
            long bad = 0;
            for (size_t i = 0; i < count; ++i) {
                float want = 0;
                for (int p = 0; p < n; ++p) want += float((i * 3 + size_t(p)) % 29);
                bad += h[i] != want;
            }
            k.check(bad == 0, "%s: wrong elements", what);
            gpucoll_free_device(s);
            gpucoll_free_device(r);
        }
    }
    // bcast from every root; and a large one (a pipelined chain between three
    // or more nodes: 64 KiB chunks, 256 KiB segments)
    for (int which = 0; which <= n; ++which) {
        const int root = which < n ? which : n / 2;
        const size_t bytes = which < n ? 100003 : (size_t{3} << 20) + 5;
        std::vector<unsigned char> h(bytes, 0xee);
        if (rank == root)
            for (size_t i = 0; i < bytes; ++i)
                h[i] = static_cast<unsigned char>(i * 5 + size_t(root));
        void* b = dalloc(bytes);
        gpucoll_memcpy(b, h.data(), bytes);
        gpucoll_call_t call{};
        call.coll = GPUCOLL_COLL_BCAST;
        call.recvbuf = b;
        call.count = bytes;
        call.dtype = GPUCOLL_BYTE;
        call.root = root;
        call.eligible = call.on_device = 1;
        run(call, "bcast from " + std::to_string(root), "hier");
        gpucoll_memcpy(h.data(), b, bytes);
        long bad = 0;
        for (size_t i = 0; i < bytes; ++i)
            bad += h[i] != static_cast<unsigned char>(i * 5 + size_t(root));
        k.check(bad == 0, "%s: wrong bytes", "bcast from " + std::to_string(root));
        gpucoll_free_device(b);
    }
    // allgather, in place and not
    for (int in_place = 0; in_place < 2; ++in_place) {
        const size_t one = 1001, total = one * size_t(n);
        std::vector<unsigned char> h(total, 0);
        for (size_t i = 0; i < one; ++i)
            h[size_t(rank) * one + i] = static_cast<unsigned char>(rank * 31 + int(i));
        void* s = dalloc(one);
        void* r = dalloc(total);
        if (in_place)
            gpucoll_memcpy(r, h.data(), total);
        else
            gpucoll_memcpy(s, h.data() + size_t(rank) * one, one);
        gpucoll_call_t call{};
        call.coll = GPUCOLL_COLL_ALLGATHER;
        call.sendbuf = in_place ? nullptr : s;
        call.recvbuf = r;
        call.count = one;
        call.dtype = GPUCOLL_BYTE;
        call.eligible = call.on_device = 1;
        run(call, in_place ? "allgather in place" : "allgather", "leader");
        gpucoll_memcpy(h.data(), r, total);
        long bad = 0;
        for (int p = 0; p < n; ++p)
            for (size_t i = 0; i < one; ++i)
                bad += h[size_t(p) * one + i] != static_cast<unsigned char>(p * 31 + int(i));
        k.check(bad == 0, "%s: wrong bytes", "allgather");
        gpucoll_free_device(s);
        gpucoll_free_device(r);
    }
    // reduce to every root, reduce_scatter with uneven blocks
    for (int root = 0; root < n; ++root) {
        const size_t count = 30001, bytes = count * sizeof(int32_t);
        std::vector<int32_t> h(count);
        for (size_t i = 0; i < count; ++i) h[i] = int32_t(i % 1000) * (rank + 1);
        void* s = dalloc(bytes);
        void* r = rank == root ? dalloc(bytes) : nullptr;
        gpucoll_memcpy(s, h.data(), bytes);
        gpucoll_call_t call{};
        call.coll = GPUCOLL_COLL_REDUCE;
        call.sendbuf = s;
        call.recvbuf = r;
        call.count = count;
        call.dtype = GPUCOLL_INT32;
        call.op = GPUCOLL_OP_SUM;
        call.root = root;
        call.eligible = call.on_device = 1;
        run(call, "reduce to " + std::to_string(root), "leader");
        if (rank == root) {
            gpucoll_memcpy(h.data(), r, bytes);
            long bad = 0;
            for (size_t i = 0; i < count; ++i) bad += h[i] != int32_t(i % 1000) * (n * (n + 1) / 2);
            k.check(bad == 0, "%s: wrong elements", "reduce to " + std::to_string(root));
            gpucoll_free_device(r);
        }
        gpucoll_free_device(s);
    }
    {
        std::vector<size_t> counts;
        size_t total = 0;
        for (int p = 0; p < n; ++p) total += counts.emplace_back(size_t(1000 + 37 * p));
        std::vector<double> h(total);
        for (size_t i = 0; i < total; ++i) h[i] = double(i) + rank;
        void* s = dalloc(total * sizeof(double));
        void* r = dalloc(counts[size_t(rank)] * sizeof(double));
        gpucoll_memcpy(s, h.data(), total * sizeof(double));
        gpucoll_call_t call{};
        call.coll = GPUCOLL_COLL_REDUCE_SCATTER;
        call.sendbuf = s;
        call.recvbuf = r;
        call.counts = counts.data();
        call.dtype = GPUCOLL_DOUBLE;
        call.op = GPUCOLL_OP_MAX;
        call.eligible = call.on_device = 1;
        run(call, "reduce_scatter", "leader");
        size_t at = 0;
        for (int p = 0; p < rank; ++p) at += counts[size_t(p)];
        gpucoll_memcpy(h.data(), r, counts[size_t(rank)] * sizeof(double));
        long bad = 0;
        for (size_t i = 0; i < counts[size_t(rank)]; ++i) bad += h[i] != double(at + i) + (n - 1);
        k.check(bad == 0, "%s: wrong elements", "reduce_scatter");
        gpucoll_free_device(s);
        gpucoll_free_device(r);
    }
    // A rank that declines (host memory): every rank declines, nobody hangs.
    // The declining rank does not wait for the others (they arrive 300 ms
    // later): its decline decides the call.
    {
        gpucoll_call_t call{};
        call.coll = GPUCOLL_COLL_ALLREDUCE;
        call.count = 16;
        call.dtype = GPUCOLL_FLOAT;
        call.op = GPUCOLL_OP_SUM;
        const auto t0 = std::chrono::steady_clock::now();
        const int rc = rank == n - 1 ? gpucoll_comm_decline(comm) : [&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            void* r = dalloc(64);
            call.recvbuf = r;
            call.eligible = call.on_device = 1;
            const int s = gpucoll_comm_run(comm, &call);
            gpucoll_free_device(r);
            return s;
        }();
        k.check(rc == GPUCOLL_DECLINED, "%s", "a call with one host-memory rank was not declined");
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        k.check(rank != n - 1 || took < 0.2, "%s",
                "the declining rank waited " + std::to_string(took) + " s for the others");
    }
    gpucoll_comm_destroy(comm);
    gpucoll_finalize();
    return k.failures;
}

// The forked ranks talk over UCX's tcp on the loopback interface.

class InterPaths : public ::testing::TestWithParam<Case> {};

TEST_P(InterPaths, MatchReference) {
#ifndef GPUCOLL_HAVE_UCX
    GTEST_SKIP() << "built without UCX";
#endif
    use_tcp_loopback();
    const Case& c = GetParam();
    int size = 0;
    for (int r : c.nodes) size += r;
    const int failed = ForkGroup::run(
        size, 120, [&c](int rank, gpucoll_bootstrap_t& bs) { return run_rank(c, rank, bs); });
    EXPECT_EQ(failed, 0) << failed << " rank(s) failed (their output above)";
}

INSTANTIATE_TEST_SUITE_P(Emu, InterPaths,
                         ::testing::Values(Case{{2, 2}, 0, "hier"}, Case{{1, 1, 1}, 1, "hier"},
                                           Case{{1, 1, 1}, 2, "hier"}, Case{{2, 1, 1}, 0, "leader"},
                                           Case{{1, 2}, 1, "leader"},
                                           Case{{1, 1, 1, 1, 1}, 0, "hier"}),
                         name_of);

// Nonblocking calls between nodes (progress thread eager): on two
// communicators started in opposite orders on even and odd ranks, the ranks
// staggered and asleep (no polling) while the threads exchange the nodes'
// verdicts and run the calls; then a call one rank declines (host memory,
// gpucoll_comm_start_decline): every device rank learns it is declined.
int run_rank_nonblocking(const std::vector<int>& nodes, int rank, gpucoll_bootstrap_t& bs) {
    Checker k{rank};
    setenv("GPUCOLL_HOSTID", ("u" + std::to_string(node_of(nodes, rank))).c_str(), 1);
    if (gpucoll_init_backend("emu") != 0) return 100;
    gpucoll_comm_config_t config;
    gpucoll_comm_config_init(&config);
    config.progress_thread = 1;
    config.inter_chunk_bytes = 64 << 10;
    gpucoll_comm_t* comm[2] = {nullptr, nullptr};
    for (auto& c : comm)
        if (gpucoll_comm_create(&bs, &config, &c) != 0 || c == nullptr) {
            std::fprintf(stderr, "[rank %d] no communicator: %s\n", rank, gpucoll_last_error());
            return 101;
        }
    k.check(gpucoll_comm_single_node(comm[0]) == 0 && gpucoll_comm_nonblocking(comm[0]) == 1, "%s",
            "a communicator between nodes with the thread on takes nonblocking calls");
    const int n = bs.size;
    const size_t count = 200000;  // several pipeline chunks between the nodes
    std::vector<float> h(count);
    for (size_t i = 0; i < count; ++i) h[i] = float((i + size_t(rank)) % 13);
    void *send[2], *recv[2];
    for (int c = 0; c < 2; ++c) {
        send[c] = dalloc(count * sizeof(float));
        recv[c] = dalloc(count * sizeof(float));
        gpucoll_memcpy(send[c], h.data(), count * sizeof(float));
    }
    gpucoll_counters_reset();
    for (int iter = 0; iter < 3; ++iter) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5 * rank));
        gpucoll_pending_t* op[2] = {nullptr, nullptr};
        for (int j = 0; j < 2; ++j) {
            const int c = rank % 2 == 0 ? j : 1 - j;
            const gpucoll_call_t call = sum_allreduce_call(send[c], recv[c], count);
            k.check(gpucoll_comm_start(comm[c], &call, GPUCOLL_FORM_NONBLOCKING, &op[c]) == 0,
                    "start: %s", gpucoll_last_error());
        }
        if (op[0] == nullptr || op[1] == nullptr) break;
        for (int ms = 0;
             ms < 20000 && !(gpucoll_pending_done(op[0]) && gpucoll_pending_done(op[1])); ++ms)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        for (int c = 0; c < 2; ++c) {
            k.check(gpucoll_pending_done(op[c]) == 1, "%s",
                    "iteration " + std::to_string(iter) + ", communicator " + std::to_string(c) +
                        ": not ended in 20 s without polling");
            int done = 0, rc = 0;
            while (!done) rc = gpucoll_pending_test(op[c], &done);
            k.check(rc == GPUCOLL_SUCCESS, "nonblocking allreduce: %s", gpucoll_last_error());
            gpucoll_pending_free(op[c]);
            std::vector<float> out(count);
            gpucoll_memcpy(out.data(), recv[c], count * sizeof(float));
            long bad = 0;
            for (size_t i = 0; i < count; ++i) {
                float want = 0;
                for (int p = 0; p < n; ++p) want += float((i + size_t(p)) % 13);
                bad += out[i] != want;
            }
            k.check(bad == 0, "%s", "nonblocking allreduce: wrong elements");
        }
    }
    gpucoll_counters_t ctr;
    gpucoll_counters_get(&ctr);
    k.check(ctr.forms[GPUCOLL_FORM_NONBLOCKING][GPUCOLL_PATH_ACCELERATED] == 6, "%s",
            "expected 6 accelerated nonblocking calls, counted " +
                std::to_string(ctr.forms[GPUCOLL_FORM_NONBLOCKING][GPUCOLL_PATH_ACCELERATED]));
    // Rank 0 leads its node: it sends between nodes in every composition.
    k.check(rank != 0 || ctr.bytes_inter > 0, "%s", "no bytes went between the nodes");
    // The last rank declines (as with host buffers); the others learn it.
    {
        gpucoll_pending_t* op = nullptr;
        if (rank == n - 1) {
            k.check(gpucoll_comm_start_decline(comm[0]) == 0, "decline: %s", gpucoll_last_error());
        } else {
            const gpucoll_call_t call = sum_allreduce_call(send[0], recv[0], 1000);
            k.check(gpucoll_comm_start(comm[0], &call, GPUCOLL_FORM_NONBLOCKING, &op) == 0,
                    "start: %s", gpucoll_last_error());
        }
        int done = 0, rc = 0;
        while (op != nullptr && !done) rc = gpucoll_pending_test(op, &done);
        k.check(op == nullptr || rc == GPUCOLL_DECLINED, "%s",
                "a call one rank declined ended with " + std::to_string(rc));
        if (op != nullptr) gpucoll_pending_free(op);
    }
    // Rank 0 declines a queued call on communicator 0, then starts a device
    // call on communicator 1 and polls only that one: its decline must leave
    // without the progress thread (which stays away while the application
    // polls), or the others, waiting for it on communicator 0 before they
    // start on 1, never get there.
    {
        gpucoll_pending_t* op[2] = {nullptr, nullptr};
        if (rank == 0) {
            k.check(gpucoll_comm_start_decline(comm[0]) == 0, "decline: %s", gpucoll_last_error());
            const gpucoll_call_t call = sum_allreduce_call(send[1], recv[1], 1000);
            k.check(gpucoll_comm_start(comm[1], &call, GPUCOLL_FORM_NONBLOCKING, &op[1]) == 0,
                    "start: %s", gpucoll_last_error());
        } else {
            for (int c = 0; c < 2; ++c) {
                const gpucoll_call_t call = sum_allreduce_call(send[c], recv[c], 1000);
                k.check(gpucoll_comm_start(comm[c], &call, GPUCOLL_FORM_NONBLOCKING, &op[c]) == 0,
                        "start: %s", gpucoll_last_error());
                int done = 0, rc = 0;
                while (c == 0 && op[0] != nullptr && !done) rc = gpucoll_pending_test(op[0], &done);
                k.check(c == 1 || rc == GPUCOLL_DECLINED, "%s",
                        "the call rank 0 declined ended with " + std::to_string(rc));
            }
        }
        int done = 0, rc = 0;
        while (op[1] != nullptr && !done) rc = gpucoll_pending_test(op[1], &done);
        k.check(rc == GPUCOLL_SUCCESS, "the call after it: %s", gpucoll_last_error());
        for (auto* o : op)
            if (o != nullptr) gpucoll_pending_free(o);
    }
    // Rank 0 starts more nonblocking declines than are kept in the
    // background, and only then lets the others start theirs (the
    // bootstrap's barrier, as an MPI message would): starting a nonblocking
    // call must stay local whatever the other nodes have not done yet.
    for (int turn = 0; turn < 2; ++turn) {
        if (turn == 1) bs.barrier(bs.ctx);
        if ((rank == 0) != (turn == 0)) continue;
        for (int i = 0; i < 70; ++i)
            k.check(gpucoll_comm_start_decline(comm[0]) == 0, "%s",
                    "decline " + std::to_string(i) + ": " + gpucoll_last_error());
    }
    // Rank 0 declines 20 blocking calls in a row, the others run them with
    // device buffers, rank 1 late each time: rank 0's decisions must not
    // overwrite the ones its node-mates have yet to read (uneven nodes read
    // their leader's verdict word).
    for (int i = 0; i < 20; ++i) {
        int rc = 0;
        if (rank == 0) {
            rc = gpucoll_comm_decline(comm[0]);
        } else {
            if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
            const gpucoll_call_t call = sum_allreduce_call(send[0], recv[0], 100);
            rc = gpucoll_comm_run(comm[0], &call);
        }
        k.check(rc == GPUCOLL_DECLINED, "%s",
                "declined call " + std::to_string(i) + " ended with " + std::to_string(rc) + ": " +
                    gpucoll_last_error());
    }
    // A blocking call after them: the queue (the decline's exchange
    // included) ends first, on every rank.
    {
        const gpucoll_call_t call = sum_allreduce_call(send[1], recv[1], 1000);
        k.check(gpucoll_comm_run(comm[0], &call) == 0, "blocking call after: %s",
                gpucoll_last_error());
    }
    for (int c = 0; c < 2; ++c) {
        gpucoll_free_device(send[c]);
        gpucoll_free_device(recv[c]);
        gpucoll_comm_destroy(comm[c]);
    }
    gpucoll_finalize();
    return k.failures;
}

// The transport alone, two processes: a send cancelled before the receiver
// posted its receive is released but goes on (UCX reads its buffer until
// the message is delivered): the request says so (abandoned), which is what
// keeps a verdict exchange from freeing the buffer. A send that completed is
// not abandoned.

int run_rank_abandoned_send(int rank, gpucoll_bootstrap_t& bs) {
    using namespace gpucoll::inter;
    Checker k{rank};
    TransportPair pair;
    if (const int rc = pair.open(rank, bs); rc != 0) return rc;
    const size_t bytes = size_t{16} << 20;  // rendezvous: waits for the receive
    std::vector<unsigned char> buf(bytes, static_cast<unsigned char>(rank + 1));
    unsigned char ack = 0;
    if (rank == 0) {
        Request req;
        k.check(
            pair.t->send(pair.peer, 7, buf.data(), bytes, MemKind::Host, &req) == GPUCOLL_SUCCESS,
            "%s", "send");
        for (int i = 0; i < 100; ++i) pair.t->progress();
        pair.t->cancel(&req);
        k.check(req.abandoned && !req.active, "%s", "a send in flight is abandoned when cancelled");
        bs.barrier(bs.ctx);  // the receiver posts its receive only now
        Request got;         // its acknowledgement, once it has the whole message
        k.check(pair.t->recv(9, ~uint64_t{0}, &ack, 1, MemKind::Host, &got) == GPUCOLL_SUCCESS,
                "%s", "ack recv");
        k.check(pair.finish(got) == GPUCOLL_SUCCESS && ack == 1, "%s",
                "the abandoned send was not delivered");
        Request small;
        k.check(pair.t->send(pair.peer, 8, buf.data(), 8, MemKind::Host, &small) == GPUCOLL_SUCCESS,
                "%s", "small send");
        k.check(pair.finish(small) == GPUCOLL_SUCCESS, "%s", "small send");
        pair.t->cancel(&small);
        k.check(!small.abandoned, "%s", "a completed send is not abandoned");
    } else {
        bs.barrier(bs.ctx);
        Request req;
        k.check(pair.t->recv(7, ~uint64_t{0}, buf.data(), bytes, MemKind::Host, &req) ==
                    GPUCOLL_SUCCESS,
                "%s", "recv");
        k.check(pair.finish(req) == GPUCOLL_SUCCESS && buf[0] == 1 && buf[bytes - 1] == 1, "%s",
                "the abandoned send was delivered whole");
        ack = 1;
        Request sent;
        k.check(pair.t->send(pair.peer, 9, &ack, 1, MemKind::Host, &sent) == GPUCOLL_SUCCESS, "%s",
                "ack");
        k.check(pair.finish(sent) == GPUCOLL_SUCCESS, "%s", "ack sent");
        Request small;
        k.check(
            pair.t->recv(8, ~uint64_t{0}, buf.data(), 8, MemKind::Host, &small) == GPUCOLL_SUCCESS,
            "%s", "small recv");
        k.check(pair.finish(small) == GPUCOLL_SUCCESS, "%s", "small recv");
    }
    return k.failures;
}

TEST(InterTransport, CancelledSendInFlightIsAbandoned) {
#ifndef GPUCOLL_HAVE_UCX
    GTEST_SKIP() << "built without UCX";
#endif
    use_tcp_loopback();
    const int failed = ForkGroup::run(2, 60, run_rank_abandoned_send);
    EXPECT_EQ(failed, 0) << failed << " rank(s) failed (their output above)";
}

// A receive must fail when its message does not carry exactly the bytes it
// expects, also when the message arrived before the receive was posted (UCX
// then completes the receive at once, and a shorter message is no error of
// its own): a peer that describes another call must not leave stale bytes
// in this one's buffer unnoticed.
int run_rank_early_message_sizes(int rank, gpucoll_bootstrap_t& bs) {
    using namespace gpucoll::inter;
    Checker k{rank};
    TransportPair pair;
    if (const int rc = pair.open(rank, bs); rc != 0) return rc;
    std::vector<unsigned char> buf(64, static_cast<unsigned char>(rank + 1));
    {  // one message each way first: the endpoints are wired up after it
        Request hello, sent;
        int rc = pair.t->recv(10, ~uint64_t{0}, buf.data() + 32, 1, MemKind::Host, &hello);
        if (rc == GPUCOLL_SUCCESS)
            rc = pair.t->send(pair.peer, 10, buf.data(), 1, MemKind::Host, &sent);
        if (rc == GPUCOLL_SUCCESS) rc = pair.finish(sent);
        if (rc == GPUCOLL_SUCCESS) rc = pair.finish(hello);
        k.check(rc == GPUCOLL_SUCCESS, "%s", std::string("hello: ") + gpucoll_last_error());
    }
    if (rank == 0) {
        const size_t sizes[] = {4, 20, 12};  // tags 11, 12, 13
        for (int i = 0; i < 3; ++i) {
            Request req;
            int rc = pair.t->send(pair.peer, 11 + i, buf.data(), sizes[i], MemKind::Host, &req);
            if (rc == GPUCOLL_SUCCESS) rc = pair.finish(req);
            k.check(rc == GPUCOLL_SUCCESS, "%s",
                    "send " + std::to_string(i) + ": " + gpucoll_last_error());
        }
        bs.barrier(bs.ctx);
    } else {
        bs.barrier(bs.ctx);  // every message is on its way; let them all arrive
        for (int i = 0; i < 200000; ++i) pair.t->progress();
        for (int i = 0; i < 3; ++i) {
            Request req;
            int rc = pair.t->recv(11 + i, ~uint64_t{0}, buf.data(), 12, MemKind::Host, &req);
            if (rc == GPUCOLL_SUCCESS) rc = pair.finish(req);
            if (i < 2)
                k.check(rc != GPUCOLL_SUCCESS, "a %s message passed for 12 bytes",
                        i == 0 ? "shorter (4 bytes)" : "longer (20 bytes)");
            else
                k.check(rc == GPUCOLL_SUCCESS && buf[0] == 1 && buf[11] == 1,
                        "a 12-byte message into 12 bytes: %s", gpucoll_last_error());
        }
    }
    return k.failures;
}

TEST(InterTransport, EarlyMessageOfAnotherSizeFailsItsReceive) {
#ifndef GPUCOLL_HAVE_UCX
    GTEST_SKIP() << "built without UCX";
#endif
    use_tcp_loopback();
    const int failed = ForkGroup::run(2, 60, run_rank_early_message_sizes);
    EXPECT_EQ(failed, 0) << failed << " rank(s) failed (their output above)";
}

// The cuda backend tells host memory from the brk heap without the driver
// (host_ranges), on any thread. Once UCX has installed its memory hooks
// (bistro mode, the default of UCX 1.13 and 1.22), sbrk(0) is no longer a
// query: UCX's replacement reads the break and sets it again, so a query on
// one thread while malloc grows the heap on another moves the break back
// under malloc (the heap corruption of the H100 runs, ninth session). The
// query must never call sbrk: with UCX's hooks in place, one thread asks
// while this one grows, fills, checks and trims the heap. One process,
// forked: a corrupted heap ends the child, not the test program.
int run_rank_heap_query_race(int rank, gpucoll_bootstrap_t&) {
    std::unique_ptr<gpucoll::inter::Transport> t;  // installs UCX's memory hooks
    if (gpucoll::inter::Transport::create(true, "lo", &t) != GPUCOLL_SUCCESS) {
        std::fprintf(stderr, "[rank %d] transport: %s\n", rank, gpucoll_last_error());
        return 100;
    }
    std::atomic<bool> stop{false};
    std::atomic<long> queries{0};
    void* small = std::malloc(64);  // the main arena: the brk heap
    const void* lowest = sbrk(0);   // this thread only: nobody grows the heap yet
    const void* highest = lowest;
    std::thread asker([&] {
        while (!stop.load(std::memory_order_relaxed)) {
            (void)gpucoll::host_ranges::certainly_host(small);
            queries.fetch_add(1, std::memory_order_relaxed);
        }
    });
    constexpr int kBlocks = 1000;
    std::vector<char*> blocks(kBlocks);
    int corrupt = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    for (int round = 0; std::chrono::steady_clock::now() < until && corrupt == 0; ++round) {
        for (int i = 0; i < kBlocks; ++i) {  // below the mmap threshold: brk
            const size_t n = 1024 + static_cast<size_t>(i * 37 % 60) * 1024;
            blocks[i] = static_cast<char*>(std::malloc(n));
            std::memset(blocks[i], (i + round) & 0x7f, n);
        }
        for (int i = 0; i < kBlocks && corrupt == 0; ++i) {
            const size_t n = 1024 + static_cast<size_t>(i * 37 % 60) * 1024;
            for (size_t b = 0; b < n; b += 512)
                if (blocks[i][b] != static_cast<char>((i + round) & 0x7f)) corrupt = round + 1;
        }
        highest = std::max(highest, static_cast<const void*>(blocks[kBlocks - 1]));
        for (char* b : blocks) std::free(b);
        malloc_trim(0);  // shrinks the heap: the break moves down
    }
    stop.store(true);
    asker.join();
    std::free(small);
    if (corrupt != 0) std::fprintf(stderr, "[rank %d] heap corrupted in round %d\n", rank, corrupt);
    if (queries.load() == 0) std::fprintf(stderr, "[rank %d] no query ran\n", rank);
    // The heap must have grown past where it started, or nothing was tried.
    if (highest <= lowest) std::fprintf(stderr, "[rank %d] the heap never grew\n", rank);
    return corrupt != 0 || queries.load() == 0 || highest <= lowest ? 1 : 0;
}

TEST(InterTransport, HostQueryDoesNotMoveTheBreakUnderUcxHooks) {
#ifndef GPUCOLL_HAVE_UCX
    GTEST_SKIP() << "built without UCX";
#endif
#ifdef GPUCOLL_ADDRESS_SANITIZER
    GTEST_SKIP() << "ASan's allocator takes no memory from brk: nothing to race with";
#endif
    const int failed = ForkGroup::run(1, 60, run_rank_heap_query_race);
    EXPECT_EQ(failed, 0) << "the heap was corrupted (output above)";
}

// The process's transports, one per NIC asked for: a communicator set up
// before its process chose a GPU takes UCX's choice (""); set up again on
// its GPU's NIC (rails), it gets a transport there. The first one stays
// until finalize even when nobody holds it (closing it, forced, could drop
// a freed communicator's last sends). Before, the first transport was the
// process's for good: no rail for an application that chose its GPU after
// MPI_Comm_split_type.
int run_rank_transports_per_nic(int rank, gpucoll_bootstrap_t&) {
    using gpucoll::Runtime;
    using gpucoll::inter::Transport;
    Checker k{rank};
    unsetenv("UCX_NET_DEVICES");
    Runtime& rt = Runtime::instance();
    std::shared_ptr<Transport> any, again, lo, served;
    k.check(rt.transport(false, "", &any) == GPUCOLL_SUCCESS, "UCX's choice: %s",
            gpucoll_last_error());
    k.check(rt.transport(false, "", &again) == GPUCOLL_SUCCESS && again == any, "%s",
            "a second communicator shares the transport");
    k.check(rt.transport(false, "lo", &lo) == GPUCOLL_SUCCESS && lo != nullptr && lo != any, "%s",
            "a transport on the NIC asked for");
    k.check(rt.transports_started() == 2, "%s", "the held transport stays open");
    if (lo != nullptr)
        k.check(lo->description().find("network device lo") != std::string::npos, "description: %s",
                lo->description());
    k.check(rt.transport(false, "", &served) == GPUCOLL_SUCCESS && served != nullptr, "%s",
            "no preference: any transport serves");
    const std::weak_ptr<Transport> first = any;
    any.reset();
    again.reset();
    if (served != lo) served.reset();
    std::shared_ptr<Transport> lo_again;
    k.check(rt.transport(false, "lo", &lo_again) == GPUCOLL_SUCCESS && lo_again == lo, "%s",
            "the same NIC shares");
    k.check(!first.expired(), "%s", "nothing started: nothing closed");
    // Another NIC (one UCX does not have: whether it starts does not
    // matter) leaves the transports nobody holds open until finalize.
    std::shared_ptr<Transport> bogus;
    const int b1 = rt.transport(false, "gpucoll_no_such_nic0", &bogus);
    k.check(!first.expired(), "%s", "the unheld transport stays until finalize");
    const int b2 = rt.transport(false, "gpucoll_no_such_nic0", &bogus);
    k.check(b1 == b2, "%s", "the answer for a NIC is remembered");
    rt.release_transport();  // gpucoll_finalize
    k.check(first.expired(), "%s", "finalize closes the transports nobody holds");
    k.check(lo != nullptr && !lo->address().empty(), "%s", "a held transport outlives finalize");
    std::shared_ptr<Transport> late;
    k.check(rt.transport(false, "", &late) != GPUCOLL_SUCCESS && late == nullptr, "%s",
            "none after finalize");
    return k.failures;
}

TEST(InterTransport, OnePerNicAskedForKeptUntilFinalize) {
#ifndef GPUCOLL_HAVE_UCX
    GTEST_SKIP() << "built without UCX";
#endif
    use_tcp_loopback();
    const int failed = ForkGroup::run(1, 60, run_rank_transports_per_nic);
    EXPECT_EQ(failed, 0) << failed << " rank(s) failed (their output above)";
}

class InterNonblocking : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(InterNonblocking, ThreadsExchangeVerdictsAndRunCalls) {
#ifndef GPUCOLL_HAVE_UCX
    GTEST_SKIP() << "built without UCX";
#endif
    use_tcp_loopback();
    const std::vector<int> nodes = GetParam();
    int size = 0;
    for (int r : nodes) size += r;
    const int failed = ForkGroup::run(size, 120, [&nodes](int rank, gpucoll_bootstrap_t& bs) {
        return run_rank_nonblocking(nodes, rank, bs);
    });
    EXPECT_EQ(failed, 0) << failed << " rank(s) failed (their output above)";
}

INSTANTIATE_TEST_SUITE_P(Emu, InterNonblocking,
                         ::testing::Values(std::vector<int>{2, 2}, std::vector<int>{2, 1, 1},
                                           std::vector<int>{1, 1}),
                         [](const ::testing::TestParamInfo<std::vector<int>>& info) {
                             std::string n;
                             for (int c : info.param)
                                 n += (n.empty() ? "" : "_") + std::to_string(c);
                             return "nodes_" + n;
                         });

}  // namespace

// --- host_page_cache: host pages the driver does not know, kept while every
// unmap is reported. In forked children: the watcher is installed once per
// process.
namespace hpc = gpucoll::host_page_cache;

struct Expect {
    int failures = 0;
    void expect(bool ok, const char* what) {
        if (ok) return;
        ++failures;
        std::fprintf(stderr, "host_page_cache: %s: failed\n", what);
    }
};

void (*g_fake_released)(const void*, size_t) = nullptr;
bool g_fake_still_reported = true;
int g_fake_probes = 0;
bool fake_start(void (*released)(const void*, size_t), bool) {
    g_fake_released = released;
    return true;
}
bool fake_still_reported() {
    ++g_fake_probes;
    return g_fake_still_reported;
}
const hpc::Watcher kFakeWatcher{&fake_start, &fake_still_reported};
const hpc::Watcher kUcxWatcher{&gpucoll::inter::watch_unmaps,
                               &gpucoll::inter::unmaps_still_reported};

void* map_pages(size_t pages, int prot = PROT_READ | PROT_WRITE) {
    void* p = mmap(nullptr, pages * 4096, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

// remember() twice: the first one starts the watcher, and refuses (an
// unmap before the start was not reported).
void remember_now(const void* p) {
    for (int i = 0; i < 2; ++i) hpc::remember(p, hpc::generation());
}

int run_rank_page_cache_rules(int, gpucoll_bootstrap_t&) {
    Expect k;
    hpc::set_watcher(kFakeWatcher);
    // Off by default (until checked on a GPU): nothing kept.
    k.expect(hpc::mode() == hpc::Mode::Off, "off by default");
    char* first = static_cast<char*>(map_pages(1));
    remember_now(first);
    k.expect(!hpc::contains(first) && g_fake_released == nullptr, "off: nothing kept");
    munmap(first, 4096);
    hpc::set_mode(hpc::Mode::Auto);
    char* a = static_cast<char*>(map_pages(4));
    void* none = map_pages(1, PROT_NONE);
    k.expect(a != nullptr && none != nullptr, "mmap");
    k.expect(!hpc::contains(a), "nothing remembered yet");
    remember_now(a + 100);
    k.expect(g_fake_released != nullptr, "the watcher was started");
    k.expect(hpc::contains(a), "a page remembered serves every address in it");
    k.expect(hpc::contains(a + 4095), "the page's last byte");
    k.expect(!hpc::contains(a + 4096), "the next page was not remembered");
    // An unmap reported while the driver was being asked: not remembered.
    const uint64_t before = hpc::generation();
    g_fake_released(a + 3 * 4096, 4096);
    hpc::remember(a + 2 * 4096, before);
    k.expect(!hpc::contains(a + 2 * 4096), "a stale answer is not remembered");
    // Unreadable memory (a reservation, device memory's CPU side): never.
    remember_now(none);
    k.expect(!hpc::contains(none), "a PROT_NONE page is not remembered");
    // A shared object's pages: dlclose unmaps them unseen.
    const void* in_libc = reinterpret_cast<const void*>(&getpid);
    remember_now(in_libc);
    k.expect(!hpc::contains(in_libc), "a shared object's page is not remembered");
    // Released: forgotten, also by a range that only overlaps the page.
    remember_now(a + 4096);
    k.expect(hpc::contains(a + 4096), "second page remembered");
    g_fake_released(a + 4096 + 4000, 200);
    k.expect(!hpc::contains(a + 4096), "a release that overlaps the page forgets it");
    k.expect(hpc::contains(a), "a release elsewhere keeps the first page");
    g_fake_released(a, 0);
    k.expect(hpc::contains(a), "an empty release forgets nothing");
    // A range that wraps the address space forgets everything above it.
    g_fake_released(a, SIZE_MAX);
    k.expect(!hpc::contains(a), "a wrapping range forgets the page");
    // Off: nothing remembered, nothing kept.
    remember_now(a);
    k.expect(hpc::contains(a), "remembered again");
    hpc::set_mode(hpc::Mode::Off);
    k.expect(!hpc::contains(a), "turned off: forgotten");
    remember_now(a);
    k.expect(!hpc::contains(a), "turned off: not remembered");
    hpc::set_mode(hpc::Mode::Auto);
    const hpc::Stats s = hpc::stats();
    k.expect(s.watching && s.remembered == 5 && s.refused == 6 && s.forgotten == 2,
             "stats: 5 kept, 6 refused (the start, stale, PROT_NONE twice, libc twice), 2 "
             "forgotten");
    munmap(a, 4 * 4096);
    munmap(none, 4096);
    return k.failures;
}

TEST(HostPageCache, RemembersReadablePagesUntilReleased) {
    EXPECT_EQ(ForkGroup::run(1, 60, run_rank_page_cache_rules), 0);
}

// More buffers than slots: after kThrashEvictions evictions in a row the
// cache keeps nothing for kThrashBackoff queries (each kept page costs a
// system call); and a probe that fails forgets everything for good.
int run_rank_page_cache_thrash_and_probe(int, gpucoll_bootstrap_t&) {
    Expect k;
    hpc::set_watcher(kFakeWatcher);
    hpc::set_mode(hpc::Mode::Auto);
    constexpr size_t kPages = 4096;
    char* a = static_cast<char*>(map_pages(kPages));
    k.expect(a != nullptr, "mmap");
    // Pages of a that share one slot.
    std::vector<char*> same;
    const size_t want =
        gpucoll::host_page_cache::detail::slot_of(reinterpret_cast<uintptr_t>(a) >> 12);
    for (size_t i = 0; i < kPages && same.size() < hpc::kThrashEvictions + 2; ++i) {
        char* p = a + i * 4096;
        if (gpucoll::host_page_cache::detail::slot_of(reinterpret_cast<uintptr_t>(p) >> 12) == want)
            same.push_back(p);
    }
    k.expect(same.size() == hpc::kThrashEvictions + 2, "enough colliding pages");
    remember_now(same[0]);
    for (int i = 1; i <= hpc::kThrashEvictions; ++i) hpc::remember(same[i], hpc::generation());
    hpc::Stats s = hpc::stats();
    k.expect(s.evicted == hpc::kThrashEvictions && s.backing_off, "thrashing detected");
    hpc::remember(same[hpc::kThrashEvictions + 1], hpc::generation());
    k.expect(!hpc::contains(same[hpc::kThrashEvictions + 1]), "backing off: not kept");
    for (int i = 0; i < hpc::kThrashBackoff; ++i) hpc::remember(a, hpc::generation());
    k.expect(!hpc::stats().backing_off, "the back-off ends");
    // The probe runs every kReprobeEvery pages kept; when it fails,
    // everything is forgotten and nothing more is kept.
    const int probes = g_fake_probes;
    for (uint64_t i = 0; i < hpc::kReprobeEvery; ++i) hpc::remember(a, hpc::generation());
    k.expect(g_fake_probes > probes, "probed again");
    k.expect(hpc::contains(a), "kept while the probe passes");
    g_fake_still_reported = false;
    for (uint64_t i = 0; i < hpc::kReprobeEvery; ++i) hpc::remember(a, hpc::generation());
    k.expect(!hpc::stats().watching && !hpc::contains(a), "a failed probe forgets everything");
    remember_now(a);
    k.expect(!hpc::contains(a), "and keeps nothing more");
    munmap(a, kPages * 4096);
    return k.failures;
}

TEST(HostPageCache, BacksOffWhenThrashingAndStopsWhenAProbeFails) {
    EXPECT_EQ(ForkGroup::run(1, 60, run_rank_page_cache_thrash_and_probe), 0);
}

int run_rank_page_cache_without_watcher(int, gpucoll_bootstrap_t&) {
    Expect k;
    hpc::set_watcher(hpc::Watcher{});
    hpc::set_mode(hpc::Mode::Install);
    char* a = static_cast<char*>(map_pages(1));
    remember_now(a);
    k.expect(!hpc::contains(a), "no watcher: nothing is remembered");
    k.expect(!hpc::stats().watching, "not watching");
    munmap(a, 4096);
    return k.failures;
}

TEST(HostPageCache, NothingIsRememberedWithoutAWatcher) {
    EXPECT_EQ(ForkGroup::run(1, 60, run_rank_page_cache_without_watcher), 0);
}

// With UCX's real hooks another thread (UCX's own, or glibc trimming an
// arena) may report an unmap between the query and the store: ask again.
void remember_until_kept(const void* p) {
    for (int i = 0; i < 10 && !hpc::contains(p); ++i) remember_now(p);
}

// UCX's memory hooks report every way a remembered page can go: munmap,
// the free() of a large malloc (inside the C library), mremap, a MAP_FIXED
// mmap over it, shmdt.
void check_ucx_hooks_forget(Expect& k) {
    char* a = static_cast<char*>(map_pages(1));
    remember_until_kept(a);
    k.expect(hpc::contains(a), "remembered");
    munmap(a, 4096);
    k.expect(!hpc::contains(a), "munmap forgets it");

    constexpr size_t kLarge = size_t{8} << 20;  // malloc maps it
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    char* big = static_cast<char*>(std::malloc(kLarge));
    k.expect(big != nullptr, "malloc");
    big[0] = 1;
    // Its middle as a number: asked about after the free() (only the address).
    const uintptr_t middle = reinterpret_cast<uintptr_t>(big) + kLarge / 2;
    remember_until_kept(reinterpret_cast<const void*>(middle));
    k.expect(hpc::contains(reinterpret_cast<const void*>(middle)), "a large malloc remembered");
    std::free(big);
    k.expect(!hpc::contains(reinterpret_cast<const void*>(middle)), "its free() forgets it");

    char* m = static_cast<char*>(map_pages(2));
    remember_until_kept(m);
    k.expect(hpc::contains(m), "a mapping remembered");
    char* moved = static_cast<char*>(mremap(m, 2 * 4096, 64 * 4096, MREMAP_MAYMOVE));
    k.expect(moved != MAP_FAILED, "mremap");
    k.expect(!hpc::contains(m), "mremap forgets the old range");
    remember_until_kept(moved);
    k.expect(hpc::contains(moved), "the moved mapping remembered");
    void* fixed = mmap(moved, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    k.expect(fixed == moved, "MAP_FIXED");
    k.expect(!hpc::contains(moved), "a MAP_FIXED mmap over the page forgets it");
    munmap(moved, 64 * 4096);

    const int id = shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
    k.expect(id >= 0, "shmget");
    void* shm = shmat(id, nullptr, 0);
    shmctl(id, IPC_RMID, nullptr);
    k.expect(shm != reinterpret_cast<void*>(-1), "shmat");
    remember_until_kept(shm);
    k.expect(hpc::contains(shm), "shared memory remembered");
    shmdt(shm);
    k.expect(!hpc::contains(shm), "shmdt forgets it");
}

// Auto rides on the hooks UCX installed (UCX 1.13 patches glibc's munmap
// as soon as libucm is loaded, which libgpucoll links: they are always there
// for it; the probe decides), here with UCX's transport started as well;
// with mode on, gpucoll installs them if nobody has. Under ASan the
// allocator unmaps by system call, unseen by UCX: the probe must refuse to
// start there.
int run_rank_page_cache_ucx(bool install) {
    Expect k;
    std::unique_ptr<gpucoll::inter::Transport> t;
    if (!install) {
        use_tcp_loopback();
        k.expect(gpucoll::inter::Transport::create(false, "lo", &t) == GPUCOLL_SUCCESS,
                 "transport (installs UCX's memory hooks)");
    }
    hpc::set_mode(install ? hpc::Mode::Install : hpc::Mode::Auto);
    hpc::set_watcher(kUcxWatcher);
    char* a = static_cast<char*>(map_pages(1));
    remember_until_kept(a);
    const bool watching = hpc::stats().watching;
    munmap(a, 4096);
#ifdef GPUCOLL_ADDRESS_SANITIZER
    k.expect(!watching, "ASan: the probe refused (its free() unmaps unseen)");
    return k.failures;
#endif
    k.expect(watching, "UCX's memory hooks report unmaps");
    if (!watching) return k.failures;
    k.expect(gpucoll::inter::unmaps_still_reported(), "the probe passes again");
    check_ucx_hooks_forget(k);
    return k.failures;
}

TEST(HostPageCache, AutoUsesTheHooksOfUcxsTransport) {
#ifndef GPUCOLL_HAVE_UCX
    GTEST_SKIP() << "built without UCX: no watcher, nothing is remembered";
#endif
    EXPECT_EQ(ForkGroup::run(
                  1, 60, [](int, gpucoll_bootstrap_t&) { return run_rank_page_cache_ucx(false); }),
              0);
}

TEST(HostPageCache, OnInstallsUcxHooksThatForgetUnmappedPages) {
#ifndef GPUCOLL_HAVE_UCX
    GTEST_SKIP() << "built without UCX: no watcher, nothing is remembered";
#endif
    EXPECT_EQ(ForkGroup::run(
                  1, 60, [](int, gpucoll_bootstrap_t&) { return run_rank_page_cache_ucx(true); }),
              0);
}
