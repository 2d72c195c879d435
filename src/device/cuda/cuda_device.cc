// cuda_device.cc - the Device interface on the CUDA runtime.
//
// cudart is linked statically and the driver API is reached only through
// entry points resolved at run time (cudaGetDriverEntryPointByVersion), so the
// library loads, and cuda_device_present() answers false quietly, on machines
// without an NVIDIA driver.
//
// Which GPU: work without a stream runs on the calling thread's current device
// (as cudaMalloc does); the core makes its communicator's GPU current
// (DeviceScope: enter_device/leave_device, which restore the thread's previous
// context, or none) on every thread that works for it. A Stream remembers the
// device it was created on, and kernels enqueued on it switch to that device
// for the launch. Work without a stream goes to the legacy default stream and is waited
// for, so it is also ordered after the application's work on blocking streams.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "device/cuda/cuda_check.h"
#include "device/cuda/cuda_flags.h"
#include "device/cuda/cuda_one_kernel.h"
#include "device/cuda/cuda_pool.h"
#include "device/cuda/cuda_reduce.h"
#include "device/device.h"
#include "device/host_page_cache.h"
#include "device/host_ranges.h"
#include "device/reduce_ops.h"

namespace gpucoll {
namespace cuda {
namespace {

CUdeviceptr device_address(const void* p) {
    return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

// ---- driver entry points ------------------------------------------------------------

class DriverApi {
public:
    Status load() {
        GPUCOLL_TRY(resolve("cuPointerGetAttribute", &pointer_get_attribute_));
        GPUCOLL_TRY(resolve("cuMemGetAddressRange", &mem_get_address_range_));
        GPUCOLL_TRY(resolve("cuPointerGetAttributes", &pointer_get_attributes_));
        GPUCOLL_TRY(resolve("cuDeviceGetUuid", &device_get_uuid_));
        GPUCOLL_TRY(resolve("cuDeviceGetAttribute", &device_get_attribute_));
        GPUCOLL_TRY(resolve("cuGetErrorString", &get_error_string_));
        GPUCOLL_TRY(resolve("cuCtxGetCurrent", &ctx_get_current_));
        GPUCOLL_TRY(resolve("cuCtxSetCurrent", &ctx_set_current_));
        ContextCalls calls{ctx_get_current_, ctx_set_current_, nullptr, nullptr, nullptr};
        GPUCOLL_TRY(resolve("cuCtxGetDevice", &calls.get_device));
        GPUCOLL_TRY(resolve("cuDeviceGet", &calls.device_get));
        GPUCOLL_TRY(resolve("cuDevicePrimaryCtxRetain", &calls.retain));
        context_calls = calls;  // for ScopedDevice
        GPUCOLL_TRY(resolve("cuDevicePrimaryCtxGetState", &primary_ctx_get_state_));
        GPUCOLL_TRY(resolve("cuDeviceTotalMem", &device_total_mem_));
        // Stream memory operations are optional: without them, device flags
        // are flag kernels (cuda_flags.cu).
        if (resolve("cuStreamWriteValue64", &stream_write_value64_) != kSuccess ||
            resolve("cuStreamWaitValue64", &stream_wait_value64_) != kSuccess) {
            stream_write_value64_ = nullptr;
            stream_wait_value64_ = nullptr;
        }
        return kSuccess;
    }

    // Everything a collective needs to know of ptr, in one driver call that
    // needs no current context and creates none (cudaPointerGetAttributes
    // would create the primary context of the current device, ~0.5 GiB, in a
    // process that has not touched the GPU yet). Memory the driver does not
    // know reads as memory type 0: host memory.
    struct Attributes {
        unsigned int memory_type = 0;  // CUmemorytype, 0: not CUDA memory
        unsigned int is_managed = 0;
        int ordinal = -1;
        unsigned long long buffer_id = 0;
    };
    // kSuccess: all of *a is valid. On failure, a->memory_type is still
    // valid if type_known (the driver could tell the type but not the rest).
    Status attributes(const void* ptr, Attributes* a, bool* type_known) const {
        // The allocation's range is not among them: for pool and virtual-
        // memory allocations the range attributes give the reservation, so
        // device memory asks cuMemGetAddressRange (address_range()).
        CUpointer_attribute names[] = {
            CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            CU_POINTER_ATTRIBUTE_IS_MANAGED,
            CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            CU_POINTER_ATTRIBUTE_BUFFER_ID,
        };
        void* data[] = {&a->memory_type, &a->is_managed, &a->ordinal, &a->buffer_id};
        static_assert(sizeof names / sizeof names[0] == sizeof data / sizeof data[0]);
        *type_known = false;
        const CUresult r = pointer_get_attributes_(sizeof names / sizeof names[0], names, data,
                                                   device_address(ptr));
        if (r == CUDA_SUCCESS) {
            *type_known = true;
            return kSuccess;
        }
        const Status s = check(r, "cuPointerGetAttributes(%p)", ptr);
        // The memory type alone, so that device memory is never taken for host.
        unsigned int type = 0;
        if (pointer_get_attribute_(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, device_address(ptr)) ==
            CUDA_SUCCESS) {
            a->memory_type = type;
            *type_known = true;
        }
        return s;
    }

    // The calling thread's current context (nullptr: none yet), and back.
    Status current_context(CUcontext* ctx) const {
        return check(ctx_get_current_(ctx), "cuCtxGetCurrent");
    }
    void restore_context(CUcontext ctx) const { (void)ctx_set_current_(ctx); }
    // GPU ordinal's memory in bytes (0 if it cannot be read). Needs no context.
    size_t total_memory(int ordinal) const {
        size_t bytes = 0;
        return device_total_mem_(&bytes, static_cast<CUdevice>(ordinal)) == CUDA_SUCCESS ? bytes
                                                                                         : 0;
    }
    // Whether the primary context of GPU ordinal is active in this process
    // (false on error). Creates nothing.
    bool primary_context_active(int ordinal) const {
        unsigned int flags = 0;
        int active = 0;
        return primary_ctx_get_state_(static_cast<CUdevice>(ordinal), &flags, &active) ==
                   CUDA_SUCCESS &&
               active != 0;
    }

    // The device holding ptr (device memory only).
    Status ordinal(const void* ptr, int* out) const {
        return check(
            pointer_get_attribute_(out, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, device_address(ptr)),
            "cuPointerGetAttribute(DEVICE_ORDINAL, %p)", ptr);
    }

    // The device's UUID (16 bytes): which ranks share a GPU.
    Status uuid(int ordinal, unsigned char out[16]) const {
        CUuuid u{};
        GPUCOLL_TRY(check(device_get_uuid_(&u, static_cast<CUdevice>(ordinal)),
                          "cuDeviceGetUuid(%d)", ordinal));
        std::memcpy(out, u.bytes, 16);
        return kSuccess;
    }

    bool has_stream_memory_ops(int ordinal) const {
        if (stream_write_value64_ == nullptr || stream_wait_value64_ == nullptr) return false;
        int supported = 0;
        return device_get_attribute_(&supported, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                                     static_cast<CUdevice>(ordinal)) == CUDA_SUCCESS &&
               supported != 0;
    }
    // After the work enqueued before it (with a memory barrier), *flag = value.
    Status stream_write(cudaStream_t stream, uint64_t* flag, uint64_t value) const {
        return check(stream_write_value64_(reinterpret_cast<CUstream>(stream), device_address(flag),
                                           value, CU_STREAM_WRITE_VALUE_DEFAULT),
                     "cuStreamWriteValue64(%p)", static_cast<void*>(flag));
    }
    // Work enqueued after it starts once *flag >= value (values below 2^63).
    Status stream_wait(cudaStream_t stream, const uint64_t* flag, uint64_t value) const {
        return check(stream_wait_value64_(reinterpret_cast<CUstream>(stream), device_address(flag),
                                          value, CU_STREAM_WAIT_VALUE_GEQ),
                     "cuStreamWaitValue64(%p)", static_cast<const void*>(flag));
    }

    // The mapped allocation holding ptr (needs the owning device's context
    // current). For stream-ordered pool and virtual-memory allocations the
    // pointer attributes give the reserved range, not the allocation.
    Status address_range(const void* ptr, uintptr_t* base, size_t* size) const {
        CUdeviceptr b = 0;
        GPUCOLL_TRY(check(mem_get_address_range_(&b, size, device_address(ptr)),
                          "cuMemGetAddressRange(%p)", ptr));
        *base = static_cast<uintptr_t>(b);
        return kSuccess;
    }

    Status buffer_id(const void* ptr, uint64_t* id) const {
        unsigned long long v = 0;
        GPUCOLL_TRY(
            check(pointer_get_attribute_(&v, CU_POINTER_ATTRIBUTE_BUFFER_ID, device_address(ptr)),
                  "cuPointerGetAttribute(BUFFER_ID, %p)", ptr));
        *id = v;
        return kSuccess;
    }

    // False when the allocation holding ptr comes from a stream-ordered pool or
    // the virtual memory API, which cudaIpcGetMemHandle cannot export; true
    // also when the driver cannot tell (cudaIpcGetMemHandle then decides).
    bool legacy_ipc_capable(const void* ptr) const {
        // The driver documents a boolean without its width; a zeroed 64-bit
        // word reads right whether it writes 1, 4 or 8 bytes (little endian).
        uint64_t capable = 0;
        const CUresult r = pointer_get_attribute_(
            &capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, device_address(ptr));
        return r != CUDA_SUCCESS || capable != 0;
    }

private:
    template <typename Fn>
    static Status resolve(const char* symbol, Fn* fn) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
        // The ABI of each function as of CUDA 12.0, whatever the driver version.
        const cudaError_t e =
            cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &found);
#else
        const cudaError_t e = cudaGetDriverEntryPoint(symbol, &p, cudaEnableDefault, &found);
#endif
        GPUCOLL_TRY(cuda::check(e, "looking up the driver function %s", symbol));
        if (found != cudaDriverEntryPointSuccess || p == nullptr) {
            return set_error(GPUCOLL_ERR_DEVICE,
                             "the NVIDIA driver does not provide %s (lookup result %d): install "
                             "a driver for CUDA 12.0 or newer",
                             symbol, static_cast<int>(found));
        }
        *fn = reinterpret_cast<Fn>(p);
        return kSuccess;
    }

