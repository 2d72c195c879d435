// runtime.h - the process-wide state of libgpucoll: the chosen device
// backend and what hangs off it (staging buffers). One per process, so that
// the component and the application always see the same backend.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/immortal.h"
#include "core/staging.h"
#include "device/device.h"
#include "inter/transport.h"
#include "intra/ipc_cache.h"

namespace gpucoll {

class Runtime {
public:
    // Never destroyed (Immortal): a call from an atexit handler or a global
    // destructor, after exit-time destruction, still finds it whole; the
    // device's memory, mappings and pinned buffers go with the process.
    static Runtime& instance() {  // inline: every host-buffer call asks for the device
        static Immortal<Runtime> runtime;
        return *runtime;
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
    // An inter-node transport on net_devices (UCX_NET_DEVICES; "": UCX's
    // choice, which any transport already started serves), shared by the
    // communicators that ask for the same one (thread_multi:
    // MPI_THREAD_MULTIPLE; the first start decides): one per NIC asked for,
    // kept until release_transport (a process set up before choosing its
    // GPU, then again on its GPU's NIC, has two). A failure to start is
    // remembered per NIC: later communicators get the same answer at once.
    Status transport(bool thread_multi, const std::string& net_devices,
                     std::shared_ptr<inter::Transport>* out);
    // How many transports are started (tests, verbose output).
    size_t transports_started();
    // Closes the transports' endpoints and workers (gpucoll_finalize): before
    // the job's own network shuts down, never from a static destructor. A
    // communicator still holding one keeps it until it is freed.
    void release_transport();

private:
    friend class Immortal<Runtime>;
    Runtime() = default;
    ~Runtime() = delete;  // see instance()
    Status choose(const std::string& requested);

    std::mutex mutex_;
    std::atomic<bool> initialised_{false};
    std::string requested_;  // what the first successful init asked for
    std::unique_ptr<Device> device_;
    StagingPool staging_;
    intra::IpcCache ipc_cache_;
    struct TransportEntry {
        std::string net_devices;
        std::shared_ptr<inter::Transport> transport;  // nullptr: failed (error)
        std::string error;
    };
    std::mutex transport_mutex_;
    std::vector<TransportEntry> transports_;
    bool transports_closed_ = false;  // gpucoll_finalize ran
};

// The environment's choice: GPUCOLL_DEVICE, then OMPI_MCA_coll_gpucoll_device, else "auto".
std::string backend_from_environment();

}  // namespace gpucoll
