// test_stream.cc - stream-ordered communicators (src/stream/) without
// mpirun: the chunk schedule, calls across many chunks (slot reuse) on
// forked ranks of the emulated device, a peer process that ends while calls
// are in flight (every survivor's stream passes, the failure is reported),
// and the refusal of a communicator the component did not register.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fork_bootstrap.h"
#include "gpucoll.h"
#include "stream/stream_comm.h"

namespace {

using gpucoll::stream::staged_bytes;
using gpucoll::stream::step_of;

TEST(StreamSchedule, BytesAndSteps) {
    gpucoll_call_t c{};
    static char result[256];
    c.coll = GPUCOLL_COLL_ALLGATHER;
    c.count = 10;
    c.recvbuf = result;
    EXPECT_EQ(staged_bytes(c, 4, 4), 40u);  // each rank stages its own block
    // In place: rank 2's block of the result is its input.
    auto s = step_of(c, 2, 4, 4, 16, 1);
    EXPECT_EQ(s.begin, 16u);
    EXPECT_EQ(s.end, 32u);
    EXPECT_EQ(s.in, result + 80 + 16);
    c.coll = GPUCOLL_COLL_BCAST;
    c.root = 1;
    EXPECT_EQ(step_of(c, 0, 4, 4, 16, 0).in_bytes, 0u);  // only the root copies in
    EXPECT_EQ(step_of(c, 1, 4, 4, 16, 2).in_bytes, 8u);  // the last, short chunk
    c.coll = GPUCOLL_COLL_REDUCE_SCATTER;
    const size_t counts[3] = {5, 0, 7};
    c.counts = counts;
    EXPECT_EQ(staged_bytes(c, 3, 8), 96u);
    c.coll = GPUCOLL_COLL_REDUCE_SCATTER_BLOCK;
    c.count = 3;
    EXPECT_EQ(staged_bytes(c, 3, 8), 72u);
}

// An in-place allreduce of count ints at d.
gpucoll_call_t int_allreduce(void* d, size_t count) {
    gpucoll_call_t c{};
    c.coll = GPUCOLL_COLL_ALLREDUCE;
    c.recvbuf = d;
    c.count = count;
    c.dtype = GPUCOLL_INT32;
    c.op = GPUCOLL_OP_SUM;
    c.eligible = 1;
    return c;
}

void* make_stream() {
    void* s = nullptr;
    return gpucoll_stream_create(&s) == 0 ? s : nullptr;
}

// Allreduce and bcast over 50000 ints in 4 KiB chunks (49 steps each: the
// four slots reused a dozen times), several calls in flight.
int run_many_chunks(int rank, gpucoll_bootstrap_t& bs) {
    if (gpucoll_init_backend("emu") != 0) return 99;
    void* stream = make_stream();
    gpucoll_stream_comm_t* sc = nullptr;
    if (stream == nullptr || gpucoll_stream_comm_create(&bs, 0, stream, &sc) != 0) return 98;
    const size_t n = 50000;
    std::vector<int32_t> host(n), out(n), out2(n);
    for (size_t k = 0; k < n; ++k) host[k] = static_cast<int32_t>(rank * 100 + k % 97);
    void* d = nullptr;
    void* e = nullptr;
    if (gpucoll_malloc_device(&d, n * 4) != 0 || gpucoll_malloc_device(&e, n * 4) != 0) return 97;
    gpucoll_memcpy_async(d, host.data(), n * 4, stream);
    gpucoll_call_t c = int_allreduce(d, n);
    if (gpucoll_stream_comm_enqueue(sc, &c) != 0) return 96;
    gpucoll_memcpy_async(out.data(), d, n * 4, stream);
    gpucoll_call_t b{};
    b.coll = GPUCOLL_COLL_BCAST;
    b.recvbuf = e;
    b.count = n * 4;
    b.dtype = GPUCOLL_BYTE;
    b.root = 2;
    b.eligible = 1;
    gpucoll_memcpy_async(e, host.data(), n * 4, stream);
    if (gpucoll_stream_comm_enqueue(sc, &b) != 0) return 95;
    gpucoll_memcpy_async(out2.data(), e, n * 4, stream);
    if (gpucoll_stream_synchronize(stream) != 0) return 94;
    for (size_t k = 0; k < n; ++k) {
        int32_t want = 0;
        for (int r = 0; r < bs.size; ++r) want += static_cast<int32_t>(r * 100 + k % 97);
        if (out[k] != want) return 10;
        if (out2[k] != static_cast<int32_t>(200 + k % 97)) return 11;
    }
    gpucoll_stream_comm_destroy(sc);
    gpucoll_free_device(d);
    gpucoll_free_device(e);
    gpucoll_stream_destroy(stream);
    return 0;
}

TEST(StreamComm, ManyChunksOnForkedRanks) {
    setenv("GPUCOLL_STREAM_CHUNK_BYTES", "4096", 1);
    EXPECT_EQ(ForkGroup::run(3, 60, run_many_chunks), 0);
    unsetenv("GPUCOLL_STREAM_CHUNK_BYTES");
}

// Rank 2 ends right after setup; ranks 0 and 1 enqueue an allreduce that
// waits on it: their streams must pass (the monitor releases the waits)
// and the failure must be reported, naming the rank.
int run_peer_ends(int rank, gpucoll_bootstrap_t& bs) {
    if (gpucoll_init_backend("emu") != 0) return 99;
    void* stream = make_stream();
    gpucoll_stream_comm_t* sc = nullptr;
    if (stream == nullptr || gpucoll_stream_comm_create(&bs, 0, stream, &sc) != 0) return 98;
    if (rank == 2) _exit(0);  // ends with calls to come: nothing torn down
    void* d = nullptr;
    if (gpucoll_malloc_device(&d, 4096) != 0) return 97;
    gpucoll_call_t c = int_allreduce(d, 1024);
    if (gpucoll_stream_comm_enqueue(sc, &c) != 0) return 96;
    (void)gpucoll_stream_synchronize(stream);  // returns: nobody hangs
    int status = 0;
    for (int t = 0; t < 500 && status == 0; ++t) {
        status = gpucoll_stream_comm_status(sc);
        if (status == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (status == 0) return 10;
    if (std::strstr(gpucoll_last_error(), "rank 2") == nullptr) return 11;
    if (gpucoll_stream_comm_enqueue(sc, &c) == 0) return 12;  // refused from now on
    gpucoll_stream_comm_destroy(sc);
    return 0;
}

TEST(StreamComm, PeerThatEndsIsReportedWithoutHang) {
    EXPECT_EQ(ForkGroup::run(3, 60, run_peer_ends), 0);
}

// A key the component never registered: made, but every call refused.
int run_unregistered(int, gpucoll_bootstrap_t& bs) {
    if (gpucoll_init_backend("emu") != 0) return 99;
    void* stream = make_stream();
    gpucoll_stream_comm_t* sc = nullptr;
    if (stream == nullptr || gpucoll_stream_comm_create(&bs, 777, stream, &sc) != 0) return 98;
    void* d = nullptr;
    if (gpucoll_malloc_device(&d, 64) != 0) return 97;
    gpucoll_call_t c = int_allreduce(d, 4);
    if (gpucoll_stream_comm_enqueue(sc, &c) != GPUCOLL_ERR_UNSUPPORTED) return 10;
    if (std::strstr(gpucoll_last_error(), "does not accelerate") == nullptr) return 11;
    gpucoll_stream_comm_destroy(sc);
    return 0;
}

TEST(StreamComm, UnregisteredCommunicatorRefuses) {
    EXPECT_EQ(ForkGroup::run(2, 60, run_unregistered), 0);
}

}  // namespace
