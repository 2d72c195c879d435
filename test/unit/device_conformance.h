// device_conformance.h - the behaviour every Device backend must show,
// as a value-parameterised GoogleTest suite. A backend's test file
// instantiates it:
//
//   INSTANTIATE_TEST_SUITE_P(Emu, DeviceConformance,
//                            ::testing::Values(DeviceFactory{"emu", gpucoll::make_emu_device}),
//                            DeviceFactoryName);
//
// A factory that returns nullptr (backend not available here) skips the
// suite with the backend's reason.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "device/device.h"
#include "reduce_reference.h"

struct DeviceFactory {
    const char* name;
    std::function<std::unique_ptr<gpucoll::Device>()> make;
};

inline void PrintTo(const DeviceFactory& factory, std::ostream* os) { *os << factory.name; }

// Test name suffix: the backend's name.
inline std::string DeviceFactoryName(const ::testing::TestParamInfo<DeviceFactory>& info) {
    return info.param.name;
}

#define ASSERT_DEV_OK(expr) ASSERT_EQ((expr), GPUCOLL_SUCCESS) << gpucoll::last_error()
#define EXPECT_DEV_OK(expr) EXPECT_EQ((expr), GPUCOLL_SUCCESS) << gpucoll::last_error()

namespace conformance {

// Device memory owned by a test; freed on scope exit.
class DeviceMemory {
public:
    DeviceMemory(gpucoll::Device* dev, size_t bytes) : dev_(dev) {
        status_ = dev_->alloc(&ptr_, bytes);
    }
    ~DeviceMemory() {
        if (ptr_ != nullptr) dev_->free(ptr_);
    }
    DeviceMemory(const DeviceMemory&) = delete;
    DeviceMemory& operator=(const DeviceMemory&) = delete;

    gpucoll::Status status() const { return status_; }
    std::byte* get() const { return static_cast<std::byte*>(ptr_); }

private:
    gpucoll::Device* dev_;
    void* ptr_ = nullptr;
    gpucoll::Status status_;
};

// Pinned host memory owned by a test.
class PinnedMemory {
public:
    PinnedMemory(gpucoll::Device* dev, size_t bytes) : dev_(dev) {
        status_ = dev_->alloc_host(&ptr_, bytes);
    }
    ~PinnedMemory() {
        if (ptr_ != nullptr) dev_->free_host(ptr_);
    }
    PinnedMemory(const PinnedMemory&) = delete;
    PinnedMemory& operator=(const PinnedMemory&) = delete;

    gpucoll::Status status() const { return status_; }
    unsigned char* get() const { return static_cast<unsigned char*>(ptr_); }

private:
    gpucoll::Device* dev_;
    void* ptr_ = nullptr;
    gpucoll::Status status_;
};

inline std::vector<unsigned char> byte_pattern(size_t bytes, unsigned seed) {
    std::vector<unsigned char> v(bytes);
    for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<unsigned char>(i * 131 + seed + i / 251);
    return v;
}

// Types a backend may legitimately not reduce (no native type on the device).
inline bool may_be_unsupported(gpucoll_dtype_t d) {
    return d == GPUCOLL_LONG_DOUBLE || d == GPUCOLL_C_LONG_DOUBLE_COMPLEX;
}

constexpr unsigned char kSentinel = 0xA5;

}  // namespace conformance

class DeviceConformance : public ::testing::TestWithParam<DeviceFactory> {
protected:
    void SetUp() override {
        dev_ = GetParam().make();
        if (!dev_) {
            GTEST_SKIP() << "backend " << GetParam().name
                         << " not available here: " << gpucoll::last_error();
        }
    }

    // Host -> device, synchronously.
    void upload(void* dst, const void* src, size_t bytes) {
        ASSERT_DEV_OK(dev_->memcpy(dst, src, bytes, nullptr));
    }
    std::vector<unsigned char> download(const void* src, size_t bytes) {
        std::vector<unsigned char> out(bytes);
        EXPECT_DEV_OK(dev_->memcpy(out.data(), src, bytes, nullptr));
        return out;
    }

    // Checks one reduction: sources at the given element offsets, dst at
    // dst_offset, or in place into source 0 when in_place. Bytes around the
    // result must stay untouched. Returns the reduce status.
    gpucoll::Status check_reduce(gpucoll_dtype_t d, gpucoll_op_t op, int nsrc, size_t count,
                                 const std::vector<conformance::DeviceMemory*>& srcs,
                                 const std::vector<size_t>& src_offsets,
                                 conformance::DeviceMemory& dst, size_t dst_offset, bool in_place);

    std::unique_ptr<gpucoll::Device> dev_;
};