    Status check(CUresult r, const char* what, ...) const __attribute__((format(printf, 3, 4)));

    PFN_cuPointerGetAttribute_v4000 pointer_get_attribute_ = nullptr;
    PFN_cuMemGetAddressRange_v3020 mem_get_address_range_ = nullptr;
    PFN_cuPointerGetAttributes_v7000 pointer_get_attributes_ = nullptr;
    PFN_cuDeviceGetUuid_v11040 device_get_uuid_ = nullptr;
    PFN_cuDeviceGetAttribute_v2000 device_get_attribute_ = nullptr;
    PFN_cuStreamWriteValue64_v11070 stream_write_value64_ = nullptr;
    PFN_cuStreamWaitValue64_v11070 stream_wait_value64_ = nullptr;
    PFN_cuGetErrorString_v6000 get_error_string_ = nullptr;
    PFN_cuCtxGetCurrent_v4000 ctx_get_current_ = nullptr;
    PFN_cuCtxSetCurrent_v4000 ctx_set_current_ = nullptr;
    PFN_cuDevicePrimaryCtxGetState_v7000 primary_ctx_get_state_ = nullptr;
    PFN_cuDeviceTotalMem_v3020 device_total_mem_ = nullptr;
};

Status DriverApi::check(CUresult r, const char* what, ...) const {
    if (r == CUDA_SUCCESS) return kSuccess;
    char call[192];
    va_list ap;
    va_start(ap, what);
    std::vsnprintf(call, sizeof call, what, ap);
    va_end(ap);
    const char* text = nullptr;
    if (get_error_string_(r, &text) != CUDA_SUCCESS || text == nullptr) text = "unknown error";
    return set_error(GPUCOLL_ERR_DEVICE, "%s failed: %s (CUresult %d)", call, text,
                     static_cast<int>(r));
}

// ---- streams ---------------------------------------------------------------------------

class CudaStream final : public Stream {
public:
    // owned: false for the application's stream (borrow_stream): not destroyed here.
    CudaStream(cudaStream_t stream, int device, bool owned = true)
        : stream_(stream), device_(device), owned_(owned) {}
    CudaStream(const CudaStream&) = delete;
    CudaStream& operator=(const CudaStream&) = delete;
    // Work still queued completes; the stream's resources go when it has.
    ~CudaStream() override {
        for (const auto& m : pending_) (void)cudaEventDestroy(m.second);
        for (cudaEvent_t e : free_events_) (void)cudaEventDestroy(e);
        if (default_done_ != nullptr) (void)cudaEventDestroy(default_done_);
        if (owned_) (void)cudaStreamDestroy(stream_);
        (void)cudaGetLastError();
    }

