// ucx_transport.cc - the Transport on UCX's tag API (see transport.h and
// ../shared/notes/ucx-facts.md: the memory type is declared on every
// operation, device pointers reach UCX only when it reports CUDA support,
// and the worker is never progressed from inside a UCX callback).
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <ucm/api/ucm.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "inter/transport.h"

namespace gpucoll::inter {

class Endpoint {
public:
    ucp_ep_h ep = nullptr;
    // UCX reported the peer unreachable (its operations fail); set from
    // whichever thread progresses the worker.
    std::atomic<bool> failed{false};
};

struct Transport::Impl {
    ucp_context_h context = nullptr;
    ucp_worker_h worker = nullptr;
    int efd = -1;  // the worker's event fd (wakeup), -1 if unavailable
    std::vector<uint8_t> address;
    bool cuda = false;
    std::string description;
    std::mutex mutex;  // the endpoint map (the worker itself is UCX's to lock)
    std::map<std::vector<uint8_t>, std::unique_ptr<Endpoint>> endpoints;

    ~Impl() {
        // Endpoints first, forced: a peer may be gone (peer error handling).
        for (auto& [address, e] : endpoints) {
            ucp_request_param_t param{};
            param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            param.flags = UCP_EP_CLOSE_FLAG_FORCE;
            ucs_status_ptr_t r = ucp_ep_close_nbx(e->ep, &param);
            if (r != nullptr && !UCS_PTR_IS_ERR(r)) {
                while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker);
                ucp_request_free(r);
            }
        }
        endpoints.clear();
        if (worker != nullptr) ucp_worker_destroy(worker);
        if (context != nullptr) ucp_cleanup(context);
    }
};

namespace {

Status ucx_error(const char* what, ucs_status_t s) {
    return set_error(GPUCOLL_ERR_SYSTEM, "UCX %s failed: %s", what, ucs_status_string(s));
}

ucs_memory_type_t memory_type(MemKind kind) {
    return kind == MemKind::Cuda ? UCS_MEMORY_TYPE_CUDA : UCS_MEMORY_TYPE_HOST;
}

}  // namespace

Transport::Transport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Transport::~Transport() = default;

Status Transport::create(bool thread_multi, const std::string& net_devices,
                         std::unique_ptr<Transport>* out) {
    auto impl = std::make_unique<Impl>();
    ucp_config_t* config = nullptr;
    ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) return ucx_error("ucp_config_read", s);
    if (!net_devices.empty() &&
        (s = ucp_config_modify(config, "NET_DEVICES", net_devices.c_str())) != UCS_OK) {
        ucp_config_release(config);
        return ucx_error("ucp_config_modify(NET_DEVICES)", s);
    }
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = thread_multi ? 1 : 0;
    s = ucp_init(&params, config, &impl->context);
    ucp_config_release(config);
    if (s != UCS_OK) return ucx_error("ucp_init", s);

    ucp_context_attr_t attr{};
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    s = ucp_context_query(impl->context, &attr);
    if (s != UCS_OK) return ucx_error("ucp_context_query", s);
    impl->cuda = (attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;

    ucp_worker_params_t wparams{};
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wparams.thread_mode = thread_multi ? UCS_THREAD_MODE_MULTI : UCS_THREAD_MODE_SINGLE;
    s = ucp_worker_create(impl->context, &wparams, &impl->worker);
    if (s != UCS_OK) return ucx_error("ucp_worker_create", s);
    if (ucp_worker_get_efd(impl->worker, &impl->efd) != UCS_OK) impl->efd = -1;
    ucp_address_t* address = nullptr;
    size_t length = 0;
    s = ucp_worker_get_address(impl->worker, &address, &length);
    if (s != UCS_OK) return ucx_error("ucp_worker_get_address", s);
    const auto* bytes = reinterpret_cast<const uint8_t*>(address);
    impl->address.assign(bytes, bytes + length);
    ucp_worker_release_address(impl->worker, address);

    unsigned major = 0, minor = 0, release = 0;
    ucp_get_version(&major, &minor, &release);
    char text[128];
    std::snprintf(text, sizeof text, "UCX %u.%u.%u, memory types: host%s", major, minor, release,
                  impl->cuda ? ", cuda" : "");
    impl->description = text;
    if (!net_devices.empty()) impl->description += ", network device " + net_devices;
    out->reset(new Transport(std::move(impl)));
    return kSuccess;
}

const std::vector<uint8_t>& Transport::address() const { return impl_->address; }
bool Transport::cuda_memory() const { return impl_->cuda; }
const std::string& Transport::description() const { return impl_->description; }

