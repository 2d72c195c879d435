// thread_bootstrap.h - ranks as threads of one process, for testing the core
// through the bootstrap seam without MPI.
#pragma once

#include <barrier>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "gpucoll.h"

class ThreadGroup {
public:
    explicit ThreadGroup(int size) : size_(size), sync_(size), slots_(size_t(size)) {}

    // Runs body(rank, bootstrap) on size threads and joins them.
    void run(const std::function<void(int, gpucoll_bootstrap_t&)>& body) {
        std::vector<std::thread> threads;
        for (int r = 0; r < size_; ++r)
            threads.emplace_back([this, r, &body] {
                Ctx ctx{this, r};
                gpucoll_bootstrap_t bs{&ctx, r, size_, &ThreadGroup::allgather,
                                       &ThreadGroup::barrier};
                body(r, bs);
            });
        for (auto& t : threads) t.join();
    }

private:
    struct Ctx {
        ThreadGroup* group;
        int rank;
    };
    static int allgather(void* c, const void* send, void* recv, size_t bytes) {
        auto* ctx = static_cast<Ctx*>(c);
        ThreadGroup* g = ctx->group;
        g->slots_[size_t(ctx->rank)].assign(static_cast<const char*>(send),
                                            static_cast<const char*>(send) + bytes);
        g->sync_.arrive_and_wait();
        for (int r = 0; r < g->size_; ++r)
            std::memcpy(static_cast<char*>(recv) + size_t(r) * bytes, g->slots_[size_t(r)].data(),
                        bytes);
        g->sync_.arrive_and_wait();
        return 0;
    }
    static int barrier(void* c) {
        static_cast<Ctx*>(c)->group->sync_.arrive_and_wait();
        return 0;
    }

    int size_;
    std::barrier<> sync_;
    std::vector<std::vector<char>> slots_;
};
