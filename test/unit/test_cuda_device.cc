// test_cuda_device.cc - the cuda backend: the shared Device conformance suite,
// plus what only CUDA has (long double left to the host, the kernels' access
// modes and source chunking, pool memory that legacy IPC rejects, IPC between
// two processes). Tests that need a GPU skip without one; the factory's quiet
// failure without a GPU is checked everywhere.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "device/cuda/cuda_pool.h"
#include "device/device.h"
#include "device/host_page_cache.h"
#include "device_conformance.h"
#include "inter/transport.h"
#include "reduce_reference.h"

extern char** environ;

INSTANTIATE_TEST_SUITE_P(Cuda, DeviceConformance,
                         ::testing::Values(DeviceFactory{
                             "cuda", [] { return gpucoll::make_cuda_device(); }}),
                         DeviceFactoryName);

namespace {

using conformance::DeviceMemory;

// ---- availability ---------------------------------------------------------------------

TEST(CudaAvailability, WithoutGpuTheFactoryFailsQuietly) {
    gpucoll::clear_error();
    testing::internal::CaptureStdout();
    testing::internal::CaptureStderr();
    const bool present = gpucoll::cuda_device_present();
    std::unique_ptr<gpucoll::Device> dev = present ? nullptr : gpucoll::make_cuda_device();
    const std::string out = testing::internal::GetCapturedStdout();
    const std::string err = testing::internal::GetCapturedStderr();
    if (present) GTEST_SKIP() << "a GPU is present";
    EXPECT_EQ(dev, nullptr);
    EXPECT_NE(std::string(gpucoll::last_error()), "");
    EXPECT_NE(std::string(gpucoll::last_error()).find("cuda"), std::string::npos)
        << gpucoll::last_error();
    EXPECT_EQ(out, "");
    EXPECT_EQ(err, "");
    EXPECT_FALSE(gpucoll::cuda_device_present());  // asking again changes nothing

    void* p = reinterpret_cast<void*>(0x1);
    EXPECT_NE(gpucoll::cuda::alloc_pool_memory(&p, 64), GPUCOLL_SUCCESS);
    EXPECT_EQ(p, nullptr);
}

TEST(CudaAvailability, WithGpuTheFactoryMakesADevice) {
    if (!gpucoll::cuda_device_present()) GTEST_SKIP() << "no GPU";
    std::unique_ptr<gpucoll::Device> dev = gpucoll::make_cuda_device();
    ASSERT_NE(dev, nullptr) << gpucoll::last_error();
    EXPECT_STREQ(dev->name(), "cuda");
}

// ---- CUDA-only behaviour ----------------------------------------------------------------

class CudaBackend : public ::testing::Test {
protected:
    void SetUp() override {
        if (!gpucoll::cuda_device_present()) GTEST_SKIP() << "no GPU";
        dev_ = gpucoll::make_cuda_device();
        ASSERT_NE(dev_, nullptr) << gpucoll::last_error();
    }

    void upload(void* dst, const void* src, size_t bytes) {
        ASSERT_DEV_OK(dev_->memcpy(dst, src, bytes, nullptr));
    }
    std::vector<unsigned char> download(const void* src, size_t bytes) {
        std::vector<unsigned char> out(bytes);
        EXPECT_DEV_OK(dev_->memcpy(out.data(), src, bytes, nullptr));
        return out;
    }

