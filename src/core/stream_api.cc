// stream_api.cc - the C interface of application streams and stream-ordered
// communicators (gpucoll.h, "Streams and stream-ordered collectives"), and
// the registry of communicators by key.
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/immortal.h"
#include "core/lifetime.h"
#include "core/runtime.h"
#include "gpucoll.h"
#include "stream/stream_comm.h"

using gpucoll::Device;
using gpucoll::Runtime;
using gpucoll::set_error;
namespace lifetime = gpucoll::lifetime;

struct gpucoll_stream_comm {
    std::unique_ptr<gpucoll::stream::StreamComm> impl;
};

namespace {

struct KeyRegistry {
    std::mutex mutex;
    std::unordered_map<uint64_t, gpucoll_comm_t*> comms;
};

KeyRegistry& keys() {
    static gpucoll::Immortal<KeyRegistry> registry;
    return *registry;
}

int with_stream(void* native, const char* what, std::shared_ptr<gpucoll::Stream>* out) {
    if (lifetime::forked_child()) return lifetime::refuse(what);
    Device* d = Runtime::instance().device();
    if (d == nullptr)
        return set_error(GPUCOLL_ERR_NO_BACKEND, "%s: no device backend is active", what);
    if (native == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "%s: stream is NULL", what);
    return d->borrow_stream(native, out);
}

// Why the component's communicator under key cannot serve stream-ordered
// calls ("" when it can).
std::string component_reason(uint64_t key) {
    if (key == 0) return "";
    std::lock_guard lock(keys().mutex);
    auto it = keys().comms.find(key);
    if (it == keys().comms.end())
        return "gpucoll's component does not accelerate this communicator (is it loaded, with "
               "coll_gpucoll_device cuda or emu, and not excluded by --mca coll?)";
    if (!gpucoll_comm_single_node(it->second))
        return "the communicator spans nodes: stream-ordered calls between nodes are not "
               "implemented yet; use the blocking or nonblocking form after synchronising the "
               "stream";
    return "";
}

}  // namespace

extern "C" {

int gpucoll_stream_create(void** stream) {
    if (stream == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_stream_create: stream is NULL");
    *stream = nullptr;
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_stream_create");
    Device* d = Runtime::instance().device();
    if (d == nullptr)
        return set_error(GPUCOLL_ERR_NO_BACKEND, "gpucoll_stream_create: no device backend");
    return d->create_native_stream(stream);
}

int gpucoll_stream_destroy(void* stream) {
    if (stream == nullptr) return GPUCOLL_SUCCESS;
    Device* d = Runtime::instance().device();
    if (d == nullptr)
        return set_error(GPUCOLL_ERR_NO_BACKEND, "gpucoll_stream_destroy: no device backend");
    return d->destroy_native_stream(stream);
}

int gpucoll_stream_synchronize(void* stream) {
    std::shared_ptr<gpucoll::Stream> s;
    if (int rc = with_stream(stream, "gpucoll_stream_synchronize", &s)) return rc;
    return s->synchronize();
}

int gpucoll_memcpy_async(void* dst, const void* src, size_t bytes, void* stream) {
    std::shared_ptr<gpucoll::Stream> s;
    if (int rc = with_stream(stream, "gpucoll_memcpy_async", &s)) return rc;
    return Runtime::instance().device()->memcpy(dst, src, bytes, s.get());
}

int gpucoll_stream_wait_host(void* stream, const uint32_t* word, uint32_t value) {
    std::shared_ptr<gpucoll::Stream> s;
    if (int rc = with_stream(stream, "gpucoll_stream_wait_host", &s)) return rc;
    return Runtime::instance().device()->hold_stream(word, value, s.get());
}

void gpucoll_comm_register_key(uint64_t key, gpucoll_comm_t* comm) {
    if (key == 0 || comm == nullptr) return;
    std::lock_guard lock(keys().mutex);
    keys().comms[key] = comm;
}

void gpucoll_comm_forget_key(uint64_t key) {
    std::lock_guard lock(keys().mutex);
    keys().comms.erase(key);
}

int gpucoll_stream_comm_create(const gpucoll_bootstrap_t* bootstrap, uint64_t key, void* stream,
                               gpucoll_stream_comm_t** out) {
    if (bootstrap == nullptr || out == nullptr || bootstrap->allgather == nullptr ||
        bootstrap->size < 1 || bootstrap->rank < 0 || bootstrap->rank >= bootstrap->size)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_stream_comm_create: bad arguments");
    *out = nullptr;
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_stream_comm_create");
    auto sc = std::make_unique<gpucoll_stream_comm>();
    if (int rc = gpucoll::stream::StreamComm::create(*bootstrap, component_reason(key), stream,
                                                     &sc->impl))
        return rc;
    *out = sc.release();
    return GPUCOLL_SUCCESS;
}

void gpucoll_stream_comm_destroy(gpucoll_stream_comm_t* comm) {
    std::unique_ptr<gpucoll_stream_comm> owned(comm);
}

int gpucoll_stream_comm_enqueue(gpucoll_stream_comm_t* comm, const gpucoll_call_t* call) {
    if (comm == nullptr || call == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_stream_comm_enqueue: NULL argument");
    return comm->impl->enqueue(*call);
}

int gpucoll_stream_comm_status(gpucoll_stream_comm_t* comm) {
    if (comm == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_stream_comm_status: NULL argument");
    return comm->impl->status();
}

}  // extern "C"
