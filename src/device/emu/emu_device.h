// emu_device.h - the emulated GPU: a Device whose memory the host cannot
// touch, for development and CI on machines without a GPU.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "device/device.h"
#include "device/emu/emu_memory.h"
#include "device/emu/emu_stream.h"

namespace gpucoll {

class EmuDevice final : public Device {
public:
    EmuDevice();

    const char* name() const override { return "emu"; }

    // One emulated GPU per process, or GPUCOLL_EMU_DEVICES (1-16) of them.
    // Its identity is the machine's boot id, GPUCOLL_EMU_GPU (default "0")
    // and the ordinal: ranks with different values behave as ranks on
    // different GPUs (tests of one-rank-per-GPU behaviour). Each thread has
    // its current device (0 until it sets one), as with CUDA; a reduction,
    // like a CUDA kernel, may only touch memory of its own device (this
    // process's allocations made there, or peers' imported there).
    int device_count() const override { return devices_; }
    Status current_device(int* ordinal) override;
    Status set_current_device(int ordinal) override;
    // Contexts as CUDA's: a thread has none until it chooses a device or
    // does work that needs one (an allocation, a stream, a copy, an import,
    // a launch: then its current device's, device 0 by default); the process
    // keeps every device's it ever had.
    bool thread_has_context() override;
    bool holds_context(int ordinal) override;
    Status gpu_identity(int ordinal, GpuIdentity* out) override;
    Status pci_bus_id(int, std::string* out) override {  // no PCI device behind it
        out->clear();
        return kSuccess;
    }
    bool flags_without_compute(int) override { return true; }   // a worker thread waits
    bool prefers_async_work() const override { return false; }  // measured: slower on the VM
    // Worker threads: side by side, unless GPUCOLL_EMU_SERIAL_KERNELS=1 says
    // otherwise (a testing aid: a shared GPU without MPS).
    bool kernels_concurrent(int) override { return !serial_kernels_; }
    Status allreduce_one_kernel(const OneKernelAllreduce& call, Stream* stream) override;
    size_t ipc_cache_default_bytes() override { return size_t{1} << 30; }

    Status enter_device(int ordinal, DeviceBinding* saved) override;
    void leave_device(const DeviceBinding& saved) override;

    Status query(const void* ptr, PointerInfo* info) override;
    Status alloc(void** ptr, size_t bytes) override;
    Status alloc_unexportable(void** ptr, size_t bytes) override;
    Status free(void* ptr) override;
    Status alloc_host(void** ptr, size_t bytes) override;
    Status free_host(void* ptr) override;

    Status create_stream(std::unique_ptr<Stream>* out) override;
    Status memcpy(void* dst, const void* src, size_t bytes, Stream* stream) override;
    Status memcpy_runs(void* dst, const void* src, const gpucoll_copy_run_t* runs, size_t nruns,
                       Stream* stream) override;

    Status reduce(void* dst, const void* const* srcs, int nsrc, size_t count, gpucoll_dtype_t dtype,
                  gpucoll_op_t op, Stream* stream) override;

    bool reduce_supported(gpucoll_dtype_t dtype, gpucoll_op_t op) const override;
    Status write_flag(uint64_t* flag, uint64_t value, Stream* stream) override;
    Status wait_flag(const uint64_t* flag, uint64_t value, Stream* stream) override;

    Status ipc_export(void* base, IpcHandle* handle) override;
    Status ipc_import(const IpcHandle& handle, std::unique_ptr<IpcMapping>* out) override;

    // The application's streams (emu_app_streams.cc).
    Status create_native_stream(void** native) override;
    Status destroy_native_stream(void* native) override;
    Status borrow_stream(void* native, std::shared_ptr<Stream>* out) override;
    Status hold_stream(const uint32_t* word, uint32_t value, Stream* stream) override;

    // Pointer translation for other emu code.
    EmuMemory& memory() { return *memory_; }

private:
    // The device whose stream (or, without one, whose current thread) runs
    // work touching ptr may do so; DEVICE error otherwise.
    Status check_reachable(const void* ptr, int device, const char* what) const;
    // The calling thread's current device, which now has a context (the
    // first work there creates one, as CUDA's primary context).
    int use_device();
    void copy_context(const void* dst, const void* src);

    // The devices this process holds a context on (bit d: device d).
    std::atomic<uint32_t> contexts_{0};

    std::shared_ptr<EmuMemory> memory_;
    int devices_ = 1;
    EmuPinnedHost pinned_host_;
    // GPUCOLL_EMU_INCOMPLETE_SIZE: allocations of exactly this size query as
    // device memory of unknown range (PointerInfo::complete false), as the
    // cuda backend reports a failed driver attribute. 0: off.
    size_t incomplete_size_ = 0;
    // GPUCOLL_EMU_FAIL_COPY_BYTES: copies of exactly this many bytes fail
    // when they run (a device fault in the middle of a call). 0: off.
    size_t fail_copy_bytes_ = 0;
    // GPUCOLL_EMU_OVERSTATE_BYTES: query() reports every allocation this
    // many bytes larger than it is (a peer that lies about its buffers).
    size_t overstate_bytes_ = 0;
    bool serial_kernels_ = false;  // GPUCOLL_EMU_SERIAL_KERNELS
    // Streams made for the application, by the handle it holds.
    std::mutex app_streams_mutex_;
    std::map<void*, std::shared_ptr<EmuStream>> app_streams_;
};

}  // namespace gpucoll
