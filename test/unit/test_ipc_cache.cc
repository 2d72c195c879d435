// IpcCache against a peer process (forked) on the emu device, which imitates
// CUDA's refusal to open a handle while a mapping of another allocation of the
// same owner, overlapping it in the owner's address space, is still open
// (cudaErrorAlreadyMapped). That is what happens when a peer frees a buffer
// and allocates another at the same address: seen on an H100 (2026-11-22),
// where every call after such a reuse failed and the communicator staged.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "device/device.h"
#include "fd_io.h"
#include "intra/ipc_cache.h"

namespace {

using gpucoll::intra::BufferDesc;
using gpucoll::intra::IpcCache;

using test_io::read_all;
using test_io::write_all;

constexpr size_t kBytes = 1 << 20;
constexpr int kRounds = 12;

// The peer: each round allocates a buffer of `each` bytes (the last round of
// a kept run: 4 x that), fills it with the round number, describes it, waits
// until the parent has read it, then frees it (often the next buffer comes
// back at the same address), or, when keep, keeps it (distinct addresses).
[[noreturn]] void peer(int desc_out, int ack_in, bool keep, size_t each) {
    auto dev = gpucoll::make_emu_device();
    IpcCache exports(16);
    std::vector<void*> kept;
    for (int round = 0; round < kRounds; ++round) {
        const size_t bytes = keep && round == kRounds - 1 ? 4 * each : each;
        void* p = nullptr;
        if (dev->alloc(&p, bytes) != gpucoll::kSuccess) _exit(10);
        std::vector<unsigned char> fill(bytes, static_cast<unsigned char>(round + 1));
        if (dev->memcpy(p, fill.data(), bytes, nullptr) != gpucoll::kSuccess) _exit(11);
        BufferDesc desc;
        if (exports.describe(dev.get(), p, &desc) != gpucoll::kSuccess) _exit(12);
        if (!write_all(desc_out, &desc, sizeof desc)) _exit(13);
        char ack = 0;
        if (!read_all(ack_in, &ack, 1)) _exit(14);
        if (keep)
            kept.push_back(p);
        else if (dev->free(p) != gpucoll::kSuccess)
            _exit(15);
    }
    for (void* p : kept) dev->free(p);
    _exit(0);
}

class IpcCacheAcrossProcesses : public ::testing::Test {
public:  // also for expect_stale_mappings_refused
    void SetUp() override {
        dev_ = gpucoll::make_emu_device();
        ASSERT_NE(dev_, nullptr);
    }
    void start(bool keep, size_t each = kBytes) {
        int desc_pipe[2], ack_pipe[2];
        ASSERT_EQ(pipe(desc_pipe), 0);
        ASSERT_EQ(pipe(ack_pipe), 0);
        child_ = fork();
        ASSERT_GE(child_, 0);
        if (child_ == 0) {
            close(desc_pipe[0]);
            close(ack_pipe[1]);
            peer(desc_pipe[1], ack_pipe[0], keep, each);
        }
        close(desc_pipe[1]);
        close(ack_pipe[0]);
        desc_in_ = desc_pipe[0];
        ack_out_ = ack_pipe[1];
    }
    // Ends the conversation; the peer's exit status (0: it saw no error).
    int finish() {
        close(ack_out_);
        close(desc_in_);
        int status = 0;
        if (waitpid(child_, &status, 0) != child_ || !WIFEXITED(status)) return -1;
        return WEXITSTATUS(status);
    }
    BufferDesc next() {
        BufferDesc desc;
        EXPECT_TRUE(read_all(desc_in_, &desc, sizeof desc));
        return desc;
    }
    void ack() {
        const char a = 1;
        EXPECT_TRUE(write_all(ack_out_, &a, 1));
    }
    std::unique_ptr<gpucoll::Device> dev_;
    pid_t child_ = -1;
    int desc_in_ = -1, ack_out_ = -1;
};

TEST_F(IpcCacheAcrossProcesses, FreedAndReallocatedPeerBuffersResolveToTheNewContents) {
    start(/*keep=*/false);
    IpcCache cache(64);  // room for every round: only the overlap may evict
    int reused = 0;
    uint64_t last_base = 0;
    for (int round = 0; round < kRounds; ++round) {
        SCOPED_TRACE(testing::Message() << "round " << round);
        const BufferDesc desc = next();
        EXPECT_EQ(desc.size, kBytes);
        if (desc.base == last_base) ++reused;
        last_base = desc.base;
        void* addr = nullptr;
        std::shared_ptr<gpucoll::IpcMapping> pin;
        if (round % 2 == 0) {
            ASSERT_EQ(cache.resolve(dev_.get(), 0, child_, desc, &addr, &pin), gpucoll::kSuccess)
                << gpucoll::last_error();
        } else {
            // A communicator's internal buffer: mapped outside the cache, yet
            // it must close the cache's stale mapping first.
            std::unique_ptr<gpucoll::IpcMapping> own;
            ASSERT_EQ(cache.import(dev_.get(), child_, desc, &own), gpucoll::kSuccess)
                << gpucoll::last_error();
            addr = own->address();
            pin = std::move(own);
        }
        std::vector<unsigned char> got(kBytes);
        ASSERT_EQ(dev_->memcpy(got.data(), addr, kBytes, nullptr), gpucoll::kSuccess);
        EXPECT_EQ(got.front(), round + 1);
        EXPECT_EQ(got.back(), round + 1);
        pin.reset();
        ack();
    }
    EXPECT_EQ(finish(), 0) << "the peer failed";
    // The case this test is about must have happened.
    EXPECT_GT(reused, 0) << "the peer never allocated at a freed buffer's address";
    RecordProperty("address_reuses", reused);
}

// A mapping opened in one GPU's context is no address for another GPU's
// kernels: a process set up again on another GPU (or using two) maps the
// peer's buffer again there. Before, the cache was keyed by owner and
// buffer only and handed GPU 0's mapping to GPU 1 (emu: its reductions
// refuse it; CUDA: an illegal address).
TEST_F(IpcCacheAcrossProcesses, EachGpuGetsItsOwnMapping) {
    setenv("GPUCOLL_EMU_DEVICES", "2", 1);
    dev_ = gpucoll::make_emu_device();
    unsetenv("GPUCOLL_EMU_DEVICES");
    ASSERT_EQ(dev_->device_count(), 2);
    start(/*keep=*/true);
    IpcCache cache(64);
    const BufferDesc desc = next();
    void* addr[2] = {};
    std::shared_ptr<gpucoll::IpcMapping> pin[2];
    for (int round = 0; round < 3; ++round)
        for (int ordinal = 0; ordinal < 2; ++ordinal) {
            SCOPED_TRACE(testing::Message() << "GPU " << ordinal << ", round " << round);
            ASSERT_EQ(dev_->set_current_device(ordinal), gpucoll::kSuccess);
            void* got = nullptr;
            std::shared_ptr<gpucoll::IpcMapping> p;
            ASSERT_EQ(cache.resolve(dev_.get(), ordinal, child_, desc, &got, &p), gpucoll::kSuccess)
                << gpucoll::last_error();
            if (round == 0) {
                addr[ordinal] = got;
                pin[ordinal] = p;
            }
            EXPECT_EQ(p, pin[ordinal]) << "cached per GPU";
            gpucoll::PointerInfo info;
            ASSERT_EQ(dev_->query(got, &info), gpucoll::kSuccess);
            EXPECT_EQ(info.device, ordinal) << "mapped in this GPU's context";
        }
    EXPECT_NE(pin[0], pin[1]);
    unsigned char first = 0;
    ASSERT_EQ(dev_->memcpy(&first, addr[1], 1, nullptr), gpucoll::kSuccess);
    EXPECT_EQ(first, 1);
    pin[0].reset();
    pin[1].reset();
    for (int round = 0; round < kRounds; ++round) {
        if (round > 0) (void)next();
        ack();
    }
    EXPECT_EQ(finish(), 0) << "the peer failed";
}

// The imitation itself, without the cache: an open mapping of a freed
// allocation blocks the import of the allocation now at that address. With
// two GPUs each imports every buffer, GPU 0's mapping is closed at once and
// GPU 1's kept: GPU 1's stale mapping must still block (emu registered only
// the first GPU's import of a buffer, and forgot it when that one closed).
void expect_stale_mappings_refused(IpcCacheAcrossProcesses& t, int gpus) {
    if (gpus > 1) {
        setenv("GPUCOLL_EMU_DEVICES", std::to_string(gpus).c_str(), 1);
        t.dev_ = gpucoll::make_emu_device();
        unsetenv("GPUCOLL_EMU_DEVICES");
        ASSERT_EQ(t.dev_->device_count(), gpus);
    }
    t.start(/*keep=*/false);
    std::vector<std::unique_ptr<gpucoll::IpcMapping>> kept;
    std::vector<BufferDesc> seen;
    int refused = 0, overlapping = 0;
    for (int round = 0; round < kRounds; ++round) {
        const BufferDesc desc = t.next();
        bool overlaps = false;
        for (const BufferDesc& s : seen)
            overlaps |= s.base < desc.base + desc.size && desc.base < s.base + s.size;
        std::vector<std::unique_ptr<gpucoll::IpcMapping>> m(static_cast<size_t>(gpus));
        std::vector<gpucoll::Status> s(static_cast<size_t>(gpus));
        for (int ordinal = 0; ordinal < gpus; ++ordinal) {
            if (gpus > 1) {
                ASSERT_EQ(t.dev_->set_current_device(ordinal), gpucoll::kSuccess);
            }
            s[size_t(ordinal)] = t.dev_->ipc_import(desc.handle, &m[size_t(ordinal)]);
        }
        if (gpus > 1) m[0].reset();  // GPU 0's closes; the last GPU's stays open
        if (overlaps) {
            ++overlapping;
            EXPECT_NE(s[0], gpucoll::kSuccess) << "round " << round;
            refused += s[0] != gpucoll::kSuccess;
        } else {
            for (const gpucoll::Status x : s) {
                EXPECT_EQ(x, gpucoll::kSuccess) << gpucoll::last_error();
            }
            seen.push_back(desc);
            kept.push_back(std::move(m.back()));
        }
        t.ack();
    }
    EXPECT_EQ(t.finish(), 0) << "the peer failed";
    EXPECT_GT(overlapping, 0) << "the peer never allocated at a freed buffer's address";
    EXPECT_EQ(refused, overlapping);
}

TEST_F(IpcCacheAcrossProcesses, EmuRefusesAnImportOverlappingAStaleMapping) {
    expect_stale_mappings_refused(*this, 1);
}

TEST_F(IpcCacheAcrossProcesses, EmuRefusesWhileAnotherGpuStillMapsIt) {
    expect_stale_mappings_refused(*this, 2);
}

// The bytes kept mapped stay within the bound (least recently used go
// first); an allocation larger than the whole bound is mapped for its call
// only.
TEST_F(IpcCacheAcrossProcesses, MappedBytesStayWithinTheBound) {
    start(/*keep=*/true);
    IpcCache cache(64);
    const size_t bound = 3 * kBytes + kBytes / 2;  // three buffers fit, not four
    cache.reserve_bytes(bound);
    for (int round = 0; round < kRounds; ++round) {
        SCOPED_TRACE(testing::Message() << "round " << round);
        const BufferDesc desc = next();
        void* addr = nullptr;
        std::shared_ptr<gpucoll::IpcMapping> pin;
        ASSERT_EQ(cache.resolve(dev_.get(), 0, child_, desc, &addr, &pin), gpucoll::kSuccess)
            << gpucoll::last_error();
        unsigned char first = 0, last = 0;
        ASSERT_EQ(dev_->memcpy(&first, addr, 1, nullptr), gpucoll::kSuccess);
        ASSERT_EQ(dev_->memcpy(&last, static_cast<char*>(addr) + desc.size - 1, 1, nullptr),
                  gpucoll::kSuccess);
        EXPECT_EQ(first, round + 1);
        EXPECT_EQ(last, round + 1);
        EXPECT_LE(cache.mapped_bytes(), bound);
        if (round == kRounds - 1) {  // 4 x kBytes: not cached
            EXPECT_GT(desc.size, bound);
            EXPECT_LE(cache.mapped_bytes(), 3 * kBytes);
        } else {
            EXPECT_EQ(cache.mapped_bytes(), std::min<size_t>(round + 1, 3) * kBytes);
        }
        pin.reset();
        ack();
    }
    EXPECT_EQ(finish(), 0) << "the peer failed";
}

// The bound counts what a mapping keeps mapped, not what the peer described:
// buffers of 100 bytes keep a page each mapped (emu; on CUDA the whole
// allocation, whatever size the peer claims). Counting the claims, all of
// them would stay under a bound of three and a half pages.
TEST_F(IpcCacheAcrossProcesses, TheBoundCountsMappedPagesNotClaimedBytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    start(/*keep=*/true, 100);
    IpcCache cache(64);
    const size_t bound = 3 * page + page / 2;
    cache.reserve_bytes(bound);
    for (int round = 0; round < kRounds - 1; ++round) {
        SCOPED_TRACE(testing::Message() << "round " << round);
        const BufferDesc desc = next();
        void* addr = nullptr;
        std::shared_ptr<gpucoll::IpcMapping> pin;
        ASSERT_EQ(cache.resolve(dev_.get(), 0, child_, desc, &addr, &pin), gpucoll::kSuccess)
            << gpucoll::last_error();
        EXPECT_EQ(pin->size(), 100u);
        EXPECT_EQ(pin->resident(), page);
        EXPECT_EQ(cache.mapped_bytes(), std::min<size_t>(round + 1, 3) * page);
        pin.reset();
        ack();
    }
    (void)next();  // the last round's buffer: not imported
    ack();
    EXPECT_EQ(finish(), 0) << "the peer failed";
}

}  // namespace
