#include "device/emu/emu_device.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "device/emu/emu_reduce.h"
#include "device/emu/emu_stream.h"
#include "device/reduce_ops.h"

namespace gpucoll {

namespace {

// The EmuStream behind stream (nullptr for synchronous work); INVALID_ARG if
// stream belongs to another backend.
Status as_emu_stream(Stream* stream, EmuStream** out) {
    *out = nullptr;
    if (stream == nullptr) return kSuccess;
    *out = dynamic_cast<EmuStream*>(stream);
    if (*out == nullptr) {
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "emu device: the stream was not created by the emu device");
    }
    return kSuccess;
}

// The calling thread's current emulated device (CUDA: per thread too), and
// whether the thread has one for real: a CUDA thread has no current context
// until it chooses a GPU or uses one (then device 0's primary context).
thread_local int t_current_device = 0;
thread_local bool t_has_context = false;

Status submit(EmuStream* stream, EmuStream::Work work) {
    if (stream == nullptr) return work();
    stream->enqueue(std::move(work));
    return kSuccess;
}

}  // namespace

EmuDevice::EmuDevice() : memory_(EmuMemory::create()) {
    set_device_span(&memory_->span());
    if (const char* v = std::getenv("GPUCOLL_EMU_INCOMPLETE_SIZE"))
        incomplete_size_ = std::strtoull(v, nullptr, 10);
    if (const char* v = std::getenv("GPUCOLL_EMU_FAIL_COPY_BYTES"))
        fail_copy_bytes_ = std::strtoull(v, nullptr, 10);
    if (const char* v = std::getenv("GPUCOLL_EMU_OVERSTATE_BYTES"))
        overstate_bytes_ = std::strtoull(v, nullptr, 10);
    if (const char* v = std::getenv("GPUCOLL_EMU_SERIAL_KERNELS"))
        serial_kernels_ = std::strcmp(v, "1") == 0;
    if (const char* v = std::getenv("GPUCOLL_EMU_DEVICES")) {
        const long n = std::strtol(v, nullptr, 10);
        devices_ = n >= 1 && n <= 16 ? static_cast<int>(n) : 1;
    }
}

// The calling thread's device for work that needs a context (an allocation,
// a stream, a copy, an import, a launch): CUDA creates the current device's
// primary context there, device 0's if the thread never chose one.
int EmuDevice::use_device() {
    t_has_context = true;
    contexts_.fetch_or(uint32_t{1} << t_current_device, std::memory_order_relaxed);
    return t_current_device;
}

// A copy without a stream: on the thread's current device if it has one,
// else (as the cuda backend does) on the device that holds the device
// memory, leaving the thread without a context.
void EmuDevice::copy_context(const void* dst, const void* src) {
    if (t_has_context) {
        (void)use_device();
        return;
    }
    for (const void* p : {dst, src}) {
        PointerInfo info;
        memory_->query(p, &info);
        if (info.type == GPUCOLL_MEM_DEVICE && info.device >= 0) {
            contexts_.fetch_or(uint32_t{1} << info.device, std::memory_order_relaxed);
            return;
        }
    }
    (void)use_device();
}

Status EmuDevice::current_device(int* ordinal) {
    if (ordinal == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "emu current_device: ordinal is NULL");
    *ordinal = t_current_device;
    return kSuccess;
}

Status EmuDevice::set_current_device(int ordinal) {
    if (ordinal < 0 || ordinal >= devices_)
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "emu device: device %d does not exist (the emulated device has %d "
                         "GPU%s: GPUCOLL_EMU_DEVICES)",
                         ordinal, devices_, devices_ == 1 ? "" : "s");
    t_current_device = ordinal;
    (void)use_device();  // cudaSetDevice creates the primary context (CUDA 12)
    return kSuccess;
}

bool EmuDevice::thread_has_context() { return t_has_context; }

bool EmuDevice::holds_context(int ordinal) {
    return ordinal >= 0 && ordinal < devices_ &&
           (contexts_.load(std::memory_order_relaxed) & (uint32_t{1} << ordinal)) != 0;
}

// saved->previous: the previous device + 1, 0 for a thread that had none.
Status EmuDevice::enter_device(int ordinal, DeviceBinding* saved) {
    *saved = DeviceBinding{};
    if (t_has_context && ordinal == t_current_device) return kSuccess;
    const uintptr_t previous = t_has_context ? static_cast<uintptr_t>(t_current_device) + 1 : 0;
    GPUCOLL_TRY(set_current_device(ordinal));
    saved->previous = previous;
    saved->changed = true;
    return kSuccess;
}

void EmuDevice::leave_device(const DeviceBinding& saved) {
    if (!saved.changed) return;
    t_has_context = saved.previous != 0;
    t_current_device = saved.previous != 0 ? static_cast<int>(saved.previous - 1) : 0;
}

