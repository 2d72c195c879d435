// api.cc - the C interface of gpucoll.h, on top of the Runtime.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "config.h"
#include "core/counters.h"
#include "core/lifetime.h"
#include "core/runtime.h"
#include "core/timing.h"
#include "device/host_page_cache.h"
#include "device/reduce_ops.h"
#include "gpucoll.h"

using gpucoll::Device;
using gpucoll::DeviceScope;
using gpucoll::PointerInfo;
using gpucoll::Runtime;
using gpucoll::set_error;
namespace lifetime = gpucoll::lifetime;

namespace {

// The device, or an error telling the user how to get one (call: the entry
// point, for the refusal in a forked child).
int require_device(Device** out, const char* call) {
    if (lifetime::forked_child()) return lifetime::refuse(call);
    Runtime& rt = Runtime::instance();
    Device* d = rt.device();
    if (d == nullptr) {
        if (*gpucoll::last_error() == '\0' || std::strcmp(rt.backend_name(), "none") == 0)
            set_error(GPUCOLL_ERR_NO_BACKEND,
                      "no gpucoll device backend is active: no GPU was found (or CUDA is not "
                      "compiled in). Set GPUCOLL_DEVICE=emu (application) and "
                      "--mca coll_gpucoll_device emu (component) to use the emulated device.");
        return GPUCOLL_ERR_NO_BACKEND;
    }
    *out = d;
    return GPUCOLL_SUCCESS;
}

constexpr const char* kCollNames[GPUCOLL_COLL_COUNT] = {"allreduce",
                                                        "bcast",
                                                        "allgather",
                                                        "reduce_scatter",
                                                        "reduce_scatter_block",
                                                        "reduce",
                                                        "reduce_local",
                                                        "allgatherv",
                                                        "alltoall",
                                                        "alltoallv",
                                                        "alltoallw",
                                                        "gather",
                                                        "gatherv",
                                                        "scatter",
                                                        "scatterv",
                                                        "scan",
                                                        "exscan",
                                                        "neighbor_allgather",
                                                        "neighbor_allgatherv",
                                                        "neighbor_alltoall",
                                                        "neighbor_alltoallv",
                                                        "neighbor_alltoallw"};
constexpr const char* kFormNames[GPUCOLL_FORM_COUNT] = {"blocking", "nonblocking", "persistent"};
constexpr const char* kPathNames[GPUCOLL_PATH_COUNT] = {"accelerated", "staged", "delegated"};
constexpr const char* kDtypeNames[GPUCOLL_DTYPE_COUNT] = {"int8",
                                                          "int16",
                                                          "int32",
                                                          "int64",
                                                          "uint8",
                                                          "uint16",
                                                          "uint32",
                                                          "uint64",
                                                          "float",
                                                          "double",
                                                          "long_double",
                                                          "c_float_complex",
                                                          "c_double_complex",
                                                          "c_long_double_complex",
                                                          "bool",
                                                          "byte",
                                                          "float16"};
constexpr const char* kOpNames[GPUCOLL_OP_COUNT] = {"sum", "prod", "min",  "max", "land",
                                                    "lor", "lxor", "band", "bor", "bxor"};

}  // namespace

extern "C" {

int gpucoll_init_backend(const char* name) {
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_init_backend");
    return Runtime::instance().init(name);
}

const char* gpucoll_backend(void) {
    if (lifetime::forked_child()) {  // no backend usable here
        (void)lifetime::refuse("gpucoll_backend");
        return "none";
    }
    return Runtime::instance().backend_name();
}

void gpucoll_set_host_cache(int mode) {
    using gpucoll::host_page_cache::Mode;
    gpucoll::host_page_cache::set_mode(mode <= 0   ? Mode::Off
                                       : mode == 1 ? Mode::Auto
                                                   : Mode::Install);
}

void gpucoll_host_cache_stats(uint64_t* kept, uint64_t* refused, int* watching) {
    const gpucoll::host_page_cache::Stats s = gpucoll::host_page_cache::stats();
    if (kept != nullptr) *kept = s.remembered;
    if (refused != nullptr) *refused = s.refused;
    if (watching != nullptr) *watching = s.watching ? 1 : 0;
}

const char* gpucoll_version(void) { return PACKAGE_VERSION; }

const char* gpucoll_last_error(void) { return gpucoll::last_error(); }

int gpucoll_device_count(void) {
    if (lifetime::forked_child()) {
        (void)lifetime::refuse("gpucoll_device_count");
        return 0;
    }
    Device* d = Runtime::instance().device();
    return d != nullptr ? d->device_count() : 0;
}

int gpucoll_set_device(int ordinal) {
    Device* d = nullptr;
    if (int s = require_device(&d, "gpucoll_set_device")) return s;
    return d->set_current_device(ordinal);
}

int gpucoll_current_device(void) {
    Device* d = nullptr;
    int ordinal = -1;
    if (require_device(&d, "gpucoll_current_device") != GPUCOLL_SUCCESS ||
        d->current_device(&ordinal) != GPUCOLL_SUCCESS)
        return -1;
    return ordinal;
}

int gpucoll_device_has_context(int ordinal) {
    Device* d = nullptr;
    if (require_device(&d, "gpucoll_device_has_context") != GPUCOLL_SUCCESS) return -1;
    if (ordinal < 0 || ordinal >= d->device_count()) {
        set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_device_has_context: no GPU %d (%d GPUs)",
                  ordinal, d->device_count());
        return -1;
    }
    return d->holds_context(ordinal) ? 1 : 0;
}

