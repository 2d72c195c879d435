// lifetime.h - gpucoll in a child created by fork().
//
// A child of a process whose gpucoll had a device backend inherits that
// process's gpucoll: its device memory (CUDA: a context the child cannot
// use; emu: the same shared pages), its communicators (the node's shared
// segment, scratch and flags, which the parent's peers read), the locks and
// condition variables of the progress threads and streams, but none of the
// threads. Nothing of it is usable there: a lock held by a thread that does
// not exist hangs, and a post or a teardown corrupts the parent's
// collectives. A pthread_atfork handler marks such a child; every entry point
// of gpucoll.h then fails there without touching the inherited state
// (refuse: an error status and message, and one line on stderr), frees
// nothing it inherited (communicators, plans and requests are left as they
// are), and the host gates send every call to the core, which refuses it.
// The parent is not affected. A child of a process that had no device
// backend (nothing chosen yet, or auto without a GPU) uses gpucoll freely.
#pragma once

#include <atomic>

#include "common/status.h"
#include "gpucoll.h"

namespace gpucoll::lifetime {

namespace detail {
extern std::atomic<bool> g_forked_child;
}

// True in a child forked from a process whose gpucoll had a device backend
// (a relaxed load: cheap enough for the host-buffer path).
inline bool forked_child() { return detail::g_forked_child.load(std::memory_order_relaxed); }

// The answer of entry point `call` in such a child: the calling thread's
// error says why, the first refusal of the process says it on stderr (one
// line), and the status is GPUCOLL_ERR_NO_BACKEND.
Status refuse(const char* call);

// The runtime has a device backend: a child forked from now on refuses.
void note_device_active();

// The host gates of live communicators, closed (busy) in a forked child:
// the caller's inline code would otherwise post into the parent's segment.
void register_gate(gpucoll_host_gate_t* gate);
void unregister_gate(gpucoll_host_gate_t* gate);

}  // namespace gpucoll::lifetime