inline gpucoll::Status DeviceConformance::check_reduce(
    gpucoll_dtype_t d, gpucoll_op_t op, int nsrc, size_t count,
    const std::vector<conformance::DeviceMemory*>& srcs, const std::vector<size_t>& src_offsets,
    conformance::DeviceMemory& dst, size_t dst_offset, bool in_place) {
    const size_t elem = reference::element_size(d);
    const size_t bytes = count * elem;
    std::vector<std::vector<unsigned char>> inputs;
    std::vector<const void*> input_ptrs, device_srcs;
    for (int k = 0; k < nsrc; ++k) {
        inputs.push_back(reference::make_input(d, k, count));
        std::byte* p = srcs[k]->get() + src_offsets[k] * elem;
        if (in_place && k == 0) p = dst.get() + dst_offset * elem;
        device_srcs.push_back(p);
    }
    for (int k = 0; k < nsrc; ++k) {
        input_ptrs.push_back(inputs[k].data());
        // Sentinels around the destination reveal writes outside [dst, dst+count).
        if (!(in_place && k == 0))
            upload(const_cast<void*>(device_srcs[k]), inputs[k].data(), bytes);
    }
    // One element of margin each side (none before dst at the allocation's base).
    const size_t front = dst_offset > 0 ? elem : 0;
    const size_t window = front + bytes + elem;
    std::byte* window_start = dst.get() + dst_offset * elem - front;
    std::vector<unsigned char> before(window, conformance::kSentinel);
    if (in_place) std::memcpy(before.data() + front, inputs[0].data(), bytes);
    upload(window_start, before.data(), window);

    const gpucoll::Status s = dev_->reduce(dst.get() + dst_offset * elem, device_srcs.data(), nsrc,
                                           count, d, op, nullptr);
    if (s != GPUCOLL_SUCCESS) return s;

    std::vector<unsigned char> expected(bytes);
    reference::reduce(d, op, input_ptrs, count, expected.data());
    const std::vector<unsigned char> after = download(window_start, window);
    EXPECT_EQ(reference::compare(d, expected.data(), after.data() + front, count), "");
    const std::vector<unsigned char> margin(elem, conformance::kSentinel);
    EXPECT_TRUE(std::equal(margin.begin(), margin.begin() + front, after.begin()))
        << "reduce wrote before dst";
    EXPECT_TRUE(std::equal(margin.begin(), margin.end(), after.end() - elem))
        << "reduce wrote past dst + count";
    return s;
}

// ---- memory ---------------------------------------------------------------------

TEST_P(DeviceConformance, AllocQueryFree) {
    conformance::DeviceMemory d(dev_.get(), 1000);
    ASSERT_DEV_OK(d.status());
    ASSERT_NE(d.get(), nullptr);

    gpucoll::PointerInfo info;
    ASSERT_DEV_OK(dev_->query(d.get(), &info));
    EXPECT_EQ(info.type, GPUCOLL_MEM_DEVICE);
    EXPECT_GE(info.device, 0);
    EXPECT_EQ(info.base, d.get());
    EXPECT_EQ(info.size, 1000u);
    EXPECT_NE(info.buffer_id, 0u);

    gpucoll::PointerInfo interior;
    ASSERT_DEV_OK(dev_->query(d.get() + 999, &interior));
    EXPECT_EQ(interior.type, GPUCOLL_MEM_DEVICE);
    EXPECT_EQ(interior.base, d.get());
    EXPECT_EQ(interior.size, 1000u);
    EXPECT_EQ(interior.buffer_id, info.buffer_id);

    int on_stack = 0;
    gpucoll::PointerInfo host;
    ASSERT_DEV_OK(dev_->query(&on_stack, &host));
    EXPECT_EQ(host.type, GPUCOLL_MEM_HOST);
    EXPECT_EQ(host.buffer_id, 0u);

    std::vector<char> heap(64);
    ASSERT_DEV_OK(dev_->query(heap.data(), &host));
    EXPECT_EQ(host.type, GPUCOLL_MEM_HOST);
}

TEST_P(DeviceConformance, PinnedHostMemoryIsHostMemory) {
    conformance::PinnedMemory h(dev_.get(), 5000);
    ASSERT_DEV_OK(h.status());
    std::memset(h.get(), 7, 5000);  // host-accessible
    gpucoll::PointerInfo info;
    ASSERT_DEV_OK(dev_->query(h.get(), &info));
    EXPECT_EQ(info.type, GPUCOLL_MEM_HOST);
    EXPECT_EQ(info.buffer_id, 0u);
}

TEST_P(DeviceConformance, BufferIdsAreNeverReused) {
    std::set<uint64_t> ids;
    std::set<void*> addresses;
    bool address_reused = false;
    constexpr int kCycles = 32;
    for (int i = 0; i < kCycles; ++i) {
        void* p = nullptr;
        ASSERT_DEV_OK(dev_->alloc(&p, 8192));
        gpucoll::PointerInfo info;
        ASSERT_DEV_OK(dev_->query(p, &info));
        EXPECT_NE(info.buffer_id, 0u);
        ids.insert(info.buffer_id);
        address_reused |= !addresses.insert(p).second;
        ASSERT_DEV_OK(dev_->free(p));
    }
    EXPECT_EQ(ids.size(), static_cast<size_t>(kCycles)) << "a buffer id was reused";
    RecordProperty("address_reused", address_reused ? "yes" : "no");

    conformance::DeviceMemory a(dev_.get(), 64), b(dev_.get(), 64);
    ASSERT_DEV_OK(a.status());
    ASSERT_DEV_OK(b.status());
    gpucoll::PointerInfo ia, ib;
    ASSERT_DEV_OK(dev_->query(a.get(), &ia));
    ASSERT_DEV_OK(dev_->query(b.get(), &ib));
    EXPECT_NE(ia.buffer_id, ib.buffer_id);
    EXPECT_EQ(ids.count(ia.buffer_id), 0u);
}

TEST_P(DeviceConformance, ZeroByteAllocationsAreUniqueAndValid) {
    conformance::DeviceMemory a(dev_.get(), 0), b(dev_.get(), 0);
    ASSERT_DEV_OK(a.status());
    ASSERT_DEV_OK(b.status());
    ASSERT_NE(a.get(), nullptr);
    ASSERT_NE(b.get(), nullptr);
    EXPECT_NE(a.get(), b.get());
    gpucoll::PointerInfo info;
    ASSERT_DEV_OK(dev_->query(a.get(), &info));
    EXPECT_EQ(info.type, GPUCOLL_MEM_DEVICE);
    EXPECT_EQ(info.base, a.get());
    EXPECT_EQ(info.size, 0u);
    char host = 0;
    EXPECT_DEV_OK(dev_->memcpy(a.get(), &host, 0, nullptr));
    EXPECT_DEV_OK(dev_->memcpy(&host, a.get(), 0, nullptr));
}