Status Transport::connect(const uint8_t* address, size_t bytes, Endpoint** out) {
    std::vector<uint8_t> key(address, address + bytes);
    std::lock_guard<std::mutex> lock(impl_->mutex);
    auto it = impl_->endpoints.find(key);
    if (it == impl_->endpoints.end()) {
        auto e = std::make_unique<Endpoint>();
        ucp_ep_params_t params{};
        params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                            UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
        // Called from progress when the peer is gone: its requests complete
        // with an error, which the waits report; nothing else to do here.
        params.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t) {
            static_cast<Endpoint*>(arg)->failed.store(true, std::memory_order_release);
        };
        params.err_handler.arg = e.get();
        params.address = reinterpret_cast<const ucp_address_t*>(address);
        // A peer that dies must not leave this process hanging at close.
        params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
        ucs_status_t s = ucp_ep_create(impl_->worker, &params, &e->ep);
        if (s != UCS_OK) return ucx_error("ucp_ep_create", s);
        it = impl_->endpoints.emplace(std::move(key), std::move(e)).first;
    }
    *out = it->second.get();
    return kSuccess;
}

Status Transport::send(Endpoint* ep, uint64_t tag, const void* buf, size_t bytes, MemKind kind,
                       Request* req) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param.memory_type = memory_type(kind);
    ucs_status_ptr_t r = ucp_tag_send_nbx(ep->ep, buf, bytes, tag, &param);
    if (UCS_PTR_IS_ERR(r)) return ucx_error("tag send", UCS_PTR_STATUS(r));
    *req = Request{r, r != nullptr, false, bytes};
    return kSuccess;
}

Status Transport::recv(uint64_t tag, uint64_t mask, void* buf, size_t bytes, MemKind kind,
                       Request* req) {
    // Always a request, never an immediate completion: a message that
    // arrived before this receive would complete it at once, and UCX reports
    // only a longer one as an error; the length of a shorter one reaches
    // recv_info only from UCX 1.16 on (openucx/ucx#9425). test() checks it.
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.memory_type = memory_type(kind);
    ucs_status_ptr_t r = ucp_tag_recv_nbx(impl_->worker, buf, bytes, tag, mask, &param);
    if (UCS_PTR_IS_ERR(r)) return ucx_error("tag receive", UCS_PTR_STATUS(r));
    *req = Request{r, r != nullptr, true, bytes};
    if (r == nullptr)  // no UCX does this with the flag; no length to check
        return set_error(GPUCOLL_ERR_INTERNAL,
                         "UCX completed a receive at once despite "
                         "UCP_OP_ATTR_FLAG_NO_IMM_CMPL");
    return kSuccess;
}

Status Transport::test(Request* req, bool* done) {
    *done = !req->active;
    if (*done) return kSuccess;
    if (req->handle == nullptr) {  // completed at once
        req->active = false;
        *done = true;
        return kSuccess;
    }
    ucs_status_t s = UCS_OK;
    size_t received = req->expected;
    if (req->is_recv) {
        ucp_tag_recv_info_t info{};
        s = ucp_tag_recv_request_test(req->handle, &info);
        received = info.length;
    } else {
        s = ucp_request_check_status(req->handle);
    }
    if (s == UCS_INPROGRESS) return kSuccess;
    ucp_request_free(req->handle);
    req->handle = nullptr;
    req->active = false;
    *done = true;
    if (s != UCS_OK) return ucx_error(req->is_recv ? "tag receive" : "tag send", s);
    if (received != req->expected)
        return set_error(GPUCOLL_ERR_INTERNAL,
                         "a peer sent %zu bytes where this call expects %zu: the ranks describe "
                         "different calls",
                         received, req->expected);
    return kSuccess;
}

void Transport::cancel(Request* req) {
    if (!req->active) return;
    if (req->handle != nullptr) {
        if (req->is_recv) {
            // An unmatched receive ends at the next progress. One whose
            // message had begun (a rendezvous from a peer now unreachable)
            // does not: after 50 ms it is released unfinished, as an
            // abandoned send is (UCX may still write into its buffer).
            ucp_request_cancel(impl_->worker, req->handle);
            const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
            while (ucp_request_check_status(req->handle) == UCS_INPROGRESS) {
                if (std::chrono::steady_clock::now() > until) {
                    req->abandoned = true;
                    break;
                }
                ucp_worker_progress(impl_->worker);
            }
        } else if (ucp_request_check_status(req->handle) == UCS_INPROGRESS) {
            req->abandoned = true;  // released: UCX completes it on its own
        }
        ucp_request_free(req->handle);
    }
    req->handle = nullptr;
    req->active = false;
}

bool Transport::failed(const Endpoint* ep) const {
    return ep != nullptr && ep->failed.load(std::memory_order_acquire);
}

void Transport::progress() { ucp_worker_progress(impl_->worker); }

void Transport::wait(int timeout_ms) {
    if (impl_->efd < 0) return;
    // UCS_ERR_BUSY: events are pending already; progress, do not sleep.
    if (ucp_worker_arm(impl_->worker) != UCS_OK) return;
    pollfd p{impl_->efd, POLLIN, 0};
    (void)poll(&p, 1, timeout_ms);
}

