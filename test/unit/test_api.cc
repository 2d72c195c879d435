// Unit tests of the C interface (gpucoll.h): backend choice, memory helpers,
// counters, staging buffers, type tables. The backend is a per-process
// choice, so tests that need "no backend" run in a re-executed child.
#include <complex.h>
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/sanitizers.h"
#include "common/wait_watch.h"
#include "core/counters.h"
#include "device/device.h"
#include "device/host_ranges.h"
#include "gpucoll.h"

namespace {

class Api : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_EQ(gpucoll_init_backend("emu"), GPUCOLL_SUCCESS) << gpucoll_last_error();
    }
};

TEST_F(Api, BackendIsFixedForTheProcess) {
    EXPECT_STREQ(gpucoll_backend(), "emu");
    EXPECT_EQ(gpucoll_init_backend("emu"), GPUCOLL_SUCCESS);
    EXPECT_EQ(gpucoll_init_backend("auto"), GPUCOLL_SUCCESS);  // auto defers to the active one
    EXPECT_EQ(gpucoll_init_backend("cuda"), GPUCOLL_ERR_BACKEND_CONFLICT);
    EXPECT_NE(std::strstr(gpucoll_last_error(), "GPUCOLL_DEVICE"), nullptr) << gpucoll_last_error();
    EXPECT_EQ(gpucoll_init_backend("bogus"), GPUCOLL_ERR_INVALID_ARG);
    EXPECT_STREQ(gpucoll_backend(), "emu");
}

TEST_F(Api, VersionMatchesHeader) {
    char want[32];
    std::snprintf(want, sizeof want, "%d.%d.%d", GPUCOLL_VERSION_MAJOR, GPUCOLL_VERSION_MINOR,
                  GPUCOLL_VERSION_PATCH);
    EXPECT_STREQ(gpucoll_version(), want);
}

TEST_F(Api, DeviceMemoryRoundTrip) {
    const size_t n = 1000003;
    void* d = nullptr;
    ASSERT_EQ(gpucoll_malloc_device(&d, n), GPUCOLL_SUCCESS);
    EXPECT_EQ(gpucoll_mem_type(d), GPUCOLL_MEM_DEVICE);
    EXPECT_EQ(gpucoll_mem_type(static_cast<char*>(d) + n - 1), GPUCOLL_MEM_DEVICE);
    std::vector<unsigned char> in(n), out(n, 0);
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<unsigned char>(i * 7 + 3);
    EXPECT_EQ(gpucoll_mem_type(in.data()), GPUCOLL_MEM_HOST);
    ASSERT_EQ(gpucoll_memcpy(d, in.data(), n), GPUCOLL_SUCCESS);
    void* d2 = nullptr;
    ASSERT_EQ(gpucoll_malloc_device(&d2, n), GPUCOLL_SUCCESS);
    ASSERT_EQ(gpucoll_memcpy(d2, d, n), GPUCOLL_SUCCESS);  // device to device
    ASSERT_EQ(gpucoll_memcpy(out.data(), d2, n), GPUCOLL_SUCCESS);
    EXPECT_EQ(in, out);
    EXPECT_EQ(gpucoll_free_device(d), GPUCOLL_SUCCESS);
    EXPECT_EQ(gpucoll_free_device(d2), GPUCOLL_SUCCESS);
    EXPECT_EQ(gpucoll_free_device(nullptr), GPUCOLL_SUCCESS);
    EXPECT_EQ(gpucoll_mem_type(nullptr), GPUCOLL_MEM_HOST);
    EXPECT_EQ(gpucoll_malloc_device(nullptr, 8), GPUCOLL_ERR_INVALID_ARG);
}

TEST_F(Api, ZeroByteAllocationsAreDistinct) {
    void* a = nullptr;
    void* b = nullptr;
    ASSERT_EQ(gpucoll_malloc_device(&a, 0), GPUCOLL_SUCCESS);
    ASSERT_EQ(gpucoll_malloc_device(&b, 0), GPUCOLL_SUCCESS);
    EXPECT_NE(a, b);
    EXPECT_EQ(gpucoll_memcpy(a, b, 0), GPUCOLL_SUCCESS);
    EXPECT_EQ(gpucoll_free_device(a), GPUCOLL_SUCCESS);
    EXPECT_EQ(gpucoll_free_device(b), GPUCOLL_SUCCESS);
}