// ---- copies -------------------------------------------------------------------------

TEST_P(DeviceConformance, MemcpyInAllDirections) {
    const size_t sizes[] = {1, 7, 4096 + 3, (1u << 20) + 5, (17u << 20) + 3};
    for (size_t bytes : sizes) {
        SCOPED_TRACE(testing::Message() << bytes << " bytes");
        const std::vector<unsigned char> src = conformance::byte_pattern(bytes, 3);
        conformance::DeviceMemory d1(dev_.get(), bytes), d2(dev_.get(), bytes);
        ASSERT_DEV_OK(d1.status());
        ASSERT_DEV_OK(d2.status());
        upload(d1.get(), src.data(), bytes);                              // H2D
        ASSERT_DEV_OK(dev_->memcpy(d2.get(), d1.get(), bytes, nullptr));  // D2D
        EXPECT_TRUE(download(d2.get(), bytes) == src);                    // D2H
        EXPECT_TRUE(download(d1.get(), bytes) == src);
    }
}

TEST_P(DeviceConformance, MemcpyWithPinnedHostBuffers) {
    constexpr size_t kBytes = (3u << 20) + 11;
    conformance::PinnedMemory in(dev_.get(), kBytes), out(dev_.get(), kBytes);
    ASSERT_DEV_OK(in.status());
    ASSERT_DEV_OK(out.status());
    const std::vector<unsigned char> pattern = conformance::byte_pattern(kBytes, 9);
    std::memcpy(in.get(), pattern.data(), kBytes);
    conformance::DeviceMemory d(dev_.get(), kBytes);
    ASSERT_DEV_OK(d.status());
    ASSERT_DEV_OK(dev_->memcpy(d.get(), in.get(), kBytes, nullptr));
    ASSERT_DEV_OK(dev_->memcpy(out.get(), d.get(), kBytes, nullptr));
    EXPECT_EQ(std::memcmp(out.get(), pattern.data(), kBytes), 0);
    std::memset(out.get(), 0, kBytes);
    ASSERT_DEV_OK(dev_->memcpy(out.get(), in.get(), kBytes, nullptr));  // H2H
    EXPECT_EQ(std::memcmp(out.get(), pattern.data(), kBytes), 0);
}

TEST_P(DeviceConformance, MemcpyAtInteriorOffsets) {
    constexpr size_t kBytes = 256;
    conformance::DeviceMemory d(dev_.get(), kBytes);
    ASSERT_DEV_OK(d.status());
    const std::vector<unsigned char> zeros(kBytes, 0);
    upload(d.get(), zeros.data(), kBytes);
    const std::vector<unsigned char> pattern = conformance::byte_pattern(100, 1);
    upload(d.get() + 5, pattern.data(), 100);
    ASSERT_DEV_OK(dev_->memcpy(d.get() + 150, d.get() + 5, 100, nullptr));
    const std::vector<unsigned char> all = download(d.get(), kBytes);
    for (size_t i = 0; i < kBytes; ++i) {
        unsigned char want = 0;
        if (i >= 5 && i < 105) want = pattern[i - 5];
        if (i >= 150 && i < 250) want = pattern[i - 150];
        ASSERT_EQ(all[i], want) << "byte " << i;
    }
    const std::vector<unsigned char> middle = download(d.get() + 7, 3);
    EXPECT_EQ(middle, std::vector<unsigned char>(pattern.begin() + 2, pattern.begin() + 5));
}

// Copy runs (gpucoll_memcpy_runs): only the blocks move, in every direction,
// with and without a stream; the bytes between them keep what they held.
TEST_P(DeviceConformance, MemcpyRunsCopyOnlyTheirBlocks) {
    constexpr size_t kBytes = 4096;
    constexpr ptrdiff_t kBase = 1024;  // runs may start below the base pointer
    const gpucoll_copy_run_t runs[] = {
        {-1000, 10, 1, 0},  // one block below the base
        {0, 12, 20, 40},    // 2D: 20 rows of 12 bytes, 28 bytes between them
        {900, 3, 5, 3},     // rows that touch: one contiguous span
        {1200, 0, 4, 16},   // nothing
        {1300, 8, 0, 16},   // nothing
        {1400, 1, 200, 7},  // many 1-byte rows
        {3000, 64, 1, 1},   // one block: the pitch is ignored
        {-20, 4, 2, 1000},  // rows on both sides of other runs' blocks
    };
    std::vector<bool> covered(kBytes, false);
    for (const gpucoll_copy_run_t& r : runs)
        for (size_t row = 0; row < r.height; ++row)
            for (size_t b = 0; b < r.width; ++b)
                covered[static_cast<size_t>(kBase + r.offset) + row * r.pitch + b] = true;
    const std::vector<unsigned char> a = conformance::byte_pattern(kBytes, 1);
    const std::vector<unsigned char> b = conformance::byte_pattern(kBytes, 77);
    auto merged = [&](const std::vector<unsigned char>& blocks,
                      const std::vector<unsigned char>& gaps) {
        std::vector<unsigned char> want(kBytes);
        for (size_t i = 0; i < kBytes; ++i) want[i] = covered[i] ? blocks[i] : gaps[i];
        return want;
    };
    conformance::DeviceMemory d1(dev_.get(), kBytes), d2(dev_.get(), kBytes);
    ASSERT_DEV_OK(d1.status());
    ASSERT_DEV_OK(d2.status());
    std::vector<unsigned char> host = b;

    upload(d1.get(), a.data(), kBytes);  // H2D
    ASSERT_DEV_OK(
        dev_->memcpy_runs(d1.get() + kBase, host.data() + kBase, runs, std::size(runs), nullptr));
    EXPECT_TRUE(download(d1.get(), kBytes) == merged(b, a));

    upload(d2.get(), b.data(), kBytes);  // D2D: d2 = b; its blocks from d1 (b there too)
    const std::vector<unsigned char> c = conformance::byte_pattern(kBytes, 200);
    upload(d1.get(), c.data(), kBytes);
    ASSERT_DEV_OK(
        dev_->memcpy_runs(d2.get() + kBase, d1.get() + kBase, runs, std::size(runs), nullptr));
    EXPECT_TRUE(download(d2.get(), kBytes) == merged(c, b));

    host = a;  // D2H on a stream
    std::unique_ptr<gpucoll::Stream> stream;
    ASSERT_DEV_OK(dev_->create_stream(&stream));
    ASSERT_DEV_OK(dev_->memcpy_runs(host.data() + kBase, d1.get() + kBase, runs, std::size(runs),
                                    stream.get()));
    ASSERT_DEV_OK(stream->synchronize());
    EXPECT_TRUE(host == merged(c, a));

    EXPECT_DEV_OK(dev_->memcpy_runs(d1.get(), host.data(), runs, 0, nullptr));  // nothing
}

