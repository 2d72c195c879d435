// The intra-node algorithms through the bootstrap seam: ranks are threads of
// this process sharing the emu device. Every algorithm of every collective,
// against a host reference, at 1..4 ranks, in place and not; and the
// agreement: when one rank cannot take the accelerated path, all decline.
// (Counters are per process, so bytes and rounds are checked by the MPI tests.)
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "calls.h"
#include "common/status.h"
#include "device/device.h"
#include "gpucoll.h"
#include "intra/node_comm.h"
#include "intra/shared_segment.h"
#include "thread_bootstrap.h"

namespace {

void* dalloc(size_t bytes, bool pool = false) {
    void* p = nullptr;
    EXPECT_EQ(pool ? gpucoll_malloc_device_pool(&p, bytes) : gpucoll_malloc_device(&p, bytes), 0)
        << gpucoll_last_error();
    return p;
}
template <typename T>
void upload(void* d, const std::vector<T>& h) {
    ASSERT_EQ(gpucoll_memcpy(d, h.data(), h.size() * sizeof(T)), 0);
}
template <typename T>
std::vector<T> download(const void* d, size_t n) {
    std::vector<T> h(n);
    EXPECT_EQ(gpucoll_memcpy(h.data(), d, n * sizeof(T)), 0);
    return h;
}
// Rank r's input element i: small integers, exact in float.
float value(int r, size_t i) { return float((i * 7 + size_t(r) * 3) % 23) - 11.0f; }

// Runs body(rank, bootstrap, fail) on n thread-ranks; a rank reports a
// failure by setting fail, and every rank's is expected empty.
template <typename Body>
void on_thread_ranks(int n, Body body) {
    ThreadGroup group(n);
    std::vector<std::string> failures(static_cast<size_t>(n));
    group.run([&](int rank, gpucoll_bootstrap_t& bs) { body(rank, bs, failures[size_t(rank)]); });
    for (int r = 0; r < n; ++r) EXPECT_EQ(failures[size_t(r)], "") << "rank " << r;
}

struct Case {
    gpucoll_coll_t coll;
    gpucoll_algorithm_t algo;
    int size;
    size_t count;  // elements (allgather, reduce_scatter_block: per rank)
    bool in_place;
    bool pool = false;          // even ranks' buffers: memory IPC cannot export
    bool device_flags = false;  // steps synchronise through stream-ordered device flags
};

std::string name_of(const ::testing::TestParamInfo<Case>& info) {
    const Case& c = info.param;
    return std::string(gpucoll_coll_name(c.coll)) + "_" + gpucoll_algorithm_name(c.algo) + "_np" +
           std::to_string(c.size) + "_n" + std::to_string(c.count) +
           (c.in_place ? "_inplace" : "") + (c.pool ? "_pool" : "") +
           (c.device_flags ? "_devflags" : "");
}

class IntraAlgorithms : public ::testing::TestWithParam<Case> {
protected:
    void SetUp() override { ASSERT_EQ(gpucoll_init_backend("emu"), 0) << gpucoll_last_error(); }
};

TEST_P(IntraAlgorithms, MatchesReference) {
    const Case c = GetParam();
    const int n = c.size;
    const int root = n - 1;
    on_thread_ranks(n, [&](int rank, gpucoll_bootstrap_t& bs, std::string& fail) {
        gpucoll_comm_config_t cfg;
        gpucoll_comm_config_init(&cfg);
        cfg.algorithm[c.coll] = c.algo;
        cfg.chunk_bytes = 4096;             // several pipeline steps at test sizes
        cfg.one_shot_max_bytes = 64 << 10;  // one-shot at every test size when forced
        cfg.device_flags = c.device_flags;
        gpucoll_comm_t* comm = nullptr;
        if (gpucoll_comm_create(&bs, &cfg, &comm) != 0 || comm == nullptr) {
            fail = std::string("comm_create: ") + gpucoll_last_error();
            return;
        }
        // Buffers and expected output.
        size_t in_n = c.count, out_n = c.count;
        if (c.coll == GPUCOLL_COLL_ALLGATHER) out_n = c.count * size_t(n);
        if (c.coll == GPUCOLL_COLL_REDUCE_SCATTER_BLOCK) in_n = c.count * size_t(n);
        std::vector<float> in(in_n), expect;
        for (size_t i = 0; i < in_n; ++i) in[i] = value(rank, i);
        auto sum_at = [&](size_t i) {
            float s = 0;
            for (int r = 0; r < n; ++r) s += value(r, i);
            return s;
        };
        switch (c.coll) {
            case GPUCOLL_COLL_ALLREDUCE:
            case GPUCOLL_COLL_REDUCE:
                for (size_t i = 0; i < c.count; ++i) expect.push_back(sum_at(i));
                break;
            case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK:
                for (size_t i = 0; i < c.count; ++i)
                    expect.push_back(sum_at(size_t(rank) * c.count + i));
                break;
            case GPUCOLL_COLL_ALLGATHER:
                for (int r = 0; r < n; ++r)
                    for (size_t i = 0; i < c.count; ++i) expect.push_back(value(r, i));
                break;
            default:  // bcast
                for (size_t i = 0; i < c.count; ++i) expect.push_back(value(root, i));
        }
        // MPI_Reduce takes MPI_IN_PLACE at the root only.
        const bool in_place = c.in_place && (c.coll != GPUCOLL_COLL_REDUCE || rank == root);
        const size_t recv_n = in_place ? std::max(in_n, out_n) : out_n;
        const bool pool = c.pool && rank % 2 == 0;
        void* send = in_place ? nullptr : dalloc(in_n * sizeof(float) + 1, pool);
        void* recv = dalloc(recv_n * sizeof(float) + 1, pool);
        if (c.coll == GPUCOLL_COLL_BCAST) {
            upload(recv, rank == root ? in : std::vector<float>(in_n, -99.0f));
        } else if (in_place) {
            std::vector<float> init(recv_n, -99.0f);
            if (c.coll == GPUCOLL_COLL_ALLGATHER)
                std::copy(in.begin(), in.end(), init.begin() + long(rank) * long(c.count));
            else
                std::copy(in.begin(), in.end(), init.begin());
            upload(recv, init);
        } else {
            upload(send, in);
        }
        gpucoll_call_t call{};
        call.coll = c.coll;
        call.sendbuf = c.coll == GPUCOLL_COLL_BCAST ? nullptr : send;
        call.recvbuf = recv;
        call.count = c.count;
        call.dtype = GPUCOLL_FLOAT;
        call.op = GPUCOLL_OP_SUM;
        call.root = root;
        call.eligible = 1;
        for (int iter = 0; iter < 3 && fail.empty(); ++iter) {  // reuse: caches, parity, windows
            int rc = gpucoll_comm_run(comm, &call);
            if (rc != 0) {
                fail = "run returned " + std::to_string(rc) + ": " + gpucoll_last_error();
                break;
            }
            bool check = c.coll != GPUCOLL_COLL_REDUCE || rank == root;
            if (check) {
                auto got = download<float>(recv, expect.size());
                for (size_t i = 0; i < expect.size(); ++i)
                    if (got[i] != expect[i]) {
                        fail = "iter " + std::to_string(iter) + " element " + std::to_string(i) +
                               ": got " + std::to_string(got[i]) + " want " +
                               std::to_string(expect[i]);
                        break;
                    }
            }
            // Re-arm inputs that in-place calls overwrote.
            if (in_place && c.coll != GPUCOLL_COLL_BCAST && c.coll != GPUCOLL_COLL_ALLGATHER) {
                std::vector<float> init(recv_n, -99.0f);
                std::copy(in.begin(), in.end(), init.begin());
                upload(recv, init);
            }
        }
        // The one-kernel path where it can run (2-8 ranks): taken, not the
        // fallback (every rank ran the same algorithm; the counters are the
        // process's).
        if (fail.empty() && c.algo == GPUCOLL_ALGO_ONE_KERNEL) {
            gpucoll_counters_t counters;
            gpucoll_counters_get(&counters);
            const std::string want = n >= 2 ? "one_kernel" : "one_shot";
            if (counters.last_algorithm != want)
                fail = "ran " + std::string(counters.last_algorithm) + ", not " + want;
        }
        bs.barrier(bs.ctx);  // as MPI_Comm_free: nobody reads our buffers any more
        gpucoll_free_device(send);
        gpucoll_free_device(recv);
        gpucoll_comm_destroy(comm);
    });
}

std::vector<Case> all_cases() {
    const std::tuple<gpucoll_coll_t, gpucoll_algorithm_t, bool> algos[] = {
        {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_ALGO_ONE_SHOT, true},
        {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_ALGO_TWO_SHOT, true},
        {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_ALGO_RING, true},
        {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_ALGO_ONE_KERNEL, true},
        {GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, GPUCOLL_ALGO_DIRECT, true},
        {GPUCOLL_COLL_REDUCE_SCATTER_BLOCK, GPUCOLL_ALGO_RING, true},
        {GPUCOLL_COLL_REDUCE, GPUCOLL_ALGO_DIRECT, true},
        {GPUCOLL_COLL_ALLGATHER, GPUCOLL_ALGO_DIRECT, true},
        {GPUCOLL_COLL_ALLGATHER, GPUCOLL_ALGO_RING, true},
        {GPUCOLL_COLL_BCAST, GPUCOLL_ALGO_DIRECT, false},
        {GPUCOLL_COLL_BCAST, GPUCOLL_ALGO_CHAIN, false},
    };
    std::vector<Case> cases;
    for (auto [coll, algo, has_in_place] : algos)
        for (int n = 1; n <= 4; ++n)
            for (size_t count : {size_t(1), size_t(7), size_t(5003)})
                for (bool ip : {false, true})
                    if (!ip || has_in_place) cases.push_back({coll, algo, n, count, ip});
    // Buffers IPC cannot export: the same algorithms through exportable copies.
    for (auto [coll, algo, has_in_place] : algos)
        for (bool ip : {false, true})
            if (!ip || has_in_place) cases.push_back({coll, algo, 3, 5003, ip, true});
    // Device-side flags: every step is a stream-ordered device operation.
    for (auto [coll, algo, has_in_place] : algos)
        for (int n : {2, 4})
            for (bool ip : {false, true})
                if (!ip || has_in_place) cases.push_back({coll, algo, n, 5003, ip, false, true});
    return cases;
}

INSTANTIATE_TEST_SUITE_P(Emu, IntraAlgorithms, ::testing::ValuesIn(all_cases()), name_of);

// One rank passes host memory, or cannot take the call (a derived datatype):
// every rank gets GPUCOLL_DECLINED, nobody waits forever; then the
// communicator still works for the next call. Many calls in a row exercise
// the post window (host ranks do not wait for the others).
TEST(IntraAgreement, OneRankDeclinesAllDecline) {
    ASSERT_EQ(gpucoll_init_backend("emu"), 0);
    const int n = 4;
    on_thread_ranks(n, [&](int rank, gpucoll_bootstrap_t& bs, std::string& fail) {
        gpucoll_comm_t* comm = nullptr;
        if (gpucoll_comm_create(&bs, nullptr, &comm) != 0 || comm == nullptr) {
            fail = "create failed";
            return;
        }
        const size_t count = 64;
        void* d = dalloc(count * sizeof(float));
        std::vector<float> host(count, 1.0f);
        upload(d, host);
        for (int iter = 0; iter < 50 && fail.empty(); ++iter) {
            const int odd_one = iter % n;
            gpucoll_call_t call{};
            call.coll = GPUCOLL_COLL_ALLREDUCE;
            call.recvbuf = (iter % 3 == 0 && rank == odd_one) ? host.data() : d;  // host memory
            call.count = count;
            call.dtype = GPUCOLL_FLOAT;
            call.op = GPUCOLL_OP_MAX;
            call.eligible = !(iter % 3 == 1 && rank == odd_one);  // e.g. a derived datatype
            const int want = iter % 3 == 2 ? GPUCOLL_SUCCESS : GPUCOLL_DECLINED;
            const int rc = gpucoll_comm_run(comm, &call);
            if (rc != want)
                fail = "iter " + std::to_string(iter) + ": got " + std::to_string(rc) + " want " +
                       std::to_string(want) + " " + gpucoll_last_error();
        }
        gpucoll_call_t empty{};
        empty.coll = GPUCOLL_COLL_BCAST;
        empty.recvbuf = d;
        empty.count = 0;
        empty.dtype = GPUCOLL_BYTE;
        empty.eligible = 1;
        if (fail.empty() && gpucoll_comm_run(comm, &empty) != GPUCOLL_DECLINED)
            fail = "count 0 was not declined";
        bs.barrier(bs.ctx);
        gpucoll_free_device(d);
        gpucoll_comm_destroy(comm);
    });
}

// Nonblocking calls with the progress threads: every rank starts its calls
// and then "computes" (sleeps, no gpucoll call), and the calls still end.
// Ranks start the calls of two communicators in opposite orders (legal for
// nonblocking collectives): the agent must not wait on one while the other
// is what a peer needs. Under ThreadSanitizer this also checks the
// hand-over between the application's threads and the agent.
class IntraNonblocking : public ::testing::TestWithParam<int> {};  // progress_thread 1 or 2

TEST_P(IntraNonblocking, ProgressThreadEndsCallsWhileRanksCompute) {
    ASSERT_EQ(gpucoll_init_backend("emu"), 0);
    const int n = 4;
    on_thread_ranks(n, [&](int rank, gpucoll_bootstrap_t& bs, std::string& fail) {
        gpucoll_comm_config_t cfg;
        gpucoll_comm_config_init(&cfg);
        cfg.progress_thread = GetParam();
        gpucoll_comm_t* comm[2] = {nullptr, nullptr};
        for (auto& c : comm)
            if (gpucoll_comm_create(&bs, &cfg, &c) != 0 || c == nullptr) fail = "create failed";
        if (!fail.empty()) return;
        const size_t count = 70000;  // two-shot: several steps between the ranks
        std::vector<float> in(count);
        for (size_t i = 0; i < count; ++i) in[i] = value(rank, i);
        void* send[2] = {dalloc(count * sizeof(float)), dalloc(count * sizeof(float))};
        void* recv[2] = {dalloc(count * sizeof(float)), dalloc(count * sizeof(float))};
        for (void* d : send) upload(d, in);
        for (int iter = 0; iter < 3 && fail.empty(); ++iter) {
            gpucoll_pending_t* op[2] = {nullptr, nullptr};
            // Staggered: the early ranks are asleep when the last one starts.
            std::this_thread::sleep_for(std::chrono::milliseconds(5 * rank));
            for (int k = 0; k < 2; ++k) {
                const int c = rank % 2 == 0 ? k : 1 - k;  // odd ranks: the other order
                gpucoll_call_t call{};
                call.coll = GPUCOLL_COLL_ALLREDUCE;
                call.sendbuf = send[c];
                call.recvbuf = recv[c];
                call.count = count;
                call.dtype = GPUCOLL_FLOAT;
                call.op = GPUCOLL_OP_SUM;
                call.eligible = 1;
                call.on_device = 1;
                if (gpucoll_comm_start(comm[c], &call, GPUCOLL_FORM_NONBLOCKING, &op[c]) != 0)
                    fail = std::string("start failed: ") + gpucoll_last_error();
            }
            if (!fail.empty()) break;
            for (int ms = 0;
                 ms < 10000 && !(gpucoll_pending_done(op[0]) && gpucoll_pending_done(op[1])); ++ms)
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            for (int c = 0; c < 2; ++c) {
                if (!gpucoll_pending_done(op[c]) && fail.empty())
                    fail = "iter " + std::to_string(iter) + ": call on communicator " +
                           std::to_string(c) + " did not end in 10 s without polling";
                int done = 0;
                while (!done) {
                    const int rc = gpucoll_pending_test(op[c], &done);
                    if (done && rc != GPUCOLL_SUCCESS && fail.empty())
                        fail =
                            "call ended with " + std::to_string(rc) + ": " + gpucoll_last_error();
                }
                gpucoll_pending_free(op[c]);
                const std::vector<float> out = download<float>(recv[c], count);
                for (size_t i = 0; i < count && fail.empty(); i += 101) {
                    float want = 0;
                    for (int r = 0; r < n; ++r) want += value(r, i);
                    if (out[i] != want)
                        fail = "element " + std::to_string(i) + ": " + std::to_string(out[i]) +
                               " want " + std::to_string(want);
                }
            }
        }
        bs.barrier(bs.ctx);
        for (int c = 0; c < 2; ++c) {
            gpucoll_free_device(send[c]);
            gpucoll_free_device(recv[c]);
        }
        for (auto& c : comm) gpucoll_comm_destroy(c);
    });
}

// Eager (takes a call over at once) and lazy (after 10-20 ms without
// polling: what auto picks on a machine with fewer than two cores per rank).
INSTANTIATE_TEST_SUITE_P(Modes, IntraNonblocking, ::testing::Values(1, 2),
                         [](const ::testing::TestParamInfo<int>& info) {
                             return std::string(info.param == 1 ? "eager" : "lazy");
                         });

// Persistent calls through a plan (gpucoll_plan_create once, then starts):
// right results with new inputs at every start; the planned starts counted;
// a plan used on another communicator refused; a plan freed while its start
// is in flight; a receive buffer too small: the plan is made, and every
// start fails on every rank (the check each start would make, kept).
TEST(IntraPlan, StartsReuseTheSetup) {
    ASSERT_EQ(gpucoll_init_backend("emu"), 0);
    const int n = 3;
    gpucoll_counters_reset();
    on_thread_ranks(n, [&](int rank, gpucoll_bootstrap_t& bs, std::string& fail) {
        gpucoll_comm_t* comm[2] = {nullptr, nullptr};
        for (auto& c : comm)
            if (gpucoll_comm_create(&bs, nullptr, &c) != 0 || c == nullptr) fail = "create failed";
        if (!fail.empty()) return;
        const size_t count = 5000;
        void* send = dalloc(count * sizeof(float));
        void* recv = dalloc(count * sizeof(float));
        void* small = dalloc(count * sizeof(float) / 2);
        gpucoll_call_t call = sum_allreduce_call(send, recv, count);
        gpucoll_plan_t* plan = nullptr;
        if (gpucoll_plan_create(comm[0], &call, &plan) != 0 || plan == nullptr) {
            fail = std::string("plan: ") + gpucoll_last_error();
            return;
        }
        auto finish = [&](gpucoll_pending_t* op) {
            int done = 0, rc = 0;
            while (!done) rc = gpucoll_pending_test(op, &done);
            gpucoll_pending_free(op);
            return rc;
        };
        for (int start = 0; start < 5 && fail.empty(); ++start) {
            std::vector<float> in(count);
            for (size_t i = 0; i < count; ++i) in[i] = value(rank, i) + float(start);
            upload(send, in);
            gpucoll_pending_t* op = nullptr;
            if (gpucoll_plan_start(comm[0], plan, &op) != 0) {
                fail = std::string("start: ") + gpucoll_last_error();
                break;
            }
            if (start == 4) {  // freed while in flight: the start keeps what it needs
                gpucoll_plan_free(plan);
                plan = nullptr;
            }
            if (finish(op) != GPUCOLL_SUCCESS) fail = std::string("run: ") + gpucoll_last_error();
            const std::vector<float> out = download<float>(recv, count);
            for (size_t i = 0; i < count && fail.empty(); i += 97) {
                float want = 0;
                for (int r = 0; r < n; ++r) want += value(r, i) + float(start);
                if (out[i] != want)
                    fail = "start " + std::to_string(start) + " element " + std::to_string(i);
            }
        }
        // Another communicator's plan.
        gpucoll_plan_t* other = nullptr;
        gpucoll_pending_t* op = nullptr;
        if (fail.empty() && (gpucoll_plan_create(comm[1], &call, &other) != 0 ||
                             gpucoll_plan_start(comm[0], other, &op) != GPUCOLL_ERR_INVALID_ARG))
            fail = "a plan of another communicator was started";
        gpucoll_plan_free(other);
        // The receive buffer cannot hold the result: every start fails everywhere.
        call.recvbuf = small;
        gpucoll_plan_t* bad = nullptr;
        if (fail.empty() && gpucoll_plan_create(comm[0], &call, &bad) != 0)
            fail = "a plan of a bad call must still be made";
        for (int start = 0; start < 2 && fail.empty(); ++start) {
            if (gpucoll_plan_start(comm[0], bad, &op) != 0) {
                fail = "bad start";
                break;
            }
            const int rc = finish(op);
            if (rc != GPUCOLL_ERR_BUFFER)
                fail = "a start with a too small buffer returned " + std::to_string(rc);
        }
        gpucoll_plan_free(bad);
        bs.barrier(bs.ctx);
        gpucoll_free_device(send);
        gpucoll_free_device(recv);
        gpucoll_free_device(small);
        for (auto& c : comm) gpucoll_comm_destroy(c);
    });
    gpucoll_counters_t c;
    ASSERT_EQ(gpucoll_counters_get(&c), 0);
    EXPECT_EQ(c.planned_starts, uint64_t(5 * n));  // the bad plan describes nothing
    EXPECT_EQ(c.forms[GPUCOLL_FORM_PERSISTENT][GPUCOLL_PATH_ACCELERATED], uint64_t(5 * n));
}

// A root outside the communicator (MPI's parameter checks off): the call
// fails on every rank before anything is posted, in each form, and the
// communicator goes on working (issue #40, defect 5: a read past the
// communicator's tables in CallContext::resolve).
TEST(IntraAgreement, RootOutsideTheCommunicatorFailsTheCall) {
    ASSERT_EQ(gpucoll_init_backend("emu"), 0);
    const int n = 3;
    on_thread_ranks(n, [&](int rank, gpucoll_bootstrap_t& bs, std::string& fail) {
        gpucoll_comm_t* comm = nullptr;
        if (gpucoll_comm_create(&bs, nullptr, &comm) != 0 || comm == nullptr) {
            fail = "create failed";
            return;
        }
        const size_t count = 100;
        void* buf = dalloc(count * sizeof(float));
        upload(buf, std::vector<float>(count, float(rank)));
        gpucoll_call_t call{};
        call.coll = GPUCOLL_COLL_BCAST;
        call.recvbuf = buf;
        call.count = count;
        call.dtype = GPUCOLL_FLOAT;
        call.op = GPUCOLL_OP_SUM;
        call.eligible = call.on_device = 1;
        for (int root : {n, -1, 1 << 20}) {
            call.root = root;
            if (gpucoll_comm_run(comm, &call) != GPUCOLL_ERR_INVALID_ARG)
                fail = "bcast with root " + std::to_string(root) + " did not fail";
            else if (std::string(gpucoll_last_error()).find("root") == std::string::npos)
                fail = std::string("message without the root: ") + gpucoll_last_error();
        }
        gpucoll_pending_t* op = nullptr;
        gpucoll_plan_t* plan = nullptr;
        call.coll = GPUCOLL_COLL_REDUCE;
        call.root = n;
        if (gpucoll_comm_start(comm, &call, GPUCOLL_FORM_NONBLOCKING, &op) !=
                GPUCOLL_ERR_INVALID_ARG ||
            op != nullptr)
            fail = "a nonblocking reduce with a bad root did not fail";
        if (gpucoll_plan_create(comm, &call, &plan) != GPUCOLL_ERR_INVALID_ARG || plan != nullptr)
            fail = "a plan with a bad root was made";
        // The next call runs, in step on every rank.
        call.coll = GPUCOLL_COLL_BCAST;
        call.root = n - 1;
        if (fail.empty() && gpucoll_comm_run(comm, &call) != GPUCOLL_SUCCESS)
            fail = std::string("the next bcast: ") + gpucoll_last_error();
        const std::vector<float> got = download<float>(buf, count);
        if (fail.empty() && got[count - 1] != float(n - 1)) fail = "the next bcast's data";
        bs.barrier(bs.ctx);
        gpucoll_free_device(buf);
        gpucoll_comm_destroy(comm);
    });
}

// coll_gpucoll_timing: while on, every accelerated call adds its steps; a
// call the selection stages by size counts as declined; off, nothing moves.
TEST(IntraTiming, StepsOfAcceleratedCallsAreCounted) {
    ASSERT_EQ(gpucoll_init_backend("emu"), 0);
    const int n = 2, calls = 7;
    auto run = [&](size_t count, gpucoll_algorithm_t algo) {
        on_thread_ranks(n, [&](int, gpucoll_bootstrap_t& bs, std::string& fail) {
            gpucoll_comm_config_t cfg;
            gpucoll_comm_config_init(&cfg);
            cfg.algorithm[GPUCOLL_COLL_ALLREDUCE] = algo;
            gpucoll_comm_t* comm = nullptr;
            if (gpucoll_comm_create(&bs, &cfg, &comm) != 0 || comm == nullptr) {
                fail = "create failed";
                return;
            }
            void* send = dalloc(count * sizeof(float));
            void* recv = dalloc(count * sizeof(float));
            const gpucoll_call_t call = sum_allreduce_call(send, recv, count);
            for (int i = 0; i < calls && fail.empty(); ++i) {
                const int rc = gpucoll_comm_run(comm, &call);
                if (rc != GPUCOLL_SUCCESS && rc != GPUCOLL_DECLINED)
                    fail = std::string("run: ") + gpucoll_last_error();
            }
            bs.barrier(bs.ctx);
            gpucoll_free_device(send);
            gpucoll_free_device(recv);
            gpucoll_comm_destroy(comm);
        });
    };
    auto report = [] {
        std::string text(gpucoll_timing_report(nullptr, 0) + 1, '\0');
        gpucoll_timing_report(text.data(), text.size());
        text.resize(text.size() - 1);
        return text;
    };
    gpucoll_timing_reset();
    gpucoll_timing_enable(1);
    run(16, GPUCOLL_ALGO_ONE_SHOT);
    run(16, GPUCOLL_ALGO_STAGED);
    gpucoll_timing_enable(0);
    run(16, GPUCOLL_ALGO_ONE_SHOT);  // not counted
    const std::string text = report();
    const std::string total = std::to_string(n * calls);
    EXPECT_NE(text.find("allreduce: " + total + " accelerated calls"), std::string::npos) << text;
    // Each step's count: once per accelerated call; entry and selection for
    // the staged calls too, which count as declined.
    const std::string both = std::to_string(2 * n * calls);
    const std::pair<const char*, std::string> steps[] = {
        {"enter", both},    {"select", both},  {"check", total}, {"describe", total},
        {"scratch", total}, {"post", total},   {"agree", total}, {"algorithm", total},
        {"device", total},  {"finish", total}, {"tail", total},  {"declined", total}};
    for (const auto& [step, count] : steps) {
        const size_t at = text.find(std::string(" ") + step + " ");
        ASSERT_NE(at, std::string::npos) << step << " missing:\n" << text;
        const std::string line = text.substr(at, text.find('\n', at) - at);
        EXPECT_NE(line.find(" x " + count), std::string::npos) << line;
        EXPECT_EQ(line.find(" x " + count + "0"), std::string::npos) << line;
    }
    char small[16];
    EXPECT_EQ(gpucoll_timing_report(small, sizeof small), text.size());
    EXPECT_EQ(std::string(small), text.substr(0, sizeof small - 1));
    gpucoll_timing_reset();
    EXPECT_EQ(report(), "");
}

}  // namespace