    // Markers are events recorded on the stream, reused once reached.
    Status mark(uint64_t* ticket) override {
        ScopedDevice on_device;
        GPUCOLL_TRY(on_device.enter(device_));
        while (pending_.size() >= kMaxMarks) {  // bounded: wait for the oldest
            GPUCOLL_TRY(check(cudaEventSynchronize(pending_.front().second),
                              "cudaEventSynchronize (device %d)", device_));
            GPUCOLL_TRY(collect());
        }
        cudaEvent_t e = nullptr;
        if (!free_events_.empty()) {
            e = free_events_.back();
            free_events_.pop_back();
        } else {
            GPUCOLL_TRY(check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
                              "cudaEventCreateWithFlags (device %d)", device_));
        }
        const cudaError_t r = cudaEventRecord(e, stream_);
        if (r != cudaSuccess) {
            free_events_.push_back(e);
            return check(r, "cudaEventRecord (device %d)", device_);
        }
        pending_.emplace_back(next_ticket_, e);
        *ticket = next_ticket_++;
        return kSuccess;
    }

    Status after_default_stream() override {
        ScopedDevice on_device;
        GPUCOLL_TRY(on_device.enter(device_));
        if (default_done_ == nullptr)
            GPUCOLL_TRY(check(cudaEventCreateWithFlags(&default_done_, cudaEventDisableTiming),
                              "cudaEventCreateWithFlags (device %d)", device_));
        GPUCOLL_TRY(check(cudaEventRecord(default_done_, cudaStreamLegacy),
                          "cudaEventRecord on the default stream (device %d)", device_));
        return check(cudaStreamWaitEvent(stream_, default_done_, 0),
                     "cudaStreamWaitEvent (device %d)", device_);
    }

    Status reached(uint64_t ticket, bool* done) override {
        GPUCOLL_TRY(collect());
        *done = reached_ >= ticket;
        return kSuccess;
    }

    Status synchronize() override {
        return check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (device %d)", device_);
    }

    Status query(bool* complete) override {
        const cudaError_t e = cudaStreamQuery(stream_);
        *complete = e != cudaErrorNotReady;
        if (e == cudaErrorNotReady) (void)cudaGetLastError();
        return e == cudaErrorNotReady ? kSuccess : check(e, "cudaStreamQuery (device %d)", device_);
    }

    cudaStream_t handle() const { return stream_; }
    int device() const { return device_; }

private:
    // Moves reached markers from pending_ to free_events_.
    Status collect() {
        while (!pending_.empty()) {
            const cudaError_t r = cudaEventQuery(pending_.front().second);
            if (r == cudaErrorNotReady) {
                (void)cudaGetLastError();
                break;
            }
            GPUCOLL_TRY(check(r, "cudaEventQuery (device %d)", device_));
            reached_ = pending_.front().first;
            free_events_.push_back(pending_.front().second);
            pending_.pop_front();
        }
        return kSuccess;
    }

    cudaStream_t stream_;
    int device_;
    bool owned_ = true;
    uint64_t next_ticket_ = 1;
    uint64_t reached_ = 0;
    std::deque<std::pair<uint64_t, cudaEvent_t>> pending_;
    std::vector<cudaEvent_t> free_events_;
    cudaEvent_t default_done_ = nullptr;  // after_default_stream()
};

// The CudaStream behind stream (nullptr: synchronous work); INVALID_ARG if the
// stream belongs to another backend.
Status as_cuda_stream(Stream* stream, CudaStream** out) {
    *out = nullptr;
    if (stream == nullptr) return kSuccess;
    *out = dynamic_cast<CudaStream*>(stream);
    if (*out == nullptr) {
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "cuda device: the stream was not created by the cuda device");
    }
    return kSuccess;
}

// ---- IPC -------------------------------------------------------------------------------

// What travels in IpcHandle::bytes. No padding, so equal exports compare equal
// byte for byte.
struct IpcWire {
    uint32_t magic;
    uint32_t version;
    uint64_t process;  // exporter's process_token()
    uint64_t base;     // exporter's address of the allocation
    uint64_t size;
    uint64_t buffer_id;
    int32_t pid;
    int32_t device;
    cudaIpcMemHandle_t handle;
};
static_assert(sizeof(IpcWire) <= sizeof(IpcHandle::bytes));
static_assert(sizeof(IpcWire) == 48 + sizeof(cudaIpcMemHandle_t), "IpcWire must have no padding");
static_assert(std::is_trivially_copyable_v<IpcWire>);
constexpr uint32_t kIpcMagic = 0x44554347;  // "GCUD"
constexpr uint32_t kIpcVersion = 1;

// Distinguishes this process from any other, also across pid namespaces.
uint64_t process_token() {
    static const uint64_t token = [] {
        static const int anchor = 0;  // its address differs between processes (ASLR)
        uint64_t x =
            static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
            (static_cast<uint64_t>(getpid()) << 40) ^ reinterpret_cast<uintptr_t>(&anchor);
        x += 0x9e3779b97f4a7c15ULL;  // splitmix64 finaliser
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
        return x ^ (x >> 31);
    }();
    return token;
}

// A peer's allocation opened with cudaIpcOpenMemHandle (closed on destruction),
// or this process's own allocation (an alias: nothing to close).
class CudaIpcMapping final : public IpcMapping {
public:
    CudaIpcMapping(void* address, size_t size, int device, bool opened)
        : address_(address), size_(size), resident_(size), device_(device), opened_(opened) {}
    CudaIpcMapping(const CudaIpcMapping&) = delete;
    CudaIpcMapping& operator=(const CudaIpcMapping&) = delete;
    ~CudaIpcMapping() override {
        if (!opened_) return;
        // Closed in the context that opened it; the thread left as it was.
        ScopedDevice on_device;
        if (on_device.enter(device_) == kSuccess) (void)cudaIpcCloseMemHandle(address_);
        (void)cudaGetLastError();
    }

    void* address() const override { return address_; }
    size_t size() const override { return size_; }
    size_t resident() const override { return resident_; }
    // What the driver mapped (the whole allocation), once it is known.
    void set_resident(size_t bytes) { resident_ = bytes; }

private:
    void* address_;
    size_t size_;
    size_t resident_;
    int device_;
    bool opened_;
};

// ---- the device ------------------------------------------------------------------------

class CudaDevice final : public Device {
public:
    explicit CudaDevice(int device_count)
        : device_count_(device_count),
          max_blocks_(std::make_unique<std::atomic<int>[]>(static_cast<size_t>(device_count))),
          memory_ops_(std::make_unique<std::atomic<int>[]>(static_cast<size_t>(device_count))) {}

    Status init() { return driver_.load(); }

    const char* name() const override { return "cuda"; }