// gpucoll_memcpy_runs: the blocks only, and a bad layout copies nothing.
TEST_F(Api, CopyRunsMoveOnlyTheirBlocks) {
    constexpr size_t n = 64;
    void* d = nullptr;
    ASSERT_EQ(gpucoll_malloc_device(&d, n), GPUCOLL_SUCCESS);
    std::vector<unsigned char> gaps(n, 0xEE), in(n), out(n, 0);
    for (size_t i = 0; i < n; ++i) in[i] = static_cast<unsigned char>(i + 1);
    ASSERT_EQ(gpucoll_memcpy(d, gaps.data(), n), GPUCOLL_SUCCESS);
    const gpucoll_copy_run_t runs[] = {{-8, 2, 3, 5}, {20, 4, 1, 0}};  // from byte 8
    char* base = static_cast<char*>(d) + 16;
    ASSERT_EQ(gpucoll_memcpy_runs(base, in.data() + 16, runs, 2), GPUCOLL_SUCCESS);
    ASSERT_EQ(gpucoll_memcpy(out.data(), d, n), GPUCOLL_SUCCESS);
    for (size_t i = 0; i < n; ++i) {
        const bool block = (i >= 8 && i < 20 && (i - 8) % 5 < 2) || (i >= 36 && i < 40);
        EXPECT_EQ(out[i], block ? in[i] : 0xEE) << "byte " << i;
    }
    const gpucoll_copy_run_t overlapping[] = {{0, 4, 1, 0}, {8, 4, 2, 3}};
    EXPECT_EQ(gpucoll_memcpy_runs(base, in.data() + 16, overlapping, 2), GPUCOLL_ERR_INVALID_ARG);
    ASSERT_EQ(gpucoll_memcpy(out.data(), d, n), GPUCOLL_SUCCESS);
    EXPECT_EQ(out[16], 0xEE);  // the first, valid run was not copied either
    EXPECT_EQ(gpucoll_memcpy_runs(nullptr, in.data(), runs, 2), GPUCOLL_ERR_INVALID_ARG);
    EXPECT_EQ(gpucoll_memcpy_runs(nullptr, nullptr, nullptr, 0), GPUCOLL_SUCCESS);
    EXPECT_EQ(gpucoll_free_device(d), GPUCOLL_SUCCESS);
}

// A buffer's span is checked against the allocation that holds the buffer
// pointer, wherever the span begins (negative lower bounds).
TEST_F(Api, SpansMustLieInsideTheBuffersAllocation) {
    void* d = nullptr;
    ASSERT_EQ(gpucoll_malloc_device(&d, 256), GPUCOLL_SUCCESS);
    char* p = static_cast<char*>(d);
    EXPECT_EQ(gpucoll_check_span(p, 0, 256, "buffer"), GPUCOLL_SUCCESS);
    EXPECT_EQ(gpucoll_check_span(p + 64, -64, 256, "buffer"), GPUCOLL_SUCCESS);
    EXPECT_EQ(gpucoll_check_span(p, -64, 68, "buffer"), GPUCOLL_ERR_BUFFER);  // begins below
    EXPECT_NE(std::string(gpucoll_last_error()).find("from offset -64"), std::string::npos)
        << gpucoll_last_error();
    EXPECT_EQ(gpucoll_check_span(p + 64, -64, 257, "buffer"), GPUCOLL_ERR_BUFFER);  // ends past
    EXPECT_EQ(gpucoll_check_span(p + 128, 64, 64, "buffer"), GPUCOLL_SUCCESS);
    EXPECT_EQ(gpucoll_check_extent(p, 257, "buffer"), GPUCOLL_ERR_BUFFER);
    int host[4];
    EXPECT_EQ(gpucoll_check_span(host + 2, -8, 16, "buffer"), GPUCOLL_SUCCESS);  // not checked
    EXPECT_EQ(gpucoll_free_device(d), GPUCOLL_SUCCESS);
}

