// selection_table.h - a measured selection table: which algorithm auto
// takes, per collective, rank count, GPU sharing mode and size range, as a
// measurement on the machine found fastest (contrib/selection-table.py
// writes one from contrib/gpu-run.sh calibrate's tables). Read once per
// process (coll_gpucoll_selection_file, or the backend's built-in table),
// resolved once per node communicator into SelectionRules, looked up on
// every call. A forced algorithm wins over it; sizes it does not cover fall
// back to the cost model's table and the size thresholds
// (intra/selection.cc).
//
// The file, one rule per line ('#' starts a comment):
//
//   backend cuda                                  optional: emu or cuda only
//   # collective  ranks  sharing     from  to    algorithm
//   allreduce     2,4    shared-mps  0     2K    staged
//   allreduce     2      shared-mps  2049  inf   ring
//
// collective: allreduce, bcast, allgather, reduce_scatter,
// reduce_scatter_block, reduce. ranks: a count, a comma list, or '*'.
// sharing: gpu-per-rank, shared-mps (ranks share a GPU, their kernels run
// side by side: MPS), shared-no-mps (ranks share a GPU and take turns), or
// '*'. from/to: bytes of the call as the selection counts them (allgather
// and reduce_scatter(_block): the whole buffer), both included, with an
// optional K, M, G or T suffix (powers of 1024); to may be 'inf'.
// algorithm: staged, auto (the fallback for that range), or an algorithm
// of the collective on one node.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gpucoll.h"

namespace gpucoll {

// How the ranks of a node communicator use their GPUs.
enum class GpuSharing : int { Any = 0, GpuPerRank, SharedMps, SharedNoMps };

const char* gpu_sharing_name(GpuSharing s);

// The sharing mode of a node communicator: shared when two ranks drive one
// GPU (or some rank's GPU is unknown), concurrent when every rank's GPU
// runs the kernels of the processes sharing it side by side (CUDA: MPS).
inline GpuSharing gpu_sharing_of(bool gpu_shared, bool kernels_concurrent) {
    if (!gpu_shared) return GpuSharing::GpuPerRank;
    return kernels_concurrent ? GpuSharing::SharedMps : GpuSharing::SharedNoMps;
}

struct SelectionRange {
    size_t from = 0, to = 0;  // bytes, both included
    gpucoll_algorithm_t algo = GPUCOLL_ALGO_AUTO;
    int line = 0;
};

// The rules one node communicator follows: per collective, ranges sorted
// by size, not overlapping.
class SelectionRules {
public:
    bool empty() const;
    // GPUCOLL_ALGO_AUTO when no range holds bytes (or the range says auto).
    gpucoll_algorithm_t lookup(gpucoll_coll_t coll, size_t bytes) const;
    // Whether some range of coll names algo.
    bool names(gpucoll_coll_t coll, gpucoll_algorithm_t algo) const;
    // "staged to 2K, one_kernel to 64K, two_shot to 8M, ring above" for one
    // collective ("" when the table has nothing for it).
    std::string summary(gpucoll_coll_t coll) const;

private:
    friend class SelectionTable;
    std::array<std::vector<SelectionRange>, GPUCOLL_COLL_REDUCE_LOCAL> ranges_;
};

class SelectionTable {
public:
    // Parses text (origin names it in messages). False with *error
    // ("ORIGIN:LINE: what is wrong; what to do") on a line that does not
    // read, an unknown collective, sharing mode or algorithm, or two ranges
    // of one collective, rank count and sharing mode that overlap. A rule
    // whose algorithm does not serve its collective on one node (bcast
    // two_shot, allreduce hier) is left out, with a line in *warnings:
    // those sizes fall back.
    static bool parse(const std::string& text, const std::string& origin, SelectionTable* out,
                      std::string* error, std::vector<std::string>* warnings);

    // The backend the file names ("" when it names none).
    const std::string& backend() const { return backend_; }
    const std::string& origin() const { return origin_; }
    // Equal on every process that read the same rules (a hash of them).
    uint64_t fingerprint() const { return fingerprint_; }

    // The rules of a node communicator of ranks ranks sharing GPUs as
    // sharing: per collective, the lines of the most specific key that has
    // any for it, in this order: (ranks, sharing), (ranks, *), (*, sharing),
    // (*, *).
    SelectionRules rules(int ranks, GpuSharing sharing) const;

private:
    struct Rule {
        gpucoll_coll_t coll;
        int ranks;  // 0: any
        GpuSharing sharing;
        SelectionRange range;
    };
    std::vector<Rule> rules_;
    std::string backend_, origin_;
    uint64_t fingerprint_ = 0;
};

// The table spec names for a backend ("emu", "cuda"), read once per process
// and spec: null or "" or "auto": the backend's built-in table (cuda: the
// 2026-11-27 H100 measurements, ranks sharing one GPU; emu: none); "none":
// none; else a file. Null when there is none, or with *error set when the
// file cannot be read, does not parse, or names another backend. *warnings:
// rules left out (see parse). *builtin: the table is the built-in one.
// *first: this is the process's first load of it (say the error and the
// warnings once).
const SelectionTable* load_selection_table(const char* spec, const std::string& backend,
                                           std::string* error, std::vector<std::string>* warnings,
                                           bool* builtin, bool* first);

// The built-in table's text for a backend ("" when it has none).
const char* builtin_selection_text(const std::string& backend);

}  // namespace gpucoll