// ---- streams ------------------------------------------------------------------------

TEST_P(DeviceConformance, StreamRunsWorkInOrder) {
    constexpr size_t kCount = 100000;
    constexpr int kSteps = 20;
    constexpr size_t kBytes = kCount * sizeof(int32_t);
    std::unique_ptr<gpucoll::Stream> stream;
    ASSERT_DEV_OK(dev_->create_stream(&stream));
    ASSERT_NE(stream, nullptr);
    conformance::PinnedMemory zeros(dev_.get(), kBytes), ones(dev_.get(), kBytes),
        result(dev_.get(), kBytes);
    ASSERT_DEV_OK(zeros.status());
    ASSERT_DEV_OK(ones.status());
    ASSERT_DEV_OK(result.status());
    std::memset(zeros.get(), 0, kBytes);
    std::memset(result.get(), 0xff, kBytes);
    for (size_t i = 0; i < kCount; ++i) {
        const int32_t one = 1;
        std::memcpy(ones.get() + i * sizeof one, &one, sizeof one);
    }
    conformance::DeviceMemory acc(dev_.get(), kBytes), inc(dev_.get(), kBytes),
        copy(dev_.get(), kBytes);
    ASSERT_DEV_OK(acc.status());
    ASSERT_DEV_OK(inc.status());
    ASSERT_DEV_OK(copy.status());

    ASSERT_DEV_OK(dev_->memcpy(acc.get(), zeros.get(), kBytes, stream.get()));
    ASSERT_DEV_OK(dev_->memcpy(inc.get(), ones.get(), kBytes, stream.get()));
    for (int step = 0; step < kSteps; ++step) {
        const void* srcs[] = {acc.get(), inc.get()};
        ASSERT_DEV_OK(
            dev_->reduce(acc.get(), srcs, 2, kCount, GPUCOLL_INT32, GPUCOLL_OP_SUM, stream.get()));
    }
    ASSERT_DEV_OK(dev_->memcpy(copy.get(), acc.get(), kBytes, stream.get()));
    const void* doubled[] = {copy.get(), acc.get()};
    ASSERT_DEV_OK(
        dev_->reduce(copy.get(), doubled, 2, kCount, GPUCOLL_INT32, GPUCOLL_OP_SUM, stream.get()));
    ASSERT_DEV_OK(dev_->memcpy(result.get(), copy.get(), kBytes, stream.get()));
    ASSERT_DEV_OK(stream->synchronize());

    for (size_t i = 0; i < kCount; ++i) {
        int32_t v;
        std::memcpy(&v, result.get() + i * sizeof v, sizeof v);
        ASSERT_EQ(v, 2 * kSteps) << "element " << i;
    }
    EXPECT_DEV_OK(stream->synchronize());  // nothing pending: still fine
}

// Markers: tickets increase, are reached in order once the work before them
// has finished, and stay bounded (more than kMaxMarks pending is fine).
TEST_P(DeviceConformance, StreamMarkersAreReachedInOrder) {
    constexpr size_t kBytes = 1 << 20;
    std::unique_ptr<gpucoll::Stream> stream;
    ASSERT_DEV_OK(dev_->create_stream(&stream));
    ASSERT_DEV_OK(stream->after_default_stream());
    conformance::DeviceMemory a(dev_.get(), kBytes), b(dev_.get(), kBytes);
    ASSERT_DEV_OK(a.status());
    ASSERT_DEV_OK(b.status());
    std::vector<uint64_t> tickets;
    for (size_t i = 0; i < gpucoll::Stream::kMaxMarks + 40; ++i) {
        ASSERT_DEV_OK(dev_->memcpy(b.get(), a.get(), kBytes, stream.get()));
        uint64_t t = 0;
        ASSERT_DEV_OK(stream->mark(&t));
        if (!tickets.empty()) {
            EXPECT_GT(t, tickets.back());
        }
        tickets.push_back(t);
    }
    // Reached in order: once a later ticket is reached, every earlier one is.
    bool last_done = false;
    while (!last_done) ASSERT_DEV_OK(stream->reached(tickets.back(), &last_done));
    for (uint64_t t : tickets) {
        bool done = false;
        ASSERT_DEV_OK(stream->reached(t, &done));
        EXPECT_TRUE(done) << "ticket " << t;
    }
    ASSERT_DEV_OK(stream->synchronize());
}

