// selection_builtin.cc - the built-in measured selection tables
// (selection_table.h): what coll_gpucoll_selection_file "auto" (the
// default) reads for a backend.
//
// cuda: from the 2026-11-27 measurements on the lent H100 (one H100 80GB
// HBM3, every rank on it; docs/performance.md, "The four collectives, with
// MPS"; perf/results/h100-2026-11-27/), written by
//   contrib/selection-table.py perf/results/h100-2026-11-27/calibrate-np{2,4}-mps.txt
//     perf/results/h100-2026-11-27/one-kernel-mps.txt
//     perf/results/h100-2026-11-27/calibrate-np{2,4}-nomps.txt
// Only for what was measured: 2 and 4 ranks sharing one GPU, with MPS
// (shared-mps) and without (shared-no-mps). One GPU per rank, other rank
// counts, reduce_scatter and reduce keep the cost model and the size
// thresholds: nothing was measured there. Untested as a default on a GPU.
// emu: none (the tests check the size thresholds; a table measured on a
// machine is given with coll_gpucoll_selection_file).
#include "core/selection_table.h"

namespace gpucoll {

namespace {

// clang-format off
constexpr const char kCudaTable[] =
    "# gpucoll measured selection table (coll_gpucoll_selection_file, docs/tuning.md)\n"
    "#   perf/results/h100-2026-11-27/calibrate-np2-mps.txt\n"
    "#   perf/results/h100-2026-11-27/calibrate-np4-mps.txt\n"
    "#   perf/results/h100-2026-11-27/one-kernel-mps.txt\n"
    "#   perf/results/h100-2026-11-27/calibrate-np2-nomps.txt\n"
    "#   perf/results/h100-2026-11-27/calibrate-np4-nomps.txt\n"
    "backend cuda\n"
    "# collective           ranks  sharing            from        to  algorithm\n"
    "allreduce                  2  shared-mps            0       128  staged     # chosen at 8 B to 128 B\n"
    "allreduce                  2  shared-mps          129       64K  one_kernel # chosen at 256 B to 64 KiB\n"
    "allreduce                  2  shared-mps        65537      256K  one_shot   # chosen at 128 KiB to 256 KiB\n"
    "allreduce                  2  shared-mps       262145        2M  two_shot   # chosen at 512 KiB to 2 MiB\n"
    "allreduce                  2  shared-mps      2097153       inf  ring       # chosen at 4 MiB to 256 MiB\n"
    "allreduce                  2  shared-no-mps         0      512K  staged     # chosen at 8 B to 512 KiB\n"
    "allreduce                  2  shared-no-mps    524289       inf  ring       # chosen at 1 MiB to 256 MiB\n"
    "allreduce                  4  shared-mps            0       256  staged     # chosen at 8 B to 256 B\n"
    "allreduce                  4  shared-mps          257       64K  one_kernel # chosen at 512 B to 64 KiB\n"
    "allreduce                  4  shared-mps        65537      256K  one_shot   # chosen at 128 KiB to 256 KiB\n"
    "allreduce                  4  shared-mps       262145        8M  two_shot   # chosen at 512 KiB to 8 MiB\n"
    "allreduce                  4  shared-mps      8388609       inf  ring       # chosen at 16 MiB to 256 MiB\n"
    "allreduce                  4  shared-no-mps         0        1M  staged     # chosen at 8 B to 1 MiB\n"
    "allreduce                  4  shared-no-mps   1048577       64M  two_shot   # chosen at 2 MiB to 64 MiB\n"
    "allreduce                  4  shared-no-mps  67108865       inf  ring       # chosen at 128 MiB to 256 MiB\n"
    "bcast                      2  shared-mps            0       16K  staged     # chosen at 8 B to 16 KiB\n"
    "bcast                      2  shared-mps        16385       inf  direct     # chosen at 32 KiB to 256 MiB\n"
    "bcast                      2  shared-no-mps         0       16K  staged     # chosen at 8 B to 16 KiB\n"
    "bcast                      2  shared-no-mps     16385       inf  direct     # chosen at 32 KiB to 256 MiB\n"
    "bcast                      4  shared-mps            0       16K  staged     # chosen at 8 B to 16 KiB\n"
    "bcast                      4  shared-mps        16385       inf  direct     # chosen at 32 KiB to 256 MiB\n"
    "bcast                      4  shared-no-mps         0        1M  staged     # chosen at 8 B to 1 MiB\n"
    "bcast                      4  shared-no-mps   1048577       inf  direct     # chosen at 2 MiB to 256 MiB\n"
    "allgather                  2  shared-mps            0       16K  staged     # chosen at 8 B to 16 KiB\n"
    "allgather                  2  shared-mps        16385       inf  direct     # chosen at 32 KiB to 256 MiB\n"
    "allgather                  2  shared-no-mps         0        1M  staged     # chosen at 8 B to 1 MiB\n"
    "allgather                  2  shared-no-mps   1048577       inf  direct     # chosen at 2 MiB to 256 MiB\n"
    "allgather                  4  shared-mps            0       16K  staged     # chosen at 16 B to 16 KiB\n"
    "allgather                  4  shared-mps        16385       inf  direct     # chosen at 32 KiB to 256 MiB\n"
    "allgather                  4  shared-no-mps         0        1M  staged     # chosen at 16 B to 1 MiB\n"
    "allgather                  4  shared-no-mps   1048577       inf  direct     # chosen at 2 MiB to 256 MiB\n"
    "reduce_scatter_block       2  shared-mps            0       512  staged     # chosen at 8 B to 512 B\n"
    "reduce_scatter_block       2  shared-mps          513       inf  direct     # chosen at 1 KiB to 256 MiB\n"
    "reduce_scatter_block       2  shared-no-mps         0      512K  staged     # chosen at 8 B to 512 KiB\n"
    "reduce_scatter_block       2  shared-no-mps    524289       inf  direct     # chosen at 1 MiB to 256 MiB\n"
    "reduce_scatter_block       4  shared-mps            0        4K  staged     # chosen at 16 B to 4 KiB\n"
    "reduce_scatter_block       4  shared-mps         4097       inf  direct     # chosen at 8 KiB to 256 MiB\n"
    "reduce_scatter_block       4  shared-no-mps         0        1M  staged     # chosen at 16 B to 1 MiB\n"
    "reduce_scatter_block       4  shared-no-mps   1048577       inf  direct     # chosen at 2 MiB to 256 MiB\n";
// clang-format on

}  // namespace

const char* builtin_selection_text(const std::string& backend) {
    return backend == "cuda" ? kCudaTable : "";
}

}  // namespace gpucoll
