#include "device/host_page_cache.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

namespace gpucoll::host_page_cache {

namespace detail {
std::atomic<uintptr_t> g_slots[1 << kSlotBits];
}  // namespace detail

namespace {

using detail::g_slots;

std::atomic<uint64_t> g_generation{1};
std::atomic<bool> g_enabled{true};
std::atomic<uint64_t> g_remembered{0}, g_refused{0}, g_forgotten{0};

enum class WatchState { NotTried, Watching, Failed };
std::mutex g_watch_mutex;
Watcher g_watcher = nullptr;                            // under g_watch_mutex
std::atomic<WatchState> g_watch{WatchState::NotTried};  // written under g_watch_mutex

// True once the watcher reports unmaps. *installed_now: it was installed by
// this call, after the caller asked the driver: an unmap in between was not
// reported.
bool watching(bool* installed_now) {
    *installed_now = false;
    const WatchState state = g_watch.load(std::memory_order_acquire);
    if (state != WatchState::NotTried) return state == WatchState::Watching;
    std::lock_guard lock(g_watch_mutex);
    if (g_watch.load(std::memory_order_relaxed) == WatchState::NotTried) {
        // Installing may itself map and unmap (released() runs meanwhile:
        // it takes no lock).
        const bool ok = g_watcher != nullptr && g_watcher(&released);
        g_watch.store(ok ? WatchState::Watching : WatchState::Failed, std::memory_order_release);
        *installed_now = ok;
    }
    return g_watch.load(std::memory_order_relaxed) == WatchState::Watching;
}

// p's byte can be read by this process: a readable mapping, not a range
// reserved with PROT_NONE (the driver's reservations, device memory's
// CPU side) nor a hole. Asked of the kernel, which reports EFAULT instead
// of faulting; any other failure (the call filtered by seccomp) reads as no.
bool readable(const void* p) {
    char byte = 0;
    iovec local{&byte, 1};
    iovec remote{const_cast<void*>(p), 1};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1;
}

}  // namespace

void set_watcher(Watcher watcher) {
    std::lock_guard lock(g_watch_mutex);
    if (g_watch.load(std::memory_order_relaxed) == WatchState::NotTried) g_watcher = watcher;
}

void set_enabled(bool on) {
    g_enabled.store(on, std::memory_order_release);
    if (!on) clear();
}

bool enabled() { return g_enabled.load(std::memory_order_acquire); }

uint64_t generation() { return g_generation.load(std::memory_order_seq_cst); }

void remember(const void* p, uint64_t before) {
    if (p == nullptr || !enabled()) return;
    bool installed_now = false;
    if (!watching(&installed_now) || installed_now || !readable(p)) {
        g_refused.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    const uintptr_t page = reinterpret_cast<uintptr_t>(p) >> detail::kPageShift;
    const uintptr_t key = detail::key_of(page);
    std::atomic<uintptr_t>& slot = g_slots[detail::slot_of(page)];
    slot.store(key, std::memory_order_seq_cst);
    // An unmap reported since the driver was asked (or while storing): the
    // answer may be stale. released() bumps the generation before it scans,
    // so either it sees the key or this sees the new generation.
    if (g_generation.load(std::memory_order_seq_cst) != before || !enabled()) {
        uintptr_t expected = key;
        slot.compare_exchange_strong(expected, 0, std::memory_order_seq_cst);
        g_refused.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    g_remembered.fetch_add(1, std::memory_order_relaxed);
}

void released(const void* p, size_t bytes) {
    g_generation.fetch_add(1, std::memory_order_seq_cst);
    if (bytes == 0) return;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p) >> detail::kPageShift;
    const uintptr_t last = reinterpret_cast<uintptr_t>(p) + (bytes - 1);
    const uintptr_t hi = last < reinterpret_cast<uintptr_t>(p)
                             ? UINTPTR_MAX >> detail::kPageShift  // wraps
                             : last >> detail::kPageShift;
    for (std::atomic<uintptr_t>& slot : g_slots) {
        uintptr_t key = slot.load(std::memory_order_seq_cst);
        if (key == 0) continue;
        const uintptr_t page = key - 1;
        if (page < lo || page > hi) continue;
        if (slot.compare_exchange_strong(key, 0, std::memory_order_seq_cst))
            g_forgotten.fetch_add(1, std::memory_order_relaxed);
    }
}

Stats stats() {
    Stats s;
    s.remembered = g_remembered.load(std::memory_order_relaxed);
    s.refused = g_refused.load(std::memory_order_relaxed);
    s.forgotten = g_forgotten.load(std::memory_order_relaxed);
    s.watching = g_watch.load(std::memory_order_acquire) == WatchState::Watching;
    return s;
}

void clear() {
    g_generation.fetch_add(1, std::memory_order_seq_cst);
    for (std::atomic<uintptr_t>& slot : g_slots) slot.store(0, std::memory_order_seq_cst);
}

}  // namespace gpucoll::host_page_cache
