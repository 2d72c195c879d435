#include "device/emu/emu_stream.h"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace gpucoll {

bool EmuStream::inline_requested_by_environment() {
    const char* value = std::getenv("GPUCOLL_EMU_INLINE_STREAMS");
    return value != nullptr && std::strcmp(value, "1") == 0;
}

EmuStream::EmuStream(bool run_inline) : run_inline_(run_inline) {
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
    const Status s = work();
    if (s == kSuccess) return;
    std::lock_guard lock(mutex_);
    if (first_error_ == kSuccess) {
        first_error_ = s;
        first_error_message_ = last_error();
    }
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

Status EmuStream::synchronize() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
    const Status s = std::exchange(first_error_, kSuccess);
    if (s != kSuccess) set_error(s, "%s", first_error_message_.c_str());
    first_error_message_.clear();
    return s;
}

}  // namespace gpucoll