    std::unique_ptr<gpucoll::Device> dev_;
};

TEST_F(CudaBackend, LongDoubleIsLeftToTheHost) {
    DeviceMemory a(dev_.get(), 4096), b(dev_.get(), 4096);
    ASSERT_DEV_OK(a.status());
    ASSERT_DEV_OK(b.status());
    const void* srcs[] = {a.get(), b.get()};
    std::unique_ptr<gpucoll::Stream> stream;
    ASSERT_DEV_OK(dev_->create_stream(&stream));
    for (gpucoll::Stream* s : {static_cast<gpucoll::Stream*>(nullptr), stream.get()}) {
        gpucoll::clear_error();
        EXPECT_EQ(dev_->reduce(a.get(), srcs, 2, 16, GPUCOLL_LONG_DOUBLE, GPUCOLL_OP_SUM, s),
                  GPUCOLL_ERR_UNSUPPORTED);
        EXPECT_NE(std::string(gpucoll::last_error()).find("host"), std::string::npos)
            << gpucoll::last_error();
        EXPECT_EQ(
            dev_->reduce(a.get(), srcs, 2, 16, GPUCOLL_C_LONG_DOUBLE_COMPLEX, GPUCOLL_OP_PROD, s),
            GPUCOLL_ERR_UNSUPPORTED);
    }
    ASSERT_DEV_OK(stream->synchronize());
}

TEST_F(CudaBackend, RejectsAStreamOfAnotherBackend) {
    std::unique_ptr<gpucoll::Device> emu = gpucoll::make_emu_device();
    ASSERT_NE(emu, nullptr) << gpucoll::last_error();
    std::unique_ptr<gpucoll::Stream> foreign;
    ASSERT_DEV_OK(emu->create_stream(&foreign));
    DeviceMemory a(dev_.get(), 64);
    ASSERT_DEV_OK(a.status());
    const void* srcs[] = {a.get()};
    EXPECT_EQ(dev_->reduce(a.get(), srcs, 1, 4, GPUCOLL_INT32, GPUCOLL_OP_SUM, foreign.get()),
              GPUCOLL_ERR_INVALID_ARG);
    char host[64] = {};
    EXPECT_EQ(dev_->memcpy(a.get(), host, sizeof host, foreign.get()), GPUCOLL_ERR_INVALID_ARG);
}

TEST_F(CudaBackend, FreeOfForeignPointerIsNotFound) {
    int on_stack = 0;
    EXPECT_EQ(dev_->free(&on_stack), GPUCOLL_ERR_NOT_FOUND);
    DeviceMemory a(dev_.get(), 256);
    ASSERT_DEV_OK(a.status());
    EXPECT_EQ(dev_->free(a.get() + 16), GPUCOLL_ERR_NOT_FOUND);
    // No sticky error: the device keeps working.
    const std::vector<unsigned char> pattern = conformance::byte_pattern(256, 5);
    upload(a.get(), pattern.data(), pattern.size());
    EXPECT_TRUE(download(a.get(), pattern.size()) == pattern);
}

// Every access mode of the kernels (16-byte packs with scalar head and tail,
// one element per load, byte-assembled elements) and source chunking (more
// sources than one launch takes), against the host reference.
TEST_F(CudaBackend, ReduceAccessModesAndManySources) {
    struct Case {
        gpucoll_dtype_t dtype;
        gpucoll_op_t op;
    };
    const Case cases[] = {
        {GPUCOLL_INT8, GPUCOLL_OP_SUM},
        {GPUCOLL_INT16, GPUCOLL_OP_MAX},
        {GPUCOLL_UINT32, GPUCOLL_OP_BXOR},
        {GPUCOLL_INT64, GPUCOLL_OP_PROD},
        {GPUCOLL_FLOAT, GPUCOLL_OP_SUM},
        {GPUCOLL_DOUBLE, GPUCOLL_OP_MIN},
        {GPUCOLL_C_FLOAT_COMPLEX, GPUCOLL_OP_SUM},
        {GPUCOLL_C_DOUBLE_COMPLEX, GPUCOLL_OP_PROD},
        {GPUCOLL_BOOL, GPUCOLL_OP_LXOR},
        {GPUCOLL_BYTE, GPUCOLL_OP_BOR},
    };
    struct Layout {
        const char* name;
        size_t dst_bytes;           // offset of dst in its allocation
        size_t src_bytes[2];        // offsets of even and odd sources, in elements...
        bool src_offsets_in_bytes;  // ...or in bytes
    };
    const Layout layouts[] = {
        {"16-byte aligned", 0, {0, 0}, false},
        {"same offset from 16 bytes", 3, {3, 3}, false},  // elements: scalar head, packs, tail
        {"different offsets", 0, {1, 0}, false},          // elements
        {"misaligned for the type", 0, {1, 0}, true},     // bytes
    };
    const int nsrcs[] = {1, 2, 8, 9, 16, 17};
    const size_t counts[] = {1, 15, 16, 17, 4099};
    constexpr int kMaxSources = 17;
    constexpr size_t kMaxCount = 4099;

    for (const Case& c : cases) {
        SCOPED_TRACE(reference::dtype_label(c.dtype));
        const size_t elem = reference::element_size(c.dtype);
        const size_t alloc_bytes = (kMaxCount + 4) * elem + 16;
        std::vector<std::unique_ptr<DeviceMemory>> srcs;
        for (int k = 0; k < kMaxSources; ++k) {
            srcs.push_back(std::make_unique<DeviceMemory>(dev_.get(), alloc_bytes));
            ASSERT_DEV_OK(srcs.back()->status());
        }
        DeviceMemory dst(dev_.get(), alloc_bytes);
        ASSERT_DEV_OK(dst.status());
        for (const Layout& layout : layouts) {
            SCOPED_TRACE(layout.name);
            const size_t unit = layout.src_offsets_in_bytes ? 1 : elem;
            for (int nsrc : nsrcs) {
                for (size_t count : counts) {
                    SCOPED_TRACE(testing::Message() << "nsrc " << nsrc << ", count " << count);
                    const size_t bytes = count * elem;
                    std::vector<std::vector<unsigned char>> inputs;
                    std::vector<const void*> host_srcs, device_srcs;
                    for (int k = 0; k < nsrc; ++k) {
                        inputs.push_back(reference::make_input(c.dtype, k, count));
                        std::byte* p = srcs[k]->get() + layout.src_bytes[k % 2] * unit;
                        upload(p, inputs.back().data(), bytes);
                        device_srcs.push_back(p);
                    }
                    for (const auto& in : inputs) host_srcs.push_back(in.data());
                    std::byte* out = dst.get() + layout.dst_bytes * elem;
                    ASSERT_DEV_OK(
                        dev_->reduce(out, device_srcs.data(), nsrc, count, c.dtype, c.op, nullptr));
                    std::vector<unsigned char> expected(bytes);
                    reference::reduce(c.dtype, c.op, host_srcs, count, expected.data());
                    ASSERT_EQ(reference::compare(c.dtype, expected.data(),
                                                 download(out, bytes).data(), count),
                              "");
                }
            }
        }
    }
}

TEST_F(CudaBackend, ManySourcesOnAStreamInPlace) {
    constexpr size_t kCount = 100003;
    constexpr int kSources = 20;
    const size_t bytes = kCount * sizeof(double);
    std::vector<std::unique_ptr<DeviceMemory>> bufs;
    std::vector<std::vector<unsigned char>> inputs;
    std::vector<const void*> host_srcs, device_srcs;
    for (int k = 0; k < kSources; ++k) {
        bufs.push_back(std::make_unique<DeviceMemory>(dev_.get(), bytes));
        ASSERT_DEV_OK(bufs.back()->status());
        inputs.push_back(reference::make_input(GPUCOLL_DOUBLE, k, kCount));
        upload(bufs.back()->get(), inputs.back().data(), bytes);
        device_srcs.push_back(bufs.back()->get());
    }
    for (const auto& in : inputs) host_srcs.push_back(in.data());
    std::unique_ptr<gpucoll::Stream> stream;
    ASSERT_DEV_OK(dev_->create_stream(&stream));
    ASSERT_DEV_OK(dev_->reduce(bufs[0]->get(), device_srcs.data(), kSources, kCount, GPUCOLL_DOUBLE,
                               GPUCOLL_OP_MAX, stream.get()));
    ASSERT_DEV_OK(stream->synchronize());
    std::vector<unsigned char> expected(bytes);
    reference::reduce(GPUCOLL_DOUBLE, GPUCOLL_OP_MAX, host_srcs, kCount, expected.data());
    EXPECT_EQ(reference::compare(GPUCOLL_DOUBLE, expected.data(),
                                 download(bufs[0]->get(), bytes).data(), kCount),
              "");
}

// 64 MB per operand: completes, is correct, and reports its bandwidth.
TEST_F(CudaBackend, Reduce64MBThroughput) {
    constexpr size_t kBytes = 64u << 20;
    constexpr size_t kCount = kBytes / sizeof(float);
    constexpr int kSources = 4;
    std::vector<std::unique_ptr<DeviceMemory>> bufs;
    std::vector<std::vector<unsigned char>> inputs;
    std::vector<const void*> host_srcs, device_srcs;
    for (int k = 0; k < kSources; ++k) {
        bufs.push_back(std::make_unique<DeviceMemory>(dev_.get(), kBytes));
        ASSERT_DEV_OK(bufs.back()->status());
        inputs.push_back(reference::make_input(GPUCOLL_FLOAT, k, kCount));
        upload(bufs.back()->get(), inputs.back().data(), kBytes);
        device_srcs.push_back(bufs.back()->get());
    }
    for (const auto& in : inputs) host_srcs.push_back(in.data());
    DeviceMemory dst(dev_.get(), kBytes);
    ASSERT_DEV_OK(dst.status());
    std::unique_ptr<gpucoll::Stream> stream;
    ASSERT_DEV_OK(dev_->create_stream(&stream));

    ASSERT_DEV_OK(dev_->reduce(dst.get(), device_srcs.data(), kSources, kCount, GPUCOLL_FLOAT,
                               GPUCOLL_OP_SUM, stream.get()));  // warm-up
    ASSERT_DEV_OK(stream->synchronize());
    constexpr int kIterations = 10;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kIterations; ++i) {
        ASSERT_DEV_OK(dev_->reduce(dst.get(), device_srcs.data(), kSources, kCount, GPUCOLL_FLOAT,
                                   GPUCOLL_OP_SUM, stream.get()));
    }
    ASSERT_DEV_OK(stream->synchronize());
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double gbps = double(kSources + 1) * kBytes * kIterations / seconds / 1e9;
    std::printf("reduce %d x 64 MB float sum: %.1f GB/s of memory traffic\n", kSources, gbps);
    RecordProperty("memory_gbps", std::to_string(gbps));

