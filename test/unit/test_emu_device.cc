// The emu backend: the conformance suite, plus what only the emulation
// promises (host access through a device pointer crashes, IPC through
// /proc/<pid>/fd, worker-thread streams, no leaked descriptors).
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <thread>

#include "device/emu/emu_device.h"
#include "device/emu/emu_poison.h"
#include "device/emu/emu_reduce.h"
#include "device/emu/emu_stream.h"
#include "device_conformance.h"
#include "fd_io.h"

INSTANTIATE_TEST_SUITE_P(Emu, DeviceConformance,
                         ::testing::Values(DeviceFactory{"emu", gpucoll::make_emu_device}),
                         DeviceFactoryName);

namespace {

using conformance::DeviceMemory;

class EmuDeviceTest : public ::testing::Test {
protected:
    std::unique_ptr<gpucoll::Device> dev_ = gpucoll::make_emu_device();
};

int count_open_fds() {
    DIR* dir = opendir("/proc/self/fd");
    if (dir == nullptr) return -1;
    int n = 0;
    while (readdir(dir) != nullptr) ++n;
    closedir(dir);
    return n;
}

// ---- memory is not host-accessible ------------------------------------------------

TEST_F(EmuDeviceTest, HostLoadThroughDevicePointerDies) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    DeviceMemory d(dev_.get(), 4096);
    ASSERT_DEV_OK(d.status());
    EXPECT_DEATH(
        {
            volatile unsigned char value = *reinterpret_cast<volatile unsigned char*>(d.get() + 1);
            (void)value;
        },
        "");
}

TEST_F(EmuDeviceTest, HostStoreThroughDevicePointerDies) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    DeviceMemory d(dev_.get(), 10);
    ASSERT_DEV_OK(d.status());
    EXPECT_DEATH({ *reinterpret_cast<volatile unsigned char*>(d.get()) = 1; }, "");
}

TEST_F(EmuDeviceTest, QueryOfUnknownPointerIsHost) {
    int on_stack = 0;
    for (const void* p : {static_cast<const void*>(&on_stack), static_cast<const void*>(nullptr),
                          reinterpret_cast<const void*>(uintptr_t{0x1000})}) {
        gpucoll::PointerInfo info;
        info.buffer_id = 42;
        ASSERT_DEV_OK(dev_->query(p, &info));
        EXPECT_EQ(info.type, GPUCOLL_MEM_HOST);
        EXPECT_EQ(info.buffer_id, 0u);
        EXPECT_EQ(info.device, -1);
    }
}

TEST_F(EmuDeviceTest, QueryCoversTheWholePaddedAllocationOnly) {
    DeviceMemory d(dev_.get(), 10);
    ASSERT_DEV_OK(d.status());
    gpucoll::PointerInfo info;
    ASSERT_DEV_OK(dev_->query(d.get() + 100, &info));  // padding of the same page
    EXPECT_EQ(info.type, GPUCOLL_MEM_DEVICE);
    EXPECT_EQ(info.base, d.get());
    ASSERT_DEV_OK(dev_->query(d.get() - 1, &info));
    if (info.type == GPUCOLL_MEM_DEVICE) {
        EXPECT_NE(info.base, d.get());
    }
}

TEST_F(EmuDeviceTest, FreeOfUnknownPointerFailsWithMessage) {
    int on_stack = 0;
    gpucoll::clear_error();
    EXPECT_EQ(dev_->free(&on_stack), GPUCOLL_ERR_NOT_FOUND);
    EXPECT_NE(std::string(gpucoll::last_error()).find("not allocated by the emu device"),
              std::string::npos)
        << gpucoll::last_error();

    void* p = nullptr;
    ASSERT_DEV_OK(dev_->alloc(&p, 100));
    EXPECT_EQ(dev_->free(static_cast<char*>(p) + 1), GPUCOLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(gpucoll::last_error()).find("inside an allocation"), std::string::npos);
    ASSERT_DEV_OK(dev_->free(p));
    EXPECT_EQ(dev_->free(p), GPUCOLL_ERR_NOT_FOUND);  // double free
    EXPECT_DEV_OK(dev_->free(nullptr));
    EXPECT_EQ(dev_->free_host(&on_stack), GPUCOLL_ERR_NOT_FOUND);
}

TEST_F(EmuDeviceTest, DeviceRangesMustStayInsideTheirAllocation) {
    DeviceMemory d(dev_.get(), 100), e(dev_.get(), 100);
    ASSERT_DEV_OK(d.status());
    ASSERT_DEV_OK(e.status());
    std::vector<unsigned char> host(200);
    EXPECT_DEV_OK(dev_->memcpy(d.get() + 50, host.data(), 50, nullptr));
    EXPECT_EQ(dev_->memcpy(d.get() + 50, host.data(), 51, nullptr), GPUCOLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(gpucoll::last_error()).find("past the end"), std::string::npos);
    EXPECT_EQ(dev_->memcpy(host.data(), d.get(), 101, nullptr), GPUCOLL_ERR_INVALID_ARG);
    EXPECT_EQ(dev_->memcpy(e.get(), d.get() + 1, 100, nullptr), GPUCOLL_ERR_INVALID_ARG);
    const void* srcs[] = {d.get(), e.get() + 4};
    EXPECT_EQ(dev_->reduce(d.get(), srcs, 2, 25, GPUCOLL_INT32, GPUCOLL_OP_SUM, nullptr),
              GPUCOLL_ERR_INVALID_ARG);
    EXPECT_DEV_OK(dev_->reduce(d.get(), srcs, 2, 24, GPUCOLL_INT32, GPUCOLL_OP_SUM, nullptr));
}

