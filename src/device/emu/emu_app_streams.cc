// emu_app_streams.cc - the emulated device's streams for applications
// (gpucoll_stream_create): what a cudaStream_t is on a GPU. The device keeps
// them by the handle the application holds; a stream-ordered communicator
// borrows one (shared ownership, so a stream destroyed by the application
// while a communicator still uses it lives until the communicator is gone).
#include <atomic>
#include <thread>

#include "device/emu/emu_device.h"

namespace gpucoll {

Status EmuDevice::create_native_stream(void** native) {
    if (native == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_stream_create: stream is NULL");
    // Always on a worker thread: an inline stream would run a held stream's
    // wait at enqueue time, in the application's thread.
    auto stream = std::make_shared<EmuStream>(false, use_device());
    *native = stream.get();
    std::lock_guard lock(app_streams_mutex_);
    app_streams_.emplace(*native, std::move(stream));
    return kSuccess;
}

Status EmuDevice::destroy_native_stream(void* native) {
    std::shared_ptr<EmuStream> stream;
    {
        std::lock_guard lock(app_streams_mutex_);
        auto it = app_streams_.find(native);
        if (it == app_streams_.end())
            return set_error(GPUCOLL_ERR_INVALID_ARG,
                             "gpucoll_stream_destroy: %p is not a stream of the emu device",
                             native);
        stream = std::move(it->second);
        app_streams_.erase(it);
    }
    // As cudaStreamDestroy: the work enqueued runs to its end (the worker
    // finishes the queue when the last owner lets go).
    return kSuccess;
}

Status EmuDevice::borrow_stream(void* native, std::shared_ptr<Stream>* out) {
    std::lock_guard lock(app_streams_mutex_);
    auto it = app_streams_.find(native);
    if (it == app_streams_.end())
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "the stream %p was not made by gpucoll_stream_create: on the emulated "
                         "device a stream-ordered communicator takes only those",
                         native);
    *out = it->second;
    return kSuccess;
}

Status EmuDevice::hold_stream(const uint32_t* word, uint32_t value, Stream* stream) {
    auto* emu_stream = dynamic_cast<EmuStream*>(stream);
    if (emu_stream == nullptr || word == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "gpucoll_stream_wait_host: not an emu stream, or no word");
    emu_stream->enqueue([word, value] {
        std::atomic_ref<uint32_t> w(*const_cast<uint32_t*>(word));
        while (w.load(std::memory_order_acquire) < value) std::this_thread::yield();
        return kSuccess;
    });
    return kSuccess;
}

}  // namespace gpucoll