TEST_F(Api, ReduceAcceptsEitherOperandAsDestination) {
    const size_t n = 257;
    std::vector<double> a(n), b(n), out(n);
    for (size_t i = 0; i < n; ++i) {
        a[i] = double(i);
        b[i] = 0.5 * double(i) + 1;
    }
    void *da = nullptr, *db = nullptr;
    ASSERT_EQ(gpucoll_malloc_device(&da, n * sizeof(double)), 0);
    ASSERT_EQ(gpucoll_malloc_device(&db, n * sizeof(double)), 0);
    ASSERT_EQ(gpucoll_memcpy(da, a.data(), n * sizeof(double)), 0);
    ASSERT_EQ(gpucoll_memcpy(db, b.data(), n * sizeof(double)), 0);
    // dst aliases the second operand
    ASSERT_EQ(gpucoll_reduce(db, da, db, n, GPUCOLL_DOUBLE, GPUCOLL_OP_SUM), 0)
        << gpucoll_last_error();
    ASSERT_EQ(gpucoll_memcpy(out.data(), db, n * sizeof(double)), 0);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], a[i] + b[i]) << i;
    // host operands are refused: a GPU kernel could not read them
    EXPECT_EQ(gpucoll_reduce(da, da, b.data(), n, GPUCOLL_DOUBLE, GPUCOLL_OP_MAX),
              GPUCOLL_ERR_INVALID_ARG);
    // dst aliases the first operand
    ASSERT_EQ(gpucoll_memcpy(db, b.data(), n * sizeof(double)), 0);
    ASSERT_EQ(gpucoll_reduce(da, da, db, n, GPUCOLL_DOUBLE, GPUCOLL_OP_MAX), 0);
    ASSERT_EQ(gpucoll_memcpy(out.data(), da, n * sizeof(double)), 0);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(out[i], std::max(a[i], b[i])) << i;
    EXPECT_EQ(gpucoll_reduce(da, da, db, n, GPUCOLL_DOUBLE, GPUCOLL_OP_BAND),
              GPUCOLL_ERR_INVALID_ARG);
    gpucoll_free_device(da);
    gpucoll_free_device(db);
}

TEST_F(Api, StagingBuffersAreReusedAndGrow) {
    void* p0 = nullptr;
    void* p1 = nullptr;
    ASSERT_EQ(gpucoll_staging_buffer(0, 1000, &p0), 0);
    ASSERT_EQ(gpucoll_staging_buffer(1, 1000, &p1), 0);
    EXPECT_NE(p0, p1);
    std::memset(p0, 0xab, 1000);  // host accessible
    void* again = nullptr;
    ASSERT_EQ(gpucoll_staging_buffer(0, 500, &again), 0);
    EXPECT_EQ(again, p0);
    void* big = nullptr;
    ASSERT_EQ(gpucoll_staging_buffer(0, 8u << 20, &big), 0);
    std::memset(big, 1, 8u << 20);
    EXPECT_EQ(gpucoll_staging_buffer(GPUCOLL_STAGING_SLOTS, 8, &big), GPUCOLL_ERR_INVALID_ARG);
    gpucoll_staging_release();
    ASSERT_EQ(gpucoll_staging_buffer(0, 16, &p0), 0);
}

// One GPU per local rank: GPUCOLL_LOCAL_GPU, else the node-local rank,
// modulo the device count (emu: one device).
TEST_F(Api, SelectLocalDevice) {
    EXPECT_EQ(gpucoll_device_count(), 1);
    ::setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
    EXPECT_EQ(gpucoll_select_local_device(), 0) << gpucoll_last_error();  // 3 % 1
    ::setenv("GPUCOLL_LOCAL_GPU", "0", 1);
    EXPECT_EQ(gpucoll_select_local_device(), 0) << gpucoll_last_error();
    ::setenv("GPUCOLL_LOCAL_GPU", "1", 1);  // no such device: an error, not a silent choice
    EXPECT_EQ(gpucoll_select_local_device(), -1);
    EXPECT_NE(std::strstr(gpucoll_last_error(), "GPUCOLL_LOCAL_GPU=1"), nullptr)
        << gpucoll_last_error();
    ::unsetenv("GPUCOLL_LOCAL_GPU");
    ::unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
    EXPECT_EQ(gpucoll_set_device(0), GPUCOLL_SUCCESS);
    EXPECT_NE(gpucoll_set_device(1), GPUCOLL_SUCCESS);
}

