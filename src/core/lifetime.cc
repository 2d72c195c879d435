#include "core/lifetime.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <vector>

#include "common/immortal.h"

namespace gpucoll::lifetime {

namespace detail {
std::atomic<bool> g_forked_child{false};
}

namespace {

std::atomic<bool> g_device_active{false};
std::atomic<bool> g_said{false};
pid_t g_parent = 0;  // written by the child's fork handler only

// Held across fork() (the prepare handler takes it), so that the child's
// copy of the list is whole and its lock free.
std::mutex g_gates_mutex;
Immortal<std::vector<gpucoll_host_gate_t*>> g_gates;

void before_fork() { g_gates_mutex.lock(); }

void after_fork_in_parent() { g_gates_mutex.unlock(); }

// The only thread of the child: no lock but ours is taken, nothing freed.
void after_fork_in_child() {
    if (g_device_active.load(std::memory_order_relaxed)) {
        g_parent = getppid();
        detail::g_forked_child.store(true, std::memory_order_relaxed);
        for (gpucoll_host_gate_t* gate : *g_gates)
            __atomic_store_n(&gate->busy, 1, __ATOMIC_RELEASE);
    }
    g_gates_mutex.unlock();
}

}  // namespace

Status refuse(const char* call) {
    set_error(GPUCOLL_ERR_NO_BACKEND,
              "%s: gpucoll cannot be used in this process: it was forked from process %d, "
              "whose gpucoll had a device backend, communicators and threads that a child "
              "does not inherit; use gpucoll in the parent, or start a new program in the "
              "child (exec; Python multiprocessing's 'spawn' or 'forkserver' start method)",
              call, static_cast<int>(g_parent));
    if (!g_said.exchange(true, std::memory_order_relaxed)) {
        // write(2), not stdio: a thread of the parent may have held stderr's lock.
        char line[256];
        const int n = std::snprintf(line, sizeof line,
                                    "gpucoll: process %d is a fork of process %d, which used "
                                    "gpucoll: gpucoll cannot be used here (%s failed)\n",
                                    static_cast<int>(getpid()), static_cast<int>(g_parent), call);
        if (n > 0)
            (void)!write(STDERR_FILENO, line, std::min(static_cast<size_t>(n), sizeof line - 1));
    }
    return GPUCOLL_ERR_NO_BACKEND;
}

void note_device_active() {
    // Once, with the first device: a process that never has one forks freely.
    static const bool registered =
        pthread_atfork(&before_fork, &after_fork_in_parent, &after_fork_in_child) == 0;
    (void)registered;
    g_device_active.store(true, std::memory_order_relaxed);
}

void register_gate(gpucoll_host_gate_t* gate) {
    std::lock_guard lock(g_gates_mutex);
    g_gates->push_back(gate);
}

void unregister_gate(gpucoll_host_gate_t* gate) {
    std::lock_guard lock(g_gates_mutex);
    std::erase(*g_gates, gate);
}

}  // namespace gpucoll::lifetime
