// log_line.h - one line of verbose output from the core, where the
// communicator's configuration sends it (Open MPI's output in the
// component), else to stderr with the rank.
#pragma once

#include <cstdio>
#include <string>

#include "gpucoll.h"

namespace gpucoll {

inline void log_line(const gpucoll_comm_config_t& c, int rank, int level, const std::string& msg) {
    if (c.verbose < level) return;
    if (c.log != nullptr)
        c.log(level, msg.c_str());
    else
        std::fprintf(stderr, "gpucoll[%d]: %s\n", rank, msg.c_str());
}

}  // namespace gpucoll
