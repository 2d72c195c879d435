// cuda_check.h - CUDA runtime errors as gpucoll statuses, and a scoped switch
// of the calling thread's current device. Included only by the cuda backend.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstdarg>
#include <cstdio>

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

// The driver's cuCtxGetCurrent / cuCtxSetCurrent, resolved by the device at
// its initialisation (the library reaches the driver only through entry
// points); null before.
struct ContextCalls {
    PFN_cuCtxGetCurrent_v4000 get = nullptr;
    PFN_cuCtxSetCurrent_v4000 set = nullptr;
};
inline ContextCalls context_calls;

// What switch_device changed, for restore_device.
struct DeviceSwitch {
    bool changed = false;
    CUcontext previous_context = nullptr;  // maybe none
    int previous = -1;                     // cudaGetDevice's answer before
};

// Makes device current for the calling thread; *out says how to undo it.
// Switches only when the thread is on another device, or (with
// make_context_current) has no context: cudaSetDevice makes the primary
// context current (CUDA 12 and later), which driver-API calls on the legacy
// stream need (cudaGetDevice alone does not).
inline Status switch_device(int device, bool make_context_current, DeviceSwitch* out) {
    *out = DeviceSwitch{};
    CUcontext context = nullptr;
    if (context_calls.get != nullptr && context_calls.get(&context) != CUDA_SUCCESS)
        context = nullptr;
    int current = -1;
    GPUCOLL_TRY(check(cudaGetDevice(&current), "cudaGetDevice"));
    if (current == device && (context != nullptr || !make_context_current)) return kSuccess;
    GPUCOLL_TRY(check(cudaSetDevice(device), "cudaSetDevice(%d)", device));
    *out = DeviceSwitch{true, context, current};
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
// the device already is current (one cuCtxGetCurrent and one cudaGetDevice).
class ScopedDevice {
public:
    ScopedDevice() = default;
    ScopedDevice(const ScopedDevice&) = delete;
    ScopedDevice& operator=(const ScopedDevice&) = delete;
    ~ScopedDevice() { restore_device(switched_); }

    Status enter(int device, bool make_context_current = false) {
        restore_device(switched_);
        return switch_device(device, make_context_current, &switched_);
    }

private:
    DeviceSwitch switched_;
};

}  // namespace gpucoll::cuda
