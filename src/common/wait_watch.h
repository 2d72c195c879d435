// wait_watch.h - a wait that says, once, that it has lasted long
// (gpucoll_comm_config_t.wait_warning_s). A rank that never makes a call
// cannot be told from a late one: without this, a missing or mismatched
// collective (or a broken uniform-memory assertion between nodes) is a
// silent hang.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace gpucoll {

class WaitWatch {
public:
    explicit WaitWatch(double after_s) : after_s_(after_s) {}
    // Call now and then in the slow part of a wait (where it yields): true
    // once, when the wait has lasted after_s (never when after_s <= 0). The
    // clock starts at the first call.
    bool due() {
        if (said_ || after_s_ <= 0) return false;
        const auto now = std::chrono::steady_clock::now();
        if (!started_) {
            started_ = true;
            start_ = now;
            return false;
        }
        if (std::chrono::duration<double>(now - start_).count() < after_s_) return false;
        said_ = true;
        return true;
    }

    // Something moved: the wait starts again (a long transfer that keeps
    // completing chunks is not a wait for someone who never comes).
    void reset() { started_ = false; }

private:
    double after_s_;
    bool started_ = false;
    bool said_ = false;
    std::chrono::steady_clock::time_point start_{};
};

// What a wait that lasted after_s says. whom: whom it waits for, with the
// call ("rank 3 (this node) to enter call 5"). arrival: a wait for a rank to
// enter a call (or for its node's word on it), where a rank that never makes
// the call cannot be told from a late one; otherwise a rank that is in the
// call and does not go on. uniform: coll_gpucoll_uniform_memory is set on a
// communicator that spans nodes.
inline std::string wait_warning_text(double after_s, const char* whom, bool arrival, bool uniform) {
    char text[640];
    if (arrival)
        std::snprintf(
            text, sizeof text,
            "this rank has waited %.0f s for %s, and still waits: a rank that never makes the call "
            "(a missing or mismatched collective%s) cannot be told from a late one "
            "(coll_gpucoll_wait_warning sets when this is said)",
            after_s, whom,
            uniform ? "; or, with coll_gpucoll_uniform_memory set, a rank that passed "
                      "host memory: its call skips gpucoll between nodes"
                    : "");
    else
        std::snprintf(
            text, sizeof text,
            "this rank has waited %.0f s for %s, and still waits: that rank is in the call but "
            "does not go on (a process stopped, or busy without entering MPI) "
            "(coll_gpucoll_wait_warning sets when this is said)",
            after_s, whom);
    return text;
}

}  // namespace gpucoll