bool Transport::device_capable(Endpoint* ep, std::string* names) {
#if UCP_API_VERSION >= UCP_VERSION(1, 14)
    ucp_transport_entry_t entries[16];
    ucp_ep_attr_t attr{};
    attr.field_mask = UCP_EP_ATTR_FIELD_TRANSPORTS;
    attr.transports.entries = entries;
    attr.transports.num_entries = 16;
    attr.transports.entry_size = sizeof(ucp_transport_entry_t);
    if (ucp_ep_query(ep->ep, &attr) != UCS_OK) return false;
    bool capable = attr.transports.num_entries > 0;
    for (unsigned i = 0; i < attr.transports.num_entries; ++i) {
        const std::string tl = entries[i].transport_name ? entries[i].transport_name : "?";
        *names += (names->empty() ? "" : ",") + tl + "/" +
                  (entries[i].device_name ? entries[i].device_name : "?");
        for (const char* host_only : {"tcp", "sysv", "posix", "cma", "xpmem", "knem"})
            if (tl == host_only) capable = false;
    }
    return capable;
#else
    (void)ep;
    *names = "unknown (UCX before 1.14)";
    return false;
#endif
}

namespace {

std::atomic<void (*)(const void*, size_t)> g_released{nullptr};
// The probe's addresses, and whether an unmap covering each was reported.
constexpr int kProbes = 4;
std::atomic<uintptr_t> g_probe_at[kProbes];
std::atomic<bool> g_probe_seen[kProbes];
std::mutex g_probe_mutex;  // one probe at a time
// The probing thread: only its own unmaps count (another thread may map
// and unmap the address between the probe's unmap and its disarm).
std::atomic<pthread_t> g_prober{};
std::atomic<bool> g_probing{false};

void on_unmap(ucm_event_type_t type, ucm_event_t* event, void*) {
    if (type != UCM_EVENT_VM_UNMAPPED) return;
    const auto lo = reinterpret_cast<uintptr_t>(event->vm_unmapped.address);
    const size_t bytes = event->vm_unmapped.size;
    if (g_probing.load(std::memory_order_acquire) &&
        pthread_equal(g_prober.load(std::memory_order_relaxed), pthread_self())) {
        for (int i = 0; i < kProbes; ++i) {
            const uintptr_t at = g_probe_at[i].load(std::memory_order_relaxed);
            if (at != 0 && at >= lo && at - lo < bytes)
                g_probe_seen[i].store(true, std::memory_order_relaxed);
        }
    }
    if (auto released = g_released.load(std::memory_order_acquire))
        released(event->vm_unmapped.address, bytes);
}

void arm(int i, const void* at) {
    g_probe_seen[i].store(false);
    g_probe_at[i].store(reinterpret_cast<uintptr_t>(at));
}
void disarm(int i) { g_probe_at[i].store(0); }

// Each way this process unmaps memory that the hooks must report: munmap,
// a MAP_FIXED mmap over a mapping, mremap (the old range), and the free()
// of a large malloc (inside the C library: seen only where UCX patched
// munmap itself or replaced malloc; not for an allocator that unmaps by
// system call, as ASan's).
bool probe_locked();
bool probe() {
    std::lock_guard lock(g_probe_mutex);
    g_prober.store(pthread_self(), std::memory_order_relaxed);
    g_probing.store(true, std::memory_order_release);
    const bool ok = probe_locked();
    g_probing.store(false, std::memory_order_release);
    return ok;
}

bool probe_locked() {
    constexpr size_t kPage = 4096, kLarge = size_t{64} << 20;  // above malloc's mmap threshold
    bool ok = true;
    auto* m = static_cast<char*>(
        mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (m == MAP_FAILED) return false;
    arm(0, m);
    munmap(m, kPage);
    disarm(0);
    char* second = m + kPage;
    arm(1, second);
    const bool fixed = mmap(second, kPage, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == second;
    disarm(1);
    arm(2, second);
    void* moved = fixed ? mremap(second, kPage, 4 * kPage, MREMAP_MAYMOVE) : MAP_FAILED;
    disarm(2);  // before the unmap below, which may land on the same address
    if (moved != MAP_FAILED)
        munmap(moved, 4 * kPage);
    else
        munmap(second, kPage);
    ok = fixed && moved != MAP_FAILED;
    if (void* large = std::malloc(kLarge)) {
        arm(3, large);
        std::free(large);
        disarm(3);
    } else {
        ok = false;
    }
    for (int i = 0; i < kProbes; ++i) ok = ok && g_probe_seen[i].load();
    return ok;
}

}  // namespace

bool watch_unmaps(void (*released)(const void* p, size_t bytes), bool install) {
    void (*none)(const void*, size_t) = nullptr;
    if (released == nullptr || !g_released.compare_exchange_strong(none, released)) return false;
    // Without install, only hooks that are installed already report
    // anything (UCX 1.13's libucm patches munmap when it is loaded; other
    // versions may wait for ucp_init or an install): the probe tells.
    const int events = UCM_EVENT_VM_UNMAPPED | (install ? 0 : UCM_EVENT_FLAG_NO_INSTALL);
    if (ucm_set_event_handler(events, -1, on_unmap, nullptr) != UCS_OK) {
        g_released.store(nullptr);
        return false;
    }
    if (probe()) return true;
    // Once this returns, no event is in flight in on_unmap.
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, on_unmap, nullptr);
    g_released.store(nullptr);
    return false;
}

bool unmaps_still_reported() { return g_released.load() != nullptr && probe(); }

}  // namespace gpucoll::inter
