// machine.h - what this process shares its machine with.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace gpucoll {

// Processes of the job on this machine as the launcher counts them (faked
// nodes share one machine), or 0 where no launcher says.
inline unsigned launcher_local_processes() {
    for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMIX_LOCAL_SIZE"}) {
        const char* v = std::getenv(var);
        if (v != nullptr && std::atoi(v) > 0) return static_cast<unsigned>(std::atoi(v));
    }
    return 0;
}

// Cores of this machine (at least 1).
inline unsigned machine_cores() { return std::max(1u, std::thread::hardware_concurrency()); }

}  // namespace gpucoll