TEST_F(EmuDeviceTest, TranslateGivesTheBackendView) {
    auto& emu = static_cast<gpucoll::EmuDevice&>(*dev_);
    DeviceMemory d(dev_.get(), 64);
    ASSERT_DEV_OK(d.status());
    void* view = nullptr;
    ASSERT_DEV_OK(emu.memory().translate(d.get() + 8, 56, &view));
    ASSERT_NE(view, static_cast<void*>(d.get() + 8));
    std::memset(view, 0x5c, 56);  // host-accessible
    const std::vector<unsigned char> back = [&] {
        std::vector<unsigned char> v(56);
        EXPECT_DEV_OK(dev_->memcpy(v.data(), d.get() + 8, 56, nullptr));
        return v;
    }();
    EXPECT_EQ(back, std::vector<unsigned char>(56, 0x5c));
    int host = 0;
    ASSERT_DEV_OK(emu.memory().translate(&host, sizeof host, &view));
    EXPECT_EQ(view, &host);
    EXPECT_EQ(emu.memory().translate(d.get() + 8, 57, &view), GPUCOLL_ERR_INVALID_ARG);
}

// ---- reductions ---------------------------------------------------------------------

TEST_F(EmuDeviceTest, EveryValidPairIsSupported) {
    DeviceMemory a(dev_.get(), 3 * 32), b(dev_.get(), 3 * 32);
    ASSERT_DEV_OK(a.status());
    ASSERT_DEV_OK(b.status());
    const void* srcs[] = {a.get(), b.get()};
    for (gpucoll_dtype_t d : reference::kAllDtypes) {
        for (gpucoll_op_t op : reference::kAllOps) {
            const gpucoll::Status s = dev_->reduce(a.get(), srcs, 2, 3, d, op, nullptr);
            EXPECT_EQ(s, reference::mpi_defines(d, op) ? GPUCOLL_SUCCESS : GPUCOLL_ERR_UNSUPPORTED)
                << reference::op_label(op) << " on " << reference::dtype_label(d) << ": "
                << gpucoll::last_error();
        }
    }
}

TEST_F(EmuDeviceTest, ReduceRejectsBadArguments) {
    DeviceMemory a(dev_.get(), 64);
    ASSERT_DEV_OK(a.status());
    const void* srcs[] = {a.get()};
    EXPECT_EQ(dev_->reduce(a.get(), srcs, 1, 4, static_cast<gpucoll_dtype_t>(99), GPUCOLL_OP_SUM,
                           nullptr),
              GPUCOLL_ERR_INVALID_ARG);
    EXPECT_EQ(
        dev_->reduce(a.get(), srcs, 1, 4, GPUCOLL_INT32, static_cast<gpucoll_op_t>(-1), nullptr),
        GPUCOLL_ERR_INVALID_ARG);
    EXPECT_EQ(dev_->reduce(a.get(), srcs, 0, 4, GPUCOLL_INT32, GPUCOLL_OP_SUM, nullptr),
              GPUCOLL_ERR_INVALID_ARG);
    EXPECT_EQ(dev_->reduce(a.get(), nullptr, 1, 4, GPUCOLL_INT32, GPUCOLL_OP_SUM, nullptr),
              GPUCOLL_ERR_INVALID_ARG);
}

// Emu pointers may sit at any byte offset (base + 1, ...), even for types
// whose alignment is larger; the reduction must still be exact.
TEST_F(EmuDeviceTest, ReduceAtMisalignedByteOffsets) {
    constexpr size_t kCount = 20000;  // several 8 KiB blocks for every type
    const size_t src_byte_offsets[] = {3, 0, 5};
    constexpr size_t kDstByteOffset = 1;
    for (gpucoll_dtype_t d : reference::kAllDtypes) {
        SCOPED_TRACE(reference::dtype_label(d));
        const size_t bytes = kCount * reference::element_size(d);
        std::vector<std::unique_ptr<DeviceMemory>> srcs_mem;
        std::vector<std::vector<unsigned char>> inputs;
        std::vector<const void*> device_srcs, host_srcs;
        for (int k = 0; k < 3; ++k) {
            srcs_mem.push_back(std::make_unique<DeviceMemory>(dev_.get(), bytes + 8));
            ASSERT_DEV_OK(srcs_mem.back()->status());
            inputs.push_back(reference::make_input(d, k, kCount));
            std::byte* p = srcs_mem.back()->get() + src_byte_offsets[k];
            ASSERT_DEV_OK(dev_->memcpy(p, inputs.back().data(), bytes, nullptr));
            device_srcs.push_back(p);
            host_srcs.push_back(inputs.back().data());
        }
        DeviceMemory dst(dev_.get(), bytes + 8);
        ASSERT_DEV_OK(dst.status());
        for (gpucoll_op_t op : reference::kAllOps) {
            if (!reference::mpi_defines(d, op)) continue;
            SCOPED_TRACE(reference::op_label(op));
            ASSERT_DEV_OK(dev_->reduce(dst.get() + kDstByteOffset, device_srcs.data(), 3, kCount, d,
                                       op, nullptr));
            std::vector<unsigned char> expected(bytes), actual(bytes);
            reference::reduce(d, op, host_srcs, kCount, expected.data());
            ASSERT_DEV_OK(dev_->memcpy(actual.data(), dst.get() + kDstByteOffset, bytes, nullptr));
            ASSERT_EQ(reference::compare(d, expected.data(), actual.data(), kCount), "");
        }
    }
}

