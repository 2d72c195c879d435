#include "device/host_ranges.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>

// The executable's image, from the linker (GNU ld and lld define both).
extern "C" char __executable_start;
extern "C" char end;

namespace gpucoll::host_ranges {

namespace {

// Where the brk heap starts: the "[heap]" line of /proc/self/maps, else the
// program break now (where the heap will start). Read once.
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
    if (start == 0) start = reinterpret_cast<uintptr_t>(sbrk(0));
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
                s.lo = reinterpret_cast<uintptr_t>(base);
                s.hi = s.lo + size;
            }
            pthread_attr_destroy(&attr);
        }
    }
    return a >= s.lo && a < s.hi;
}

}  // namespace

bool certainly_host(const void* p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    if (a >= reinterpret_cast<uintptr_t>(&__executable_start) &&
        a < reinterpret_cast<uintptr_t>(&end))
        return true;
    const uintptr_t heap = heap_start();
    if (a >= heap && a < reinterpret_cast<uintptr_t>(sbrk(0))) return true;
    return on_my_stack(a);
}

}  // namespace gpucoll::host_ranges