TEST_F(Api, CountersRecordPathsAndLastCall) {
    gpucoll_counters_reset();
    gpucoll_counters_t c;
    ASSERT_EQ(gpucoll_counters_get(&c), 0);
    EXPECT_EQ(c.calls[GPUCOLL_COLL_ALLREDUCE][GPUCOLL_PATH_STAGED], 0u);
    gpucoll_counters_record(GPUCOLL_COLL_ALLREDUCE, GPUCOLL_PATH_STAGED, 4096, "staged");
    gpucoll_counters_record(GPUCOLL_COLL_BCAST, GPUCOLL_PATH_DELEGATED, 0, "delegated");
    gpucoll_counters_record(GPUCOLL_COLL_COUNT, GPUCOLL_PATH_STAGED, 1, "ignored");  // out of range
    ASSERT_EQ(gpucoll_counters_get(&c), 0);
    EXPECT_EQ(c.calls[GPUCOLL_COLL_ALLREDUCE][GPUCOLL_PATH_STAGED], 1u);
    EXPECT_EQ(c.calls[GPUCOLL_COLL_BCAST][GPUCOLL_PATH_DELEGATED], 1u);
    EXPECT_EQ(c.bytes_staged, 4096u);
    EXPECT_EQ(c.last_coll, GPUCOLL_COLL_BCAST);
    EXPECT_EQ(c.last_path, GPUCOLL_PATH_DELEGATED);
    EXPECT_STREQ(c.last_algorithm, "delegated");
    EXPECT_EQ(gpucoll_counters_get(nullptr), GPUCOLL_ERR_INVALID_ARG);
    EXPECT_STREQ(gpucoll_coll_name(GPUCOLL_COLL_REDUCE_SCATTER_BLOCK), "reduce_scatter_block");
    EXPECT_STREQ(gpucoll_path_name(GPUCOLL_PATH_ACCELERATED), "accelerated");
}

// A communicator's host calls are counted in its own tally (plain adds, no
// locked instruction): the process's counters include every live tally,
// keep a tally's counts after it ends, and counters_reset clears them too.
TEST_F(Api, CommunicatorTalliesJoinTheProcessCounters) {
    auto delegated = [](gpucoll_coll_t coll) {
        gpucoll_counters_t c;
        EXPECT_EQ(gpucoll_counters_get(&c), 0);
        return c.calls[coll][GPUCOLL_PATH_DELEGATED];
    };
    gpucoll_counters_reset();
    {
        gpucoll::DelegatedTally a, b;
        gpucoll_counters_record(GPUCOLL_COLL_ALLREDUCE, GPUCOLL_PATH_STAGED, 4096, "staged");
        gpucoll::counters_record_delegated(GPUCOLL_COLL_ALLREDUCE, &a);
        gpucoll::counters_record_delegated(GPUCOLL_COLL_ALLREDUCE, &b);
        gpucoll::counters_record_delegated(GPUCOLL_COLL_BCAST, &b);
        gpucoll::counters_record_delegated(GPUCOLL_COLL_BCAST);  // the process's own
        gpucoll_counters_t c;
        ASSERT_EQ(gpucoll_counters_get(&c), 0);
        EXPECT_EQ(c.calls[GPUCOLL_COLL_ALLREDUCE][GPUCOLL_PATH_DELEGATED], 2u);
        EXPECT_EQ(c.calls[GPUCOLL_COLL_BCAST][GPUCOLL_PATH_DELEGATED], 2u);
        EXPECT_EQ(c.forms[GPUCOLL_FORM_BLOCKING][GPUCOLL_PATH_DELEGATED], 4u);
        EXPECT_EQ(c.calls[GPUCOLL_COLL_ALLREDUCE][GPUCOLL_PATH_STAGED], 1u);
        EXPECT_EQ(c.last_coll, GPUCOLL_COLL_BCAST);
        EXPECT_EQ(c.last_path, GPUCOLL_PATH_DELEGATED);
        EXPECT_EQ(c.last_form, GPUCOLL_FORM_BLOCKING);
        EXPECT_STREQ(c.last_algorithm, "delegated");
        {
            gpucoll::DelegatedTally gone;
            gpucoll::counters_record_delegated(GPUCOLL_COLL_ALLGATHER, &gone);
        }
        EXPECT_EQ(delegated(GPUCOLL_COLL_ALLGATHER), 1u);  // kept after its tally ended
        gpucoll_counters_reset();
        EXPECT_EQ(delegated(GPUCOLL_COLL_ALLREDUCE), 0u);
        EXPECT_EQ(delegated(GPUCOLL_COLL_BCAST), 0u);
        EXPECT_EQ(delegated(GPUCOLL_COLL_ALLGATHER), 0u);
        gpucoll::counters_record_delegated(GPUCOLL_COLL_ALLREDUCE, &a);
        EXPECT_EQ(delegated(GPUCOLL_COLL_ALLREDUCE), 1u);
    }
    EXPECT_EQ(delegated(GPUCOLL_COLL_ALLREDUCE), 1u);  // a and b ended
    gpucoll_counters_reset();
}

