#include "device/host_page_cache.h"

#include <dlfcn.h>
#include <sys/uio.h>
#include <unistd.h>

#include <mutex>

namespace gpucoll::host_page_cache {

namespace detail {
std::atomic<uintptr_t> g_slots[1 << kSlotBits];
}  // namespace detail

namespace {

using detail::g_slots;
using detail::kPending;

std::atomic<uint64_t> g_generation{1};
std::atomic<Mode> g_mode{Mode::Off};  // until checked on a GPU
std::atomic<uint64_t> g_remembered{0}, g_refused{0}, g_forgotten{0}, g_evicted{0};
std::atomic<uint64_t> g_kept_since_probe{0};
std::atomic<int> g_evictions_in_a_row{0}, g_backoff{0};

enum class WatchState { NotTried, Watching, Failed };
std::mutex g_watch_mutex;
Watcher g_watcher;                                      // under g_watch_mutex
std::atomic<WatchState> g_watch{WatchState::NotTried};  // written under g_watch_mutex

// True while the watcher reports unmaps. *installed_now: it started in this
// call, after the caller asked the driver: an unmap in between was not
// reported.
bool watching(bool* installed_now) {
    *installed_now = false;
    const WatchState state = g_watch.load(std::memory_order_acquire);
    if (state != WatchState::NotTried) return state == WatchState::Watching;
    std::lock_guard lock(g_watch_mutex);
    if (g_watch.load(std::memory_order_relaxed) == WatchState::NotTried) {
        // Starting may itself map and unmap (released() runs meanwhile: it
        // takes no lock).
        const bool ok = g_watcher.start != nullptr &&
                        g_watcher.start(&released, g_mode.load() == Mode::Install);
        // Every answer asked for before now is stale.
        g_generation.fetch_add(1, std::memory_order_seq_cst);
        g_watch.store(ok ? WatchState::Watching : WatchState::Failed, std::memory_order_release);
        *installed_now = ok;
    }
    return g_watch.load(std::memory_order_relaxed) == WatchState::Watching;
}

// The watcher still reports unmaps (another library may have patched the
// same functions since): else forget everything and keep nothing more.
void reprobe() {
    std::lock_guard lock(g_watch_mutex);
    if (g_watch.load(std::memory_order_relaxed) != WatchState::Watching) return;
    if (g_watcher.still_reported != nullptr && g_watcher.still_reported()) return;
    g_watch.store(WatchState::Failed, std::memory_order_release);
    clear();
}

// p's byte can be read by this process: a readable mapping, not a range
// reserved with PROT_NONE (the driver's reservations, device memory's CPU
// side) nor a hole. Asked of the kernel, which reports EFAULT instead of
// faulting; any other failure (the call filtered by seccomp) reads as no.
bool readable(const void* p) {
    char byte = 0;
    iovec local{&byte, 1};
    iovec remote{const_cast<void*>(p), 1};
    return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1;
}

// p lies in a loaded shared object (its data or bss): dlclose unmaps it
// with the dynamic loader's own munmap, which no hook sees.
bool in_shared_object(const void* p) {
    Dl_info info{};
    return dladdr(p, &info) != 0 && info.dli_fbase != nullptr;
}

uintptr_t system_page_bytes() {
    static const uintptr_t bytes = [] {
        const long b = sysconf(_SC_PAGESIZE);
        // A power of two of at least 4 KiB, else 4 KiB.
        return b >= 4096 && (b & (b - 1)) == 0 ? static_cast<uintptr_t>(b) : uintptr_t{4096};
    }();
    return bytes;
}

// More buffers than slots: every kept page evicts another, and each costs
// a system call. After kThrashEvictions in a row, keep nothing for a while.
void count_eviction(uintptr_t old, uintptr_t key) {
    if (old == 0 || old == key || (old & kPending) != 0) {
        g_evictions_in_a_row.store(0, std::memory_order_relaxed);
        return;
    }
    g_evicted.fetch_add(1, std::memory_order_relaxed);
    if (g_evictions_in_a_row.fetch_add(1, std::memory_order_relaxed) + 1 >= kThrashEvictions) {
        g_evictions_in_a_row.store(0, std::memory_order_relaxed);
        g_backoff.store(kThrashBackoff, std::memory_order_relaxed);
    }
}

}  // namespace

void set_watcher(const Watcher& watcher) {
    std::lock_guard lock(g_watch_mutex);
    if (g_watch.load(std::memory_order_relaxed) == WatchState::NotTried) g_watcher = watcher;
}

void set_mode(Mode mode) {
    g_mode.store(mode, std::memory_order_seq_cst);
    if (mode == Mode::Off) clear();
}

Mode mode() { return g_mode.load(std::memory_order_acquire); }

uint64_t generation() { return g_generation.load(std::memory_order_seq_cst); }

void remember(const void* p, uint64_t before) {
    if (p == nullptr || mode() == Mode::Off) return;
    for (int left = g_backoff.load(std::memory_order_relaxed); left > 0;)
        if (g_backoff.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) return;
    bool installed_now = false;
    if (!watching(&installed_now) || installed_now || in_shared_object(p) || !readable(p)) {
        g_refused.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    const uintptr_t page = reinterpret_cast<uintptr_t>(p) >> detail::kPageShift;
    const uintptr_t key = detail::key_of(page);
    std::atomic<uintptr_t>& slot = g_slots[detail::slot_of(page)];
    // Stored as pending (contains() does not match it) until the generation
    // says no unmap was reported since the driver was asked: released()
    // bumps the generation before it scans, so either this sees the new
    // generation, or the scan finds the key, pending or kept, and clears it
    // (retrying if this turned it from pending to kept meanwhile).
    const uintptr_t old = slot.exchange(key | kPending, std::memory_order_seq_cst);
    uintptr_t expected = key | kPending;
    if (g_generation.load(std::memory_order_seq_cst) != before || mode() == Mode::Off ||
        !slot.compare_exchange_strong(expected, key, std::memory_order_seq_cst)) {
        expected = key | kPending;
        slot.compare_exchange_strong(expected, 0, std::memory_order_seq_cst);
        g_refused.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    g_remembered.fetch_add(1, std::memory_order_relaxed);
    count_eviction(old, key);
    if (g_kept_since_probe.fetch_add(1, std::memory_order_relaxed) + 1 == kReprobeEvery) {
        g_kept_since_probe.store(0, std::memory_order_relaxed);
        reprobe();
    }
}

void released(const void* p, size_t bytes) {
    g_generation.fetch_add(1, std::memory_order_seq_cst);
    if (bytes == 0) return;
    // The kernel unmaps whole pages of its own size (64 KiB on some arm64
    // kernels): widen the range to them.
    const uintptr_t system_page = system_page_bytes();
    const uintptr_t first = reinterpret_cast<uintptr_t>(p) & ~(system_page - 1);
    uintptr_t last = reinterpret_cast<uintptr_t>(p) + (bytes - 1);
    if (last < reinterpret_cast<uintptr_t>(p)) last = UINTPTR_MAX;  // wraps
    last |= system_page - 1;
    const uintptr_t lo = first >> detail::kPageShift, hi = last >> detail::kPageShift;
    for (std::atomic<uintptr_t>& slot : g_slots) {
        uintptr_t key = slot.load(std::memory_order_seq_cst);
        // A failed exchange reloads key: a pending store that became kept
        // meanwhile (remember() passed its check before the generation
        // moved) must be cleared too.
        while (key != 0) {
            const uintptr_t page = (key & ~kPending) - 1;
            if (page < lo || page > hi) break;
            if (slot.compare_exchange_weak(key, 0, std::memory_order_seq_cst)) {
                if ((key & kPending) == 0) g_forgotten.fetch_add(1, std::memory_order_relaxed);
                break;
            }
        }
    }
}

Stats stats() {
    Stats s;
    s.remembered = g_remembered.load(std::memory_order_relaxed);
    s.refused = g_refused.load(std::memory_order_relaxed);
    s.forgotten = g_forgotten.load(std::memory_order_relaxed);
    s.evicted = g_evicted.load(std::memory_order_relaxed);
    s.watching = g_watch.load(std::memory_order_acquire) == WatchState::Watching;
    s.backing_off = g_backoff.load(std::memory_order_relaxed) > 0;
    return s;
}

void clear() {
    g_generation.fetch_add(1, std::memory_order_seq_cst);
    for (std::atomic<uintptr_t>& slot : g_slots) slot.store(0, std::memory_order_seq_cst);
}

}  // namespace gpucoll::host_page_cache
