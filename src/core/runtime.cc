#include "core/runtime.h"

#include <algorithm>
#include <cstdlib>

#include "core/lifetime.h"
#include "device/host_page_cache.h"

namespace gpucoll {

Status Runtime::transport(bool thread_multi, const std::string& net_devices,
                          std::shared_ptr<inter::Transport>* out) {
    std::lock_guard<std::mutex> lock(transport_mutex_);
    out->reset();
    if (transports_closed_)
        return set_error(GPUCOLL_ERR_UNSUPPORTED, "the inter-node transport was shut down");
    for (const TransportEntry& e : transports_)
        if (e.net_devices == net_devices) {
            if (e.transport == nullptr)
                return set_error(GPUCOLL_ERR_UNSUPPORTED, "%s", e.error.c_str());
            *out = e.transport;
            return kSuccess;
        }
    if (net_devices.empty())  // no preference: any NIC serves
        for (const TransportEntry& e : transports_)
            if (e.transport != nullptr) {
                *out = e.transport;
                return kSuccess;
            }
    // Another NIC: one more UCX context. Those nobody holds any more stay
    // until gpucoll_finalize: closing one here (forced: no flush) could drop
    // the last sends of a freed communicator that a peer on another node
    // still waits for, and nothing synchronizes this point with them.
    TransportEntry entry{net_devices, nullptr, {}};
    std::unique_ptr<inter::Transport> created;
    if (inter::Transport::create(thread_multi, net_devices, &created) == kSuccess)
        entry.transport = std::move(created);
    else
        entry.error = last_error();
    transports_.push_back(entry);
    if (entry.transport == nullptr)
        return set_error(GPUCOLL_ERR_UNSUPPORTED, "%s", entry.error.c_str());
    *out = entry.transport;
    return kSuccess;
}

size_t Runtime::transports_started() {
    std::lock_guard<std::mutex> lock(transport_mutex_);
    return static_cast<size_t>(
        std::count_if(transports_.begin(), transports_.end(),
                      [](const TransportEntry& e) { return e.transport != nullptr; }));
}

void Runtime::release_transport() {
    std::lock_guard<std::mutex> lock(transport_mutex_);
    transports_.clear();
    transports_closed_ = true;
}

std::string backend_from_environment() {
    for (const char* var : {"GPUCOLL_DEVICE", "OMPI_MCA_coll_gpucoll_device"}) {
        const char* v = std::getenv(var);
        if (v != nullptr && *v != '\0') return v;
    }
    return "auto";
}

Status Runtime::init(const char* requested) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string want = requested != nullptr ? requested : backend_from_environment();
    if (want != "auto" && want != "cuda" && want != "emu")
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "unknown gpucoll device backend '%s': use auto, cuda or emu",
                         want.c_str());
    if (initialised_.load(std::memory_order_relaxed)) {
        const std::string active = device_ ? device_->name() : "none";
        // "auto" defers to whatever this process already uses; a name must match.
        if (want == "auto" || want == requested_ || want == active) return kSuccess;
        return set_error(GPUCOLL_ERR_BACKEND_CONFLICT,
                         "gpucoll backend '%s' requested, but this process already uses '%s' "
                         "(chosen as '%s'). Set the same value in GPUCOLL_DEVICE for the "
                         "application and coll_gpucoll_device for the component.",
                         want.c_str(), active.c_str(), requested_.c_str());
    }
    Status s = choose(want);
    if (s != kSuccess) return s;
    if (device_ != nullptr) lifetime::note_device_active();
    requested_ = want;
    initialised_.store(true, std::memory_order_release);
    return kSuccess;
}

Status Runtime::choose(const std::string& want) {
    // A backend that asks its driver about host pointers (cuda) remembers
    // the pages it was told are host memory while UCX reports the unmaps.
    host_page_cache::set_watcher({&inter::watch_unmaps, &inter::unmaps_still_reported});
    if (want == "emu") {
        device_ = make_emu_device();
        if (!device_) return GPUCOLL_ERR_SYSTEM;  // make_emu_device set the message
    } else if (want == "cuda") {
        device_ = make_cuda_device();
        if (!device_) return GPUCOLL_ERR_NO_BACKEND;
    } else if (cuda_device_present()) {  // auto
        device_ = make_cuda_device();
        if (!device_) return GPUCOLL_ERR_NO_BACKEND;
    }
    // auto without a GPU: no device, every pointer is host memory.
    return kSuccess;
}

const char* Runtime::backend_name() {
    Device* d = device();
    return d != nullptr ? d->name() : "none";
}

}  // namespace gpucoll