TEST_F(EmuDeviceTest, BoolBytesOtherThanOneCountAsTrue) {
    const unsigned char a[] = {0, 2, 255, 0};
    const unsigned char b[] = {0, 1, 0, 7};
    DeviceMemory da(dev_.get(), 4), db(dev_.get(), 4);
    ASSERT_DEV_OK(da.status());
    ASSERT_DEV_OK(db.status());
    ASSERT_DEV_OK(dev_->memcpy(da.get(), a, 4, nullptr));
    ASSERT_DEV_OK(dev_->memcpy(db.get(), b, 4, nullptr));
    const void* srcs[] = {da.get(), db.get()};
    unsigned char out[4];
    ASSERT_DEV_OK(dev_->reduce(da.get(), srcs, 2, 4, GPUCOLL_BOOL, GPUCOLL_OP_LXOR, nullptr));
    ASSERT_DEV_OK(dev_->memcpy(out, da.get(), 4, nullptr));
    EXPECT_EQ(std::vector<unsigned char>(out, out + 4), (std::vector<unsigned char>{0, 0, 1, 1}));
}

// ---- accesses past an allocation's end, through the backend's views --------------
// The backend works on whole pages: a kernel that reads one element past its
// source (a wrong count or offset) reads the page's slack, which only
// AddressSanitizer can report (the emu memory poisons it), or the guard page
// after the last page, which faults in every build. These tests run a
// reduction kernel (emu_reduce, what EmuDevice::reduce runs after its bounds
// checks) one element too far, and check that the sanitizer said so.

// What ASan prints for a read of poisoned memory (ASan builds).
constexpr const char* kAsanPoisonedRead =
    "ERROR: AddressSanitizer: use-after-poison on address.*READ of size";

// Sums `reduced` int32s of a and b, allocations of `allocated` int32s each,
// into b, through the backend's views and past EmuDevice::reduce's checks.
void reduce_through_views(gpucoll::EmuMemory& memory, void* a, void* b, size_t allocated,
                          size_t reduced) {
    void* va = nullptr;
    void* vb = nullptr;
    if (memory.translate(a, allocated * sizeof(int32_t), &va) != GPUCOLL_SUCCESS ||
        memory.translate(b, allocated * sizeof(int32_t), &vb) != GPUCOLL_SUCCESS)
        std::abort();  // not the death the tests expect: no ASan report
    const void* srcs[] = {va, vb};
    (void)gpucoll::emu_reduce(vb, srcs, 2, reduced, GPUCOLL_INT32, GPUCOLL_OP_SUM);
}

TEST_F(EmuDeviceTest, ReductionReadingIntoThePageSlackIsReportedByAsan) {
    if (!gpucoll::kAddressSanitizer)
        GTEST_SKIP() << "the page slack is visible to AddressSanitizer only: configure with "
                        "--enable-sanitizers=address,undefined (contrib/sanitize.sh asan)";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    auto& emu = static_cast<gpucoll::EmuDevice&>(*dev_);
    const size_t count = 250;  // 1000 bytes: 3096 bytes of slack in the page
    DeviceMemory a(dev_.get(), count * sizeof(int32_t)), b(dev_.get(), count * sizeof(int32_t));
    ASSERT_DEV_OK(a.status());
    ASSERT_DEV_OK(b.status());
    EXPECT_DEATH(reduce_through_views(emu.memory(), a.get(), b.get(), count, count + 1),
                 std::string(kAsanPoisonedRead) + ".*gpucoll::emu_reduce");
    // The kernel with the right count stays silent.
    reduce_through_views(emu.memory(), a.get(), b.get(), count, count);
}

