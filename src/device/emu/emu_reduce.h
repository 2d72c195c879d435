// emu_reduce.h - reductions of the emulated GPU: blocked CPU loops over
// host-accessible memory (the backend's read-write views).
#pragma once

#include <cstddef>

#include "device/device.h"

namespace gpucoll {

// dst[i] = srcs[0][i] op ... op srcs[nsrc-1][i] for i < count. Pointers may
// have any byte alignment; dst may equal any srcs[k] exactly but must not
// overlap one partially. UNSUPPORTED for pairs MPI does not define.
Status emu_reduce(void* dst, const void* const* srcs, int nsrc, size_t count, gpucoll_dtype_t dtype,
                  gpucoll_op_t op);

}  // namespace gpucoll
