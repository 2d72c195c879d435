// device.h - the Device interface: the only way the core touches memory.
//
// Two backends implement it: cuda/ (CUDA runtime + kernels) and emu/ (an
// emulated GPU in host memory whose device memory the host cannot touch).
// Nothing outside src/device/ includes a CUDA header.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "gpucoll.h"

namespace gpucoll {

struct PointerInfo {
    gpucoll_memtype_t type = GPUCOLL_MEM_HOST;
    int device = -1;         // ordinal, -1 for host
    void* base = nullptr;    // start of the allocation holding the pointer
    size_t size = 0;         // size of that allocation
    uint64_t buffer_id = 0;  // unique per allocation for the process life (0: host)
    // false: device memory whose allocation (base, size, id) the backend could
    // not determine; callers stage it (never accelerated, never host memory).
    bool complete = true;
};

// kSuccess if [ptr + lo, ptr + lo + bytes) lies inside the allocation info
// describes (a complete query of ptr: the allocation that holds ptr; lo may
// be negative, as for a datatype with a negative lower bound); a span that
// begins below that allocation or ends past it is GPUCOLL_ERR_BUFFER with a
// message.
inline Status check_span(const PointerInfo& info, const void* ptr, ptrdiff_t lo, size_t bytes,
                         const char* what) {
    const auto p = reinterpret_cast<uintptr_t>(ptr), base = reinterpret_cast<uintptr_t>(info.base);
    // offset of the span's first byte from the allocation's start
    const ptrdiff_t at = static_cast<ptrdiff_t>(p - base) + lo;
    if (p >= base && p - base <= info.size && at >= 0 && static_cast<size_t>(at) <= info.size &&
        bytes <= info.size - static_cast<size_t>(at))
        return kSuccess;
    return set_error(GPUCOLL_ERR_BUFFER,
                     "%s %p: %zu bytes from offset %td do not fit its device allocation of %zu "
                     "bytes at %p (count or datatype larger than the buffer?); nothing was written",
                     what, reinterpret_cast<const void*>(p + static_cast<uintptr_t>(lo)), bytes, at,
                     info.size, info.base);
}

// The bytes a run of gpucoll_memcpy_runs spans from its offset, (height - 1)
// x pitch + width (0: nothing to copy); GPUCOLL_ERR_INVALID_ARG for blocks
// that overlap (pitch < width) or a span that overflows.
inline Status run_span(const gpucoll_copy_run_t& run, size_t* span) {
    *span = 0;
    if (run.width == 0 || run.height == 0) return kSuccess;
    if (run.height > 1 &&
        (run.pitch < run.width || run.pitch > (SIZE_MAX - run.width) / (run.height - 1)))
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "copy run of %zu blocks of %zu bytes, pitch %zu: blocks overlap or the "
                         "span overflows",
                         run.height, run.width, run.pitch);
    *span = (run.height - 1) * run.pitch + run.width;
    return kSuccess;
}

// check_span from ptr itself.
inline Status check_extent(const PointerInfo& info, const void* ptr, size_t bytes,
                           const char* what) {
    return check_span(info, ptr, 0, bytes, what);
}

// Which physical GPU: equal in every process that uses the same GPU (CUDA:
// the device UUID), so that ranks learn which of them share one.
struct GpuIdentity {
    uint8_t bytes[16];
    bool operator==(const GpuIdentity&) const = default;
};

// Opaque, trivially copyable: sent to peers through the bootstrap.
struct IpcHandle {
    uint8_t bytes[128];
};

// A peer's allocation mapped into this process. Unmapped on destruction.
class IpcMapping {
public:
    virtual ~IpcMapping() = default;
    virtual void* address() const = 0;  // device address usable by this process
    virtual size_t size() const = 0;    // the bytes the exporter described
    // The bytes this mapping keeps mapped, what a bound on imports counts:
    // the whole allocation where the driver maps it all (CUDA), whatever
    // the exporter claimed; whole pages on emu.
    virtual size_t resident() const { return size(); }
};