    std::vector<unsigned char> expected(kBytes);
    reference::reduce(GPUCOLL_FLOAT, GPUCOLL_OP_SUM, host_srcs, kCount, expected.data());
    EXPECT_EQ(reference::compare(GPUCOLL_FLOAT, expected.data(), download(dst.get(), kBytes).data(),
                                 kCount),
              "");
}

// ---- host pages the driver does not know (host_page_cache) --------------------------------

// With the cache on (mode on: UCX's hooks installed if needed), plain host
// memory outside the heap is kept after one query; device memory, pool
// memory, pinned memory and what cudaFree/cudaFreeAsync/cudaFreeHost gave
// back are never kept; and device memory allocated after those frees, at
// whatever address the driver picks, still reads as device memory. A kept
// page that later held device memory would send it down Open MPI's host
// path: this is the check the cache waits for before it is on by default.
TEST_F(CudaBackend, HostPageCacheKeepsOnlyPlainHostMemory) {
    namespace hpc = gpucoll::host_page_cache;
    hpc::set_watcher({&gpucoll::inter::watch_unmaps, &gpucoll::inter::unmaps_still_reported});
    hpc::set_mode(hpc::Mode::Install);
    constexpr size_t kBytes = size_t{1} << 20;
    void* host = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(host, MAP_FAILED);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(dev_->memory_type(host), GPUCOLL_MEM_HOST);
    EXPECT_TRUE(hpc::stats().watching) << "UCX's memory hooks did not pass the probe";
    EXPECT_TRUE(hpc::contains(host)) << "plain host memory was not kept";
    munmap(host, kBytes);
    EXPECT_FALSE(hpc::contains(host)) << "kept after munmap";

    void* pinned = nullptr;
    ASSERT_DEV_OK(dev_->alloc_host(&pinned, kBytes));
    EXPECT_EQ(dev_->memory_type(pinned), GPUCOLL_MEM_HOST);
    EXPECT_FALSE(hpc::contains(pinned)) << "pinned memory kept";
    ASSERT_DEV_OK(dev_->free_host(pinned));
    (void)dev_->memory_type(pinned);  // whatever the answer, what follows must hold

    for (int i = 0; i < 32; ++i) {
        void* d = nullptr;
        const bool pool = i % 2 == 1;
        ASSERT_DEV_OK(pool ? gpucoll::cuda::alloc_pool_memory(&d, kBytes << (i % 3))
                           : dev_->alloc(&d, kBytes << (i % 3)));
        EXPECT_EQ(dev_->memory_type(d), GPUCOLL_MEM_DEVICE) << "allocation " << i << " at " << d;
        EXPECT_FALSE(hpc::contains(d)) << "device memory kept: " << d;
        ASSERT_DEV_OK(pool ? gpucoll::cuda::free_pool_memory(d) : dev_->free(d));
        // A collective on a dangling pointer (count 0 is legal MPI) asks too.
        (void)dev_->memory_type(d);
        EXPECT_FALSE(hpc::contains(d)) << "freed device memory kept: " << d;
    }
    hpc::set_mode(hpc::Mode::Off);
}