TEST_F(EmuDeviceTest, ReductionReadingPastTheLastPageFaultsInEveryBuild) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    auto& emu = static_cast<gpucoll::EmuDevice&>(*dev_);
    const size_t count = gpucoll::page_size() / sizeof(int32_t);  // no slack: the guard page
    DeviceMemory a(dev_.get(), count * sizeof(int32_t)), b(dev_.get(), count * sizeof(int32_t));
    ASSERT_DEV_OK(a.status());
    ASSERT_DEV_OK(b.status());
    if (gpucoll::kAddressSanitizer) {
        EXPECT_EXIT(reduce_through_views(emu.memory(), a.get(), b.get(), count, count + 1),
                    ::testing::ExitedWithCode(1), kAsanPoisonedRead);
    } else {  // SIGSEGV, or a sanitizer's report of it (TSan)
        EXPECT_DEATH(reduce_through_views(emu.memory(), a.get(), b.get(), count, count + 1), "");
    }
}

TEST_F(EmuDeviceTest, ImportedMappingAndPinnedMemoryPoisonTheirSlackForAsan) {
    if (!gpucoll::kAddressSanitizer)
        GTEST_SKIP() << "needs an AddressSanitizer build (contrib/sanitize.sh asan)";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    auto& emu = static_cast<gpucoll::EmuDevice&>(*dev_);
    DeviceMemory d(dev_.get(), 1000);
    ASSERT_DEV_OK(d.status());
    gpucoll::IpcHandle handle;
    ASSERT_DEV_OK(dev_->ipc_export(d.get(), &handle));
    std::unique_ptr<gpucoll::IpcMapping> peer;
    ASSERT_DEV_OK(dev_->ipc_import(handle, &peer));
    void* view = nullptr;
    ASSERT_DEV_OK(emu.memory().translate(peer->address(), 1000, &view));
    EXPECT_DEATH((void)static_cast<volatile unsigned char*>(view)[1000],
                 "ERROR: AddressSanitizer: use-after-poison");
    conformance::PinnedMemory pinned(dev_.get(), 1000);
    ASSERT_DEV_OK(pinned.status());
    EXPECT_DEATH((void)*(static_cast<volatile unsigned char*>(pinned.get()) + 1000),
                 "ERROR: AddressSanitizer: use-after-poison");
}

// ---- streams ------------------------------------------------------------------------

class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old, had_ = true;
        setenv(name, value, 1);
    }
    ~ScopedEnv() {
        if (had_) {
            setenv(name_, old_.c_str(), 1);
        } else {
            unsetenv(name_);
        }
    }

private:
    const char* name_;
    std::string old_;
    bool had_ = false;
};

TEST(EmuStream, RunsWorkOnAnotherThreadWhileTheCallerContinues) {
    ScopedEnv env("GPUCOLL_EMU_INLINE_STREAMS", "0");
    ASSERT_FALSE(gpucoll::EmuStream::inline_requested_by_environment());
    gpucoll::EmuStream stream(false);
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::thread::id worker_id;
    bool waited_for_caller = false;
    stream.enqueue([&] {
        worker_id = std::this_thread::get_id();
        waited_for_caller =
            released.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
        return gpucoll::kSuccess;
    });
    release.set_value();  // reached only because enqueue did not run the work inline
    ASSERT_DEV_OK(stream.synchronize());
    EXPECT_TRUE(waited_for_caller);
    EXPECT_NE(worker_id, std::this_thread::get_id());
}

TEST(EmuStream, InlineModeRunsAtEnqueue) {
    ScopedEnv env("GPUCOLL_EMU_INLINE_STREAMS", "1");
    ASSERT_TRUE(gpucoll::EmuStream::inline_requested_by_environment());
    auto dev = gpucoll::make_emu_device();
    std::unique_ptr<gpucoll::Stream> stream;
    ASSERT_DEV_OK(dev->create_stream(&stream));
    auto* emu_stream = dynamic_cast<gpucoll::EmuStream*>(stream.get());
    ASSERT_NE(emu_stream, nullptr);
    EXPECT_TRUE(emu_stream->runs_inline());
    std::thread::id ran_on;
    emu_stream->enqueue([&] {
        ran_on = std::this_thread::get_id();
        return gpucoll::kSuccess;
    });
    EXPECT_EQ(ran_on, std::this_thread::get_id());  // done before enqueue returned

    DeviceMemory d(dev.get(), 16);
    ASSERT_DEV_OK(d.status());
    const char text[16] = "inline streams";
    char back[16] = {};
    ASSERT_DEV_OK(dev->memcpy(d.get(), text, 16, stream.get()));
    ASSERT_DEV_OK(dev->memcpy(back, d.get(), 16, stream.get()));
    EXPECT_STREQ(back, text);  // visible without synchronize in inline mode
    EXPECT_DEV_OK(stream->synchronize());
}

TEST(EmuStream, KeepsOrderAndReportsTheFirstErrorOnce) {
    gpucoll::EmuStream stream(false);
    std::vector<int> order;
    for (int i = 0; i < 1000; ++i) {
        stream.enqueue([&order, i] {
            order.push_back(i);
            return gpucoll::kSuccess;
        });
    }
    stream.enqueue([] { return gpucoll::set_error(GPUCOLL_ERR_DEVICE, "first failure"); });
    stream.enqueue([] { return gpucoll::set_error(GPUCOLL_ERR_SYSTEM, "second failure"); });
    gpucoll::clear_error();
    EXPECT_EQ(stream.synchronize(), GPUCOLL_ERR_DEVICE);
    EXPECT_STREQ(gpucoll::last_error(), "first failure");  // carried to the caller's thread
    ASSERT_EQ(order.size(), 1000u);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(order[i], i);
    EXPECT_DEV_OK(stream.synchronize());
}

