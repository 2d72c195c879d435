// model_table.h - the selection table from the cost model (topo/cost_model):
// for one node communicator, the algorithm the model predicts fastest for
// each collective and size class, computed once when the communicator is
// created and looked up on every call (a prediction per call would cost
// more than a small call itself).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gpucoll.h"
#include "topo/cost_model.h"

namespace gpucoll::topo {

// The preset whose values a params file's missing keys take on a device
// backend: "emu" on emu, "h100-nvswitch" on cuda (and any other).
std::string base_preset(const std::string& backend);

// Link costs named by spec: a preset ("h100-nvswitch", "pcie4-workstation",
// "emu"), else a params file (what contrib/calibrate.py writes, naming every
// key) refining base_preset(backend). The one reading of a spec, for the
// node communicator (coll_gpucoll_cost_model) and gpucoll_topo --model.
// False with *error set when spec names neither.
bool resolve_model(const std::string& spec, const std::string& backend, ModelParams* out,
                   std::string* error);

// resolve_model once per process for each spec and backend. Null with
// *error set when spec names neither a preset nor a params file.
const ModelParams* load_model(const std::string& spec, const std::string& backend,
                              std::string* error);

// Equal on every process that loaded the same parameters.
uint64_t model_fingerprint(const ModelParams& params);

class ModelTable {
public:
    // The fastest algorithm of the one-node table (or staged) per collective
    // and size class, for size ranks on one node; one-shot only up to
    // scratch_slot_bytes (its scratch slot).
    void build(const ModelParams& params, int size, size_t scratch_slot_bytes);
    bool empty() const { return table_.empty(); }
    // GPUCOLL_ALGO_AUTO when there is no table or coll is not in it.
    gpucoll_algorithm_t lookup(gpucoll_coll_t coll, size_t bytes) const;
    // "allreduce: one_shot to 16K, two_shot to 8M, ring above; ..." for verbose output.
    std::string summary() const;

private:
    // Size class b holds calls of (2^(b-1), 2^b] bytes; the model is asked
    // at 2^b.
    static constexpr int kClasses = 48;
    static int size_class(size_t bytes);
    std::vector<std::array<gpucoll_algorithm_t, kClasses>> table_;  // per collective
};

}  // namespace gpucoll::topo