// The one-kernel path, a rank waiting inside the kernel for a peer that never
// publishes its word: the host says so after wait_warning_s (no silent
// hang); then the call is aborted, by the peer's fail() (its flag written past
// every step) or by the abort word alone (a peer that could not write its
// flag: the waiting rank's host writes the peers' flags), and the kernel
// ends. Words keep growing: a later word never reads as an earlier one.
namespace one_kernel {
std::mutex g_log_mutex;
std::string g_log;
void capture(int, const char* message) {
    std::lock_guard lock(g_log_mutex);
    g_log += message;
    g_log += '\n';
}
}  // namespace one_kernel

TEST(IntraFailure, OneKernelWaitEndsWhenThePeerFails) {
    ASSERT_EQ(gpucoll_init_backend("emu"), 0) << gpucoll_last_error();
    one_kernel::g_log.clear();
    for (const bool by_fail : {true, false}) {
        on_thread_ranks(2, [&](int rank, gpucoll_bootstrap_t& bs, std::string& fail) {
            gpucoll_comm_config_t cfg;
            gpucoll_comm_config_init(&cfg);
            cfg.one_kernel_max_bytes = 4096;
            cfg.wait_warning_s = 0.2;
            cfg.log = one_kernel::capture;
            std::unique_ptr<gpucoll::intra::NodeComm> comm;
            if (gpucoll::intra::NodeComm::create(bs, cfg, &comm) != GPUCOLL_SUCCESS || !comm) {
                fail = std::string("create: ") + gpucoll_last_error();
                return;
            }
            if (comm->stream() == nullptr || !comm->kernels_wait_on_flags()) {
                fail = "the one-kernel path was not set up";
                return;
            }
            const uint64_t seq = 1;
            bs.barrier(bs.ctx);
            if (rank == 0) {
                const size_t count = 16;
                void* buf = dalloc(count * sizeof(float));
                upload(buf, std::vector<float>(count, 1.0f));
                gpucoll::OneKernelAllreduce k;
                k.input = k.output = buf;
                k.count = count;
                k.dtype = GPUCOLL_FLOAT;
                k.op = GPUCOLL_OP_SUM;
                k.rank = 0;
                k.size = 2;
                k.word = gpucoll::intra::progress_word(seq, 1);
                for (int p = 0; p < 2; ++p) {
                    k.slots[p] = comm->scratch_slot(p, seq);
                    k.flags[p] = comm->flag(p);
                }
                if (comm->device()->allreduce_one_kernel(k, comm->stream()) != GPUCOLL_SUCCESS)
                    fail = std::string("launch: ") + gpucoll_last_error();
                else if (comm->wait_stream(seq) != GPUCOLL_SUCCESS)  // ends once rank 1 failed
                    fail = std::string("wait: ") + gpucoll_last_error();
                else if (!comm->aborted())
                    fail = "the kernel ended before the peer failed";
                gpucoll_free_device(buf);
            } else {
                std::this_thread::sleep_for(std::chrono::milliseconds(600));
                if (by_fail) {
                    comm->fail(gpucoll::set_error(GPUCOLL_ERR_INTERNAL, "injected by the test"),
                               seq);
                } else {  // the abort word only: rank 0's host releases its own kernel
                    uint64_t none = 0;
                    comm->segment().header().abort.compare_exchange_strong(none, seq);
                }
            }
            bs.barrier(bs.ctx);
        });
    }
    EXPECT_NE(one_kernel::g_log.find("GPU work of call 1 (it waits on the peers' steps)"),
              std::string::npos)
        << one_kernel::g_log;
    using gpucoll::intra::progress_word;
    EXPECT_GT(progress_word(2, 1), progress_word(1, gpucoll::intra::kStepDone));
}