TEST_P(DeviceConformance, IndependentStreamsEachSynchronize) {
    constexpr size_t kBytes = 1u << 20;
    std::unique_ptr<gpucoll::Stream> s1, s2;
    ASSERT_DEV_OK(dev_->create_stream(&s1));
    ASSERT_DEV_OK(dev_->create_stream(&s2));
    conformance::PinnedMemory h1(dev_.get(), kBytes), h2(dev_.get(), kBytes);
    ASSERT_DEV_OK(h1.status());
    ASSERT_DEV_OK(h2.status());
    const auto p1 = conformance::byte_pattern(kBytes, 1), p2 = conformance::byte_pattern(kBytes, 2);
    std::memcpy(h1.get(), p1.data(), kBytes);
    std::memcpy(h2.get(), p2.data(), kBytes);
    conformance::DeviceMemory d1(dev_.get(), kBytes), d2(dev_.get(), kBytes);
    ASSERT_DEV_OK(d1.status());
    ASSERT_DEV_OK(d2.status());
    ASSERT_DEV_OK(dev_->memcpy(d1.get(), h1.get(), kBytes, s1.get()));
    ASSERT_DEV_OK(dev_->memcpy(d2.get(), h2.get(), kBytes, s2.get()));
    ASSERT_DEV_OK(s1->synchronize());
    ASSERT_DEV_OK(s2->synchronize());
    EXPECT_TRUE(download(d1.get(), kBytes) == p1);
    EXPECT_TRUE(download(d2.get(), kBytes) == p2);
}

// ---- reductions ---------------------------------------------------------------------

TEST_P(DeviceConformance, ReduceEveryTypeAndOp) {
    constexpr size_t kMaxCount = 1001;
    const int nsrcs[] = {1, 2, 3, 7};
    const size_t counts[] = {0, 1, 7, kMaxCount};
    struct Layout {
        const char* name;
        size_t dst_offset;
        size_t src_offset[7];  // in elements
    };
    const Layout layouts[] = {
        {"at allocation base", 0, {0, 0, 0, 0, 0, 0, 0}},
        {"shifted by one element", 1, {1, 1, 1, 1, 1, 1, 1}},
        {"mixed offsets", 0, {1, 0, 1, 0, 1, 0, 1}},
    };
    for (gpucoll_dtype_t d : reference::kAllDtypes) {
        SCOPED_TRACE(reference::dtype_label(d));
        const size_t elem = reference::element_size(d);
        const size_t buffer_bytes = (kMaxCount + 2) * elem;
        std::vector<std::unique_ptr<conformance::DeviceMemory>> owned;
        std::vector<conformance::DeviceMemory*> srcs;
        for (int k = 0; k < 7; ++k) {
            owned.push_back(std::make_unique<conformance::DeviceMemory>(dev_.get(), buffer_bytes));
            ASSERT_DEV_OK(owned.back()->status());
            srcs.push_back(owned.back().get());
        }
        conformance::DeviceMemory dst(dev_.get(), buffer_bytes);
        ASSERT_DEV_OK(dst.status());
        bool type_unsupported = false;
        for (gpucoll_op_t op : reference::kAllOps) {
            SCOPED_TRACE(reference::op_label(op));
            if (!reference::mpi_defines(d, op)) {
                const void* in[] = {srcs[0]->get(), srcs[1]->get()};
                EXPECT_EQ(dev_->reduce(dst.get(), in, 2, 7, d, op, nullptr),
                          GPUCOLL_ERR_UNSUPPORTED);
                continue;
            }
            for (const Layout& layout : layouts) {
                SCOPED_TRACE(layout.name);
                const std::vector<size_t> offsets(layout.src_offset, layout.src_offset + 7);
                for (int nsrc : nsrcs) {
                    for (size_t count : counts) {
                        SCOPED_TRACE(testing::Message() << "nsrc " << nsrc << ", count " << count);
                        const gpucoll::Status s = check_reduce(d, op, nsrc, count, srcs, offsets,
                                                               dst, layout.dst_offset, false);
                        if (s == GPUCOLL_ERR_UNSUPPORTED && conformance::may_be_unsupported(d)) {
                            type_unsupported = true;
                            break;
                        }
                        ASSERT_EQ(s, GPUCOLL_SUCCESS) << gpucoll::last_error();
                        if (HasFailure()) return;  // one clear failure, not thousands
                    }
                    if (type_unsupported) break;
                }
                if (type_unsupported) break;
            }
            if (type_unsupported) break;
        }
        if (type_unsupported) {
            RecordProperty(std::string("unsupported_") + reference::dtype_label(d), "yes");
        }
    }
}

