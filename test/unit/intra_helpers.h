// intra_helpers.h - what the intra-node unit tests share: device buffers of
// the emu backend, and ranks as threads of this process (thread_bootstrap.h)
// with a failure message each.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpucoll.h"
#include "thread_bootstrap.h"

namespace intra_test {

inline void* dalloc(size_t bytes, bool pool = false) {
    void* p = nullptr;
    EXPECT_EQ(pool ? gpucoll_malloc_device_pool(&p, bytes) : gpucoll_malloc_device(&p, bytes), 0)
        << gpucoll_last_error();
    return p;
}
template <typename T>
inline void upload(void* d, const std::vector<T>& h) {
    ASSERT_EQ(gpucoll_memcpy(d, h.data(), h.size() * sizeof(T)), 0);
}
template <typename T>
inline std::vector<T> download(const void* d, size_t n) {
    std::vector<T> h(n);
    EXPECT_EQ(gpucoll_memcpy(h.data(), d, n * sizeof(T)), 0);
    return h;
}
// Rank r's input element i: small integers, exact in float.
inline float value(int r, size_t i) { return float((i * 7 + size_t(r) * 3) % 23) - 11.0f; }

// Runs body(rank, bootstrap, fail) on n thread-ranks; a rank reports a
// failure by setting fail, and every rank's is expected empty.
template <typename Body>
inline void on_thread_ranks(int n, Body body) {
    ThreadGroup group(n);
    std::vector<std::string> failures(static_cast<size_t>(n));
    group.run([&](int rank, gpucoll_bootstrap_t& bs) { body(rank, bs, failures[size_t(rank)]); });
    for (int r = 0; r < n; ++r) EXPECT_EQ(failures[size_t(r)], "") << "rank " << r;
}

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

}  // namespace intra_test