// Device flags, a rank failing with a step write still queued on its stream:
// fail() releases the peers with kStepDone written at once, then drains the
// stream, where the queued write runs (here: once the abort released the
// stream's own wait on a peer, as in a real failure mid-call) and puts a
// lower value over kStepDone. Peers would then wait forever for a step the
// failed rank never signals. The flag must end at kStepDone.
TEST(IntraFailure, DeviceFlagsQueuedStepDoesNotHideTheAbort) {
    ASSERT_EQ(gpucoll_init_backend("emu"), 0) << gpucoll_last_error();
    on_thread_ranks(2, [&](int rank, gpucoll_bootstrap_t& bs, std::string& fail) {
        gpucoll_comm_config_t cfg;
        gpucoll_comm_config_init(&cfg);
        cfg.device_flags = 1;  // forced: the thread ranks share the emu GPU
        std::unique_ptr<gpucoll::intra::NodeComm> comm;
        if (gpucoll::intra::NodeComm::create(bs, cfg, &comm) != GPUCOLL_SUCCESS || !comm) {
            fail = std::string("create: ") + gpucoll_last_error();
            return;
        }
        if (!comm->device_flags() || comm->stream() == nullptr) {
            fail = "no device flags";
            return;
        }
        bs.barrier(bs.ctx);
        if (rank == 0) {
            using gpucoll::intra::kStepDone;
            using gpucoll::intra::progress_word;
            const uint64_t seq = 1;
            gpucoll::Device* dev = comm->device();
            // Queued: wait for the peer's step 1 (it never comes), then signal ours.
            if (dev->wait_flag(comm->flag(1), progress_word(seq, 1), comm->stream()) !=
                    GPUCOLL_SUCCESS ||
                dev->write_flag(comm->flag(0), progress_word(seq, 1), comm->stream()) !=
                    GPUCOLL_SUCCESS) {
                fail = std::string("enqueue: ") + gpucoll_last_error();
            } else {
                comm->fail(gpucoll::set_error(GPUCOLL_ERR_INTERNAL, "injected by the test"), seq);
                uint64_t got = 0;  // device memory: read through the device
                if (dev->memcpy(&got, comm->flag(0), sizeof got, nullptr) != GPUCOLL_SUCCESS)
                    fail = std::string("read back: ") + gpucoll_last_error();
                else if (got != progress_word(seq, kStepDone))
                    fail = "rank 0's flag after fail(): step " + std::to_string(got & kStepDone) +
                           ", not kStepDone";
            }
        }
        bs.barrier(bs.ctx);
    });
}

