#include "device/emu/emu_stream.h"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace gpucoll {

bool EmuStream::inline_requested_by_environment() {
    const char* value = std::getenv("GPUCOLL_EMU_INLINE_STREAMS");
    return value != nullptr && std::strcmp(value, "1") == 0;
}

EmuStream::EmuStream(bool run_inline, int device) : run_inline_(run_inline), device_(device) {
    if (!run_inline_) worker_ = std::thread([this] { worker_loop(); });
}

EmuStream::~EmuStream() {
    if (!worker_.joinable()) return;
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    work_ready_.notify_one();
    worker_.join();
}

void EmuStream::enqueue(Work work) {
    if (run_inline_) {
        run(work);
        return;
    }
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(work));
    }
    work_ready_.notify_one();
}

void EmuStream::run(Work& work) {
    // Like a CUDA stream after a failed operation (a sticky error): the work
    // queued behind it does not run (a flag write there would tell the peers
    // that a step succeeded) until synchronize() has reported the failure.
    if (failed_.load(std::memory_order_acquire)) return;
    const Status s = work();
    if (s == kSuccess) return;
    std::lock_guard lock(mutex_);
    if (first_error_ == kSuccess) {
        first_error_ = s;
        first_error_message_ = last_error();
    }
    failed_.store(true, std::memory_order_release);
}

void EmuStream::worker_loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
        work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and everything enqueued has run
        Work work = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
        lock.unlock();
        run(work);
        lock.lock();
        busy_ = false;
        if (queue_.empty()) idle_.notify_all();
    }
}

Status EmuStream::query(bool* complete) {
    std::lock_guard lock(mutex_);
    *complete = queue_.empty() && !busy_;
    return kSuccess;
}

Status EmuStream::mark(uint64_t* ticket) {
    while (next_ticket_ - reached_ticket_.load(std::memory_order_acquire) > kMaxMarks)
        std::this_thread::yield();  // bounded like the cuda backend's events
    const uint64_t t = next_ticket_++;
    enqueue([this, t] {
        // Like a CUDA event behind failed work: never reached.
        if (!failed_.load(std::memory_order_acquire))
            reached_ticket_.store(t, std::memory_order_release);
        return kSuccess;
    });
    *ticket = t;
    return kSuccess;
}

Status EmuStream::reached(uint64_t ticket, bool* done) {
    *done = reached_ticket_.load(std::memory_order_acquire) >= ticket;
    if (*done || !failed_.load(std::memory_order_acquire)) return kSuccess;
    std::lock_guard lock(mutex_);
    return set_error(first_error_, "%s", first_error_message_.c_str());
}

Status EmuStream::synchronize() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
    const Status s = std::exchange(first_error_, kSuccess);
    failed_.store(false, std::memory_order_release);
    if (s != kSuccess) set_error(s, "%s", first_error_message_.c_str());
    first_error_message_.clear();
    return s;
}

}  // namespace gpucoll