TEST(EmuStream, DestructorFinishesQueuedWork) {
    bool done = false;
    {
        gpucoll::EmuStream stream(false);
        stream.enqueue([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            done = true;
            return gpucoll::kSuccess;
        });
    }
    EXPECT_TRUE(done);
}

// Like a CUDA event behind a failed kernel: a marker behind failed work is
// never reached, and reached() reports the failure (host flags then never
// publish a step whose data is wrong).
TEST_F(EmuDeviceTest, MarkerBehindFailedWorkIsNeverReached) {
    std::unique_ptr<gpucoll::Stream> stream;
    ASSERT_DEV_OK(dev_->create_stream(&stream));
    DeviceMemory big(dev_.get(), 4096);
    ASSERT_DEV_OK(big.status());
    // Work that fails when it runs (as a kernel fault would).
    static_cast<gpucoll::EmuStream*>(stream.get())->enqueue([] {
        return gpucoll::set_error(GPUCOLL_ERR_DEVICE, "injected failure");
    });
    uint64_t t = 0;
    ASSERT_DEV_OK(stream->mark(&t));
    bool complete = false;
    while (!complete) ASSERT_DEV_OK(stream->query(&complete));
    bool done = true;
    EXPECT_NE(stream->reached(t, &done), GPUCOLL_SUCCESS);
    EXPECT_FALSE(done);
    EXPECT_NE(stream->synchronize(), GPUCOLL_SUCCESS);  // the copy's error, once
    // After synchronize() reported it, the stream works again.
    ASSERT_DEV_OK(dev_->memcpy(big.get(), big.get() + 2048, 1024, stream.get()));
    ASSERT_DEV_OK(stream->mark(&t));
    ASSERT_DEV_OK(stream->synchronize());
    ASSERT_DEV_OK(stream->reached(t, &done));
    EXPECT_TRUE(done);
}

TEST_F(EmuDeviceTest, RejectsStreamsOfOtherBackends) {
    class ForeignStream : public gpucoll::Stream {
    public:
        gpucoll::Status synchronize() override { return gpucoll::kSuccess; }
        gpucoll::Status query(bool* complete) override {
            *complete = true;
            return gpucoll::kSuccess;
        }
        gpucoll::Status mark(uint64_t* ticket) override {
            *ticket = 1;
            return gpucoll::kSuccess;
        }
        gpucoll::Status reached(uint64_t, bool* done) override {
            *done = true;
            return gpucoll::kSuccess;
        }
        gpucoll::Status after_default_stream() override { return gpucoll::kSuccess; }
    } foreign;
    DeviceMemory d(dev_.get(), 8);
    ASSERT_DEV_OK(d.status());
    char host[8] = {};
    EXPECT_EQ(dev_->memcpy(d.get(), host, 8, &foreign), GPUCOLL_ERR_INVALID_ARG);
}

// ---- devices -----------------------------------------------------------------------

// Processes with the same GPUCOLL_EMU_GPU share one emulated GPU; different
// values behave as different GPUs (how tests fake one GPU per rank).
TEST_F(EmuDeviceTest, GpuIdentityFollowsGpucollEmuGpu) {
    EXPECT_EQ(dev_->device_count(), 1);
    int current = -1;
    ASSERT_DEV_OK(dev_->current_device(&current));
    EXPECT_EQ(current, 0);
    EXPECT_NE(dev_->set_current_device(1), GPUCOLL_SUCCESS);
    gpucoll::GpuIdentity a{}, a2{}, b{};
    ::unsetenv("GPUCOLL_EMU_GPU");
    ASSERT_DEV_OK(dev_->gpu_identity(0, &a));
    ::setenv("GPUCOLL_EMU_GPU", "0", 1);
    ASSERT_DEV_OK(dev_->gpu_identity(0, &a2));
    ::setenv("GPUCOLL_EMU_GPU", "5", 1);
    ASSERT_DEV_OK(dev_->gpu_identity(0, &b));
    ::unsetenv("GPUCOLL_EMU_GPU");
    EXPECT_TRUE(a == a2) << "the default is GPU 0";
    EXPECT_FALSE(a == b);
    EXPECT_TRUE(dev_->flags_without_compute(0));
}

// ---- IPC --------------------------------------------------------------------------

using test_io::read_all;
using test_io::write_all;

