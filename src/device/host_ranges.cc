#include "device/host_ranges.h"

#include <link.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace gpucoll::host_ranges {

namespace {

// The executable's image (its loaded segments: code, data, bss): the first
// object dl_iterate_phdr reports is the program. Read once.
struct Range {
    uintptr_t lo = 0, hi = 0;
};

Range read_executable() {
    Range r;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) {
            Range& range = *static_cast<Range*>(out);
            range.lo = UINTPTR_MAX;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& ph = info->dlpi_phdr[i];
                if (ph.p_type != PT_LOAD) continue;
                const uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
                range.lo = std::min(range.lo, lo);
                range.hi = std::max(range.hi, lo + ph.p_memsz);
            }
            if (range.lo == UINTPTR_MAX) range = Range{};
            return 1;  // the program only
        },
        &r);
    return r;
}

const Range& executable() {
    static const Range range = read_executable();
    return range;
}

// The program break, read without calling sbrk: glibc's __curbrk, what
// sbrk(0) would return (kept by glibc's brk/sbrk and by UCX's replacements
// of them). sbrk(0) is not a harmless query once UCX has installed its
// memory hooks in bistro mode (the default of UCX 1.13 and 1.22): the
// replacement reads the break and then sets it again (brk(current + 0)),
// and a malloc on another thread that grew the heap in between sees it
// shrunk back under its feet. On the H100 (UCX 1.22, progress thread
// classifying buffers while the main thread allocated) that corrupted the
// heap in 12 of 67 runs of test_forms between faked nodes;
// InterTransport.HostQueryDoesNotMoveTheBreakUnderUcxHooks reproduces it
// without a GPU. 0 where the C library has no __curbrk (not glibc): no brk
// range then, and the backend is asked.
extern "C" void* __curbrk __attribute__((weak));

uintptr_t program_break() {
    if (&__curbrk == nullptr) return 0;
    return reinterpret_cast<uintptr_t>(__atomic_load_n(&__curbrk, __ATOMIC_RELAXED));
}

// Where the brk heap starts: the "[heap]" line of /proc/self/maps, else the
// program break now (where the heap will start), asked of the kernel (the
// brk system call with 0 only reads it; no hook sees it). Read once.
uintptr_t read_heap_start() {
    uintptr_t start = 0;
    if (FILE* f = std::fopen("/proc/self/maps", "re")) {
        char line[512];
        while (start == 0 && std::fgets(line, sizeof line, f) != nullptr) {
            unsigned long lo = 0, hi = 0;
            if (std::strstr(line, "[heap]") != nullptr &&
                std::sscanf(line, "%lx-%lx", &lo, &hi) == 2)
                start = lo;
        }
        std::fclose(f);
    }
    if (start == 0) start = static_cast<uintptr_t>(syscall(SYS_brk, 0));
    return start;
}

uintptr_t heap_start() {
    static const uintptr_t start = read_heap_start();
    return start;
}

// This thread's stack, looked up at its first query.
struct Stack {
    uintptr_t lo = 0, hi = 0;
    bool known = false;
};
thread_local Stack t_stack;

bool on_my_stack(uintptr_t a) {
    Stack& s = t_stack;
    if (!s.known) {
        s.known = true;
        pthread_attr_t attr;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            void* base = nullptr;
            size_t size = 0;
            if (pthread_attr_getstack(&attr, &base, &size) == 0) {
                // Only the top 64 MiB: with an unlimited stack limit the
                // reported range can reach far down, where mappings may
                // later be placed.
                constexpr size_t kMaxStack = size_t{64} << 20;
                s.hi = reinterpret_cast<uintptr_t>(base) + size;
                s.lo = s.hi - std::min(size, kMaxStack);
            }
            pthread_attr_destroy(&attr);
        }
    }
    return a >= s.lo && a < s.hi;
}

}  // namespace

bool certainly_host(const void* p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    const Range& image = executable();
    if (a >= image.lo && a < image.hi) return true;
    const uintptr_t heap = heap_start();
    if (heap != 0 && a >= heap && a < program_break()) return true;
    return on_my_stack(a);
}

}  // namespace gpucoll::host_ranges
