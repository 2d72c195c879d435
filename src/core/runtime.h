// runtime.h - the process-wide state of libgpucoll: the chosen device
// backend and what hangs off it (staging buffers). One per process, so that
// the component and the application always see the same backend.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "core/staging.h"
#include "device/device.h"
#include "inter/transport.h"
#include "intra/ipc_cache.h"

namespace gpucoll {

class Runtime {
public:
    static Runtime& instance() {  // inline: every host-buffer call asks for the device
        static Runtime runtime;
        return runtime;
    }

    // Chooses the backend ("auto", "cuda", "emu"; nullptr: from the
    // environment). Idempotent; a different choice after the first one fails
    // with GPUCOLL_ERR_BACKEND_CONFLICT.
    Status init(const char* requested);

    // The active device, or nullptr for backend "none". Initialises from the
    // environment on first use. Cheap after the first call.
    Device* device() {
        if (initialised_.load(std::memory_order_acquire)) return device_.get();
        init(nullptr);
        return device_.get();
    }
    // "cuda", "emu" or "none"; "none" also while a failed init left nothing.
    const char* backend_name();

    StagingPool& staging() { return staging_; }
    intra::IpcCache& ipc_cache() { return ipc_cache_; }
    // The inter-node transport, started by the first communicator that spans
    // nodes (thread_multi: MPI_THREAD_MULTIPLE). A failure to start is
    // remembered: later communicators get the same answer at once.
    // net_devices: UCX_NET_DEVICES for it ("": UCX's choice); the first call decides.
    Status transport(bool thread_multi, const std::string& net_devices, inter::Transport** out);
    // Closes the transport's endpoints and worker (gpucoll_finalize): before
    // the job's own network shuts down, never from a static destructor.
    void release_transport();

private:
    Runtime() = default;
    ~Runtime();
    Status choose(const std::string& requested);

    std::mutex mutex_;
    std::atomic<bool> initialised_{false};
    std::string requested_;  // what the first successful init asked for
    std::unique_ptr<Device> device_;
    // Declared after device_: destroyed first.
    StagingPool staging_;
    intra::IpcCache ipc_cache_;
    std::mutex transport_mutex_;
    std::unique_ptr<inter::Transport> transport_;
    bool transport_tried_ = false;
    std::string transport_error_;
};

// The environment's choice: GPUCOLL_DEVICE, then OMPI_MCA_coll_gpucoll_device, else "auto".
std::string backend_from_environment();

}  // namespace gpucoll