// ---- IPC ----------------------------------------------------------------------------------

TEST_F(CudaBackend, IpcExportOfPoolMemoryIsUnsupported) {
    void* pool = nullptr;
    ASSERT_DEV_OK(gpucoll::cuda::alloc_pool_memory(&pool, 1u << 20));
    gpucoll::PointerInfo info;
    ASSERT_DEV_OK(dev_->query(pool, &info));
    EXPECT_EQ(info.type, GPUCOLL_MEM_DEVICE);
    gpucoll::IpcHandle handle;
    EXPECT_EQ(dev_->ipc_export(info.base, &handle), GPUCOLL_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(gpucoll::last_error()).find("cudaMallocAsync"), std::string::npos)
        << gpucoll::last_error();
    ASSERT_DEV_OK(gpucoll::cuda::free_pool_memory(pool));

    // Nothing sticky was left behind: cudaMalloc memory still exports.
    DeviceMemory plain(dev_.get(), 4096);
    ASSERT_DEV_OK(plain.status());
    EXPECT_DEV_OK(dev_->ipc_export(plain.get(), &handle));
}

TEST_F(CudaBackend, IpcExportNeedsTheAllocationStart) {
    DeviceMemory a(dev_.get(), 4096);
    ASSERT_DEV_OK(a.status());
    gpucoll::IpcHandle handle;
    EXPECT_EQ(dev_->ipc_export(a.get() + 256, &handle), GPUCOLL_ERR_INVALID_ARG);
    int host = 0;
    EXPECT_EQ(dev_->ipc_export(&host, &handle), GPUCOLL_ERR_INVALID_ARG);
    gpucoll::IpcHandle garbage;
    std::memset(garbage.bytes, 0x5a, sizeof garbage.bytes);
    std::unique_ptr<gpucoll::IpcMapping> mapping;
    EXPECT_EQ(dev_->ipc_import(garbage, &mapping), GPUCOLL_ERR_INVALID_ARG);
}

