// host_ranges.h - addresses that are host memory for certain, told without
// asking the driver: the executable's own image (code, static data), the
// brk heap (malloc's main arena) and the calling thread's stack. A backend
// whose pointer query is a driver call (cuda: cuPointerGetAttributes, about
// 0.2 us) answers these from here, so the host scalars of HPC codes (an
// MPI_Allreduce of a local sum on the stack) cost no driver call. Memory
// the driver maps (device, managed, its own pinned allocations) comes from
// mmap and is never in these ranges; host memory elsewhere (large mallocs,
// other threads' stacks, shared libraries) is simply not answered here.
#pragma once

namespace gpucoll::host_ranges {

// true: p is host memory. false: unknown (ask the backend).
bool certainly_host(const void* p);

}  // namespace gpucoll::host_ranges
