// cuda_absent.cc - the cuda backend's entry points in a build without CUDA
// (configure found no toolkit, or was given --without-cuda).
#include "device/cuda/cuda_pool.h"
#include "device/device.h"

namespace gpucoll {

namespace {

Status not_built() {
    return set_error(GPUCOLL_ERR_NO_BACKEND,
                     "gpucoll was built without CUDA, so the cuda backend is unavailable: "
                     "reconfigure with --with-cuda=DIR (the toolkit holding bin/nvcc and "
                     "lib64/libcudart_static.a) and rebuild, or select the emulated device "
                     "(GPUCOLL_DEVICE=emu)");
}

}  // namespace

bool cuda_device_present() { return false; }

std::unique_ptr<Device> make_cuda_device() {
    (void)not_built();
    return nullptr;
}

namespace cuda {

Status alloc_pool_memory(void** ptr, size_t) {
    if (ptr != nullptr) *ptr = nullptr;
    return not_built();
}

Status free_pool_memory(void* ptr) { return ptr == nullptr ? kSuccess : not_built(); }

}  // namespace cuda

}  // namespace gpucoll
