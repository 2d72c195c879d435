// The intra-node algorithms through the bootstrap seam: ranks are threads of
// this process sharing the emu device. Every algorithm of every collective,
// against a host reference, at 1..4 ranks, in place and not; nonblocking
// calls with the progress thread, plans, timing, failures in the middle of a
// call (the agreement: test_intra_agreement.cc).
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
#include "intra_helpers.h"
#include "thread_bootstrap.h"

namespace {

using intra_test::dalloc;
using intra_test::download;
using intra_test::on_thread_ranks;
using intra_test::upload;
using intra_test::value;

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
    const intra_test::Watchdog watchdog(60, "IntraReentry");
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

namespace {}  // namespace