    int device_count() const override { return device_count_; }
    Status current_device(int* ordinal) override {
        return check(cudaGetDevice(ordinal), "cudaGetDevice");
    }
    Status set_current_device(int ordinal) override {
        GPUCOLL_TRY(valid_ordinal(ordinal));
        return check(cudaSetDevice(ordinal), "cudaSetDevice(%d)", ordinal);
    }
    bool thread_has_context() override {
        CUcontext ctx = nullptr;
        return driver_.current_context(&ctx) == kSuccess && ctx != nullptr;
    }
    bool holds_context(int ordinal) override {
        return ordinal >= 0 && ordinal < device_count_ && driver_.primary_context_active(ordinal);
    }
    // Switches only when the thread is not on ordinal's context already, and
    // gives the thread its previous context back (none, if it had none).
    Status enter_device(int ordinal, DeviceBinding* saved) override {
        *saved = DeviceBinding{};
        GPUCOLL_TRY(valid_ordinal(ordinal));
        DeviceSwitch s;
        GPUCOLL_TRY(switch_device(ordinal, &s));
        saved->previous = reinterpret_cast<uintptr_t>(s.previous_context);
        saved->changed = s.changed;
        return kSuccess;
    }
    void leave_device(const DeviceBinding& saved) override {
        if (saved.changed) driver_.restore_context(reinterpret_cast<CUcontext>(saved.previous));
    }
    Status gpu_identity(int ordinal, GpuIdentity* out) override {
        GPUCOLL_TRY(valid_ordinal(ordinal));
        return driver_.uuid(ordinal, out->bytes);
    }
    Status pci_bus_id(int ordinal, std::string* out) override {
        GPUCOLL_TRY(valid_ordinal(ordinal));
        char id[32] = {};
        if (cudaDeviceGetPCIBusId(id, sizeof id, ordinal) != cudaSuccess) {
            (void)cudaGetLastError();
            out->clear();  // unknown: the topology is not used
            return kSuccess;
        }
        *out = id;
        return kSuccess;
    }
    bool flags_without_compute(int ordinal) override;
    bool prefers_async_work() const override { return true; }
    bool kernels_concurrent(int ordinal) override;
    Status allreduce_one_kernel(const OneKernelAllreduce& call, Stream* stream) override;
    // An eighth of the current device's memory (1 GiB if it cannot be read).
    // Asked of the driver: a communicator set up before the application
    // chose its GPU must create no context (device management calls of the
    // runtime may).
    size_t ipc_cache_default_bytes() override {
        int ordinal = 0;
        if (cudaGetDevice(&ordinal) != cudaSuccess) {
            (void)cudaGetLastError();
            return size_t{1} << 30;
        }
        const size_t total = driver_.total_memory(ordinal);
        return total != 0 ? total / 8 : size_t{1} << 30;
    }

    Status query(const void* ptr, PointerInfo* info) override;
    Status alloc(void** ptr, size_t bytes) override;
    Status alloc_unexportable(void** ptr, size_t bytes) override;
    bool reduce_supported(gpucoll_dtype_t dtype, gpucoll_op_t op) const override {
        return reduce::op_valid(dtype, op) && dtype != GPUCOLL_LONG_DOUBLE &&
               dtype != GPUCOLL_C_LONG_DOUBLE_COMPLEX;  // the device has no long double
    }
    Status write_flag(uint64_t* flag, uint64_t value, Stream* stream) override;
    Status wait_flag(const uint64_t* flag, uint64_t value, Stream* stream) override;
    Status free(void* ptr) override;
    Status alloc_host(void** ptr, size_t bytes) override;
    Status free_host(void* ptr) override;

    Status create_stream(std::unique_ptr<Stream>* out) override;
    Status create_native_stream(void** native) override;
    Status destroy_native_stream(void* native) override;
    Status borrow_stream(void* native, std::shared_ptr<Stream>* out) override;
    Status hold_stream(const uint32_t* word, uint32_t value, Stream* stream) override;
    Status memcpy(void* dst, const void* src, size_t bytes, Stream* stream) override;
    Status memcpy_runs(void* dst, const void* src, const gpucoll_copy_run_t* runs, size_t nruns,
                       Stream* stream) override;

    Status reduce(void* dst, const void* const* srcs, int nsrc, size_t count, gpucoll_dtype_t dtype,
                  gpucoll_op_t op, Stream* stream) override;

    Status ipc_export(void* base, IpcHandle* handle) override;
    Status ipc_import(const IpcHandle& handle, std::unique_ptr<IpcMapping>* out) override;

private:
    // Blocks that fill the device (all SMs at full occupancy of kReduceBlock
    // threads), queried once per device.
    Status max_blocks(int device, int* out);
    Status valid_ordinal(int ordinal) const {
        if (ordinal >= 0 && ordinal < device_count_) return kSuccess;
        return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda device: device %d outside 0..%d", ordinal,
                         device_count_ - 1);
    }
    // The device holding ptr (device memory), else the current device.
    Status owning_device(const void* ptr, int* ordinal) const;
    // *host_only (if given): the thread has no context and neither pointer
    // is device memory (copy it with the CPU).
    Status enter_memory_device(const void* dst, const void* src, ScopedDevice* scope,
                               bool* host_only = nullptr);
    Status enter_used_device(ScopedDevice* scope);
    Status flag_op(uint64_t* flag, uint64_t value, Stream* stream, bool write);

    DriverApi driver_;
    int device_count_;
    std::unique_ptr<std::atomic<int>[]> max_blocks_;  // 0: not queried yet
    std::unique_ptr<std::atomic<int>[]> memory_ops_;  // 0: not queried, 1: yes, 2: no

    // Allocations of 0 bytes get 1 byte from cudaMalloc but report size 0.
    // Keyed on the buffer id, which CUDA never reuses, so a stale entry (memory
    // freed behind our back) can never match a later allocation.
    std::mutex zero_sized_mutex_;
    std::unordered_set<uint64_t> zero_sized_;
};

