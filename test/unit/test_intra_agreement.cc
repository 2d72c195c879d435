// The agreement of the intra-node path through the bootstrap seam (ranks
// are threads of this process sharing the emu device): when one rank cannot
// take the accelerated path, all decline; host calls decline without
// waiting; a root outside the communicator fails the call; the bound on
// communicators with an accelerated path (max_comms).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "calls.h"
#include "common/status.h"
#include "device/device.h"
#include "gpucoll.h"
#include "intra/node_comm.h"
#include "intra/shared_segment.h"
#include "intra_helpers.h"

namespace {

using intra_test::dalloc;
using intra_test::download;
using intra_test::on_thread_ranks;
using intra_test::upload;
using intra_test::value;

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
    intra_test::Watchdog watchdog(60, "DeclinesWriteNoPostAndWaitForNobody");
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

// max_comms: a communicator created while a rank's process already holds
// that many with an accelerated path gets none (every rank agrees: the
// counts travel in the setup's exchange); freeing one makes room. Ranks are
// threads of one process here, so its count holds both ranks'.
TEST(IntraAgreement, BoundOnCommunicatorsWithAnAcceleratedPath) {
    ASSERT_EQ(gpucoll_init_backend("emu"), 0);
    on_thread_ranks(2, [&](int, gpucoll_bootstrap_t& bs, std::string& fail) {
        gpucoll_comm_config_t cfg;
        gpucoll_comm_config_init(&cfg);
        cfg.max_comms = 2;
        gpucoll_comm_t* first = nullptr;
        gpucoll_comm_t* beyond = nullptr;
        gpucoll_comm_t* after = nullptr;
        if (gpucoll_comm_create(&bs, &cfg, &first) != 0 || first == nullptr) {
            fail = std::string("first: ") + gpucoll_last_error();
            return;
        }
        // Both ranks' communicators count: the process holds 2, the bound.
        if (gpucoll_comm_create(&bs, &cfg, &beyond) != 0) fail = "beyond: create failed";
        if (beyond != nullptr) fail = "a communicator beyond the bound has an accelerated path";
        gpucoll_comm_destroy(beyond);
        bs.barrier(bs.ctx);
        gpucoll_comm_destroy(first);
        bs.barrier(bs.ctx);
        if (gpucoll_comm_create(&bs, &cfg, &after) != 0 || after == nullptr)
            fail = "no accelerated path after the others were freed";
        bs.barrier(bs.ctx);
        gpucoll_comm_destroy(after);
    });
}

}  // namespace
