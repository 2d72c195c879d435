// inter_helpers.h - what the tests of the path between nodes share: a
// per-rank checker, UCX over tcp loopback, and a pair of forked ranks with
// a transport each, connected to the other.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gpucoll.h"
#include "inter/transport.h"

namespace {

// Everything one rank checks; the number of failures is its exit status.
struct Checker {
    int rank, failures = 0;
    void check(bool ok, const char* fmt, const std::string& what)
        __attribute__((format(printf, 3, 0))) {
        if (ok) return;
        ++failures;
        char line[512];
        std::snprintf(line, sizeof line, fmt, what.c_str());
        std::fprintf(stderr, "[rank %d] %s\n", rank, line);  // one write: ranks interleave
    }
};

void use_tcp_loopback() {
    setenv("UCX_TLS", "tcp,self", 1);
    setenv("UCX_NET_DEVICES", "lo", 1);
    setenv("UCX_WARN_UNUSED_ENV_VARS", "n", 1);
}

// Two forked ranks, each with a transport over tcp loopback connected to
// the other.
struct TransportPair {
    std::unique_ptr<gpucoll::inter::Transport> t;
    gpucoll::inter::Endpoint* peer = nullptr;

    // 0, or the exit status that says what failed.
    int open(int rank, gpucoll_bootstrap_t& bs) {
        using gpucoll::inter::Transport;
        if (Transport::create(false, "lo", &t) != GPUCOLL_SUCCESS) {
            std::fprintf(stderr, "[rank %d] transport: %s\n", rank, gpucoll_last_error());
            return 100;
        }
        const std::vector<uint8_t>& mine = t->address();
        std::vector<uint8_t> all(2 * 4096, 0);
        if (mine.size() > 4096) return 101;
        std::vector<uint8_t> padded(4096, 0);
        std::copy(mine.begin(), mine.end(), padded.begin());
        bs.allgather(bs.ctx, padded.data(), all.data(), padded.size());
        if (t->connect(all.data() + size_t(1 - rank) * 4096, 4096, &peer) != GPUCOLL_SUCCESS) {
            std::fprintf(stderr, "[rank %d] connect: %s\n", rank, gpucoll_last_error());
            return 102;
        }
        return 0;
    }

    // Waits for req, progressing the worker (the sender's side of a
    // rendezvous moves only then): GPUCOLL_SUCCESS once done, or the error.
    int finish(gpucoll::inter::Request& req) {
        bool done = false;
        for (long i = 0; i < 20000000; ++i) {
            t->progress();
            if (const int rc = t->test(&req, &done); rc != GPUCOLL_SUCCESS || done) return rc;
        }
        return GPUCOLL_ERR_INTERNAL;
    }
};

}  // namespace