// An ordered queue of device work. Work enqueued on a stream is complete
// after synchronize() returns (or after an event recorded behind it completes).
class Stream {
public:
    virtual ~Stream() = default;
    virtual Status synchronize() = 0;
    // *complete: all enqueued work has finished (does not wait). Errors of
    // finished work are reported by synchronize().
    virtual Status query(bool* complete) = 0;
    // Markers: mark() places one behind the work enqueued so far and returns
    // its ticket (increasing from 1); reached(t, &done) tells, without
    // waiting, whether the work before marker t has finished. Tickets are
    // reached in order. At most kMaxMarks may be pending (not yet seen
    // reached); mark() waits for the oldest beyond that.
    static constexpr size_t kMaxMarks = 256;
    // Work enqueued after this starts after the work the application has
    // enqueued so far on the device's default stream (CUDA: the legacy
    // stream, which the streams of this interface, non-blocking, do not
    // otherwise wait for). Called at the start of every call.
    virtual Status after_default_stream() = 0;
    virtual Status mark(uint64_t* ticket) = 0;
    virtual Status reached(uint64_t ticket, bool* done) = 0;
};

// One launch of a small allreduce (the one-kernel path, allreduce_one_kernel):
// this rank copies `input` into its slot, publishes `word` in its flag
// (after the slot's bytes, visible to peers), waits until every peer's flag
// holds at least `word`, then reduces the `size` slots in rank order into
// `output`. slots[p] and flags[p] are rank p's slot and flag as this process
// addresses them (IPC-mapped; p == rank: its own). Words only grow, call
// after call, so nothing is reset between calls; a rank that fails writes a
// word past every step of its call into the waiting peers' flags
// (NodeComm::fail, wait_stream), which ends their waits.
struct OneKernelAllreduce {
    static constexpr int kMaxRanks = 8;
    const void* input = nullptr;
    void* output = nullptr;
    size_t count = 0;  // elements
    gpucoll_dtype_t dtype = GPUCOLL_BYTE;
    gpucoll_op_t op = GPUCOLL_OP_SUM;
    int rank = 0;
    int size = 0;
    uint64_t word = 0;
    char* slots[kMaxRanks] = {};
    uint64_t* flags[kMaxRanks] = {};
};

// What DeviceScope restores: the thread's state before it was entered.
struct DeviceBinding {
    uintptr_t previous = 0;  // backend-specific (CUDA: the previous context, maybe none)
    bool changed = false;    // false: nothing to restore
};

class Device {
public:
    virtual ~Device() = default;

    virtual const char* name() const = 0;  // "cuda", "emu"

    // --- devices -------------------------------------------------------------
    // GPUs this process can use (emu: 1).
    virtual int device_count() const = 0;
    // The calling thread's current device: where alloc() allocates and where
    // work without a stream runs unless its buffers say otherwise.
    virtual Status current_device(int* ordinal) = 0;
    virtual Status set_current_device(int ordinal) = 0;
    // Whether the calling thread has a GPU current for real (CUDA: a current
    // context: the application chose its GPU, or used one): false before the
    // process touched a GPU, when current_device() names device 0 only by
    // default. Creates nothing.
    virtual bool thread_has_context() = 0;
    // Whether this process holds a context on GPU ordinal (CUDA: its primary
    // context is active), i.e. device memory of this process lives there.
    // Creates nothing.
    virtual bool holds_context(int ordinal) = 0;
    // Makes ordinal the calling thread's current device; *saved says how to
    // undo it. leave_device restores exactly the previous state, creating
    // nothing (CUDA: the previous context, or none: never a context on the
    // device that was merely "current" by default). Use DeviceScope.
    virtual Status enter_device(int ordinal, DeviceBinding* saved) = 0;
    virtual void leave_device(const DeviceBinding& saved) = 0;
    virtual Status gpu_identity(int ordinal, GpuIdentity* out) = 0;
    // The GPU's PCI bus id ("0000:18:00.0"), for the topology; empty where
    // the device has none (emu).
    virtual Status pci_bus_id(int ordinal, std::string* out) = 0;
    // Whether write_flag/wait_flag on streams of this device wait without
    // occupying the device's compute units (CUDA: stream memory operations),
    // so that processes sharing the GPU do not starve each other.
    virtual bool flags_without_compute(int ordinal) = 0;
    // Whether kernels of the processes sharing GPU ordinal run at the same
    // time (CUDA: MPS; without it their contexts take turns, and a kernel
    // that waits for a peer's kernel waits a time slice or more), so that the
    // one-kernel path may spin on its peers' flags there.
    virtual bool kernels_concurrent(int ordinal) = 0;
    // Whether enqueueing work and checking markers beats issuing each copy
    // and reduction synchronously (a real GPU: yes; the emulated one, whose
    // worker threads compete with the polling ranks for the CPU: no).
    virtual bool prefers_async_work() const = 0;
    // Default bound of the bytes of peers' allocations kept mapped (IPC
    // cache): a small fraction of the device's memory.
    virtual size_t ipc_cache_default_bytes() = 0;

