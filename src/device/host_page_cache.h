// host_page_cache.h - host pages the backend's driver said it does not know,
// remembered so that a host-buffer collective does not ask again. The cuda
// backend asks the driver (cuPointerGetAttributes, 0.2-0.3 us) about every
// pointer host_ranges cannot tell: large malloc'd or mmap'd buffers, such
// as the OSU benchmarks' (both buffers of a call: about +0.5 us per call).
//
// A page stays host memory until it is unmapped (munmap, mremap, a MAP_FIXED
// mmap over it, shmdt, a brk shrink): only then could the driver put device
// memory there. So pages are kept only while something reports the
// process's unmaps (the watcher: UCX's memory hooks, the ones UCX's
// registration cache relies on; they report madvise too, which only
// forgets a page early), and only while a probe says it does (at the
// start, and again every kReprobeEvery pages kept: a library that patches
// munmap after that, while no new page is kept, goes unnoticed). Nothing is
// kept without a watcher; every query then goes to the driver, as before.
//
// A page is kept only when, at the time of the query, it is readable (a
// range the driver reserved but has not allocated yet is neither known to
// it nor readable) and not part of a loaded shared object (dlclose unmaps
// with the dynamic loader's own munmap, which no hook sees), and only if no
// unmap was reported while the driver was being asked. Not covered: an unmap
// by raw system call, a pointer queried while another thread unmaps it (the
// application frees memory that it passes to a collective), and a fork
// while another thread probes (the child inherits a held lock).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gpucoll::host_page_cache {

enum class Mode {
    Off,      // nothing kept; every query asks the driver (the default)
    Auto,     // kept while UCX's hooks, as installed, report unmaps
    Install,  // the same, installing UCX's hooks if nobody has (at the first page)
};

// The watcher: starts reporting unmaps to released() (install: UCX's hooks
// may be installed for it), true once a probe saw them reported; and the
// probe alone, run again later. Set by the core; none: nothing is kept.
struct Watcher {
    bool (*start)(void (*released)(const void* p, size_t bytes), bool install) = nullptr;
    bool (*still_reported)() = nullptr;
};
void set_watcher(const Watcher& watcher);
void set_mode(Mode mode);  // Off forgets what was kept
Mode mode();

namespace detail {
constexpr int kPageShift = 12;
constexpr int kSlotBits = 6;  // 64 slots, one page each, direct-mapped
extern std::atomic<uintptr_t> g_slots[1 << kSlotBits];
inline size_t slot_of(uintptr_t page) {
    return static_cast<size_t>((page * 0x9E3779B97F4A7C15ull) >> (64 - kSlotBits));
}
// A slot holds page + 1 (0: empty); with kPending set, the page is being
// stored and does not count yet.
constexpr uintptr_t kPending = uintptr_t{1} << 63;
inline uintptr_t key_of(uintptr_t page) { return page + 1; }
}  // namespace detail

// p's page was kept as host memory: no query needed. One load.
inline bool contains(const void* p) {
    const uintptr_t page = reinterpret_cast<uintptr_t>(p) >> detail::kPageShift;
    return detail::g_slots[detail::slot_of(page)].load(std::memory_order_acquire) ==
           detail::key_of(page);
}

// Read before asking the driver; pass to remember().
uint64_t generation();
// The driver said p is not its memory (neither device, managed nor pinned
// host memory), asked after generation() returned `before`. Keeps p's page
// under the rules above.
void remember(const void* p, uint64_t before);
// [p, p + bytes) is about to be unmapped: forget its pages (the watcher's
// callback; no allocation, no lock).
void released(const void* p, size_t bytes);

// What the cache did (tests, verbose output).
struct Stats {
    uint64_t remembered = 0;   // pages kept
    uint64_t refused = 0;      // not kept: unreadable, a shared object, an unmap meanwhile
    uint64_t forgotten = 0;    // pages dropped by released()
    uint64_t evicted = 0;      // kept pages replaced by another in their slot
    bool watching = false;     // unmaps are reported
    bool backing_off = false;  // slots thrashed: pages are not kept for a while
};
Stats stats();
// Forgets every page (tests; mode Off).
void clear();

// Pages kept between two probes of the watcher.
constexpr uint64_t kReprobeEvery = 256;
// Evictions in a row that count as thrashing (more buffers than slots), and
// the queries that then keep nothing (each kept page costs a system call).
constexpr int kThrashEvictions = 32;
constexpr int kThrashBackoff = 1024;

}  // namespace gpucoll::host_page_cache