Status CudaDevice::query(const void* ptr, PointerInfo* info) {
    if (info == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda query: info is NULL");
    *info = PointerInfo{};
    // Host memory the driver need not be asked about (stack, brk heap,
    // static data, pages it said before it did not know): every
    // host-buffer collective queries its buffers.
    if (ptr == nullptr || host_ranges::certainly_host(ptr) || host_page_cache::contains(ptr))
        return kSuccess;
    const uint64_t unmaps_before = host_page_cache::generation();
    DriverApi::Attributes a;
    bool type_known = false;
    Status s = driver_.attributes(ptr, &a, &type_known);
    if (s != kSuccess && type_known && a.memory_type == CU_MEMORYTYPE_DEVICE) {
        // Some attributes may want a current context (a thread that has made
        // no CUDA call yet): try once more on the pointer's device.
        int ordinal = -1;
        ScopedDevice on_device;
        if (driver_.ordinal(ptr, &ordinal) == kSuccess && on_device.enter(ordinal) == kSuccess)
            s = driver_.attributes(ptr, &a, &type_known);
    }
    // Pinned, managed and unregistered host memory are all reachable by the host.
    if (a.memory_type != CU_MEMORYTYPE_DEVICE || (s == kSuccess && a.is_managed != 0)) {
        // Memory the driver does not know at all (not its pinned or managed
        // memory, which it may hand out again as device memory without an
        // unmap) stays host memory until it is unmapped.
        if (s == kSuccess && a.memory_type == 0 && a.is_managed == 0)
            host_page_cache::remember(ptr, unmaps_before);
        return type_known ? kSuccess : s;
    }
    info->type = GPUCOLL_MEM_DEVICE;
    if (s != kSuccess) {
        // Device memory whose range or id the driver would not give: never
        // host memory, never accelerated (callers stage it).
        info->complete = false;
        return kSuccess;
    }
    info->device = a.ordinal;
    info->buffer_id = a.buffer_id;
    {
        // The allocation itself, as cuMemGetAddressRange reports it (what
        // ran on the H100). Device memory only: host pointers cost the one
        // call above.
        ScopedDevice on_device;
        uintptr_t base = 0;
        size_t size = 0;
        if (on_device.enter(a.ordinal) != kSuccess ||
            driver_.address_range(ptr, &base, &size) != kSuccess) {
            info->complete = false;  // staged (last_error() says why)
            return kSuccess;
        }
        info->base = reinterpret_cast<void*>(base);
        info->size = size;
    }
    if (info->size == 1) {
        std::lock_guard<std::mutex> lock(zero_sized_mutex_);
        if (zero_sized_.count(info->buffer_id) != 0) info->size = 0;
    }
    return kSuccess;
}

Status CudaDevice::alloc(void** ptr, size_t bytes) {
    if (ptr == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda alloc: ptr is NULL");
    *ptr = nullptr;
    // bytes == 0 still yields a unique, valid pointer.
    GPUCOLL_TRY(
        check(cudaMalloc(ptr, std::max<size_t>(bytes, 1)), "cudaMalloc of %zu bytes", bytes));
    if (bytes > 0) return kSuccess;
    uint64_t id = 0;
    Status s = driver_.buffer_id(*ptr, &id);
    if (s == kSuccess) {
        std::lock_guard<std::mutex> lock(zero_sized_mutex_);
        zero_sized_.insert(id);
    } else {
        (void)cudaFree(*ptr);
        *ptr = nullptr;
    }
    return s;
}

Status CudaDevice::free(void* ptr) {
    if (ptr == nullptr) return kSuccess;
    uint64_t zero_sized_id = 0;
    {
        std::lock_guard<std::mutex> lock(zero_sized_mutex_);
        uint64_t id = 0;
        if (!zero_sized_.empty() && driver_.buffer_id(ptr, &id) == kSuccess &&
            zero_sized_.count(id) != 0) {
            zero_sized_id = id;
        }
    }
    ScopedDevice on_device;  // a thread without a context: the memory's GPU
    GPUCOLL_TRY(enter_memory_device(ptr, ptr, &on_device));
    const cudaError_t e = cudaFree(ptr);
    if (e == cudaSuccess && zero_sized_id != 0) {
        std::lock_guard<std::mutex> lock(zero_sized_mutex_);
        zero_sized_.erase(zero_sized_id);
    }
    if (e == cudaErrorInvalidValue || e == cudaErrorInvalidDevicePointer) {
        (void)cudaGetLastError();
        return set_error(GPUCOLL_ERR_NOT_FOUND,
                         "cuda free: %p is not the start of a live device allocation (already "
                         "freed, or not from gpucoll_malloc_device/cudaMalloc)",
                         ptr);
    }
    return check(e, "cudaFree(%p)", ptr);
}

// Pool memory: what cudaMallocAsync-based allocators hand to MPI. cudaFree
// releases it too (after synchronising), so free() serves both kinds.
Status CudaDevice::alloc_unexportable(void** ptr, size_t bytes) {
    return alloc_pool_memory(ptr, bytes);
}

// Pinning needs a context: a thread without one (an application's worker
// thread staging a call) works in the context of a GPU this process already
// uses, not in a new one on GPU 0 of every rank.
Status CudaDevice::enter_used_device(ScopedDevice* scope) {
    if (thread_has_context()) return kSuccess;
    for (int d = 0; d < device_count_; ++d)
        if (holds_context(d)) return scope->enter(d);
    return kSuccess;  // the process uses none yet: the runtime's choice
}

Status CudaDevice::alloc_host(void** ptr, size_t bytes) {
    if (ptr == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda alloc_host: ptr is NULL");
    *ptr = nullptr;
    ScopedDevice on_device;
    GPUCOLL_TRY(enter_used_device(&on_device));
    // Portable: pinned for every device of the process, not only the current one.
    return check(cudaHostAlloc(ptr, std::max<size_t>(bytes, 1), cudaHostAllocPortable),
                 "cudaHostAlloc of %zu pinned bytes", bytes);
}

Status CudaDevice::free_host(void* ptr) {
    if (ptr == nullptr) return kSuccess;
    ScopedDevice on_device;
    GPUCOLL_TRY(enter_used_device(&on_device));
    return check(cudaFreeHost(ptr), "cudaFreeHost(%p)", ptr);
}

Status CudaDevice::create_stream(std::unique_ptr<Stream>* out) {
    if (out == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda create_stream: out is NULL");
    int device = -1;
    GPUCOLL_TRY(check(cudaGetDevice(&device), "cudaGetDevice"));
    cudaStream_t stream = nullptr;
    GPUCOLL_TRY(check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                      "cudaStreamCreateWithFlags (device %d)", device));
    *out = std::make_unique<CudaStream>(stream, device);
    return kSuccess;
}

// The application's streams (stream-ordered collectives). Untested on a GPU.
Status CudaDevice::create_native_stream(void** native) {
    if (native == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_stream_create: stream is NULL");
    cudaStream_t stream = nullptr;
    GPUCOLL_TRY(check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                      "cudaStreamCreateWithFlags"));
    *native = stream;
    return kSuccess;
}

Status CudaDevice::destroy_native_stream(void* native) {
    return check(cudaStreamDestroy(static_cast<cudaStream_t>(native)), "cudaStreamDestroy");
}

Status CudaDevice::borrow_stream(void* native, std::shared_ptr<Stream>* out) {
    const auto stream = static_cast<cudaStream_t>(native);
    int device = -1;
    GPUCOLL_TRY(check(cudaStreamGetDevice(stream, &device), "cudaStreamGetDevice(%p)", native));
    *out = std::make_shared<CudaStream>(stream, device, /*owned=*/false);
    return kSuccess;
}

namespace {
struct HostHold {
    const uint32_t* word;
    uint32_t value;
};
// A host function that polls: the stream waits behind it (a test aid).
void CUDART_CB hold_until(void* data) {
    std::unique_ptr<HostHold> hold(static_cast<HostHold*>(data));
    std::atomic_ref<uint32_t> w(*const_cast<uint32_t*>(hold->word));
    while (w.load(std::memory_order_acquire) < hold->value) std::this_thread::yield();
}
}  // namespace

Status CudaDevice::hold_stream(const uint32_t* word, uint32_t value, Stream* stream) {
    CudaStream* cuda_stream = nullptr;
    GPUCOLL_TRY(as_cuda_stream(stream, &cuda_stream));
    if (cuda_stream == nullptr || word == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_stream_wait_host: no stream or word");
    auto hold = std::make_unique<HostHold>(HostHold{word, value});
    GPUCOLL_TRY(check(cudaLaunchHostFunc(cuda_stream->handle(), hold_until, hold.get()),
                      "cudaLaunchHostFunc"));
    (void)hold.release();  // hold_until owns it now
    return kSuccess;
}

Status CudaDevice::memcpy(void* dst, const void* src, size_t bytes, Stream* stream) {
    CudaStream* cuda_stream = nullptr;
    GPUCOLL_TRY(as_cuda_stream(stream, &cuda_stream));
    if (bytes == 0) return kSuccess;
    if (dst == nullptr || src == nullptr) {
        return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda memcpy: NULL pointer for %zu bytes", bytes);
    }
    if (cuda_stream != nullptr) {
        // Copies may be enqueued on a stream of another device than the current one.
        return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cuda_stream->handle()),
                     "cudaMemcpyAsync(%p <- %p, %zu bytes)", dst, src, bytes);
    }
    ScopedDevice on_device;
    bool host_only = false;
    GPUCOLL_TRY(enter_memory_device(dst, src, &on_device, &host_only));
    if (host_only) {  // a thread without a context: none is created for it
        std::memcpy(dst, src, bytes);
        return kSuccess;
    }
    // cudaMemcpy may return before a copy from pageable memory reaches the
    // device; waiting for the stream makes the copy complete on return.
    GPUCOLL_TRY(check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamLegacy),
                      "cudaMemcpyAsync(%p <- %p, %zu bytes)", dst, src, bytes));
    return check(cudaStreamSynchronize(cudaStreamLegacy), "waiting for a copy of %zu bytes", bytes);
}