// The child: allocate, fill, export, hand over the handle; wait until the
// parent is done; check what the parent wrote through its mapping.
[[noreturn]] void ipc_child(int handle_out, int done_in, size_t bytes) {
    auto dev = gpucoll::make_emu_device();
    void* p = nullptr;
    if (dev->alloc(&p, bytes) != GPUCOLL_SUCCESS) _exit(10);
    const auto pattern = conformance::byte_pattern(bytes, 77);
    if (dev->memcpy(p, pattern.data(), bytes, nullptr) != GPUCOLL_SUCCESS) _exit(11);
    gpucoll::IpcHandle handle;
    if (dev->ipc_export(p, &handle) != GPUCOLL_SUCCESS) _exit(12);
    if (!write_all(handle_out, &handle, sizeof handle)) _exit(13);
    char done = 0;
    if (!read_all(done_in, &done, 1)) _exit(14);
    char back[5] = {};
    if (dev->memcpy(back, static_cast<char*>(p) + 100, 5, nullptr) != GPUCOLL_SUCCESS) _exit(15);
    _exit(std::memcmp(back, "peer!", 5) == 0 ? 0 : 16);
}

TEST_F(EmuDeviceTest, IpcImportAcrossForkedProcess) {
    constexpr size_t kBytes = (1u << 20) + 3;
    int handle_pipe[2], done_pipe[2];
    ASSERT_EQ(pipe(handle_pipe), 0);
    ASSERT_EQ(pipe(done_pipe), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(handle_pipe[0]);
        close(done_pipe[1]);
        ipc_child(handle_pipe[1], done_pipe[0], kBytes);
    }
    close(handle_pipe[1]);
    close(done_pipe[0]);

    gpucoll::IpcHandle handle;
    const bool got_handle = read_all(handle_pipe[0], &handle, sizeof handle);
    if (got_handle) {
        std::unique_ptr<gpucoll::IpcMapping> mapping;
        EXPECT_DEV_OK(dev_->ipc_import(handle, &mapping));
        if (mapping) {
            EXPECT_EQ(mapping->size(), kBytes);
            std::vector<unsigned char> content(kBytes);
            EXPECT_DEV_OK(dev_->memcpy(content.data(), mapping->address(), kBytes, nullptr));
            EXPECT_TRUE(content == conformance::byte_pattern(kBytes, 77));
            EXPECT_DEV_OK(
                dev_->memcpy(static_cast<char*>(mapping->address()) + 100, "peer!", 5, nullptr));
        }
    }
    const char done = 1;
    EXPECT_TRUE(write_all(done_pipe[1], &done, 1));
    close(done_pipe[1]);
    close(handle_pipe[0]);
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_TRUE(got_handle);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "child failed at step " << WEXITSTATUS(status);
}

TEST_F(EmuDeviceTest, IpcExportAndImportErrors) {
    int on_stack = 0;
    gpucoll::IpcHandle handle;
    EXPECT_EQ(dev_->ipc_export(&on_stack, &handle), GPUCOLL_ERR_NOT_FOUND);
    DeviceMemory d(dev_.get(), 100);
    ASSERT_DEV_OK(d.status());
    EXPECT_EQ(dev_->ipc_export(d.get() + 1, &handle), GPUCOLL_ERR_INVALID_ARG);

    gpucoll::IpcHandle garbage;
    std::memset(garbage.bytes, 0x11, sizeof garbage.bytes);
    std::unique_ptr<gpucoll::IpcMapping> mapping;
    EXPECT_EQ(dev_->ipc_import(garbage, &mapping), GPUCOLL_ERR_INVALID_ARG);
    EXPECT_EQ(mapping, nullptr);

    // An imported mapping cannot be freed or re-exported.
    ASSERT_DEV_OK(dev_->ipc_export(d.get(), &handle));
    ASSERT_DEV_OK(dev_->ipc_import(handle, &mapping));
    EXPECT_EQ(dev_->free(mapping->address()), GPUCOLL_ERR_INVALID_ARG);
    gpucoll::IpcHandle again;
    EXPECT_EQ(dev_->ipc_export(mapping->address(), &again), GPUCOLL_ERR_UNSUPPORTED);
}

TEST_F(EmuDeviceTest, ImportAfterTheExporterFreedFails) {
    void* p = nullptr;
    ASSERT_DEV_OK(dev_->alloc(&p, 4096));
    gpucoll::IpcHandle handle;
    ASSERT_DEV_OK(dev_->ipc_export(p, &handle));
    ASSERT_DEV_OK(dev_->free(p));
    DeviceMemory reuse(dev_.get(), 4096);  // likely takes the same descriptor number
    ASSERT_DEV_OK(reuse.status());
    std::unique_ptr<gpucoll::IpcMapping> mapping;
    EXPECT_NE(dev_->ipc_import(handle, &mapping), GPUCOLL_SUCCESS);
    EXPECT_EQ(mapping, nullptr);
}