Status EmuDevice::check_reachable(const void* ptr, int device, const char* what) const {
    if (devices_ == 1) return kSuccess;  // one device: everything is its own
    PointerInfo info;
    memory_->query(ptr, &info);
    if (info.type != GPUCOLL_MEM_DEVICE || info.device == device) return kSuccess;
    return set_error(GPUCOLL_ERR_DEVICE,
                     "emu reduce on device %d: %s %p is memory of device %d, which a kernel of "
                     "device %d cannot reach (CUDA: an illegal address without peer access)",
                     device, what, ptr, info.device, device);
}

Status EmuDevice::gpu_identity(int ordinal, GpuIdentity* out) {
    if (ordinal < 0 || ordinal >= devices_)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "emu device: device %d does not exist (%d GPUs)",
                         ordinal, devices_);
    std::string id;
    std::ifstream boot("/proc/sys/kernel/random/boot_id");
    std::getline(boot, id);
    const char* gpu = std::getenv("GPUCOLL_EMU_GPU");
    id += "/emu-gpu-";
    id += gpu != nullptr ? gpu : "0";
    if (devices_ > 1) id += "/" + std::to_string(ordinal);
    // Two 64-bit FNV-1a hashes of the text (different offsets): 16 bytes.
    uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
    for (uint64_t& v : h) {
        for (unsigned char c : id) {
            v ^= c;
            v *= 0x100000001b3ull;
        }
    }
    std::memcpy(out->bytes, h, sizeof out->bytes);
    return kSuccess;
}

Status EmuDevice::query(const void* ptr, PointerInfo* info) {
    if (info == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "emu query: info is NULL");
    memory_->query(ptr, info);
    // Testing aid: a process that overstates its allocations to its peers
    // (GPUCOLL_EMU_OVERSTATE_BYTES), to check that peers' claims are checked.
    if (info->type == GPUCOLL_MEM_DEVICE) info->size += overstate_bytes_;
    if (info->type == GPUCOLL_MEM_DEVICE && incomplete_size_ != 0 &&
        info->size == incomplete_size_) {
        // Testing aid: what the cuda backend reports when the driver gives
        // the memory type but not the allocation (a failed attribute).
        *info = PointerInfo{};
        info->type = GPUCOLL_MEM_DEVICE;
        info->complete = false;
        set_error(GPUCOLL_ERR_DEVICE,
                  "emu: allocation of %zu bytes reported without its range "
                  "(GPUCOLL_EMU_INCOMPLETE_SIZE)",
                  incomplete_size_);
    }
    return kSuccess;
}

Status EmuDevice::alloc(void** ptr, size_t bytes) {
    return memory_->alloc(ptr, bytes, /*exportable=*/true, use_device());
}

Status EmuDevice::alloc_unexportable(void** ptr, size_t bytes) {
    return memory_->alloc(ptr, bytes, /*exportable=*/false, use_device());
}

Status EmuDevice::free(void* ptr) { return memory_->free(ptr); }

Status EmuDevice::alloc_host(void** ptr, size_t bytes) {
    (void)use_device();  // cudaMallocHost: a context on the current device
    return pinned_host_.alloc(ptr, bytes);
}

Status EmuDevice::free_host(void* ptr) { return pinned_host_.free(ptr); }

Status EmuDevice::create_stream(std::unique_ptr<Stream>* out) {
    if (out == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "emu create_stream: out is NULL");
    *out = std::make_unique<EmuStream>(EmuStream::inline_requested_by_environment(), use_device());
    return kSuccess;
}

bool EmuDevice::reduce_supported(gpucoll_dtype_t dtype, gpucoll_op_t op) const {
    return reduce::op_valid(dtype, op);  // every type, long double included
}

// Flags: the host view of the device word, read and written atomically by the
// stream's worker (or inline without a stream).
Status EmuDevice::write_flag(uint64_t* flag, uint64_t value, Stream* stream) {
    EmuStream* emu_stream = nullptr;
    GPUCOLL_TRY(as_emu_stream(stream, &emu_stream));
    void* view = nullptr;
    GPUCOLL_TRY(memory_->translate(flag, sizeof *flag, &view));
    return submit(emu_stream, [view, value] {
        std::atomic_ref<uint64_t>(*static_cast<uint64_t*>(view))
            .store(value, std::memory_order_release);
        return kSuccess;
    });
}

Status EmuDevice::wait_flag(const uint64_t* flag, uint64_t value, Stream* stream) {
    EmuStream* emu_stream = nullptr;
    GPUCOLL_TRY(as_emu_stream(stream, &emu_stream));
    void* view = nullptr;
    GPUCOLL_TRY(memory_->translate(flag, sizeof *flag, &view));
    return submit(emu_stream, [view, value] {
        std::atomic_ref<uint64_t> word(*static_cast<uint64_t*>(view));
        for (unsigned spins = 0; word.load(std::memory_order_acquire) < value; ++spins)
            if (spins > 64) std::this_thread::yield();
        return kSuccess;
    });
}

