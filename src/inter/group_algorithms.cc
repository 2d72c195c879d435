#include "inter/group_algorithms.h"

#include "device/reduce_ops.h"
#include "inter/bcast_plan.h"

namespace gpucoll::inter {

const char* inter_algorithm_name(InterAlgorithm a) {
    switch (a) {
        case InterAlgorithm::Ring:
            return "ring";
        case InterAlgorithm::Direct:
            return "direct";
        default:
            return "auto";
    }
}

namespace {

size_t block_begin(size_t count, int n, int c) {
    return count * static_cast<size_t>(c) / static_cast<size_t>(n);
}

Status allreduce_ring(Group& g, uint64_t seq, char* buf, size_t count, gpucoll_dtype_t dtype,
                      gpucoll_op_t op) {
    const int n = g.size(), me = g.me();
    const int left = (me - 1 + n) % n, right = (me + 1) % n;
    const size_t elem = reduce::dtype_size(dtype);
    auto at = [&](int c) { return buf + block_begin(count, n, c) * elem; };
    auto len = [&](int c) {
        return (block_begin(count, n, c + 1) - block_begin(count, n, c)) * elem;
    };
    uint32_t step = 0;
    for (int s = 0; s < n - 1; ++s, ++step) {  // reduce-scatter
        const int out = ((me - s) % n + n) % n, in = ((me - s - 1) % n + n) % n;
        GPUCOLL_TRY(g.transfer(seq, step, {{right, at(out), len(out)}},
                               {{left, at(in), len(in), true}}, dtype, op));
    }
    for (int s = 0; s < n - 1; ++s, ++step) {  // allgather of the reduced blocks
        const int out = ((me + 1 - s) % n + n) % n, in = ((me - s) % n + n) % n;
        GPUCOLL_TRY(g.transfer(seq, step, {{right, at(out), len(out)}},
                               {{left, at(in), len(in), false}}, dtype, op));
    }
    return kSuccess;
}

Status allreduce_direct(Group& g, uint64_t seq, char* buf, size_t count, gpucoll_dtype_t dtype,
                        gpucoll_op_t op) {
    const int n = g.size(), me = g.me();
    const size_t bytes = count * reduce::dtype_size(dtype);
    char* all = nullptr;  // every member's buffer, in member order
    GPUCOLL_TRY(g.scratch(bytes * static_cast<size_t>(n), &all));
    std::vector<SendOp> sends;
    std::vector<RecvOp> recvs;
    std::vector<const void*> srcs;
    for (int p = 0; p < n; ++p) {
        srcs.push_back(all + static_cast<size_t>(p) * bytes);
        if (p == me) continue;
        sends.push_back({p, buf, bytes});
        recvs.push_back({p, all + static_cast<size_t>(p) * bytes, bytes});
    }
    GPUCOLL_TRY(g.device()->memcpy(all + static_cast<size_t>(me) * bytes, buf, bytes, nullptr));
    GPUCOLL_TRY(g.transfer(seq, 0, sends, recvs, dtype, op));
    return g.device()->reduce(buf, srcs.data(), n, count, dtype, op, nullptr);
}

}  // namespace

bool ring_fits(int members) { return 2 * (static_cast<int64_t>(members) - 1) < kDataSteps; }

Status group_allreduce(Group& g, uint64_t seq, void* buf, size_t count, gpucoll_dtype_t dtype,
                       gpucoll_op_t op, InterAlgorithm algo) {
    if (g.size() == 1 || count == 0) return kSuccess;
    char* b = static_cast<char*>(buf);
    if (algo == InterAlgorithm::Direct || count < static_cast<size_t>(g.size()) ||
        !ring_fits(g.size()))
        return allreduce_direct(g, seq, b, count, dtype, op);
    return allreduce_ring(g, seq, b, count, dtype, op);
}

namespace {

// Members in order root, root+1, ...: member rel receives segment k from
// rel-1 in round k and sends segment k-1 to rel+1 in the same round (one
// transfer: both directions at once).
Status bcast_chain(Group& g, uint64_t seq, char* buf, size_t bytes, int root,
                   const BcastPlan& plan) {
    const int n = g.size(), rel = (g.me() - root + n) % n;
    const int prev = (g.me() - 1 + n) % n, next = (g.me() + 1) % n;
    const bool has_prev = rel != 0, has_next = rel != n - 1;
    auto seg = [&](size_t k) {
        const size_t at = k * plan.segment;
        return std::make_pair(buf + at, std::min(plan.segment, bytes - at));
    };
    std::vector<SendOp> sends;
    std::vector<RecvOp> recvs;
    const size_t rounds = plan.segments + (has_prev ? 1 : 0);
    for (size_t k = 0; k < rounds; ++k) {
        sends.clear();
        recvs.clear();
        if (has_prev && k < plan.segments) {
            const auto [at, len] = seg(k);
            recvs.push_back({prev, at, len});
        }
        const bool forwards = has_next && (!has_prev || k >= 1);
        const size_t out = has_prev ? k - 1 : k;  // the segment this round forwards
        if (forwards && out < plan.segments) {
            const auto [at, len] = seg(out);
            sends.push_back({next, at, len});
        }
        GPUCOLL_TRY(g.transfer(seq, 0, sends, recvs, GPUCOLL_BYTE, GPUCOLL_OP_BOR));
    }
    return kSuccess;
}

}  // namespace

Status group_bcast(Group& g, uint64_t seq, void* buf, size_t bytes, int root) {
    const int n = g.size(), rel = (g.me() - root + n) % n;
    if (n == 1 || bytes == 0) return kSuccess;
    const BcastPlan plan = bcast_plan(n, bytes, g.chunk_bytes(), g.slots(), g.bcast_mode());
    if (plan.chain) return bcast_chain(g, seq, static_cast<char*>(buf), bytes, root, plan);
    int mask = 1;
    for (; mask < n; mask <<= 1) {  // receive from the parent
        if ((rel & mask) != 0) {
            const int parent = (rel - mask + root) % n;
            GPUCOLL_TRY(
                g.transfer(seq, 0, {}, {{parent, buf, bytes}}, GPUCOLL_BYTE, GPUCOLL_OP_BOR));
            break;
        }
    }
    std::vector<SendOp> sends;  // then to the children
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (rel + mask < n) sends.push_back({(rel + mask + root) % n, buf, bytes});
    return g.transfer(seq, 0, sends, {}, GPUCOLL_BYTE, GPUCOLL_OP_BOR);
}

Status group_reduce_scatter(Group& g, uint64_t seq, void* buf,
                            const std::vector<std::vector<Piece>>& pieces, gpucoll_dtype_t dtype,
                            gpucoll_op_t op) {
    const int n = g.size(), me = g.me();
    if (n == 1) return kSuccess;
    const size_t elem = reduce::dtype_size(dtype);
    char* b = static_cast<char*>(buf);
    size_t mine = 0;  // bytes of my pieces
    for (const Piece& x : pieces[me]) mine += x.bytes;
    // Every member's contribution to my pieces, region p of scratch for
    // member p (mine too, copied), reduced in member order into buf.
    char* scratch = nullptr;
    GPUCOLL_TRY(g.scratch(std::max<size_t>(mine, 1) * static_cast<size_t>(n), &scratch));
    auto region = [&](int p) { return scratch + static_cast<size_t>(p) * mine; };
    std::vector<SendOp> sends;
    std::vector<RecvOp> recvs;
    for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        for (const Piece& x : pieces[p]) sends.push_back({p, b + x.offset, x.bytes});
        size_t at = 0;
        for (const Piece& x : pieces[me]) {
            recvs.push_back({p, region(p) + at, x.bytes});
            at += x.bytes;
        }
    }
    GPUCOLL_TRY(g.transfer(seq, 0, sends, recvs, dtype, op));
    std::vector<const void*> srcs(static_cast<size_t>(n));
    size_t at = 0;
    for (const Piece& x : pieces[me]) {
        GPUCOLL_TRY(g.device()->memcpy(region(me) + at, b + x.offset, x.bytes, nullptr));
        for (int p = 0; p < n; ++p) srcs[p] = region(p) + at;
        GPUCOLL_TRY(
            g.device()->reduce(b + x.offset, srcs.data(), n, x.bytes / elem, dtype, op, nullptr));
        at += x.bytes;
    }
    return kSuccess;
}

Status group_allgather(Group& g, uint64_t seq, void* buf,
                       const std::vector<std::vector<Piece>>& pieces) {
    const int n = g.size(), me = g.me();
    char* b = static_cast<char*>(buf);
    std::vector<SendOp> sends;
    std::vector<RecvOp> recvs;
    for (int p = 0; p < n; ++p) {
        if (p == me) continue;
        for (const Piece& x : pieces[me]) sends.push_back({p, b + x.offset, x.bytes});
        for (const Piece& x : pieces[p]) recvs.push_back({p, b + x.offset, x.bytes});
    }
    return g.transfer(seq, 0, sends, recvs, GPUCOLL_BYTE, GPUCOLL_OP_BOR);
}

}  // namespace gpucoll::inter