constexpr const char* kIpcHandleVariable = "GPUCOLL_TEST_CUDA_IPC_HANDLE";
constexpr size_t kIpcBytes = (1u << 20) + 3;
constexpr size_t kIpcChildWrite = 4096;

std::string to_hex(const gpucoll::IpcHandle& h) {
    static const char digits[] = "0123456789abcdef";
    std::string s;
    for (unsigned char b : h.bytes) {
        s += digits[b >> 4];
        s += digits[b & 15];
    }
    return s;
}

bool from_hex(const std::string& s, gpucoll::IpcHandle* h) {
    if (s.size() != 2 * sizeof h->bytes) return false;
    for (size_t i = 0; i < sizeof h->bytes; ++i) {
        unsigned v = 0;
        if (std::sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
        h->bytes[i] = static_cast<uint8_t>(v);
    }
    return true;
}

// Parent: exports a buffer and runs this binary again as the child below,
// which maps it, checks it, and writes into it.
TEST_F(CudaBackend, IpcAcrossProcesses) {
    DeviceMemory buffer(dev_.get(), kIpcBytes);
    ASSERT_DEV_OK(buffer.status());
    const auto pattern = conformance::byte_pattern(kIpcBytes, 21);
    upload(buffer.get(), pattern.data(), kIpcBytes);
    gpucoll::IpcHandle handle;
    ASSERT_DEV_OK(dev_->ipc_export(buffer.get(), &handle));

    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
        if (std::strncmp(*e, kIpcHandleVariable, std::strlen(kIpcHandleVariable)) != 0)
            env_strings.emplace_back(*e);
    }
    env_strings.push_back(std::string(kIpcHandleVariable) + "=" + to_hex(handle));
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string exe = "/proc/self/exe";
    std::string filter = "--gtest_filter=CudaIpcChild.MapsTheParentsBuffer";
    char* argv[] = {exe.data(), filter.data(), nullptr};
    pid_t pid = -1;
    ASSERT_EQ(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv, envp.data()), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;

    const auto after = download(buffer.get(), kIpcBytes);
    for (size_t i = 0; i < kIpcBytes; ++i) {
        const unsigned char want =
            i < kIpcChildWrite ? static_cast<unsigned char>(~pattern[i]) : pattern[i];
        ASSERT_EQ(after[i], want) << "byte " << i << " (the child writes the first "
                                  << kIpcChildWrite << " inverted)";
    }
}