// A copy without a stream (or a free) on a thread without a context would
// create one on its current device (GPU 0 by default): it runs on the GPU
// that holds the device memory instead, and the thread is left without one
// again; a copy between two host buffers there needs no GPU at all.
Status CudaDevice::enter_memory_device(const void* dst, const void* src, ScopedDevice* scope,
                                       bool* host_only) {
    if (host_only != nullptr) *host_only = false;
    if (thread_has_context()) return kSuccess;
    bool all_host = true;
    for (const void* p : {dst, src}) {
        DriverApi::Attributes a;
        bool known = false;
        const Status s = driver_.attributes(p, &a, &known);
        if (s == kSuccess && a.memory_type == CU_MEMORYTYPE_DEVICE && a.ordinal >= 0)
            return scope->enter(a.ordinal);
        all_host = all_host && known && a.memory_type != CU_MEMORYTYPE_DEVICE;
    }
    // Both host memory (pageable or pinned): no GPU is needed for the copy.
    if (host_only != nullptr) *host_only = all_host;
    return kSuccess;
}

Status CudaDevice::memcpy_runs(void* dst, const void* src, const gpucoll_copy_run_t* runs,
                               size_t nruns, Stream* stream) {
    CudaStream* cuda_stream = nullptr;
    GPUCOLL_TRY(as_cuda_stream(stream, &cuda_stream));
    if (nruns == 0) return kSuccess;
    if (dst == nullptr || src == nullptr || runs == nullptr) {
        return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda memcpy_runs: NULL pointer for %zu runs",
                         nruns);
    }
    // Without a stream: enqueued on the legacy stream, one wait for all (as
    // memcpy: complete on return, also from pageable memory).
    const cudaStream_t s = cuda_stream != nullptr ? cuda_stream->handle() : cudaStreamLegacy;
    ScopedDevice on_device;
    if (cuda_stream == nullptr) GPUCOLL_TRY(enter_memory_device(dst, src, &on_device));
    // cudaMemcpy2D refuses pitches above cudaDevAttrMaxPitch (2^31 - 1 on
    // every GPU so far): wider ones are copied block by block.
    constexpr size_t kMaxPitch = 0x7fffffff;
    Status status = kSuccess;
    for (size_t k = 0; k < nruns && status == kSuccess; ++k) {
        const gpucoll_copy_run_t& r = runs[k];
        size_t span = 0;
        status = run_span(r, &span);
        if (status != kSuccess || span == 0) continue;
        char* to = static_cast<char*>(dst) + r.offset;
        const char* from = static_cast<const char*>(src) + r.offset;
        if (r.height == 1) {
            status = check(cudaMemcpyAsync(to, from, r.width, cudaMemcpyDefault, s),
                           "cudaMemcpyAsync(%p <- %p, %zu bytes)", static_cast<void*>(to),
                           static_cast<const void*>(from), r.width);
        } else if (r.pitch <= kMaxPitch) {
            status = check(cudaMemcpy2DAsync(to, r.pitch, from, r.pitch, r.width, r.height,
                                             cudaMemcpyDefault, s),
                           "cudaMemcpy2DAsync(%p <- %p, %zu rows of %zu bytes, pitch %zu)",
                           static_cast<void*>(to), static_cast<const void*>(from), r.height,
                           r.width, r.pitch);
        } else {
            for (size_t row = 0; row < r.height && status == kSuccess; ++row)
                status = check(cudaMemcpyAsync(to + row * r.pitch, from + row * r.pitch, r.width,
                                               cudaMemcpyDefault, s),
                               "cudaMemcpyAsync(%p <- %p, %zu bytes)",
                               static_cast<void*>(to + row * r.pitch),
                               static_cast<const void*>(from + row * r.pitch), r.width);
        }
    }
    if (cuda_stream != nullptr && status == kSuccess) return kSuccess;
    // Synchronous, or a failed enqueue: nothing still reads the caller's
    // buffers when this returns.
    const Status waited = check(cudaStreamSynchronize(s), "waiting for %zu copy runs", nruns);
    return status != kSuccess ? status : waited;
}