// A nonblocking call started from inside a blocking call's wait (Open MPI's
// progress engine starts calls of its own wherever it runs: MPI_Comm_idup's
// rounds) is posted after the blocking call, not in its middle: there it
// took the next call number while the blocking call was running, its peers
// read a post not yet written and saw its progress word past steps it had
// not made (wrong results, "different collectives", a hang). Rank 0 comes
// late; the others start the nonblocking call from inside their wait for
// it, rank 0 after its blocking call: every rank runs both, accelerated.
namespace reentry {
// Ends the process with a message where the test hangs (the old code's
// failure); disarmed when the test ends.
class Watchdog {
public:
    Watchdog(int seconds, const char* what)
        : thread_([this, seconds, what] {
              std::unique_lock lock(m_);
              if (!cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return done_; })) {
                  std::fprintf(stderr, "%s: not ended after %d s: hung\n", what, seconds);
                  std::abort();
              }
          }) {}
    ~Watchdog() {
        {
            std::lock_guard lock(m_);
            done_ = true;
        }
        cv_.notify_one();
        thread_.join();
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread thread_;  // last: starts once the rest is made
};
thread_local gpucoll_comm_t* t_comm = nullptr;
thread_local gpucoll_call_t t_call{};
thread_local gpucoll_pending_t* t_op = nullptr;
thread_local int t_start_rc = 0;
// Once per iteration: the start may itself wait (and call this again).
void start_once() {
    gpucoll_comm_t* comm = std::exchange(t_comm, nullptr);
    if (comm != nullptr && t_op == nullptr)
        t_start_rc = gpucoll_comm_start(comm, &t_call, GPUCOLL_FORM_NONBLOCKING, &t_op);
}
}  // namespace reentry