TEST(CudaIpcChild, MapsTheParentsBuffer) {
    const char* hex = std::getenv(kIpcHandleVariable);
    if (hex == nullptr) GTEST_SKIP() << "runs only as the child of CudaBackend.IpcAcrossProcesses";
    gpucoll::IpcHandle handle;
    ASSERT_TRUE(from_hex(hex, &handle));
    std::unique_ptr<gpucoll::Device> dev = gpucoll::make_cuda_device();
    ASSERT_NE(dev, nullptr) << gpucoll::last_error();
    std::unique_ptr<gpucoll::IpcMapping> mapping;
    ASSERT_DEV_OK(dev->ipc_import(handle, &mapping));
    ASSERT_EQ(mapping->size(), kIpcBytes);
    gpucoll::PointerInfo info;
    ASSERT_DEV_OK(dev->query(mapping->address(), &info));
    EXPECT_EQ(info.type, GPUCOLL_MEM_DEVICE);

    const auto pattern = conformance::byte_pattern(kIpcBytes, 21);
    std::vector<unsigned char> seen(kIpcBytes);
    ASSERT_DEV_OK(dev->memcpy(seen.data(), mapping->address(), kIpcBytes, nullptr));
    ASSERT_TRUE(seen == pattern);
    std::vector<unsigned char> inverted(pattern.begin(), pattern.begin() + kIpcChildWrite);
    for (auto& b : inverted) b = static_cast<unsigned char>(~b);
    ASSERT_DEV_OK(dev->memcpy(mapping->address(), inverted.data(), kIpcChildWrite, nullptr));
}

}  // namespace
