// A peer between nodes that is lost in the middle of a call (its link or
// node down, the process stopped, gone): the waits of the path between nodes
// end, with a message naming the rank and its host, and a late peer is not
// taken for a lost one. Two forked ranks, each with a UCX transport over
// tcp loopback and a group of the two, on the emu device.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "config.h"
#include "core/runtime.h"
#include "fork_bootstrap.h"
#include "gpucoll.h"
#include "inter/group.h"
#include "inter/transport.h"
#include "inter_helpers.h"

namespace {

using namespace gpucoll::inter;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

// A group of both ranks, members on hosts "host-a" and "host-b".
struct PairGroup {
    TransportPair pair;
    std::unique_ptr<Group> group;

    int open(int rank, gpucoll_bootstrap_t& bs, double peer_timeout_s) {
        if (gpucoll_init_backend("emu") != 0) return 99;
        if (const int rc = pair.open(rank, bs); rc != 0) return rc;
        GroupConfig config;
        config.peer_timeout_s = peer_timeout_s;
        config.member_ranks = {0, 1};
        config.member_hosts = {"host-a", "host-b"};
        std::vector<Endpoint*> members(2, nullptr);
        members[static_cast<size_t>(1 - rank)] = pair.peer;
        group = std::make_unique<Group>(pair.t.get(), gpucoll::Runtime::instance().device(),
                                        members, rank, /*comm_id=*/7, config, nullptr);
        if (group->start() != GPUCOLL_SUCCESS) return 103;
        // One exchange wires the endpoints up (and says both are there).
        uint32_t mine = 1, all[2] = {};
        if (group->exchange_host(0, kHelloStep, &mine, sizeof mine, all, 30.0) != GPUCOLL_SUCCESS)
            return 104;
        return 0;
    }

    // One data step of call seq: 64 bytes each way.
    int data_step(uint64_t seq, int rank, std::vector<char>* out, std::vector<char>* in) {
        const int peer = 1 - rank;
        return group->transfer(seq, /*step=*/0, {{peer, out->data(), out->size(), true}},
                               {{peer, in->data(), in->size(), false, true}}, GPUCOLL_BYTE,
                               GPUCOLL_OP_BOR);
    }
};

// Rank 1 is in the call (it passed the hello) and sends nothing for longer
// than the peer timeout: rank 0's data step fails after about that long,
// naming rank 1 and its host. At a verdict (the wait for a peer to enter a
// call), a peer later than the timeout is given up too (gpucoll cannot tell
// it from a lost one), one late by less is waited for.
int run_rank_silent_peer(int rank, gpucoll_bootstrap_t& bs) {
    Checker k{rank};
    PairGroup g;
    if (const int rc = g.open(rank, bs, /*peer_timeout_s=*/0.5); rc != 0) return rc;
    std::vector<char> out(64, static_cast<char>(rank + 1)), in(64, 0);
    if (rank == 0) {
        auto t0 = Clock::now();
        const int rc = g.data_step(1, rank, &out, &in);
        const double took = seconds_since(t0);
        const std::string why = gpucoll_last_error();
        k.check(rc != GPUCOLL_SUCCESS, "%s", "a data step with a silent peer succeeded");
        k.check(took >= 0.5 && took < 10, "%s",
                "the silent peer was given up after " + std::to_string(took) + " s, not 0.5");
        k.check(why.find("rank 1 on host host-b is unreachable") != std::string::npos &&
                    why.find("coll_gpucoll_peer_timeout") != std::string::npos,
                "the message names neither the rank and host nor the parameter: %s", why);
    }
    bs.barrier(bs.ctx);  // rank 1 stays silent until rank 0 gave up
    // A verdict 2 s late: given up, saying that it did not enter the call.
    uint32_t mine = static_cast<uint32_t>(rank + 10), all[2] = {};
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2000));
    int rc = g.group->exchange_host(2, kVerdictStep, &mine, sizeof mine, all);
    if (rank == 0) {
        const std::string why = gpucoll_last_error();
        k.check(rc != GPUCOLL_SUCCESS &&
                    why.find("rank 1 on host host-b is unreachable: it did not enter the call") !=
                        std::string::npos,
                "a verdict 2 s late (timeout 0.5 s) was not given up as not entering: %s", why);
    } else {  // rank 0's verdict was there when rank 1 came
        k.check(rc == GPUCOLL_SUCCESS && all[0] == 10, "%s",
                std::string("the late rank did not get the verdict: ") + gpucoll_last_error());
    }
    bs.barrier(bs.ctx);
    // A verdict 0.1 s late: waited for.
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    rc = g.group->exchange_host(3, kVerdictStep, &mine, sizeof mine, all);
    k.check(
        rc == GPUCOLL_SUCCESS && all[1 - rank] == static_cast<uint32_t>(11 - rank), "%s",
        std::string("a verdict 0.1 s late (timeout 0.5 s) was given up: ") + gpucoll_last_error());
    bs.barrier(bs.ctx);
    return k.failures;
}

// Rank 1's process ends in the middle of the call (killed, its node gone):
// UCX reports its connection failed, and rank 0's data step fails at once,
// with no peer timeout at all (0: wait for ever).
int run_rank_gone_peer(int rank, gpucoll_bootstrap_t& bs) {
    Checker k{rank};
    PairGroup g;
    if (const int rc = g.open(rank, bs, /*peer_timeout_s=*/0); rc != 0) return rc;
    bs.barrier(bs.ctx);
    if (rank == 1) _exit(0);  // no goodbye: as SIGKILL
    std::vector<char> out(64, 1), in(64, 0);
    auto t0 = Clock::now();
    const int rc = g.data_step(1, rank, &out, &in);
    const double took = seconds_since(t0);
    const std::string why = gpucoll_last_error();
    k.check(rc != GPUCOLL_SUCCESS, "%s", "a data step with a gone peer succeeded");
    k.check(took < 20, "%s", "the gone peer was noticed after " + std::to_string(took) + " s");
    k.check(why.find("rank 1 on host host-b is unreachable") != std::string::npos &&
                why.find("UCX reports its connection failed") != std::string::npos,
            "the message does not say that UCX lost rank 1 on host-b: %s", why);
    return k.failures;
}

}  // namespace

TEST(PeerLoss, SilentPeerTimesOutSlightlyLatePeerDoesNot) {
#ifndef GPUCOLL_HAVE_UCX
    GTEST_SKIP() << "built without UCX";
#endif
    use_tcp_loopback();
    const int failed = ForkGroup::run(2, 60, run_rank_silent_peer);
    EXPECT_EQ(failed, 0) << failed << " rank(s) failed (their output above)";
}

TEST(PeerLoss, GonePeerFailsTheWaitAtOnce) {
#ifndef GPUCOLL_HAVE_UCX
    GTEST_SKIP() << "built without UCX";
#endif
    use_tcp_loopback();
    const int failed = ForkGroup::run(2, 60, run_rank_gone_peer);
    EXPECT_EQ(failed, 0) << failed << " rank(s) failed (their output above)";
}