// Non-integer complex products: each product and sum rounded on its own, as
// the host computes them (a fused multiply-add would change the last bit).
TEST_P(DeviceConformance, ComplexProductIsBitExact) {
    constexpr size_t kCount = 4099;
    auto run = [&](auto zero, gpucoll_dtype_t d) {
        using T = decltype(zero);
        struct C {
            T re, im;
        };
        for (int nsrc : {2, 3, 7}) {
            SCOPED_TRACE(testing::Message() << reference::dtype_label(d) << " nsrc " << nsrc);
            std::vector<std::vector<C>> in(static_cast<size_t>(nsrc), std::vector<C>(kCount));
            for (int k = 0; k < nsrc; ++k)
                for (size_t i = 0; i < kCount; ++i)
                    in[k][i] = {T(1) + T(0.1) * T(k + 1) + T(i % 97) / T(89),
                                T(0.3) - T(i % 13) / T(7) + T(k) / T(3)};
            // Left to right, each rounding step separate (volatile: no contraction).
            std::vector<C> want = in[0];
            for (int k = 1; k < nsrc; ++k) {
                for (size_t i = 0; i < kCount; ++i) {
                    const C a = want[i], b = in[k][i];
                    volatile T rr = a.re * b.re, ii = a.im * b.im, ri = a.re * b.im,
                               ir = a.im * b.re;
                    want[i] = {T(rr - ii), T(ri + ir)};
                }
            }
            std::vector<std::unique_ptr<conformance::DeviceMemory>> bufs;
            std::vector<const void*> srcs;
            for (int k = 0; k < nsrc; ++k) {
                bufs.push_back(
                    std::make_unique<conformance::DeviceMemory>(dev_.get(), kCount * sizeof(C)));
                ASSERT_DEV_OK(bufs.back()->status());
                upload(bufs.back()->get(), in[k].data(), kCount * sizeof(C));
                srcs.push_back(bufs.back()->get());
            }
            conformance::DeviceMemory dst(dev_.get(), kCount * sizeof(C));
            ASSERT_DEV_OK(dst.status());
            ASSERT_DEV_OK(
                dev_->reduce(dst.get(), srcs.data(), nsrc, kCount, d, GPUCOLL_OP_PROD, nullptr));
            const std::vector<unsigned char> got = download(dst.get(), kCount * sizeof(C));
            size_t differing = 0, first = kCount;
            for (size_t i = 0; i < kCount; ++i) {
                if (std::memcmp(got.data() + i * sizeof(C), &want[i], sizeof(C)) != 0) {
                    ++differing;
                    first = std::min(first, i);
                }
            }
            EXPECT_EQ(differing, 0u) << "first differing element " << first;
        }
    };
    run(float{}, GPUCOLL_C_FLOAT_COMPLEX);
    run(double{}, GPUCOLL_C_DOUBLE_COMPLEX);
}

// binary16 with every mantissa bit in use and both signs, so that sums and
// products round: the reduction combines up to kReduceMaxSources (8) sources
// in float and rounds once, so it equals the float-accumulated reference bit
// for bit (within half an ulp of the exact result), where rounding after each
// step would not.
TEST_P(DeviceConformance, Float16CombinesInFloatAndRoundsOnce) {
    constexpr size_t kCount = 3001;  // not a multiple of a 16-byte pack of halves
    uint32_t seed = 12345;
    auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
    for (gpucoll_op_t op : {GPUCOLL_OP_SUM, GPUCOLL_OP_PROD, GPUCOLL_OP_MIN, GPUCOLL_OP_MAX}) {
        for (int nsrc : {2, 3, 7, 8}) {
            SCOPED_TRACE(testing::Message() << reference::op_label(op) << " nsrc " << nsrc);
            std::vector<std::vector<reference::F16>> in(static_cast<size_t>(nsrc),
                                                        std::vector<reference::F16>(kCount));
            for (auto& v : in)
                for (auto& x : v) {
                    // sign, exponent 2^-6 .. 2^0 (biased 9..15), any mantissa
                    const uint32_t r = next() >> 8;
                    x.bits = uint16_t(((r & 1u) << 15) | ((9u + (r >> 1) % 7u) << 10) |
                                      ((r >> 4) & 0x3ffu));
                }
            std::vector<const void*> host;
            std::vector<std::unique_ptr<conformance::DeviceMemory>> bufs;
            std::vector<const void*> srcs;
            for (int k = 0; k < nsrc; ++k) {
                host.push_back(in[k].data());
                bufs.push_back(std::make_unique<conformance::DeviceMemory>(dev_.get(), kCount * 2));
                ASSERT_DEV_OK(bufs.back()->status());
                upload(bufs.back()->get(), in[k].data(), kCount * 2);
                srcs.push_back(bufs.back()->get());
            }
            conformance::DeviceMemory dst(dev_.get(), kCount * 2);
            ASSERT_DEV_OK(dst.status());
            ASSERT_DEV_OK(
                dev_->reduce(dst.get(), srcs.data(), nsrc, kCount, GPUCOLL_FLOAT16, op, nullptr));
            const std::vector<unsigned char> got = download(dst.get(), kCount * 2);
            std::vector<reference::F16> want(kCount);
            reference::reduce(GPUCOLL_FLOAT16, op, host, kCount, want.data());
            EXPECT_EQ(reference::compare(GPUCOLL_FLOAT16, want.data(), got.data(), kCount), "");
            // Rounding after every step gives other bits somewhere (the check
            // above can tell the two apart).
            size_t stepwise_differs = 0;
            for (size_t i = 0; i < kCount; ++i) {
                reference::F16 acc = in[0][i];
                for (int k = 1; k < nsrc; ++k) acc = reference::combine(op, acc, in[k][i]);
                stepwise_differs += acc.bits != want[i].bits;
            }
            if ((op == GPUCOLL_OP_SUM || op == GPUCOLL_OP_PROD) && nsrc > 2) {
                EXPECT_GT(stepwise_differs, 0u);
            }
        }
    }
}

TEST_P(DeviceConformance, ReduceInPlace) {
    constexpr size_t kCount = 1001;
    const gpucoll_dtype_t dtypes[] = {
        GPUCOLL_INT8, GPUCOLL_INT32, GPUCOLL_FLOAT, GPUCOLL_DOUBLE, GPUCOLL_C_DOUBLE_COMPLEX,
        GPUCOLL_BOOL, GPUCOLL_BYTE};
    for (gpucoll_dtype_t d : dtypes) {
        SCOPED_TRACE(reference::dtype_label(d));
        const size_t bytes = (kCount + 3) * reference::element_size(d);
        conformance::DeviceMemory s1(dev_.get(), bytes), s2(dev_.get(), bytes),
            dst(dev_.get(), bytes);
        ASSERT_DEV_OK(s1.status());
        ASSERT_DEV_OK(s2.status());
        ASSERT_DEV_OK(dst.status());
        std::vector<conformance::DeviceMemory*> srcs = {&dst, &s1, &s2};
        for (gpucoll_op_t op : reference::kAllOps) {
            if (!reference::mpi_defines(d, op)) continue;
            SCOPED_TRACE(reference::op_label(op));
            for (int nsrc : {1, 2, 3}) {
                for (size_t offset : {size_t{1}, size_t{2}}) {
                    const std::vector<size_t> offsets = {offset, offset, 0};
                    ASSERT_EQ(check_reduce(d, op, nsrc, kCount, srcs, offsets, dst, offset, true),
                              GPUCOLL_SUCCESS)
                        << gpucoll::last_error();
                    if (HasFailure()) return;
                }
            }
        }
    }
}