TEST(ApiTypes, SizesMatchTheCTypes) {
    EXPECT_EQ(gpucoll_dtype_size(GPUCOLL_INT8), sizeof(int8_t));
    EXPECT_EQ(gpucoll_dtype_size(GPUCOLL_UINT64), sizeof(uint64_t));
    EXPECT_EQ(gpucoll_dtype_size(GPUCOLL_LONG_DOUBLE), sizeof(long double));
    EXPECT_EQ(gpucoll_dtype_size(GPUCOLL_C_FLOAT_COMPLEX), sizeof(float _Complex));
    EXPECT_EQ(gpucoll_dtype_size(GPUCOLL_C_LONG_DOUBLE_COMPLEX), sizeof(long double _Complex));
    EXPECT_EQ(gpucoll_dtype_size(GPUCOLL_BOOL), sizeof(bool));
    EXPECT_EQ(gpucoll_dtype_size(GPUCOLL_BYTE), 1u);
    EXPECT_EQ(gpucoll_dtype_size(GPUCOLL_FLOAT16), 2u);
    EXPECT_EQ(gpucoll_dtype_size(GPUCOLL_DTYPE_COUNT), 0u);
    EXPECT_TRUE(gpucoll_op_valid(GPUCOLL_C_DOUBLE_COMPLEX, GPUCOLL_OP_PROD));
    EXPECT_FALSE(gpucoll_op_valid(GPUCOLL_C_DOUBLE_COMPLEX, GPUCOLL_OP_MAX));
    EXPECT_FALSE(gpucoll_op_valid(GPUCOLL_FLOAT, GPUCOLL_OP_BXOR));
    EXPECT_TRUE(gpucoll_op_valid(GPUCOLL_BOOL, GPUCOLL_OP_LXOR));
    EXPECT_FALSE(gpucoll_op_valid(GPUCOLL_BYTE, GPUCOLL_OP_SUM));
    EXPECT_STREQ(gpucoll_dtype_name(GPUCOLL_C_DOUBLE_COMPLEX), "c_double_complex");
    EXPECT_STREQ(gpucoll_dtype_name(GPUCOLL_FLOAT16), "float16");
    EXPECT_STREQ(gpucoll_op_name(GPUCOLL_OP_BXOR), "bxor");
}

// A fresh process that asks for "auto": on a machine without a GPU the backend
// is "none", every pointer is host memory and device allocation explains itself.
int auto_without_gpu_child() {
    if (gpucoll_init_backend("auto") != 0) return 10;
    if (std::strcmp(gpucoll_backend(), "none") != 0) return 11;
    void* p = nullptr;
    if (gpucoll_malloc_device(&p, 64) != GPUCOLL_ERR_NO_BACKEND) return 12;
    if (std::strstr(gpucoll_last_error(), "GPUCOLL_DEVICE=emu") == nullptr) return 13;
    if (gpucoll_init_backend("emu") != GPUCOLL_ERR_BACKEND_CONFLICT) return 14;
    int x = 5, y = 0;
    if (gpucoll_memcpy(&y, &x, sizeof x) != 0 || y != 5) return 15;
    if (gpucoll_mem_type(&x) != GPUCOLL_MEM_HOST) return 16;
    return 0;
}

