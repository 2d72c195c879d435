// immortal.h - process-wide objects that are never destroyed.
//
// A function-local or namespace-scope static is destroyed at exit, in the
// reverse order of construction; an atexit handler registered before it was
// built, or another object's destructor (an application's global that calls
// MPI_Finalize or gpucoll_free_device), runs after that and would reach a
// destroyed object. A child created by fork() inherits the parent's objects
// but not its threads, and destroying thread state there (joining a thread,
// a condition variable with waiters) hangs. An Immortal<T> builds its T in
// place and never destroys it: the operating system reclaims its memory,
// mappings and threads when the process ends. Memory it holds stays
// reachable through the static, so LeakSanitizer does not report it.
#pragma once

#include <new>
#include <utility>

namespace gpucoll {

template <class T>
class Immortal {
public:
    template <class... Args>
    explicit Immortal(Args&&... args) {
        ::new (static_cast<void*>(storage_)) T(std::forward<Args>(args)...);
    }
    Immortal(const Immortal&) = delete;
    Immortal& operator=(const Immortal&) = delete;
    // Trivial (implicitly): nothing is registered to run at exit.
    ~Immortal() = default;

    T& operator*() { return *std::launder(reinterpret_cast<T*>(storage_)); }
    T* operator->() { return &**this; }

private:
    alignas(T) unsigned char storage_[sizeof(T)];
};

}  // namespace gpucoll