Status EmuDevice::memcpy(void* dst, const void* src, size_t bytes, Stream* stream) {
    EmuStream* emu_stream = nullptr;
    GPUCOLL_TRY(as_emu_stream(stream, &emu_stream));
    if (bytes == 0) return kSuccess;
    if (dst == nullptr || src == nullptr) {
        return set_error(GPUCOLL_ERR_INVALID_ARG, "emu memcpy: NULL pointer for %zu bytes", bytes);
    }
    void* to = nullptr;
    void* from = nullptr;
    GPUCOLL_TRY(memory_->translate(dst, bytes, &to));
    GPUCOLL_TRY(memory_->translate(src, bytes, &from));
    if (emu_stream == nullptr) copy_context(dst, src);
    const bool inject = fail_copy_bytes_ != 0 && bytes == fail_copy_bytes_;
    return submit(emu_stream, [to, from, bytes, inject] {
        if (inject)  // testing aid: a copy that fails when it runs (GPUCOLL_EMU_FAIL_COPY_BYTES)
            return set_error(
                GPUCOLL_ERR_DEVICE,
                "emu memcpy of %zu bytes: injected failure (GPUCOLL_EMU_FAIL_COPY_BYTES)", bytes);
        std::memmove(to, from, bytes);
        return kSuccess;
    });
}

Status EmuDevice::memcpy_runs(void* dst, const void* src, const gpucoll_copy_run_t* runs,
                              size_t nruns, Stream* stream) {
    EmuStream* emu_stream = nullptr;
    GPUCOLL_TRY(as_emu_stream(stream, &emu_stream));
    if (nruns == 0) return kSuccess;
    if (dst == nullptr || src == nullptr || runs == nullptr) {
        return set_error(GPUCOLL_ERR_INVALID_ARG, "emu memcpy_runs: NULL pointer for %zu runs",
                         nruns);
    }
    // Every run translated (and checked against its allocation) before
    // anything is copied, as one copy engine call would refuse the layout.
    struct View {
        char* to;
        const char* from;
        size_t width, height, pitch;
    };
    std::vector<View> views;
    views.reserve(nruns);
    for (size_t k = 0; k < nruns; ++k) {
        const gpucoll_copy_run_t& r = runs[k];
        size_t span = 0;
        GPUCOLL_TRY(run_span(r, &span));
        if (span == 0) continue;
        void* to = nullptr;
        void* from = nullptr;
        GPUCOLL_TRY(memory_->translate(static_cast<char*>(dst) + r.offset, span, &to));
        GPUCOLL_TRY(memory_->translate(static_cast<const char*>(src) + r.offset, span, &from));
        views.push_back(
            {static_cast<char*>(to), static_cast<const char*>(from), r.width, r.height, r.pitch});
    }
    if (emu_stream == nullptr) (void)use_device();  // cudaMemcpy2D: the current device's context
    return submit(emu_stream, [views = std::move(views)] {
        for (const View& v : views)
            for (size_t row = 0; row < v.height; ++row)
                std::memmove(v.to + row * v.pitch, v.from + row * v.pitch, v.width);
        return kSuccess;
    });
}