TEST(IntraReentry, CallStartedInsideAWaitPostsAfterTheBlockingCall) {
    ASSERT_EQ(gpucoll_init_backend("emu"), 0);
    const reentry::Watchdog watchdog(60, "IntraReentry");
    const int n = 3;
    on_thread_ranks(n, [&](int rank, gpucoll_bootstrap_t& bs, std::string& fail) {
        gpucoll_comm_config_t cfg;
        gpucoll_comm_config_init(&cfg);
        cfg.progress_thread = 0;
        cfg.progress = reentry::start_once;
        gpucoll_comm_t* comm = nullptr;
        if (gpucoll_comm_create(&bs, &cfg, &comm) != 0 || comm == nullptr) {
            fail = "create failed";
            return;
        }
        const size_t count = 70000;  // two-shot: steps between the ranks
        std::vector<float> in(count);
        for (size_t i = 0; i < count; ++i) in[i] = value(rank, i);
        void* send = dalloc(count * sizeof(float));
        void* recv[2] = {dalloc(count * sizeof(float)), dalloc(count * sizeof(float))};
        upload(send, in);
        for (int iter = 0; iter < 5; ++iter) {  // all of them: every rank makes every call
            gpucoll_call_t call = sum_allreduce_call(send, recv[0], count);
            reentry::t_call = sum_allreduce_call(send, recv[1], count);
            reentry::t_op = nullptr;
            if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
            reentry::t_comm = rank == 0 ? nullptr : comm;  // the others: from inside the wait
            const int rc = gpucoll_comm_run(comm, &call);
            reentry::t_comm = nullptr;
            if (rank != 0 && reentry::t_op == nullptr && fail.empty())
                fail = "iter " + std::to_string(iter) + ": the wait never called progress";
            reentry::t_comm = comm;
            reentry::start_once();  // rank 0: after its blocking call
            if ((rc != GPUCOLL_SUCCESS || reentry::t_start_rc != 0) && fail.empty())
                fail = "iter " + std::to_string(iter) + ": blocking " + std::to_string(rc) +
                       ", start " + std::to_string(reentry::t_start_rc) + ": " +
                       gpucoll_last_error();
            int done = 0, rc2 = GPUCOLL_SUCCESS;
            while (reentry::t_op != nullptr && !done)
                rc2 = gpucoll_pending_test(reentry::t_op, &done);
            if (reentry::t_op != nullptr) gpucoll_pending_free(reentry::t_op);
            if (rc2 != GPUCOLL_SUCCESS && fail.empty())
                fail = "iter " + std::to_string(iter) + ": nonblocking " + std::to_string(rc2) +
                       ": " + gpucoll_last_error();
            for (int b = 0; b < 2 && fail.empty(); ++b) {
                const std::vector<float> out = download<float>(recv[b], count);
                for (size_t i = 0; i < count && fail.empty(); i += 97) {
                    float want = 0;
                    for (int r = 0; r < n; ++r) want += value(r, i);
                    if (out[i] != want)
                        fail = "iter " + std::to_string(iter) +
                               (b == 0 ? " blocking" : " nonblocking") + ": element " +
                               std::to_string(i) + " = " + std::to_string(out[i]) + ", want " +
                               std::to_string(want);
                }
            }
        }
        bs.barrier(bs.ctx);
        gpucoll_free_device(send);
        for (void* d : recv) gpucoll_free_device(d);
        gpucoll_comm_destroy(comm);
    });
}