TEST_F(EmuDeviceTest, UnmappedImportIsNoLongerDeviceMemory) {
    DeviceMemory d(dev_.get(), 100);
    ASSERT_DEV_OK(d.status());
    gpucoll::IpcHandle handle;
    ASSERT_DEV_OK(dev_->ipc_export(d.get(), &handle));
    std::unique_ptr<gpucoll::IpcMapping> mapping;
    ASSERT_DEV_OK(dev_->ipc_import(handle, &mapping));
    void* address = mapping->address();
    gpucoll::PointerInfo info;
    ASSERT_DEV_OK(dev_->query(address, &info));
    EXPECT_EQ(info.type, GPUCOLL_MEM_DEVICE);
    gpucoll::PointerInfo original;
    ASSERT_DEV_OK(dev_->query(d.get(), &original));
    EXPECT_NE(info.buffer_id, original.buffer_id);
    mapping.reset();
    ASSERT_DEV_OK(dev_->query(address, &info));
    EXPECT_EQ(info.type, GPUCOLL_MEM_HOST);
}

TEST(EmuIpc, MappingMayOutliveTheImportingDevice) {
    auto owner = gpucoll::make_emu_device();
    auto importer = gpucoll::make_emu_device();
    DeviceMemory d(owner.get(), 100);
    ASSERT_DEV_OK(d.status());
    gpucoll::IpcHandle handle;
    ASSERT_DEV_OK(owner->ipc_export(d.get(), &handle));
    std::unique_ptr<gpucoll::IpcMapping> mapping;
    ASSERT_DEV_OK(importer->ipc_import(handle, &mapping));
    importer.reset();
    mapping.reset();  // must not touch the destroyed device
}

// ---- resources ----------------------------------------------------------------------

TEST_F(EmuDeviceTest, DescriptorsReturnToBaselineAfterManyCycles) {
    const int baseline = count_open_fds();
    ASSERT_GT(baseline, 0);
    for (int i = 0; i < 1000; ++i) {
        void* p = nullptr;
        ASSERT_DEV_OK(dev_->alloc(&p, static_cast<size_t>(i % 7) * 1000));
        if (i % 100 == 0) {
            gpucoll::IpcHandle handle;
            ASSERT_DEV_OK(dev_->ipc_export(p, &handle));
            std::unique_ptr<gpucoll::IpcMapping> mapping;
            ASSERT_DEV_OK(dev_->ipc_import(handle, &mapping));
        }
        ASSERT_DEV_OK(dev_->free(p));
        void* h = nullptr;
        ASSERT_DEV_OK(dev_->alloc_host(&h, 100));
        ASSERT_DEV_OK(dev_->free_host(h));
    }
    EXPECT_EQ(count_open_fds(), baseline);
}

TEST(EmuResources, DestroyingTheDeviceReleasesWhatWasNotFreed) {
    const int baseline = count_open_fds();
    {
        auto dev = gpucoll::make_emu_device();
        for (int i = 0; i < 20; ++i) {
            void* p = nullptr;
            ASSERT_DEV_OK(dev->alloc(&p, 4096));
            ASSERT_DEV_OK(dev->alloc_host(&p, 4096));
        }
        std::unique_ptr<gpucoll::Stream> stream;
        ASSERT_DEV_OK(dev->create_stream(&stream));
        EXPECT_GT(count_open_fds(), baseline);
    }
    EXPECT_EQ(count_open_fds(), baseline);
}

// ---- several emulated GPUs (GPUCOLL_EMU_DEVICES) --------------------------------------

// Each thread has its current GPU; memory and streams belong to the GPU
// current when they were made; a reduction reaches only its own GPU's memory.
TEST(EmuDevices, MemoryAndStreamsBelongToTheCurrentGpuAndKernelsStayOnIt) {
    ScopedEnv env("GPUCOLL_EMU_DEVICES", "2");
    auto dev = gpucoll::make_emu_device();
    ASSERT_EQ(dev->device_count(), 2);
    int current = -1;
    ASSERT_DEV_OK(dev->current_device(&current));
    EXPECT_EQ(current, 0);
    void* on0 = nullptr;
    void* on1 = nullptr;
    ASSERT_DEV_OK(dev->alloc(&on0, 4096));
    ASSERT_DEV_OK(dev->set_current_device(1));
    ASSERT_DEV_OK(dev->alloc(&on1, 4096));
    std::unique_ptr<gpucoll::Stream> stream1;
    ASSERT_DEV_OK(dev->create_stream(&stream1));
    gpucoll::PointerInfo info;
    ASSERT_DEV_OK(dev->query(on0, &info));
    EXPECT_EQ(info.device, 0);
    ASSERT_DEV_OK(dev->query(on1, &info));
    EXPECT_EQ(info.device, 1);
    EXPECT_NE(dev->set_current_device(2), gpucoll::kSuccess);

    const void* srcs[] = {on1, on0};
    // On GPU 1's stream, GPU 0's memory is out of reach, as a source...
    EXPECT_EQ(dev->reduce(on1, srcs, 2, 16, GPUCOLL_FLOAT, GPUCOLL_OP_SUM, stream1.get()),
              GPUCOLL_ERR_DEVICE);
    EXPECT_NE(std::string(gpucoll::last_error()).find("memory of device 0"), std::string::npos)
        << gpucoll::last_error();
    // ...and as the result; without a stream the result's GPU runs it.
    const void* own[] = {on1};
    EXPECT_EQ(dev->reduce(on0, own, 1, 16, GPUCOLL_FLOAT, GPUCOLL_OP_SUM, stream1.get()),
              GPUCOLL_ERR_DEVICE);
    EXPECT_EQ(dev->reduce(on0, srcs, 2, 16, GPUCOLL_FLOAT, GPUCOLL_OP_SUM, nullptr),
              GPUCOLL_ERR_DEVICE);
    EXPECT_DEV_OK(dev->reduce(on1, own, 1, 16, GPUCOLL_FLOAT, GPUCOLL_OP_SUM, stream1.get()));
    EXPECT_DEV_OK(stream1->synchronize());
    // Copies cross GPUs (CUDA copies between devices without peer access).
    EXPECT_DEV_OK(dev->memcpy(on0, on1, 64, stream1.get()));
    EXPECT_DEV_OK(stream1->synchronize());

    // An import belongs to the GPU current when it was made.
    gpucoll::IpcHandle handle;
    ASSERT_DEV_OK(dev->ipc_export(on0, &handle));
    std::unique_ptr<gpucoll::IpcMapping> mapping;
    ASSERT_DEV_OK(dev->ipc_import(handle, &mapping));
    ASSERT_DEV_OK(dev->query(mapping->address(), &info));
    EXPECT_EQ(info.device, 1);

    // A thread has its own current GPU.
    std::thread([&] {
        int other = -1;
        EXPECT_DEV_OK(dev->current_device(&other));
        EXPECT_EQ(other, 0);
    }).join();
    mapping.reset();
    stream1.reset();
    EXPECT_DEV_OK(dev->free(on0));
    EXPECT_DEV_OK(dev->free(on1));
    ASSERT_DEV_OK(dev->set_current_device(0));
}