int gpucoll_select_local_device(void) {
    Device* d = nullptr;
    if (require_device(&d, "gpucoll_select_local_device") != GPUCOLL_SUCCESS) return -1;
    const int count = d->device_count();
    if (count < 1) {
        set_error(GPUCOLL_ERR_NO_BACKEND, "gpucoll_select_local_device: no device");
        return -1;
    }
    int ordinal = -1;
    const char* forced = std::getenv("GPUCOLL_LOCAL_GPU");
    if (forced != nullptr && *forced != '\0') {
        char* end = nullptr;
        const long v = std::strtol(forced, &end, 10);
        if (*end != '\0' || v < 0 || v >= count) {
            set_error(GPUCOLL_ERR_INVALID_ARG,
                      "GPUCOLL_LOCAL_GPU=%s is not a device ordinal of this process (0..%d)",
                      forced, count - 1);
            return -1;
        }
        ordinal = static_cast<int>(v);
    } else {
        long local = 0;
        for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID",
                                "PMIX_LOCAL_RANK"}) {
            const char* v = std::getenv(var);
            if (v != nullptr && *v != '\0') {
                local = std::strtol(v, nullptr, 10);
                break;
            }
        }
        ordinal = static_cast<int>((local < 0 ? 0 : local) % count);
    }
    if (d->set_current_device(ordinal) != GPUCOLL_SUCCESS) return -1;
    return ordinal;
}

