// report.h - a Machine in words: the matrix users know from
// `nvidia-smi topo -m`, affinities, NIC per GPU, ring order and algorithm
// family, as text or JSON. Used by the gpucoll_topo tool and the component's
// verbose output.
#pragma once

#include <string>
#include <vector>

#include "topo/paths.h"
#include "topo/topology.h"

namespace gpucoll::topo {

// What the report covers: the machine, and the ranks of one node that use
// its GPUs (gpu_of_rank[r]: rank r's GPU, -1 unknown; empty: one rank per GPU).
struct ReportInput {
    const Machine* machine = nullptr;
    std::vector<int> gpu_of_rank;
};

std::string format_text(const ReportInput& in);
std::string format_json(const ReportInput& in);

// One rank per GPU, in order.
std::vector<int> one_rank_per_gpu(const Machine& m);

}  // namespace gpucoll::topo