Status CudaDevice::max_blocks(int device, int* out) {
    if (device < 0 || device >= device_count_) {
        return set_error(GPUCOLL_ERR_DEVICE, "cuda device: device ordinal %d outside 0..%d", device,
                         device_count_ - 1);
    }
    std::atomic<int>& cached = max_blocks_[static_cast<size_t>(device)];
    int blocks = cached.load(std::memory_order_relaxed);
    if (blocks == 0) {
        int sms = 0;
        int threads = 0;
        GPUCOLL_TRY(check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                          "cudaDeviceGetAttribute(MultiProcessorCount, %d)", device));
        GPUCOLL_TRY(
            check(cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, device),
                  "cudaDeviceGetAttribute(MaxThreadsPerMultiProcessor, %d)", device));
        blocks = std::max(1, sms) * std::max(1, threads / kReduceBlock);
        cached.store(blocks, std::memory_order_relaxed);  // racing threads store the same value
    }
    *out = blocks;
    return kSuccess;
}

Status CudaDevice::owning_device(const void* ptr, int* ordinal) const {
    DriverApi::Attributes a;
    bool type_known = false;
    if (driver_.attributes(ptr, &a, &type_known) == kSuccess &&
        a.memory_type == CU_MEMORYTYPE_DEVICE && a.ordinal >= 0) {
        *ordinal = a.ordinal;
        return kSuccess;
    }
    return check(cudaGetDevice(ordinal), "cudaGetDevice");
}

bool CudaDevice::flags_without_compute(int ordinal) {
    if (valid_ordinal(ordinal) != kSuccess) return false;
    std::atomic<int>& cached = memory_ops_[static_cast<size_t>(ordinal)];
    int v = cached.load(std::memory_order_relaxed);
    if (v == 0) {
        v = driver_.has_stream_memory_ops(ordinal) ? 1 : 2;
        cached.store(v, std::memory_order_relaxed);  // racing threads store the same value
    }
    return v == 1;
}

Status CudaDevice::reduce(void* dst, const void* const* srcs, int nsrc, size_t count,
                          gpucoll_dtype_t dtype, gpucoll_op_t op, Stream* stream) {
    CudaStream* cuda_stream = nullptr;
    GPUCOLL_TRY(as_cuda_stream(stream, &cuda_stream));
    // Kernels run on their stream's device; without a stream, on the device
    // that holds the result (one rank per GPU: never "the current device" by
    // accident).
    int device = -1;
    if (cuda_stream != nullptr)
        device = cuda_stream->device();
    else
        GPUCOLL_TRY(owning_device(dst, &device));
    ScopedDevice on_device;
    GPUCOLL_TRY(on_device.enter(device));
    int blocks = 0;
    GPUCOLL_TRY(max_blocks(device, &blocks));
    if (cuda_stream != nullptr) {
        return launch_reduce(dst, srcs, nsrc, count, dtype, op, blocks, cuda_stream->handle());
    }
    GPUCOLL_TRY(launch_reduce(dst, srcs, nsrc, count, dtype, op, blocks, cudaStreamLegacy));
    if (count == 0) return kSuccess;
    return check(cudaStreamSynchronize(cudaStreamLegacy), "waiting for a reduction of %zu elements",
                 count);
}

// Flags: stream memory operations where the device has them (the stream's
// front end waits; no SM is occupied, so ranks sharing a GPU do not starve
// each other), else one-thread kernels (cuda_flags.cu). Without a stream they
// run on the legacy default stream of the current device and are waited for.
// MPS: the contexts of the processes on the GPU share it, their kernels run
// side by side. Without it they take turns (time slices).
bool CudaDevice::kernels_concurrent(int ordinal) {
    if (valid_ordinal(ordinal) != kSuccess) return false;
    int mps = 0;
    return cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, ordinal) == cudaSuccess && mps == 1;
}

Status CudaDevice::allreduce_one_kernel(const OneKernelAllreduce& call, Stream* stream) {
    CudaStream* cuda_stream = nullptr;
    GPUCOLL_TRY(as_cuda_stream(stream, &cuda_stream));
    if (cuda_stream == nullptr)  // a spinning kernel on the legacy stream would block the others
        return set_error(GPUCOLL_ERR_INVALID_ARG, "one-kernel allreduce needs a stream");
    ScopedDevice on_device;
    GPUCOLL_TRY(on_device.enter(cuda_stream->device()));
    return launch_allreduce_one_kernel(call, cuda_stream->handle());
}

Status CudaDevice::write_flag(uint64_t* flag, uint64_t value, Stream* stream) {
    return flag_op(flag, value, stream, /*write=*/true);
}

Status CudaDevice::wait_flag(const uint64_t* flag, uint64_t value, Stream* stream) {
    return flag_op(const_cast<uint64_t*>(flag), value, stream, /*write=*/false);
}

Status CudaDevice::flag_op(uint64_t* flag, uint64_t value, Stream* stream, bool write) {
    CudaStream* cuda_stream = nullptr;
    GPUCOLL_TRY(as_cuda_stream(stream, &cuda_stream));
    // Without a stream: the calling thread's current device, where the
    // caller mapped the flag (a peer's flag is mapped into the context of the
    // device that opened it, not the device it lives on).
    int device = -1;
    if (cuda_stream != nullptr)
        device = cuda_stream->device();
    else
        GPUCOLL_TRY(check(cudaGetDevice(&device), "cudaGetDevice"));
    ScopedDevice on_device;
    GPUCOLL_TRY(on_device.enter(device));
    const cudaStream_t s = cuda_stream != nullptr ? cuda_stream->handle() : cudaStreamLegacy;
    if (flags_without_compute(device))
        GPUCOLL_TRY(write ? driver_.stream_write(s, flag, value)
                          : driver_.stream_wait(s, flag, value));
    else
        GPUCOLL_TRY(write ? launch_write_flag(flag, value, s) : launch_wait_flag(flag, value, s));
    if (cuda_stream != nullptr) return kSuccess;
    return check(cudaStreamSynchronize(cudaStreamLegacy), "waiting for a flag %s",
                 write ? "write" : "wait");
}