    // --- memory ------------------------------------------------------------
    // What ptr points to. Never creates a device context or changes the
    // current device. kSuccess whenever the memory type is known, also when
    // the rest is not (info->complete false, the reason in last_error()).
    virtual Status query(const void* ptr, PointerInfo* info) = 0;
    // Only the memory type of ptr (host when the query fails), for the
    // classification every collective call makes: outside a published
    // device span without a query; backends override it where host memory
    // can be told cheaply in other ways.
    virtual gpucoll_memtype_t memory_type(const void* ptr) {
        if (surely_host(ptr)) return GPUCOLL_MEM_HOST;
        PointerInfo info;
        return query(ptr, &info) == kSuccess ? info.type : GPUCOLL_MEM_HOST;
    }
    // True: ptr is host memory for certain, told inline without a virtual
    // call (the host-buffer path of every collective asks this first).
    // False: ask memory_type(). A backend that knows an address range
    // holding all of its device memory publishes it (set_device_span).
    bool surely_host(const void* ptr) const {
        if (span_ == nullptr) return false;
        const auto addr = reinterpret_cast<uintptr_t>(ptr);
        return addr < __atomic_load_n(&span_->lo, __ATOMIC_ACQUIRE) ||
               addr >= __atomic_load_n(&span_->hi, __ATOMIC_ACQUIRE);
    }
    // The span surely_host reads, or nullptr (the host gate reads it too).
    const gpucoll_device_span_t* device_span() const { return span_; }
    virtual Status alloc(void** ptr, size_t bytes) = 0;  // device memory
    // Device memory that legacy IPC cannot export, as applications get it from
    // stream-ordered pools (CUDA: cudaMallocAsync; emu: an allocation marked
    // so). Freed with free(); ipc_export() on it returns GPUCOLL_ERR_UNSUPPORTED.
    virtual Status alloc_unexportable(void** ptr, size_t bytes) = 0;
    virtual Status free(void* ptr) = 0;
    virtual Status alloc_host(void** ptr, size_t bytes) = 0;  // pinned host memory
    virtual Status free_host(void* ptr) = 0;

    // --- streams and copies -------------------------------------------------
    virtual Status create_stream(std::unique_ptr<Stream>* out) = 0;
    // Any direction. stream == nullptr: synchronous with respect to the host.
    virtual Status memcpy(void* dst, const void* src, size_t bytes, Stream* stream) = 0;
    // The blocks of runs[0..nruns) from src + offset to dst + offset, any
    // direction (gpucoll_memcpy_runs); the bytes between them untouched.
    // stream == nullptr: synchronous, one wait for all of them.
    virtual Status memcpy_runs(void* dst, const void* src, const gpucoll_copy_run_t* runs,
                               size_t nruns, Stream* stream) = 0;