TEST(ApiNoGpu, AutoWithoutGpuMeansNone) {
    if (gpucoll::cuda_device_present()) GTEST_SKIP() << "a GPU is present";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(std::_Exit(auto_without_gpu_child()), ::testing::ExitedWithCode(0), "");
}

}  // namespace

// Host memory told without the backend (the cuda backend's query skips the
// driver for it): static data, this thread's stack, the brk heap; memory
// from mmap (where device memory lives) is never answered as host.
TEST_F(Api, HostRangesAnswerOnlyCertainHostMemory) {
    using gpucoll::host_ranges::certainly_host;
    static int in_static = 0;
    int on_stack = 0;
    EXPECT_TRUE(certainly_host(&in_static));
    // Under the sanitizers the answer may be "unknown" (the backend is then
    // asked): ASan keeps locals on fake stacks, and neither ASan's nor
    // TSan's allocator takes memory from brk.
#if !defined(GPUCOLL_ADDRESS_SANITIZER)
    EXPECT_TRUE(certainly_host(&on_stack));
#endif
#if !defined(GPUCOLL_ADDRESS_SANITIZER) && !defined(GPUCOLL_THREAD_SANITIZER)
    void* small = std::malloc(64);  // the main arena: the brk heap (main thread)
    EXPECT_TRUE(certainly_host(small));
    std::free(small);
#endif
    void* mapped =
        mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mapped, MAP_FAILED);
    EXPECT_FALSE(certainly_host(mapped));
    munmap(mapped, 1 << 20);
    void* dev = nullptr;
    ASSERT_EQ(gpucoll_malloc_device(&dev, 4096), 0);
    EXPECT_FALSE(certainly_host(dev));
    EXPECT_EQ(gpucoll_mem_type(dev), GPUCOLL_MEM_DEVICE);
    gpucoll_free_device(dev);
    // Another thread: its own stack is known, the main thread's is not.
    bool own = false, other = true;
    std::thread([&] {
        int mine = 0;
        own = certainly_host(&mine);
        other = certainly_host(&on_stack);
    }).join();
#if !defined(GPUCOLL_ADDRESS_SANITIZER)
    EXPECT_TRUE(own);
#endif
    EXPECT_FALSE(other);
}

// The watch behind coll_gpucoll_wait_warning: due once, after its time;
// never when off; a reset (something moved) starts the wait again.
TEST(WaitWatch, DueOnceAfterItsTimeAndAgainAfterAReset) {
    using namespace std::chrono_literals;
    gpucoll::WaitWatch off(0);
    EXPECT_FALSE(off.due());
    std::this_thread::sleep_for(5ms);
    EXPECT_FALSE(off.due());

    gpucoll::WaitWatch w(0.05);
    EXPECT_FALSE(w.due());  // the clock starts here
    std::this_thread::sleep_for(70ms);
    EXPECT_TRUE(w.due());
    EXPECT_FALSE(w.due());  // said once
    std::this_thread::sleep_for(70ms);
    EXPECT_FALSE(w.due());

    // Wide margins: on a loaded machine a sleep may last much longer.
    gpucoll::WaitWatch r(0.5);
    EXPECT_FALSE(r.due());
    std::this_thread::sleep_for(300ms);
    r.reset();
    EXPECT_FALSE(r.due());  // starts again
    std::this_thread::sleep_for(100ms);
    EXPECT_FALSE(r.due());  // ~0.1 s into the new wait (0.4 s without the reset)
    std::this_thread::sleep_for(450ms);
    EXPECT_TRUE(r.due());

    const std::string arrival = gpucoll::wait_warning_text(60, "rank 3 (this node)", true, true);
    EXPECT_NE(arrival.find("never makes the call"), std::string::npos) << arrival;
    EXPECT_NE(arrival.find("uniform_memory"), std::string::npos) << arrival;
    const std::string step = gpucoll::wait_warning_text(60, "rank 3 (this node)", false, true);
    EXPECT_EQ(step.find("never makes the call"), std::string::npos) << step;
    EXPECT_NE(step.find("in the call but does not go on"), std::string::npos) << step;
}
