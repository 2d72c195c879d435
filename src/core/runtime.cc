#include "core/runtime.h"

#include <cstdlib>

namespace gpucoll {

Runtime::~Runtime() {
    ipc_cache_.clear();
    staging_.release();
    // UCX may already be torn down by its own destructors at this point:
    // a transport still open is left to the exit.
    (void)transport_.release();
}

Status Runtime::transport(bool thread_multi, const std::string& net_devices,
                          inter::Transport** out) {
    std::lock_guard<std::mutex> lock(transport_mutex_);
    if (!transport_tried_) {
        transport_tried_ = true;
        if (inter::Transport::create(thread_multi, net_devices, &transport_) != kSuccess)
            transport_error_ = last_error();
    }
    *out = transport_.get();
    if (transport_ == nullptr)
        return set_error(GPUCOLL_ERR_UNSUPPORTED, "%s", transport_error_.c_str());
    return kSuccess;
}

void Runtime::release_transport() {
    std::lock_guard<std::mutex> lock(transport_mutex_);
    if (transport_ != nullptr) transport_error_ = "the inter-node transport was shut down";
    transport_.reset();
    transport_tried_ = true;
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
    requested_ = want;
    initialised_.store(true, std::memory_order_release);
    return kSuccess;
}

Status Runtime::choose(const std::string& want) {
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
