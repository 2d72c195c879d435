// fork_bootstrap.h - ranks as forked processes, for testing the core through
// the bootstrap seam without MPI where ranks must be separate processes (a
// process-wide transport per rank, fake nodes through GPUCOLL_HOSTID).
#pragma once

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <vector>

#include "gpucoll.h"

class ForkGroup {
public:
    static constexpr size_t kSlotBytes = 64 << 10;  // largest allgather contribution

    // Runs body(rank, bootstrap) in size forked processes; the child's exit
    // status is body's return value. Returns how many children failed
    // (nonzero exit, signal, or still running after timeout_s: killed).
    static int run(int size, unsigned timeout_s,
                   const std::function<int(int, gpucoll_bootstrap_t&)>& body) {
        const size_t bytes = sizeof(Shared) + kSlotBytes * static_cast<size_t>(size);
        void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) return size;
        auto* shared = static_cast<Shared*>(mem);
        pthread_barrierattr_t attr;
        pthread_barrierattr_init(&attr);
        pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
        pthread_barrier_init(&shared->barrier, &attr, static_cast<unsigned>(size));
        std::vector<pid_t> pids;
        for (int r = 0; r < size; ++r) {
            const pid_t pid = fork();
            if (pid == 0) {
                alarm(timeout_s);  // a hang ends the child, and the test fails
                Ctx ctx{shared, r, size};
                gpucoll_bootstrap_t bs{&ctx, r, size, &ForkGroup::allgather, &ForkGroup::barrier};
                _exit(body(r, bs));
            }
            pids.push_back(pid);
        }
        int failed = 0;
        for (pid_t pid : pids) {
            int status = 0;
            if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                ++failed;
        }
        munmap(mem, bytes);
        return failed;
    }

private:
    struct Shared {
        pthread_barrier_t barrier;
        // then size slots of kSlotBytes
    };
    struct Ctx {
        Shared* shared;
        int rank, size;
    };
    static char* slot(Ctx* c, int r) {
        return reinterpret_cast<char*>(c->shared + 1) + static_cast<size_t>(r) * kSlotBytes;
    }
    static int allgather(void* p, const void* send, void* recv, size_t bytes) {
        auto* c = static_cast<Ctx*>(p);
        if (bytes > kSlotBytes) return -1;
        std::memcpy(slot(c, c->rank), send, bytes);
        pthread_barrier_wait(&c->shared->barrier);
        for (int r = 0; r < c->size; ++r)
            std::memcpy(static_cast<char*>(recv) + static_cast<size_t>(r) * bytes, slot(c, r),
                        bytes);
        pthread_barrier_wait(&c->shared->barrier);
        return 0;
    }
    static int barrier(void* p) {
        pthread_barrier_wait(&static_cast<Ctx*>(p)->shared->barrier);
        return 0;
    }
};