Status CudaDevice::ipc_export(void* base, IpcHandle* handle) {
    if (handle == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda ipc_export: handle is NULL");
    PointerInfo info;
    GPUCOLL_TRY(query(base, &info));
    if (info.type != GPUCOLL_MEM_DEVICE) {
        return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda ipc_export: %p is not device memory", base);
    }
    if (info.base != base) {
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "cuda ipc_export: %p is inside the allocation that starts at %p; export "
                         "the start (PointerInfo::base) and add the offset after import",
                         base, info.base);
    }
    ScopedDevice on_device;
    GPUCOLL_TRY(on_device.enter(info.device));
    const char* const kUnsupported =
        "cuda ipc_export: the allocation at %p (%zu bytes) comes from a stream-ordered pool "
        "(cudaMallocAsync) or the virtual memory API (cuMemCreate), which legacy CUDA IPC "
        "cannot export; copy through a scratch buffer instead";
    if (!driver_.legacy_ipc_capable(base)) {
        return set_error(GPUCOLL_ERR_UNSUPPORTED, kUnsupported, base, info.size);
    }
    IpcWire wire{};
    const cudaError_t e = cudaIpcGetMemHandle(&wire.handle, base);
    if (e == cudaErrorInvalidValue || e == cudaErrorNotSupported ||
        e == cudaErrorInvalidDevicePointer) {
        (void)cudaGetLastError();
        return set_error(GPUCOLL_ERR_UNSUPPORTED, kUnsupported, base, info.size);
    }
    GPUCOLL_TRY(check(e, "cudaIpcGetMemHandle(%p)", base));
    wire.magic = kIpcMagic;
    wire.version = kIpcVersion;
    wire.process = process_token();
    wire.base = reinterpret_cast<uintptr_t>(base);
    wire.size = info.size;
    wire.buffer_id = info.buffer_id;
    wire.pid = static_cast<int32_t>(getpid());
    wire.device = info.device;
    std::memset(handle->bytes, 0, sizeof handle->bytes);
    std::memcpy(handle->bytes, &wire, sizeof wire);
    return kSuccess;
}

Status CudaDevice::ipc_import(const IpcHandle& handle, std::unique_ptr<IpcMapping>* out) {
    if (out == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "cuda ipc_import: out is NULL");
    IpcWire wire;
    std::memcpy(&wire, handle.bytes, sizeof wire);
    if (wire.magic != kIpcMagic || wire.version != kIpcVersion) {
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "cuda ipc_import: not a handle from gpucoll's cuda backend version %u "
                         "(was the peer built differently, or using the emu backend?)",
                         kIpcVersion);
    }
    if (wire.process == process_token() && wire.pid == static_cast<int32_t>(getpid())) {
        // CUDA cannot open a process's own handle; the allocation is right here.
        *out = std::make_unique<CudaIpcMapping>(
            reinterpret_cast<void*>(static_cast<uintptr_t>(wire.base)), wire.size, wire.device,
            false);
        return kSuccess;
    }
    int device = -1;
    GPUCOLL_TRY(check(cudaGetDevice(&device), "cudaGetDevice"));
    void* address = nullptr;
    GPUCOLL_TRY(check(cudaIpcOpenMemHandle(&address, wire.handle, cudaIpcMemLazyEnablePeerAccess),
                      "cudaIpcOpenMemHandle (%llu bytes on device %d of pid %d, opened on device "
                      "%d; is the exporter alive with the allocation not freed, and can the two "
                      "GPUs reach each other?)",
                      static_cast<unsigned long long>(wire.size), wire.device, wire.pid, device));
    auto mapping = std::make_unique<CudaIpcMapping>(address, wire.size, device, true);
    // The size comes from the peer: check it against what was mapped
    // (unverifiable is refused too; the mapping closes on return).
    uintptr_t mapped_base = 0;
    size_t mapped = 0;
    GPUCOLL_TRY(driver_.address_range(address, &mapped_base, &mapped));
    if (wire.size > mapped) {
        return set_error(GPUCOLL_ERR_BUFFER,
                         "cuda ipc_import: pid %d describes its allocation as %llu bytes, but the "
                         "mapping holds %zu",
                         wire.pid, static_cast<unsigned long long>(wire.size), mapped);
    }
    mapping->set_resident(mapped);  // a bound on imports counts this, not the claim
    *out = std::move(mapping);
    return kSuccess;
}

// kSuccess if CUDA sees a GPU; otherwise NO_BACKEND with the reason.
Status require_device() {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaSuccess && count > 0) return kSuccess;
    std::string reason;
    if (e != cudaSuccess) {
        (void)check(e, "cudaGetDeviceCount");
        reason = last_error();
    } else {
        reason = "cudaGetDeviceCount found no device";
    }
    return set_error(GPUCOLL_ERR_NO_BACKEND,
                     "cuda backend unavailable: %s. Without a GPU, select the emulated device "
                     "(GPUCOLL_DEVICE=emu, or the MCA parameter coll_gpucoll_device=emu)",
                     reason.c_str());
}

}  // namespace

Status alloc_pool_memory(void** ptr, size_t bytes) {
    if (ptr == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "alloc_pool_memory: ptr is NULL");
    *ptr = nullptr;
    GPUCOLL_TRY(require_device());
    GPUCOLL_TRY(check(cudaMallocAsync(ptr, std::max<size_t>(bytes, 1), cudaStreamLegacy),
                      "cudaMallocAsync of %zu bytes", bytes));
    return check(cudaStreamSynchronize(cudaStreamLegacy), "waiting for cudaMallocAsync");
}

Status free_pool_memory(void* ptr) {
    if (ptr == nullptr) return kSuccess;
    GPUCOLL_TRY(check(cudaFreeAsync(ptr, cudaStreamLegacy), "cudaFreeAsync(%p)", ptr));
    return check(cudaStreamSynchronize(cudaStreamLegacy), "waiting for cudaFreeAsync");
}

}  // namespace cuda

bool cuda_device_present() {
    static const bool present = [] {
        int count = 0;
        if (cudaGetDeviceCount(&count) != cudaSuccess) {
            (void)cudaGetLastError();
            return false;
        }
        return count > 0;
    }();
    return present;
}

std::unique_ptr<Device> make_cuda_device() {
    if (cuda::require_device() != kSuccess) return nullptr;
    int count = 0;
    if (cuda::check(cudaGetDeviceCount(&count), "cudaGetDeviceCount") != kSuccess) return nullptr;
    auto device = std::make_unique<cuda::CudaDevice>(count);
    if (device->init() != kSuccess) return nullptr;  // init set the message
    return device;
}

}  // namespace gpucoll
