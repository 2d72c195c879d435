// host_page_cache.h - host pages the backend's driver said it does not know,
// remembered so that a host-buffer collective does not ask again. The cuda
// backend asks the driver (cuPointerGetAttributes, 0.2-0.3 us) about every
// pointer host_ranges cannot tell: large malloc'd or mmap'd buffers, such
// as the OSU benchmarks' (both buffers of a call: about +0.5 us per call).
//
// A page stays host memory until it is unmapped (munmap, mremap, a MAP_FIXED
// mmap over it, madvise, shmdt, a brk shrink): only then could the driver
// put device memory there. So the cache is kept only while something
// reports every unmap of the process (the watcher: UCX's memory hooks, the
// ones UCX's registration cache relies on), installed at the first page
// remembered; without a watcher nothing is remembered, and every query goes
// to the driver as before. A page is remembered only when it is readable
// host memory at the time of the query (a pointer into a range the driver
// reserved but has not allocated yet is neither known nor readable), and
// only if no unmap was reported while the driver was being asked.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gpucoll::host_page_cache {

// Installs a process-wide notification that calls released() before every
// unmap; true once it works. Set by the core (UCX's memory hooks); none:
// nothing is ever remembered.
using Watcher = bool (*)(void (*released)(const void* p, size_t bytes));
void set_watcher(Watcher watcher);
// On by default; off: nothing is remembered, and what was is forgotten.
void set_enabled(bool on);
bool enabled();

namespace detail {
constexpr int kPageShift = 12;
constexpr int kSlotBits = 6;  // 64 slots, one page each, direct-mapped
extern std::atomic<uintptr_t> g_slots[1 << kSlotBits];
inline size_t slot_of(uintptr_t page) {
    return static_cast<size_t>((page * 0x9E3779B97F4A7C15ull) >> (64 - kSlotBits));
}
// A slot holds page + 1 (0: empty).
inline uintptr_t key_of(uintptr_t page) { return page + 1; }
}  // namespace detail

// p's page was remembered as host memory: no query needed. One load.
inline bool contains(const void* p) {
    const uintptr_t page = reinterpret_cast<uintptr_t>(p) >> detail::kPageShift;
    return detail::g_slots[detail::slot_of(page)].load(std::memory_order_acquire) ==
           detail::key_of(page);
}

// Read before asking the driver; pass to remember().
uint64_t generation();
// The driver said p is not its memory (neither device, managed nor pinned
// host memory), asked after generation() returned `before`. Remembers p's
// page where it is readable and no unmap was reported since `before`.
void remember(const void* p, uint64_t before);
// [p, p + bytes) is about to be unmapped: forget its pages (the watcher's
// callback; no allocation, no lock).
void released(const void* p, size_t bytes);

// What the cache did (tests, verbose output).
struct Stats {
    uint64_t remembered = 0;  // pages stored
    uint64_t refused = 0;     // not stored: unreadable, an unmap meanwhile, or no watcher
    uint64_t forgotten = 0;   // pages dropped by released()
    bool watching = false;    // the watcher is installed
};
Stats stats();
// Forgets every page (tests).
void clear();

}  // namespace gpucoll::host_page_cache