TEST_P(DeviceConformance, ReduceLargerThan16MB) {
    const gpucoll_dtype_t dtypes[] = {GPUCOLL_FLOAT, GPUCOLL_DOUBLE, GPUCOLL_INT32};
    for (gpucoll_dtype_t d : dtypes) {
        SCOPED_TRACE(reference::dtype_label(d));
        const size_t elem = reference::element_size(d);
        const size_t count = (16u << 20) / elem + 1001;
        const size_t bytes = (count + 3) * elem;
        conformance::DeviceMemory a(dev_.get(), bytes), b(dev_.get(), bytes), c(dev_.get(), bytes),
            dst(dev_.get(), bytes);
        ASSERT_DEV_OK(a.status());
        ASSERT_DEV_OK(b.status());
        ASSERT_DEV_OK(c.status());
        ASSERT_DEV_OK(dst.status());
        const std::vector<conformance::DeviceMemory*> srcs = {&a, &b, &c};
        ASSERT_EQ(check_reduce(d, GPUCOLL_OP_SUM, 3, count, srcs, {0, 0, 0}, dst, 1, false),
                  GPUCOLL_SUCCESS)
            << gpucoll::last_error();
        ASSERT_EQ(check_reduce(d, GPUCOLL_OP_SUM, 2, count, {&dst, &b}, {1, 1}, dst, 1, true),
                  GPUCOLL_SUCCESS)
            << gpucoll::last_error();
    }
}

TEST_P(DeviceConformance, ReduceMixesDeviceAndPinnedHostOperands) {
    constexpr size_t kCount = 5000;
    constexpr size_t kBytes = kCount * sizeof(double);
    const auto a = reference::make_input(GPUCOLL_DOUBLE, 0, kCount);
    const auto b = reference::make_input(GPUCOLL_DOUBLE, 1, kCount);
    conformance::DeviceMemory da(dev_.get(), kBytes);
    conformance::PinnedMemory hb(dev_.get(), kBytes), hdst(dev_.get(), kBytes);
    ASSERT_DEV_OK(da.status());
    ASSERT_DEV_OK(hb.status());
    ASSERT_DEV_OK(hdst.status());
    upload(da.get(), a.data(), kBytes);
    std::memcpy(hb.get(), b.data(), kBytes);
    const void* srcs[] = {da.get(), hb.get()};
    ASSERT_DEV_OK(
        dev_->reduce(hdst.get(), srcs, 2, kCount, GPUCOLL_DOUBLE, GPUCOLL_OP_MAX, nullptr));
    std::vector<unsigned char> expected(kBytes);
    reference::reduce(GPUCOLL_DOUBLE, GPUCOLL_OP_MAX, {a.data(), b.data()}, kCount,
                      expected.data());
    EXPECT_EQ(reference::compare(GPUCOLL_DOUBLE, expected.data(), hdst.get(), kCount), "");
}

// ---- IPC ------------------------------------------------------------------------------

// Pool-like memory (cudaMallocAsync): device memory in every respect except
// that IPC refuses to export it, cleanly, so callers can fall back.
TEST_P(DeviceConformance, UnexportableMemoryRefusesIpcOnly) {
    constexpr size_t kBytes = 70001;
    void* p = nullptr;
    ASSERT_DEV_OK(dev_->alloc_unexportable(&p, kBytes));
    gpucoll::PointerInfo info;
    ASSERT_DEV_OK(dev_->query(static_cast<char*>(p) + 5, &info));
    EXPECT_EQ(info.type, GPUCOLL_MEM_DEVICE);
    EXPECT_EQ(info.base, p);
    EXPECT_NE(info.buffer_id, 0u);
    const auto bytes = conformance::byte_pattern(kBytes, 9);
    upload(static_cast<std::byte*>(p), bytes.data(), kBytes);
    EXPECT_TRUE(download(static_cast<std::byte*>(p), kBytes) == bytes);
    gpucoll::IpcHandle handle;
    EXPECT_EQ(dev_->ipc_export(p, &handle), GPUCOLL_ERR_UNSUPPORTED);
    EXPECT_STRNE(gpucoll::last_error(), "");
    EXPECT_DEV_OK(dev_->free(p));
}