// A call queued after a rank failed, which that rank never posts, is left
// in the queue when the communicator is freed (MPI_Comm_free with a request
// outstanding is legal): the caller's handle must then say the call ended,
// with an error, and never touch the freed communicator again.
TEST(IntraFailure, CallLeftQueuedAtTeardownEndsWithAnError) {
    ASSERT_EQ(gpucoll_init_backend("emu"), 0) << gpucoll_last_error();
    on_thread_ranks(2, [&](int rank, gpucoll_bootstrap_t& bs, std::string& fail) {
        gpucoll_comm_config_t cfg;
        gpucoll_comm_config_init(&cfg);
        std::unique_ptr<gpucoll::intra::NodeComm> comm;
        if (gpucoll::intra::NodeComm::create(bs, cfg, &comm) != GPUCOLL_SUCCESS || !comm) {
            fail = std::string("create: ") + gpucoll_last_error();
            return;
        }
        const size_t count = 1000;
        void* d = dalloc(count * sizeof(float));
        std::shared_ptr<gpucoll::intra::NodeComm::Pending> left;
        if (rank == 0) {  // queued: rank 1 never posts it
            std::lock_guard lock(comm->lock());
            left = comm->start(sum_allreduce_call(nullptr, d, count), GPUCOLL_FORM_NONBLOCKING);
            comm->progress();
        }
        bs.barrier(bs.ctx);
        if (rank == 1)  // fails before posting: the abort word is set
            comm->fail(gpucoll::set_error(GPUCOLL_ERR_INTERNAL, "injected by the test"), 1);
        bs.barrier(bs.ctx);
        comm.reset();  // MPI_Comm_free
        if (left != nullptr) {
            if (!left->finished.load(std::memory_order_acquire))
                fail = "the queued call is not finished after its communicator was freed";
            else if (left->status == GPUCOLL_SUCCESS || left->status == GPUCOLL_DECLINED)
                fail = "the queued call ended without an error";
            else if (left->error.empty())
                fail = "the queued call ended with no message";
        }
        gpucoll_free_device(d);
    });
}

