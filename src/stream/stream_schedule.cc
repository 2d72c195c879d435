// stream_schedule.cc - what each rank stages, chunk by chunk, in a
// stream-ordered call (stream_comm.h): the bytes every rank moves through
// its slots (equal on every rank), and this rank's part of chunk j.
#include <algorithm>

#include "intra/algorithms.h"
#include "stream/stream_comm.h"

namespace gpucoll::stream {

size_t staged_bytes(const gpucoll_call_t& call, int size, size_t elem) {
    switch (call.coll) {
        case GPUCOLL_COLL_REDUCE_SCATTER_BLOCK:
            return static_cast<size_t>(size) * call.count * elem;
        case GPUCOLL_COLL_REDUCE_SCATTER: {
            size_t total = 0;
            for (int p = 0; p < size; ++p) total += intra::rs_count(call, p);
            return total * elem;
        }
        default:  // allreduce, reduce, bcast; allgather: each rank's block
            return call.count * elem;
    }
}

Step step_of(const gpucoll_call_t& call, int rank, int size, size_t elem, size_t chunk,
             uint64_t j) {
    Step s;
    const uint64_t total = staged_bytes(call, size, elem);
    s.begin = j * chunk;
    s.end = std::min<uint64_t>(total, s.begin + chunk);
    const char* input =
        static_cast<const char*>(call.sendbuf != nullptr ? call.sendbuf : call.recvbuf);
    switch (call.coll) {
        case GPUCOLL_COLL_BCAST:
            if (rank != call.root) return s;  // reads the root's slot only
            input = static_cast<const char*>(call.recvbuf);
            break;
        case GPUCOLL_COLL_ALLGATHER:
            if (call.sendbuf == nullptr)  // in place: this rank's block of the result
                input = static_cast<const char*>(call.recvbuf) +
                        static_cast<size_t>(rank) * call.count * elem;
            break;
        default:
            break;
    }
    s.in = input + s.begin;
    s.in_bytes = s.end - s.begin;
    return s;
}

}  // namespace gpucoll::stream
