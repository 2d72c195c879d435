// cuda_check.h - CUDA runtime errors as gpucoll statuses, and a scoped switch
// of the calling thread's current device. Included only by the cuda backend.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <mutex>

#include "common/status.h"

#if CUDART_VERSION < 12000
#error \
    "gpucoll's cuda backend needs CUDA 12.0 or newer; configure --without-cuda to build without it"
#endif

namespace gpucoll::cuda {

// What the user can do about e; "" when the CUDA message says it all.
inline const char* error_hint(cudaError_t e) {
    switch (e) {
        case cudaErrorNoDevice:
            return " (no GPU is visible to this process: check nvidia-smi and "
                   "CUDA_VISIBLE_DEVICES)";
        case cudaErrorInsufficientDriver:
        case cudaErrorCompatNotSupportedOnDevice:
            return " (the NVIDIA driver is missing or older than the CUDA runtime gpucoll was built"
                   " with: install a newer driver, or rebuild gpucoll with an older CUDA toolkit)";
        case cudaErrorMemoryAllocation:
            return " (device memory is exhausted: free buffers or use smaller messages)";
        case cudaErrorNoKernelImageForDevice:
        case cudaErrorUnsupportedPtxVersion:
            return " (gpucoll's kernels were not built for this GPU: reconfigure with"
                   " --with-cuda-arch listing its compute capability, e.g. \"80 90 100\")";
        case cudaErrorIllegalAddress:
        case cudaErrorLaunchFailure:
        case cudaErrorMisalignedAddress:
        case cudaErrorIllegalInstruction:
        case cudaErrorHardwareStackError:
        case cudaErrorInvalidPc:
        case cudaErrorAssert:
            return " (a kernel faulted: the CUDA context is unusable and the process must exit;"
                   " run under compute-sanitizer to find the faulting access)";
        case cudaErrorPeerAccessUnsupported:
            return " (these two GPUs cannot access each other's memory directly)";
        default:
            return "";
    }
}

// Turns the result of a CUDA runtime call into a Status. On failure it records
// "<what> failed: <CUDA's description> (<error name>)<hint>" as the calling
// thread's last error, and clears CUDA's own last-error state so that a
// non-sticky error does not resurface from an unrelated later call.
// `what` is printf-style: name the call and what it was asked to do.
inline Status check(cudaError_t e, const char* what, ...) __attribute__((format(printf, 2, 3)));
inline Status check(cudaError_t e, const char* what, ...) {
    if (e == cudaSuccess) return kSuccess;
    (void)cudaGetLastError();
    char call[256];
    va_list ap;
    va_start(ap, what);
    std::vsnprintf(call, sizeof call, what, ap);
    va_end(ap);
    const Status s =
        e == cudaErrorMemoryAllocation ? GPUCOLL_ERR_OUT_OF_MEMORY : GPUCOLL_ERR_DEVICE;
    return set_error(s, "%s failed: %s (%s)%s", call, cudaGetErrorString(e), cudaGetErrorName(e),
                     error_hint(e));
}

// The driver's context calls, resolved by the device at its initialisation
// (the library reaches the driver only through entry points); null before.
struct ContextCalls {
    PFN_cuCtxGetCurrent_v4000 get = nullptr;
    PFN_cuCtxSetCurrent_v4000 set = nullptr;
    PFN_cuCtxGetDevice_v2000 get_device = nullptr;
    PFN_cuDeviceGet_v2000 device_get = nullptr;
    PFN_cuDevicePrimaryCtxRetain_v7000 retain = nullptr;
};
inline ContextCalls context_calls;

// Each GPU's primary context (the runtime's), retained once for the process
// the first time a thread is switched to it (never released: the process
// uses that GPU). kMaxPrimary GPUs are switched to with the driver; beyond,
// with cudaSetDevice.
constexpr int kMaxPrimary = 64;
inline std::atomic<CUcontext> primary_contexts[kMaxPrimary];
inline std::mutex primary_mutex;
// Each GPU's driver handle (cuDeviceGet) + 1, asked once (0: not yet):
// every switch compares the current context's device with it.
inline std::atomic<int> device_handles[kMaxPrimary] = {};

// GPU device's driver handle; false if the driver will not give it.
inline bool device_handle(int device, CUdevice* out) {
    if (device >= 0 && device < kMaxPrimary) {
        const int cached = device_handles[device].load(std::memory_order_relaxed);
        if (cached > 0) {
            *out = cached - 1;  // stored + 1: 0 means not asked yet
            return true;
        }
    }
    if (context_calls.device_get == nullptr ||
        context_calls.device_get(out, device) != CUDA_SUCCESS)
        return false;
    if (device >= 0 && device < kMaxPrimary)
        device_handles[device].store(static_cast<int>(*out) + 1, std::memory_order_relaxed);
    return true;
}

// GPU device's primary context, or nullptr where the driver calls are not
// there (then cudaSetDevice switches).
inline Status primary_context(int device, CUcontext* out) {
    *out = nullptr;
    if (context_calls.retain == nullptr || device < 0 || device >= kMaxPrimary) return kSuccess;
    *out = primary_contexts[device].load(std::memory_order_acquire);
    if (*out != nullptr) return kSuccess;
    std::lock_guard<std::mutex> lock(primary_mutex);
    *out = primary_contexts[device].load(std::memory_order_relaxed);
    if (*out != nullptr) return kSuccess;
    CUdevice handle = 0;
    CUcontext context = nullptr;
    if (!device_handle(device, &handle) || context_calls.retain(&context, handle) != CUDA_SUCCESS ||
        context == nullptr)
        return set_error(GPUCOLL_ERR_DEVICE, "cannot retain GPU %d's primary context", device);
    primary_contexts[device].store(context, std::memory_order_release);
    *out = context;
    return kSuccess;
}

// What switch_device changed, for restore_device.
struct DeviceSwitch {
    bool changed = false;
    bool with_runtime = false;             // switched with cudaSetDevice
    CUcontext previous_context = nullptr;  // maybe none
    int previous = -1;                     // cudaGetDevice's answer before (with_runtime)
};

// Makes device current for the calling thread, with a context (the work
// that follows needs one); *out says how to undo it. A thread already on a
// context of device stays on it. Otherwise device's primary context is made
// current with the driver (cuCtxSetCurrent): the runtime works in the
// current context, and its own choice of device for the thread (what
// cudaGetDevice says once no context is current) stays as it was.
inline Status switch_device(int device, DeviceSwitch* out) {
    *out = DeviceSwitch{};
    CUcontext context = nullptr;
    if (context_calls.get != nullptr && context_calls.get(&context) != CUDA_SUCCESS)
        context = nullptr;
    if (context != nullptr && context_calls.get_device != nullptr) {
        CUdevice current = -1, wanted = -1;
        if (context_calls.get_device(&current) == CUDA_SUCCESS && device_handle(device, &wanted) &&
            current == wanted)
            return kSuccess;
    }
    CUcontext primary = nullptr;
    GPUCOLL_TRY(primary_context(device, &primary));
    if (primary != nullptr) {
        if (context_calls.set(primary) != CUDA_SUCCESS)
            return set_error(GPUCOLL_ERR_DEVICE, "cannot make GPU %d's context current", device);
        *out = DeviceSwitch{true, false, context, -1};
        return kSuccess;
    }
    // Without the driver's calls (or beyond kMaxPrimary GPUs).
    int current = -1;
    GPUCOLL_TRY(check(cudaGetDevice(&current), "cudaGetDevice"));
    if (current == device && context != nullptr) return kSuccess;
    GPUCOLL_TRY(check(cudaSetDevice(device), "cudaSetDevice(%d)", device));
    *out = DeviceSwitch{true, true, context, current};
    return kSuccess;
}

// Gives the thread exactly its previous state back: its previous context,
// or none (cudaSetDevice of the previous ordinal would create a context on
// GPU 0 for a thread that had none).
inline void restore_device(const DeviceSwitch& s) {
    if (!s.changed) return;
    if (context_calls.set != nullptr)
        (void)context_calls.set(s.previous_context);
    else if (s.previous >= 0)
        (void)cudaSetDevice(s.previous);
}

// switch_device while the guard lives, restore_device afterwards. Cheap when
// the device already is current (cuCtxGetCurrent and cuCtxGetDevice).
class ScopedDevice {
public:
    ScopedDevice() = default;
    ScopedDevice(const ScopedDevice&) = delete;
    ScopedDevice& operator=(const ScopedDevice&) = delete;
    ~ScopedDevice() { restore_device(switched_); }

    Status enter(int device) {
        restore_device(switched_);
        switched_ = DeviceSwitch{};
        return switch_device(device, &switched_);
    }

private:
    DeviceSwitch switched_;
};

}  // namespace gpucoll::cuda