int gpucoll_malloc_device(void** ptr, size_t bytes) {
    if (ptr == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_malloc_device: ptr is NULL");
    Device* d = nullptr;
    if (int s = require_device(&d, "gpucoll_malloc_device")) return s;
    return d->alloc(ptr, bytes);
}

int gpucoll_malloc_device_pool(void** ptr, size_t bytes) {
    if (ptr == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_malloc_device_pool: ptr is NULL");
    Device* d = nullptr;
    if (int s = require_device(&d, "gpucoll_malloc_device_pool")) return s;
    return d->alloc_unexportable(ptr, bytes);
}

int gpucoll_free_device(void* ptr) {
    if (ptr == nullptr) return GPUCOLL_SUCCESS;
    Device* d = nullptr;
    if (int s = require_device(&d, "gpucoll_free_device")) return s;
    return d->free(ptr);
}

int gpucoll_malloc_host(void** ptr, size_t bytes) {
    if (ptr == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_malloc_host: ptr is NULL");
    Device* d = nullptr;
    if (int s = require_device(&d, "gpucoll_malloc_host")) return s;
    return d->alloc_host(ptr, bytes);
}

int gpucoll_free_host(void* ptr) {
    if (ptr == nullptr) return GPUCOLL_SUCCESS;
    Device* d = nullptr;
    if (int s = require_device(&d, "gpucoll_free_host")) return s;
    return d->free_host(ptr);
}

int gpucoll_memcpy(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return GPUCOLL_SUCCESS;
    if (dst == nullptr || src == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_memcpy: NULL pointer with %zu bytes",
                         bytes);
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_memcpy");
    Device* d = Runtime::instance().device();
    if (d == nullptr) {  // no backend: everything is host memory
        std::memmove(dst, src, bytes);
        return GPUCOLL_SUCCESS;
    }
    const gpucoll::timing::Scope timed(GPUCOLL_COLL_COUNT, gpucoll::timing::kStageCopy);
    return d->memcpy(dst, src, bytes, nullptr);
}

int gpucoll_memcpy_runs(void* dst, const void* src, const gpucoll_copy_run_t* runs, size_t nruns) {
    if (nruns == 0) return GPUCOLL_SUCCESS;
    if (dst == nullptr || src == nullptr || runs == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_memcpy_runs: NULL pointer with %zu runs",
                         nruns);
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_memcpy_runs");
    for (size_t k = 0; k < nruns; ++k) {  // all valid before anything is copied
        size_t span = 0;
        if (int s = gpucoll::run_span(runs[k], &span)) return s;
    }
    Device* d = Runtime::instance().device();
    const gpucoll::timing::Scope timed(GPUCOLL_COLL_COUNT, gpucoll::timing::kStageCopy);
    if (d != nullptr) return d->memcpy_runs(dst, src, runs, nruns, nullptr);
    for (size_t k = 0; k < nruns; ++k) {  // no backend: everything is host memory
        const gpucoll_copy_run_t& r = runs[k];
        if (r.width == 0) continue;
        for (size_t row = 0; row < r.height; ++row) {
            const ptrdiff_t at = r.offset + static_cast<ptrdiff_t>(row * r.pitch);
            std::memmove(static_cast<char*>(dst) + at, static_cast<const char*>(src) + at, r.width);
        }
    }
    return GPUCOLL_SUCCESS;
}

int gpucoll_counters_get(gpucoll_counters_t* out) {
    if (out == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_counters_get: NULL");
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_counters_get");  // locks
    gpucoll::counters_get(out);
    return GPUCOLL_SUCCESS;
}

void gpucoll_counters_reset(void) {
    if (!lifetime::forked_child()) gpucoll::counters_reset();
}

const char* gpucoll_coll_name(gpucoll_coll_t coll) {
    return coll >= 0 && coll < GPUCOLL_COLL_COUNT ? kCollNames[coll] : "unknown";
}

const char* gpucoll_path_name(gpucoll_path_t path) {
    return path >= 0 && path < GPUCOLL_PATH_COUNT ? kPathNames[path] : "unknown";
}

const char* gpucoll_form_name(gpucoll_form_t form) {
    return form >= 0 && form < GPUCOLL_FORM_COUNT ? kFormNames[form] : "unknown";
}

void gpucoll_timing_enable(int on) { gpucoll::timing::set_on(on != 0); }

void gpucoll_timing_reset(void) { gpucoll::timing::reset(); }

size_t gpucoll_timing_report(char* buf, size_t len) {
    const std::string text = gpucoll::timing::report();
    if (buf != nullptr && len > 0) {
        const size_t n = std::min(len - 1, text.size());
        std::memcpy(buf, text.data(), n);
        buf[n] = '\0';
    }
    return text.size();
}

size_t gpucoll_dtype_size(gpucoll_dtype_t dtype) { return gpucoll::reduce::dtype_size(dtype); }

const char* gpucoll_dtype_name(gpucoll_dtype_t dtype) {
    return dtype >= 0 && dtype < GPUCOLL_DTYPE_COUNT ? kDtypeNames[dtype] : "unknown";
}

const char* gpucoll_op_name(gpucoll_op_t op) {
    return op >= 0 && op < GPUCOLL_OP_COUNT ? kOpNames[op] : "unknown";
}

int gpucoll_op_valid(gpucoll_dtype_t dtype, gpucoll_op_t op) {
    return gpucoll::reduce::op_valid(dtype, op) ? 1 : 0;
}

int gpucoll_check_span(const void* ptr, ptrdiff_t lo, size_t bytes, const char* what) {
    if (lifetime::forked_child()) return lifetime::refuse("gpucoll_check_span");
    Device* d = Runtime::instance().device();
    if (d == nullptr || ptr == nullptr || bytes == 0) return GPUCOLL_SUCCESS;
    gpucoll::PointerInfo info;  // the allocation that holds ptr, wherever the span begins
    if (d->query(ptr, &info) != GPUCOLL_SUCCESS || info.type != GPUCOLL_MEM_DEVICE ||
        !info.complete)
        return GPUCOLL_SUCCESS;  // host memory, or an allocation the backend cannot tell
    return gpucoll::check_span(info, ptr, lo, bytes, what != nullptr ? what : "buffer");
}

int gpucoll_check_extent(const void* ptr, size_t bytes, const char* what) {
    return gpucoll_check_span(ptr, 0, bytes, what);
}

gpucoll_memtype_t gpucoll_mem_type(const void* ptr) {
    if (ptr == nullptr) return GPUCOLL_MEM_HOST;
    // A forked child: device memory for all it knows, so that no caller
    // hands a pointer to host code on its word (the device calls refuse).
    if (lifetime::forked_child()) {
        (void)lifetime::refuse("gpucoll_mem_type");
        return GPUCOLL_MEM_DEVICE;
    }
    Device* d = Runtime::instance().device();
    if (d == nullptr) return GPUCOLL_MEM_HOST;
    return d->memory_type(ptr);
}

int gpucoll_staging_buffer(int slot, size_t bytes, void** host) {
    Device* d = nullptr;
    if (int s = require_device(&d, "gpucoll_staging_buffer")) return s;
    return Runtime::instance().staging().get(d, slot, bytes, host);
}

// A forked child frees nothing it inherited (the parent's buffers and UCX
// endpoints, whose teardown would talk on the parent's connections).
void gpucoll_staging_release(void) {
    if (!lifetime::forked_child()) Runtime::instance().staging().release();
}

void gpucoll_finalize(void) {
    if (!lifetime::forked_child()) Runtime::instance().release_transport();
}

int gpucoll_reduce(void* dst, const void* a, const void* b, size_t count, gpucoll_dtype_t dtype,
                   gpucoll_op_t op) {
    if (!gpucoll::reduce::op_valid(dtype, op))
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_reduce: %s is not defined on %s",
                         gpucoll_op_name(op), gpucoll_dtype_name(dtype));
    if (count == 0) return GPUCOLL_SUCCESS;
    Device* d = nullptr;
    if (int s = require_device(&d, "gpucoll_reduce")) return s;
    for (const void* p : {static_cast<const void*>(dst), a, b})
        if (gpucoll_mem_type(p) != GPUCOLL_MEM_DEVICE)
            return set_error(GPUCOLL_ERR_INVALID_ARG,
                             "gpucoll_reduce: %p is not device memory; stage host operands", p);
    // Device::reduce allows dst to alias only the first source; every
    // predefined op is commutative, so put the aliased operand first.
    const void* srcs[2] = {a, b};
    if (dst == b) std::swap(srcs[0], srcs[1]);
    // The kernel runs on the result's GPU, which cannot read another GPU's
    // memory (CUDA without peer access: an illegal address): an operand on
    // another GPU is copied next to the result first (MPI_Reduce_local with
    // buffers on two GPUs). One GPU: nothing to ask.
    if (d->device_count() == 1) return d->reduce(dst, srcs, 2, count, dtype, op, nullptr);
    PointerInfo where;
    GPUCOLL_TRY(d->query(dst, &where));
    const size_t elem = gpucoll::reduce::dtype_size(dtype);
    if (count > SIZE_MAX / elem)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_reduce: %zu elements overflow size_t",
                         count);
    // The scope first: the copies are freed inside it, on the result's GPU.
    DeviceScope on_result;
    auto release = [d](void* p) { (void)d->free(p); };
    std::unique_ptr<void, decltype(release)> copies[2] = {{nullptr, release}, {nullptr, release}};
    for (int k = 0; k < 2; ++k) {
        PointerInfo info;
        GPUCOLL_TRY(d->query(srcs[k], &info));
        if (info.device < 0 || where.device < 0 || info.device == where.device) continue;
        GPUCOLL_TRY(on_result.enter(d, where.device));  // the copy is made there
        void* copy = nullptr;
        GPUCOLL_TRY(d->alloc(&copy, count * elem));
        copies[k].reset(copy);
        GPUCOLL_TRY(d->memcpy(copy, srcs[k], count * elem, nullptr));
        srcs[k] = copy;
    }
    return d->reduce(dst, srcs, 2, count, dtype, op, nullptr);
}

void gpucoll_counters_record(gpucoll_coll_t coll, gpucoll_path_t path, uint64_t bytes_staged,
                             const char* algorithm) {
    if (lifetime::forked_child()) return;  // may lock
    gpucoll::counters_record({coll, path, bytes_staged, 0, 0, algorithm});
}

void gpucoll_counters_record_form(gpucoll_coll_t coll, gpucoll_path_t path, gpucoll_form_t form,
                                  uint64_t bytes_staged, const char* algorithm) {
    if (lifetime::forked_child()) return;  // may lock
    gpucoll::CallRecord r{coll, path, bytes_staged, 0, 0, algorithm};
    r.form = form;
    gpucoll::counters_record(r);
}

}  // extern "C"