    // --- the application's streams (stream-ordered collectives) --------------
    // A stream of this backend for an application (gpucoll_stream_create):
    // *native is what the application holds (CUDA: a cudaStream_t, non-
    // blocking; emu: a handle of an emu stream the backend keeps until
    // destroy_native_stream).
    virtual Status create_native_stream(void** native) = 0;
    virtual Status destroy_native_stream(void* native) = 0;
    // A Stream that enqueues on the application's stream native, without
    // owning it (CUDA: any cudaStream_t; emu: one create_native_stream made).
    virtual Status borrow_stream(void* native, std::shared_ptr<Stream>* out) = 0;
    // Test and benchmark aid: work enqueued on stream after this starts once
    // the host word *word (host memory, written by another thread) is at
    // least value (CUDA: a host function that polls it; emu: a work item).
    virtual Status hold_stream(const uint32_t* word, uint32_t value, Stream* stream) = 0;

    // --- reductions ---------------------------------------------------------
    // Whether reduce() can do (dtype, op) on this backend (CUDA: no long
    // double). Callers decide before committing to a device reduction.
    virtual bool reduce_supported(gpucoll_dtype_t dtype, gpucoll_op_t op) const = 0;
    // dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[nsrc-1][i], i < count.
    // nsrc >= 1; dst may equal srcs[0] (and only srcs[0]). Pointers may be
    // device memory, or host memory the device can reach (pinned).
    // GPUCOLL_ERR_UNSUPPORTED if the backend cannot do (dtype, op).
    virtual Status reduce(void* dst, const void* const* srcs, int nsrc, size_t count,
                          gpucoll_dtype_t dtype, gpucoll_op_t op, Stream* stream) = 0;

    // --- flags in device memory ---------------------------------------------------
    // Stream-ordered synchronisation between ranks (device-side flags: one rank
    // per GPU, since a waiting kernel would stall a GPU that processes share).
    // flag: 8-byte aligned device memory, possibly a peer's (IPC-mapped).
    // After the work enqueued before it, *flag = value, visible to peers.
    virtual Status write_flag(uint64_t* flag, uint64_t value, Stream* stream) = 0;
    // Work enqueued after it starts once *flag >= value.
    virtual Status wait_flag(const uint64_t* flag, uint64_t value, Stream* stream) = 0;

    // --- one-kernel calls ------------------------------------------------------------
    // Enqueues the whole of a small allreduce as one kernel on stream
    // (OneKernelAllreduce). Errors: GPUCOLL_ERR_UNSUPPORTED for (dtype, op)
    // that reduce() cannot do or elements over 16 bytes; the caller checks
    // the slots are large enough.
    virtual Status allreduce_one_kernel(const OneKernelAllreduce& call, Stream* stream) = 0;
    // --- IPC ---------------------------------------------------------------------
    // Export the allocation that starts at base (PointerInfo::base).
    virtual Status ipc_export(void* base, IpcHandle* handle) = 0;
    // Map a peer's exported allocation into this process.
    virtual Status ipc_import(const IpcHandle& handle, std::unique_ptr<IpcMapping>* out) = 0;

protected:
    // [lo, hi) holds every device address this backend may hand out or map,
    // now and later (the bounds may only widen, written atomically); it
    // outlives the Device.
    void set_device_span(const gpucoll_device_span_t* span) { span_ = span; }

private:
    const gpucoll_device_span_t* span_ = nullptr;
};

// The device a communicator was set up on, made current for the calling
// thread while the scope lives (an MPI thread whose application switched
// devices, the progress thread, a thread that never chose one), then the
// thread's previous state back.
class DeviceScope {
public:
    DeviceScope() = default;
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;
    ~DeviceScope() {
        if (device_ != nullptr && saved_.changed) device_->leave_device(saved_);
    }
    Status enter(Device* device, int ordinal) {
        if (device == nullptr || ordinal < 0 || device_ != nullptr) return kSuccess;
        GPUCOLL_TRY(device->enter_device(ordinal, &saved_));
        device_ = device;
        return kSuccess;
    }

private:
    Device* device_ = nullptr;
    DeviceBinding saved_;
};

// Factories, one per backend. They return nullptr (and set the last error)
// when the backend cannot run here (no GPU, not compiled in).
std::unique_ptr<Device> make_emu_device();
std::unique_ptr<Device> make_cuda_device();
// True if the cuda backend was compiled in and sees at least one GPU.
bool cuda_device_present();

}  // namespace gpucoll
