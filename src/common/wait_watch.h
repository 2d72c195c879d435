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
    // Call every few hundred spins of a wait: true once, when the wait has
    // lasted after_s (never when after_s <= 0). The clock starts at the
    // first call.
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

private:
    double after_s_;
    bool started_ = false;
    bool said_ = false;
    std::chrono::steady_clock::time_point start_{};
};

// What a wait that lasted after_s says: call seq waits for whom, and what can
// make such a wait endless. uniform: coll_gpucoll_uniform_memory is set on
// a communicator that spans nodes.
inline std::string wait_warning_text(uint64_t seq, double after_s, const char* whom, bool uniform) {
    char text[640];
    std::snprintf(text, sizeof text,
                  "collective call %llu on this communicator has waited %.0f s for %s and still "
                  "waits. A rank that "
                  "never makes this call (a missing or mismatched collective%s) cannot be told "
                  "from a late one (coll_gpucoll_wait_warning sets when this is said)",
                  static_cast<unsigned long long>(seq), after_s, whom,
                  uniform ? "; or, with coll_gpucoll_uniform_memory set, a rank that passed host "
                            "memory: its call skips gpucoll between nodes"
                          : "");
    return text;
}

}  // namespace gpucoll