Status EmuDevice::reduce(void* dst, const void* const* srcs, int nsrc, size_t count,
                         gpucoll_dtype_t dtype, gpucoll_op_t op, Stream* stream) {
    EmuStream* emu_stream = nullptr;
    GPUCOLL_TRY(as_emu_stream(stream, &emu_stream));
    if (dtype < 0 || dtype >= GPUCOLL_DTYPE_COUNT || op < 0 || op >= GPUCOLL_OP_COUNT) {
        return set_error(GPUCOLL_ERR_INVALID_ARG, "emu reduce: unknown dtype %d or op %d",
                         static_cast<int>(dtype), static_cast<int>(op));
    }
    if (!reduce::op_valid(dtype, op)) {
        return set_error(GPUCOLL_ERR_UNSUPPORTED, "emu reduce: MPI does not define %s on %s",
                         gpucoll_op_name(op), gpucoll_dtype_name(dtype));
    }
    if (nsrc < 1 || srcs == nullptr) {
        return set_error(GPUCOLL_ERR_INVALID_ARG, "emu reduce: needs at least one source (nsrc=%d)",
                         nsrc);
    }
    if (count == 0) return kSuccess;
    const size_t elem = reduce::dtype_size(dtype);
    if (count > SIZE_MAX / elem) {
        return set_error(GPUCOLL_ERR_INVALID_ARG, "emu reduce: %zu elements overflow size_t",
                         count);
    }
    const size_t bytes = count * elem;
    void* out = nullptr;
    if (dst == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "emu reduce: dst is NULL");
    GPUCOLL_TRY(memory_->translate(dst, bytes, &out));
    // Like a CUDA kernel: on its stream's device, else on the device of dst
    // (asked only where there are several: one device reaches everything).
    if (emu_stream == nullptr) (void)use_device();  // a launch: the current device's context
    int device = 0;
    if (devices_ > 1 && emu_stream != nullptr) {
        device = emu_stream->device();
    } else if (devices_ > 1) {
        PointerInfo info;
        memory_->query(dst, &info);
        device = info.type == GPUCOLL_MEM_DEVICE ? info.device : t_current_device;
    }
    GPUCOLL_TRY(check_reachable(dst, device, "dst"));
    std::vector<const void*> in(static_cast<size_t>(nsrc));
    for (int k = 0; k < nsrc; ++k) {
        if (srcs[k] == nullptr) {
            return set_error(GPUCOLL_ERR_INVALID_ARG, "emu reduce: srcs[%d] is NULL", k);
        }
        void* view = nullptr;
        GPUCOLL_TRY(memory_->translate(srcs[k], bytes, &view));
        GPUCOLL_TRY(check_reachable(srcs[k], device, "a source"));
        in[static_cast<size_t>(k)] = view;
    }
    return submit(emu_stream, [out, in = std::move(in), count, dtype, op] {
        return emu_reduce(out, in.data(), static_cast<int>(in.size()), count, dtype, op);
    });
}

// The CUDA kernel's protocol (cuda_one_kernel.cu) on the stream's worker:
// the copy into this rank's slot, the release of the word, the acquire of
// every peer's, the reduction of all slots in rank order.
Status EmuDevice::allreduce_one_kernel(const OneKernelAllreduce& c, Stream* stream) {
    EmuStream* emu_stream = nullptr;
    GPUCOLL_TRY(as_emu_stream(stream, &emu_stream));
    if (emu_stream == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "one-kernel allreduce needs a stream");
    if (c.size < 1 || c.size > OneKernelAllreduce::kMaxRanks || c.rank < 0 || c.rank >= c.size)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "one-kernel allreduce: rank %d of %d ranks",
                         c.rank, c.size);
    if (!reduce::op_valid(c.dtype, c.op) || reduce::dtype_size(c.dtype) > 16)
        return set_error(GPUCOLL_ERR_UNSUPPORTED, "one-kernel allreduce: no kernel for %s on %s",
                         gpucoll_op_name(c.op), gpucoll_dtype_name(c.dtype));
    const size_t bytes = c.count * reduce::dtype_size(c.dtype);
    struct Views {
        void* in;
        void* out;
        const void* slots[OneKernelAllreduce::kMaxRanks];
        uint64_t* flags[OneKernelAllreduce::kMaxRanks];
    } v{};
    if (bytes != 0) {
        GPUCOLL_TRY(memory_->translate(c.input, bytes, &v.in));
        GPUCOLL_TRY(memory_->translate(c.output, bytes, &v.out));
    }
    for (int p = 0; p < c.size; ++p) {
        void* view = nullptr;
        if (bytes != 0) {
            GPUCOLL_TRY(memory_->translate(c.slots[p], bytes, &view));
            v.slots[p] = view;
        }
        GPUCOLL_TRY(memory_->translate(c.flags[p], sizeof(uint64_t), &view));
        v.flags[p] = static_cast<uint64_t*>(view);
    }
    return submit(emu_stream, [v, c, bytes] {
        if (bytes != 0) std::memmove(const_cast<void*>(v.slots[c.rank]), v.in, bytes);
        std::atomic_ref<uint64_t>(*v.flags[c.rank]).store(c.word, std::memory_order_release);
        for (int p = 0; p < c.size; ++p) {
            if (p == c.rank) continue;
            std::atomic_ref<uint64_t> word(*v.flags[p]);
            for (unsigned spins = 0; word.load(std::memory_order_acquire) < c.word; ++spins)
                if (spins > 64) std::this_thread::yield();
        }
        if (bytes == 0) return kSuccess;
        return emu_reduce(v.out, v.slots, c.size, c.count, c.dtype, c.op);
    });
}

Status EmuDevice::ipc_export(void* base, IpcHandle* handle) {
    return memory_->export_handle(base, handle);
}

Status EmuDevice::ipc_import(const IpcHandle& handle, std::unique_ptr<IpcMapping>* out) {
    return memory_->import_handle(handle, out, use_device());
}

std::unique_ptr<Device> make_emu_device() { return std::make_unique<EmuDevice>(); }

}  // namespace gpucoll
