// one_shot_slot.h - how large one-shot allreduce's scratch slot is, decided
// in one place for the node communicator (intra/node_comm.cc) and for
// gpucoll_topo's selection table; header-only.
#pragma once

#include <cstddef>
#include <string_view>

namespace gpucoll::intra {

// The largest allreduce auto sends through one-shot
// (coll_gpucoll_allreduce_one_shot_max; 0: the backend's default). One-shot
// wins while its extra n x S of reads costs less than two-shot's two extra
// rounds. emu: crossover measured at 16-32 KiB with 3-4 ranks on the 2-core
// VM (docs/performance.md). cuda: 256 KiB, an assumption until measured on
// a GPU node.
// At most kOneShotMaxCap: each rank keeps two slots of it in device memory
// per communicator, and a larger value would wrap the scratch size.
constexpr size_t kOneShotMaxCap = size_t{256} << 20;
constexpr size_t one_shot_max_bytes(std::string_view backend, size_t configured) {
    if (configured != 0) return configured < kOneShotMaxCap ? configured : kOneShotMaxCap;
    return backend == "emu" ? size_t{16} << 10 : size_t{256} << 10;
}

// Each of a rank's two one-shot scratch slots: the limit rounded up to 256
// bytes, so that slots stay aligned. One-shot runs only up to this.
constexpr size_t one_shot_slot_bytes(size_t one_shot_max) {
    return (one_shot_max + 255) / 256 * 256;
}

}  // namespace gpucoll::intra