namespace {

// gpucoll_comm_host_call, the host-buffer path of every blocking call: a
// rank with host buffers declines and counts in one call; a rank with a
// device buffer is told to take the full path, where it learns that the
// call was declined; without a communicator it only counts.
TEST(IntraAgreement, HostCallDeclinesForHostBuffersOnly) {
    ASSERT_EQ(gpucoll_init_backend("emu"), 0) << gpucoll_last_error();
    gpucoll_counters_reset();
    on_thread_ranks(2, [&](int rank, gpucoll_bootstrap_t& bs, std::string& fail) {
        gpucoll_comm_t* comm = nullptr;
        if (gpucoll_comm_create(&bs, nullptr, &comm) != 0 || comm == nullptr) {
            fail = std::string("comm_create: ") + gpucoll_last_error();
            return;
        }
        const size_t count = 256;
        void* d = dalloc(count * sizeof(float));
        std::vector<float> host(count, 1.0f);
        for (int iter = 0; iter < 100 && fail.empty(); ++iter) {
            const bool host_rank = rank == iter % 2;
            void* buf = host_rank ? static_cast<void*>(host.data()) : d;
            int device = -1;
            const int rc =
                gpucoll_comm_host_call(comm, nullptr, buf, GPUCOLL_COLL_ALLREDUCE, &device);
            if (host_rank) {
                if (rc != GPUCOLL_DECLINED) fail = "host buffers: " + std::to_string(rc);
                continue;
            }
            if (rc != GPUCOLL_SUCCESS || device != 2) {
                fail = "a device buffer was not sent the full way: " + std::to_string(rc) +
                       ", device mask " + std::to_string(device);
                continue;
            }
            gpucoll_call_t call = sum_allreduce_call(nullptr, d, count);
            if (gpucoll_comm_run(comm, &call) != GPUCOLL_DECLINED)
                fail = "the device rank's call was not declined";
        }
        if (fail.empty() &&
            (gpucoll_comm_host_call(nullptr, host.data(), nullptr, GPUCOLL_COLL_BCAST, nullptr) !=
                 GPUCOLL_DECLINED ||
             gpucoll_comm_host_call(nullptr, d, nullptr, GPUCOLL_COLL_BCAST, nullptr) !=
                 GPUCOLL_SUCCESS))
            fail = "without a communicator";
        bs.barrier(bs.ctx);
        gpucoll_free_device(d);
        gpucoll_comm_destroy(comm);
    });
    gpucoll_counters_t c;
    ASSERT_EQ(gpucoll_counters_get(&c), 0);
    EXPECT_EQ(c.calls[GPUCOLL_COLL_ALLREDUCE][GPUCOLL_PATH_DELEGATED], 100u);  // the host ranks'
    EXPECT_EQ(c.calls[GPUCOLL_COLL_BCAST][GPUCOLL_PATH_DELEGATED], 2u);
}

// The host gate (gpucoll_host_gate_call, inline in the component) and the
// core's own decline are one protocol on the same fields: a rank may use
// either, call after call, across many post windows, and a device rank
// still learns of every decline. The gate never posts for a device buffer
// nor while a call is queued, and counts what it declines.
#if !defined(GPUCOLL_THREAD_SANITIZER)  // no gate there (gpucoll_comm_host_gate)
// Host buffers the gate can tell without the core: static storage, below
// every mapping (a thread's heap arena or stack is an mmap, and may lie
// inside the emu device span that earlier tests widened).
float g_gate_host[2][256];
constexpr int kGateCalls = 3072;  // a multiple of 6

// A communicator of the thread-ranks and its gate (NULL where it has none).
bool gate_comm(gpucoll_bootstrap_t& bs, gpucoll_comm_t** comm, gpucoll_host_gate_t** gate,
               std::string& fail) {
    if (gpucoll_comm_create(&bs, nullptr, comm) != 0 || *comm == nullptr) {
        fail = std::string("comm_create: ") + gpucoll_last_error();
        return false;
    }
    *gate = gpucoll_comm_host_gate(*comm, GPUCOLL_HOST_GATE_VERSION, sizeof(gpucoll_host_gate_t));
    return true;
}

TEST(IntraAgreement, HostGateAndCoreDeclineAlike) {
    ASSERT_EQ(gpucoll_init_backend("emu"), 0) << gpucoll_last_error();
    gpucoll_counters_reset();
    std::atomic<int> gate_declines{0};
    on_thread_ranks(2, [&](int rank, gpucoll_bootstrap_t& bs, std::string& fail) {
        gpucoll_comm_t* comm = nullptr;
        gpucoll_host_gate_t* gate = nullptr;
        if (!gate_comm(bs, &comm, &gate, fail)) return;
        const size_t count = 256;
        void* d = dalloc(count * sizeof(float));
        float* host = g_gate_host[rank];
        if (gate == nullptr) fail = "no host gate on emu, one node";
        // Many post windows. Iteration i: rank i % 2 has
        // host buffers except every third call, where both have; the host
        // rank uses the gate on even calls (then the core, where the gate
        // cannot tell), the core on odd ones.
        for (int iter = 0; iter < kGateCalls && fail.empty(); ++iter) {
            const bool host_rank = iter % 3 == 0 || rank == iter % 2;
            if (!host_rank) {
                const uint64_t seq = gate->seq;
                if (gpucoll_host_gate_call(gate, d, nullptr, GPUCOLL_COLL_ALLREDUCE) !=
                        GPUCOLL_SUCCESS ||
                    gate->seq != seq) {
                    fail = "the gate took a device buffer";
                    break;
                }
                gpucoll_call_t call = sum_allreduce_call(nullptr, d, count);
                if (gpucoll_comm_run(comm, &call) != GPUCOLL_DECLINED)
                    fail = "call " + std::to_string(iter) + ": the device rank was not declined";
                continue;
            }
            int rc = GPUCOLL_SUCCESS;
            if (iter % 2 == 0) {
                rc = gpucoll_host_gate_call(gate, host, nullptr, GPUCOLL_COLL_ALLREDUCE);
                if (rc == GPUCOLL_DECLINED) ++gate_declines;
            }
            if (rc == GPUCOLL_SUCCESS)
                rc = gpucoll_comm_host_call(comm, host, nullptr, GPUCOLL_COLL_ALLREDUCE, nullptr);
            if (rc != GPUCOLL_DECLINED)
                fail = "call " + std::to_string(iter) + ": host buffers: " + std::to_string(rc);
        }
        // A queued nonblocking call (rank 0's, on device buffers, waiting
        // for rank 1's post): rank 0's gate leaves host calls to the core
        // until it ended; rank 1 declines that call through its gate.
        gpucoll_pending_t* op = nullptr;
        if (fail.empty() && rank == 0) {
            gpucoll_call_t call = sum_allreduce_call(nullptr, d, count);
            if (gpucoll_comm_start(comm, &call, GPUCOLL_FORM_NONBLOCKING, &op) != GPUCOLL_SUCCESS)
                fail = std::string("start: ") + gpucoll_last_error();
            else if (gpucoll_host_gate_call(gate, host, nullptr, GPUCOLL_COLL_BCAST) !=
                     GPUCOLL_SUCCESS)
                fail = "the gate declined while a call was queued";
        }
        bs.barrier(bs.ctx);
        for (int k = 0; k < 2 && fail.empty() && rank == 1; ++k)  // that call and the next
            if (gpucoll_host_gate_call(gate, host, nullptr, GPUCOLL_COLL_BCAST) != GPUCOLL_DECLINED)
                fail = "rank 1's gate did not decline";
        if (op != nullptr) {
            int done = 0, rc = GPUCOLL_SUCCESS;
            while (rc == GPUCOLL_SUCCESS && !done) rc = gpucoll_pending_test(op, &done);
            if (fail.empty() && rc != GPUCOLL_DECLINED)
                fail = "the queued call was not declined: " + std::to_string(rc);
            gpucoll_pending_free(op);
            if (fail.empty() &&
                gpucoll_host_gate_call(gate, host, nullptr, GPUCOLL_COLL_BCAST) != GPUCOLL_DECLINED)
                fail = "the gate did not decline once the queue was empty";
        }
        bs.barrier(bs.ctx);
        gpucoll_free_device(d);
        gpucoll_comm_destroy(comm);
    });
    EXPECT_GT(gate_declines.load(), kGateCalls / 6);  // a good part of its 2048 tries
    gpucoll_counters_t c;
    ASSERT_EQ(gpucoll_counters_get(&c), 0);
    // Host ranks: every third call both, else one; the bcasts: rank 1's
    // two, rank 0's second.
    EXPECT_EQ(c.calls[GPUCOLL_COLL_ALLREDUCE][GPUCOLL_PATH_DELEGATED],
              static_cast<uint64_t>(kGateCalls / 3 * 2 + kGateCalls / 3 * 2));
    EXPECT_EQ(c.calls[GPUCOLL_COLL_BCAST][GPUCOLL_PATH_DELEGATED], 3u);
    EXPECT_EQ(c.last_coll, GPUCOLL_COLL_BCAST);
    EXPECT_EQ(c.last_path, GPUCOLL_PATH_DELEGATED);
    EXPECT_STREQ(c.last_algorithm, "delegated");
}

// A declined call writes no post, not even a kind word, so it waits for
// nobody: rank 0 declines thousands of calls (many post windows, and more
// than the 1024 calls the window of post kinds once allowed) before rank 1
// makes any, in turn through the gate, the core's lock-free decline, its
// decline() and a nonblocking decline. Then rank 1 reads rank 0's kinds:
// call 1 was accelerated, and the calls that reuse its post slot were
// declined, though the slot still holds call 1's kind word; rank 1's device
// calls there are declined. (A kind read without its call number, or a
// decline that writes one, fails the kind_of checks, made before such a
// call, which would otherwise wait for steps rank 0 never makes.) Last, both
// ranks run one more call on device buffers: rank 0's post of it, far
// ahead, still waits for the post window (rank 1's post of the call 63
// before it); rank 1 looks at rank 0's progress word 50 ms after rank 0
// began that call (a loaded machine may miss a post made too early, never
// fail spuriously).
TEST(IntraAgreement, DeclinesWriteNoPostAndWaitForNobody) {
    using gpucoll::intra::kPostDepth;
    using gpucoll::intra::PostKind;
    using gpucoll::intra::progress_word;
    ASSERT_EQ(gpucoll_init_backend("emu"), 0) << gpucoll_last_error();
    constexpr uint64_t kAhead = 3000;  // calls 2 .. 1 + kAhead: rank 0 declines them first
    std::atomic<bool> ahead{false}, all_declined{false};
    constexpr uint64_t kLast = 2 + kAhead;  // on device buffers, both ranks
    // A decline that waits for rank 1 would wait forever: fail instead.
    reentry::Watchdog watchdog(60, "DeclinesWriteNoPostAndWaitForNobody");
    on_thread_ranks(2, [&](int rank, gpucoll_bootstrap_t& bs, std::string& fail) {
        gpucoll_comm_config_t cfg;
        gpucoll_comm_config_init(&cfg);
        cfg.progress_thread = 0;  // queued calls advance in this thread only
        // Not one-shot: its input goes to a scratch slot, whose reuse waits
        // for the peers' previous call, which would hide the window's wait.
        cfg.algorithm[GPUCOLL_COLL_ALLREDUCE] = GPUCOLL_ALGO_TWO_SHOT;
        std::unique_ptr<gpucoll::intra::NodeComm> comm;
        if (gpucoll::intra::NodeComm::create(bs, cfg, &comm) != GPUCOLL_SUCCESS || !comm) {
            fail = std::string("create: ") + gpucoll_last_error();
            ahead = true;
            return;
        }
        const size_t count = 256;
        void* d = dalloc(count * sizeof(float));
        float* host = g_gate_host[rank];
        gpucoll_call_t call = sum_allreduce_call(nullptr, d, count);
        const int first = comm->run(call);  // call 1, both ranks on device buffers
        if (first != GPUCOLL_SUCCESS)
            fail =
                "call 1 was not accelerated: " + std::to_string(first) + " " + gpucoll_last_error();
        gpucoll_host_gate_t* gate = &comm->host_gate();
        // gpucoll_comm_host_gate sets the process's; a bare NodeComm has none.
        uint64_t last_call = 0;
        gate->last_call = &last_call;
        if (rank == 0) {
            for (uint64_t k = 2; k <= 1 + kAhead; ++k) {
                int rc = GPUCOLL_SUCCESS;
                const char* way = "the gate";
                const uint64_t turn = (k + k / kPostDepth) % 4;  // call 1's slot: each way too
                if (turn == 0) {
                    rc = gpucoll_host_gate_call(gate, host, nullptr, GPUCOLL_COLL_BCAST);
                } else if (turn == 1) {
                    way = "decline_unlocked";
                    if (!comm->decline_unlocked(&rc)) rc = GPUCOLL_SUCCESS;
                } else if (turn == 2) {
                    way = "decline()";
                    rc = comm->decline();
                } else {
                    // Nonblocking: posted at once (the next call finds it ended).
                    way = "start_decline";
                    std::lock_guard lock(comm->lock());
                    comm->start_decline();
                    rc = comm->progress() ? GPUCOLL_DECLINED : GPUCOLL_SUCCESS;
                }
                if (rc == GPUCOLL_DECLINED) continue;
                if (fail.empty())
                    fail = "rank 0's call " + std::to_string(k) + " through " + way +
                           " (rank 1 has made none): " + std::to_string(rc);
                ahead = true;  // the core may wait for rank 1: let it go on
                if (rc == GPUCOLL_SUCCESS) (void)comm->decline();
            }
            all_declined = fail.empty();
            ahead = true;
            const int rc = comm->run(call);
            if (rc != GPUCOLL_SUCCESS && fail.empty())
                fail = "rank 0's last call: " + std::to_string(rc) + " " + gpucoll_last_error();
        } else {
            while (!ahead) std::this_thread::yield();
            bool kinds_right = fail.empty() && all_declined;
            for (uint64_t k : {uint64_t{1}, 1 + kPostDepth, 1 + 2 * kPostDepth, 1 + 3 * kPostDepth,
                               1 + 17 * kPostDepth}) {
                const PostKind want = k == 1 ? PostKind::Accelerate : PostKind::Decline;
                if (comm->kind_of(0, k) != want) {
                    kinds_right = false;
                    if (fail.empty())
                        fail = "rank 0's kind of call " + std::to_string(k) + ": " +
                               std::to_string(static_cast<int>(comm->kind_of(0, k)));
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));  // rank 0 tries kLast
            // Device buffers where rank 0's slot holds call 1's kind word.
            for (uint64_t k = 2; k <= 1 + kAhead; ++k) {
                const uint64_t theirs = comm->segment().slot(0).progress.load();
                if (k == kLast - kPostDepth + 1 && theirs >= progress_word(kLast, 0) &&
                    fail.empty())
                    fail = "rank 0 posted call " + std::to_string(kLast) +
                           " (device buffers) before rank 1 posted call " + std::to_string(k) +
                           ", the post window's";
                const bool device = kinds_right && k % kPostDepth == 1;
                const int rc = device ? comm->run(call) : comm->decline();
                if (rc != GPUCOLL_DECLINED && fail.empty())
                    fail = "rank 1, call " + std::to_string(k) + (device ? " (device)" : "") +
                           ": " + std::to_string(rc);
            }
            const int rc = comm->run(call);
            if (rc != GPUCOLL_SUCCESS && fail.empty())
                fail = "rank 1's last call: " + std::to_string(rc) + " " + gpucoll_last_error();
        }
        bs.barrier(bs.ctx);
        comm.reset();
        gpucoll_free_device(d);
    });
}

// A peer failed the call this rank declines through the gate: an error
// with the core's message, not a decline, and the call is not counted; a
// failure of a later call does not touch this one. A caller built against
// another gpucoll.h gets no gate.
TEST(IntraAgreement, HostGateReportsAPeersFailure) {
    ASSERT_EQ(gpucoll_init_backend("emu"), 0) << gpucoll_last_error();
    gpucoll_counters_reset();
    on_thread_ranks(1, [&](int, gpucoll_bootstrap_t& bs, std::string& fail) {
        gpucoll_comm_t* comm = nullptr;
        gpucoll_host_gate_t* gate = nullptr;
        if (!gate_comm(bs, &comm, &gate, fail)) return;
        float* x = g_gate_host[0];
        if (gate == nullptr) {
            fail = "no host gate";
        } else if (gpucoll_comm_host_gate(comm, GPUCOLL_HOST_GATE_VERSION + 1,
                                          sizeof(gpucoll_host_gate_t)) != nullptr ||
                   gpucoll_comm_host_gate(comm, GPUCOLL_HOST_GATE_VERSION,
                                          sizeof(gpucoll_host_gate_t) + 8) != nullptr) {
            fail = "a gate for a caller built against another gpucoll.h";
        } else {
            // What a failing peer writes (NodeComm::fail): the call it
            // failed, here the second from now. The first is declined.
            __atomic_store_n(const_cast<uint64_t*>(gate->abort), gate->seq + 2, __ATOMIC_RELEASE);
            int rc = gpucoll_host_gate_call(gate, x, nullptr, GPUCOLL_COLL_ALLREDUCE);
            if (rc != GPUCOLL_DECLINED)
                fail = "a failure of a later call read as " + std::to_string(rc);
            rc = gpucoll_host_gate_call(gate, x, nullptr, GPUCOLL_COLL_ALLREDUCE);
            if (fail.empty() && (rc == GPUCOLL_DECLINED || rc == GPUCOLL_SUCCESS)) {
                fail = "a peer's failure read as " + std::to_string(rc);
            } else if (fail.empty() && std::string(gpucoll_last_error()).find("a peer failed") ==
                                           std::string::npos) {
                fail = std::string("message: ") + gpucoll_last_error();
            }
            if (gpucoll_host_gate_call(gate, x, nullptr, static_cast<gpucoll_coll_t>(-1)) !=
                GPUCOLL_SUCCESS)
                fail = "the gate took a collective it cannot count";
        }
        gpucoll_comm_destroy(comm);
    });
    gpucoll_counters_t c;
    ASSERT_EQ(gpucoll_counters_get(&c), 0);
    EXPECT_EQ(c.calls[GPUCOLL_COLL_ALLREDUCE][GPUCOLL_PATH_DELEGATED], 1u);  // the first only
}
#endif

}  // namespace