TEST(EmuDevices, DeviceScopeRestoresTheThreadsGpu) {
    ScopedEnv env("GPUCOLL_EMU_DEVICES", "3");
    auto dev = gpucoll::make_emu_device();
    ASSERT_DEV_OK(dev->set_current_device(2));
    {
        gpucoll::DeviceScope scope;
        ASSERT_DEV_OK(scope.enter(dev.get(), 1));
        int current = -1;
        ASSERT_DEV_OK(dev->current_device(&current));
        EXPECT_EQ(current, 1);
        ASSERT_DEV_OK(scope.enter(dev.get(), 0));  // once: a second enter keeps the first
        ASSERT_DEV_OK(dev->current_device(&current));
        EXPECT_EQ(current, 1);
    }
    int current = -1;
    ASSERT_DEV_OK(dev->current_device(&current));
    EXPECT_EQ(current, 2);
    {
        gpucoll::DeviceScope scope;
        EXPECT_NE(scope.enter(dev.get(), 5), gpucoll::kSuccess);  // no such GPU: unchanged
    }
    ASSERT_DEV_OK(dev->current_device(&current));
    EXPECT_EQ(current, 2);
    ASSERT_DEV_OK(dev->set_current_device(0));
}

// Contexts as CUDA's: a thread has none until it chooses a GPU or does
// work needing one (then its current GPU's, 0 by default); DeviceScope gives
// a thread that had none exactly that back; the process keeps a context on
// every GPU it used (a fresh device here; fresh threads).
TEST(EmuDevices, ContextsComeFromChoosingOrUsingAGpuOnly) {
    ScopedEnv env("GPUCOLL_EMU_DEVICES", "4");
    auto dev = gpucoll::make_emu_device();
    std::thread([&] {
        EXPECT_FALSE(dev->thread_has_context());
        int current = -1;
        EXPECT_DEV_OK(dev->current_device(&current));  // 0, but only by default
        EXPECT_EQ(current, 0);
        EXPECT_FALSE(dev->thread_has_context());
        EXPECT_FALSE(dev->holds_context(3));
        {
            gpucoll::DeviceScope scope;
            ASSERT_DEV_OK(scope.enter(dev.get(), 3));
            EXPECT_TRUE(dev->thread_has_context());
        }
        EXPECT_FALSE(dev->thread_has_context());  // none again, not GPU 0's
        EXPECT_TRUE(dev->holds_context(3));       // the process keeps it
        EXPECT_FALSE(dev->holds_context(2));
        void* p = nullptr;
        ASSERT_DEV_OK(dev->alloc(&p, 64));  // work without a choice: GPU 0
        EXPECT_TRUE(dev->thread_has_context());
        EXPECT_TRUE(dev->holds_context(0));
        gpucoll::PointerInfo info;
        ASSERT_DEV_OK(dev->query(p, &info));
        EXPECT_EQ(info.device, 0);
        EXPECT_DEV_OK(dev->free(p));
        EXPECT_FALSE(dev->holds_context(4));  // no such GPU
    }).join();
    std::thread([&] {
        ASSERT_DEV_OK(dev->set_current_device(2));  // choosing is enough (cudaSetDevice)
        EXPECT_TRUE(dev->thread_has_context());
        EXPECT_TRUE(dev->holds_context(2));
        EXPECT_FALSE(dev->holds_context(1));
    }).join();
}

}  // namespace