TEST_P(DeviceConformance, IpcExportImportWithinProcess) {
    constexpr size_t kBytes = (1u << 20) + 5;
    conformance::DeviceMemory d(dev_.get(), kBytes);
    ASSERT_DEV_OK(d.status());
    const auto first = conformance::byte_pattern(kBytes, 4);
    upload(d.get(), first.data(), kBytes);

    gpucoll::IpcHandle handle;
    ASSERT_DEV_OK(dev_->ipc_export(d.get(), &handle));
    std::unique_ptr<gpucoll::IpcMapping> mapping;
    ASSERT_DEV_OK(dev_->ipc_import(handle, &mapping));
    ASSERT_NE(mapping, nullptr);
    ASSERT_NE(mapping->address(), nullptr);
    EXPECT_EQ(mapping->size(), kBytes);
    auto* peer = static_cast<std::byte*>(mapping->address());

    gpucoll::PointerInfo info;
    ASSERT_DEV_OK(dev_->query(peer + 10, &info));
    EXPECT_EQ(info.type, GPUCOLL_MEM_DEVICE);

    EXPECT_TRUE(download(peer, kBytes) == first);  // written via d, read via the mapping

    const auto second = conformance::byte_pattern(4096, 8);
    upload(peer + 333, second.data(), second.size());  // written via the mapping
    EXPECT_TRUE(download(d.get() + 333, second.size()) == second);

    // The mapping is device memory for reductions too.
    const size_t count = 1000;
    const auto ints = reference::make_input(GPUCOLL_INT32, 0, count);
    upload(d.get(), ints.data(), ints.size());
    const void* srcs[] = {peer, d.get()};
    conformance::DeviceMemory out(dev_.get(), ints.size());
    ASSERT_DEV_OK(out.status());
    ASSERT_DEV_OK(dev_->reduce(out.get(), srcs, 2, count, GPUCOLL_INT32, GPUCOLL_OP_SUM, nullptr));
    std::vector<unsigned char> expected(ints.size());
    reference::reduce(GPUCOLL_INT32, GPUCOLL_OP_SUM, {ints.data(), ints.data()}, count,
                      expected.data());
    EXPECT_EQ(reference::compare(GPUCOLL_INT32, expected.data(),
                                 download(out.get(), ints.size()).data(), count),
              "");

    mapping.reset();
    EXPECT_TRUE(download(d.get(), ints.size()) == ints);  // the original stays valid
}

// ---- the one-kernel allreduce ----------------------------------------------------------

// Ranks as streams of one process: each stream runs its rank's kernel, which
// waits inside for the others' words (on a GPU the kernels run side by
// side). Every rank's output is the rank-order reduction of all inputs;
// words grow call after call, so an earlier call's word never passes a wait;
// an output at an odd address is written byte by byte.
TEST_P(DeviceConformance, OneKernelAllreduceAcrossStreams) {
    constexpr size_t kCount = 333, kSlot = 8192, kFlagStride = 256;
    const gpucoll_dtype_t dtypes[] = {GPUCOLL_FLOAT, GPUCOLL_DOUBLE,           GPUCOLL_INT8,
                                      GPUCOLL_INT64, GPUCOLL_C_DOUBLE_COMPLEX, GPUCOLL_BOOL};
    const gpucoll_op_t ops[] = {GPUCOLL_OP_SUM, GPUCOLL_OP_MAX, GPUCOLL_OP_BXOR, GPUCOLL_OP_LAND};
    uint64_t word = 0;
    for (int n : {2, 3, 4}) {
        SCOPED_TRACE("ranks " + std::to_string(n));
        conformance::DeviceMemory flags(dev_.get(), kFlagStride * size_t(n)),
            slots(dev_.get(), kSlot * size_t(n)), in(dev_.get(), kSlot * size_t(n)),
            out(dev_.get(), (kSlot + 16) * size_t(n));
        ASSERT_DEV_OK(flags.status());
        ASSERT_DEV_OK(slots.status());
        ASSERT_DEV_OK(in.status());
        ASSERT_DEV_OK(out.status());
        const std::vector<unsigned char> zeros(kFlagStride * size_t(n), 0);
        upload(flags.get(), zeros.data(), zeros.size());
        std::vector<std::unique_ptr<gpucoll::Stream>> streams(static_cast<size_t>(n));
        for (auto& s : streams) ASSERT_DEV_OK(dev_->create_stream(&s));
        for (gpucoll_dtype_t d : dtypes) {
            for (gpucoll_op_t op : ops) {
                if (!reference::mpi_defines(d, op)) continue;
                SCOPED_TRACE(std::string(reference::dtype_label(d)) + " " +
                             reference::op_label(op));
                const size_t elem = reference::element_size(d), bytes = kCount * elem;
                std::vector<std::vector<unsigned char>> inputs;
                std::vector<const void*> input_ptrs;
                for (int r = 0; r < n; ++r) {
                    inputs.push_back(reference::make_input(d, r, kCount));
                    upload(in.get() + kSlot * size_t(r), inputs.back().data(), bytes);
                }
                for (auto& i : inputs) input_ptrs.push_back(i.data());
                ++word;
                const size_t odd = word % 2;  // every other call: outputs at odd addresses
                for (int r = 0; r < n; ++r) {
                    gpucoll::OneKernelAllreduce k;
                    k.input = in.get() + kSlot * size_t(r);
                    k.output = out.get() + (kSlot + 16) * size_t(r) + odd;
                    k.count = kCount;
                    k.dtype = d;
                    k.op = op;
                    k.rank = r;
                    k.size = n;
                    k.word = word;
                    for (int p = 0; p < n; ++p) {
                        k.slots[p] = reinterpret_cast<char*>(slots.get() + kSlot * size_t(p));
                        k.flags[p] =
                            reinterpret_cast<uint64_t*>(flags.get() + kFlagStride * size_t(p));
                    }
                    ASSERT_DEV_OK(dev_->allreduce_one_kernel(k, streams[size_t(r)].get()));
                }
                for (auto& s : streams) ASSERT_DEV_OK(s->synchronize());
                std::vector<unsigned char> expected(bytes);
                reference::reduce(d, op, input_ptrs, kCount, expected.data());
                for (int r = 0; r < n; ++r) {
                    const auto got = download(out.get() + (kSlot + 16) * size_t(r) + odd, bytes);
                    ASSERT_EQ(reference::compare(d, expected.data(), got.data(), kCount), "")
                        << "rank " << r;
                }
            }
        }
    }
    // Without a stream the kernel would wait on the legacy stream: refused.
    gpucoll::OneKernelAllreduce k;
    EXPECT_EQ(dev_->allreduce_one_kernel(k, nullptr), GPUCOLL_ERR_INVALID_ARG);
}
