// test_selection_table.cc - the measured selection table
// (src/core/selection_table.h): parsing, errors with line numbers,
// overlapping ranges, unknown and inapplicable algorithms, the most
// specific rules for a communicator, the built-in cuda table, and what
// select_algorithm makes of the rules.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/selection_table.h"
#include "intra/algorithms.h"

namespace gpucoll {
namespace {

struct Parsed {
    bool ok = false;
    SelectionTable table;
    std::string error;
    std::vector<std::string> warnings;
};

Parsed parse(const std::string& text) {
    Parsed p;
    p.ok = SelectionTable::parse(text, "t.txt", &p.table, &p.error, &p.warnings);
    return p;
}

TEST(SelectionTable, ReadsRulesAndLooksThemUp) {
    const Parsed p = parse(
        "# a comment\n"
        "backend emu\n"
        "allreduce 2 shared-mps 0 2K staged   # to 2 KiB\n"
        "allreduce 2 shared-mps 2049 64KiB one_kernel\n"
        "allreduce 2 shared-mps 65537 inf ring\n"
        "\n"
        "bcast * * 0 inf direct\n");
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_TRUE(p.warnings.empty());
    EXPECT_EQ(p.table.backend(), "emu");
    const SelectionRules r = p.table.rules(2, GpuSharing::SharedMps);
    EXPECT_FALSE(r.empty());
    EXPECT_EQ(r.lookup(GPUCOLL_COLL_ALLREDUCE, 1), GPUCOLL_ALGO_STAGED);
    EXPECT_EQ(r.lookup(GPUCOLL_COLL_ALLREDUCE, 2048), GPUCOLL_ALGO_STAGED);
    EXPECT_EQ(r.lookup(GPUCOLL_COLL_ALLREDUCE, 2049), GPUCOLL_ALGO_ONE_KERNEL);
    EXPECT_EQ(r.lookup(GPUCOLL_COLL_ALLREDUCE, 65536), GPUCOLL_ALGO_ONE_KERNEL);
    EXPECT_EQ(r.lookup(GPUCOLL_COLL_ALLREDUCE, size_t{1} << 40), GPUCOLL_ALGO_RING);
    EXPECT_EQ(r.lookup(GPUCOLL_COLL_BCAST, 12345), GPUCOLL_ALGO_DIRECT);
    EXPECT_EQ(r.lookup(GPUCOLL_COLL_ALLGATHER, 8), GPUCOLL_ALGO_AUTO);  // no rule: fallback
    EXPECT_TRUE(r.names(GPUCOLL_COLL_ALLREDUCE, GPUCOLL_ALGO_ONE_KERNEL));
    EXPECT_FALSE(r.names(GPUCOLL_COLL_ALLREDUCE, GPUCOLL_ALGO_TWO_SHOT));
    EXPECT_EQ(r.summary(GPUCOLL_COLL_ALLREDUCE), "staged to 2K, one_kernel to 64K, ring above");
    // Another sharing mode or rank count: only the wildcard rules.
    const SelectionRules other = p.table.rules(4, GpuSharing::GpuPerRank);
    EXPECT_EQ(other.lookup(GPUCOLL_COLL_ALLREDUCE, 8), GPUCOLL_ALGO_AUTO);
    EXPECT_EQ(other.lookup(GPUCOLL_COLL_BCAST, 8), GPUCOLL_ALGO_DIRECT);
}

TEST(SelectionTable, TheMostSpecificKeyWinsAndGapsFallBack) {
    const Parsed p = parse(
        "allreduce * * 0 inf two_shot\n"
        "allreduce 4 * 0 inf ring\n"
        "allreduce 4 shared-no-mps 0 1M staged\n"  // a gap above 1M: fallback, not ring
        "allreduce * shared-mps 0 inf one_shot\n");
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_EQ(p.table.rules(4, GpuSharing::SharedNoMps).lookup(GPUCOLL_COLL_ALLREDUCE, 8),
              GPUCOLL_ALGO_STAGED);
    EXPECT_EQ(p.table.rules(4, GpuSharing::SharedNoMps).lookup(GPUCOLL_COLL_ALLREDUCE, 2 << 20),
              GPUCOLL_ALGO_AUTO);
    EXPECT_EQ(p.table.rules(4, GpuSharing::SharedMps).lookup(GPUCOLL_COLL_ALLREDUCE, 8),
              GPUCOLL_ALGO_RING);
    EXPECT_EQ(p.table.rules(3, GpuSharing::SharedMps).lookup(GPUCOLL_COLL_ALLREDUCE, 8),
              GPUCOLL_ALGO_ONE_SHOT);
    EXPECT_EQ(p.table.rules(3, GpuSharing::GpuPerRank).lookup(GPUCOLL_COLL_ALLREDUCE, 8),
              GPUCOLL_ALGO_TWO_SHOT);
    EXPECT_EQ(p.table.rules(4, GpuSharing::SharedNoMps).summary(GPUCOLL_COLL_ALLREDUCE),
              "staged to 1M, fallback above");
}

TEST(SelectionTable, ErrorsNameTheLine) {
    struct Case {
        const char* text;
        const char* want;  // in the error
    };
    const Case cases[] = {
        {"allreduce 2 shared-mps 0 inf\n", "t.txt:1: expected 6 fields"},
        {"# c\nallgatherv 2 * 0 inf direct\n", "t.txt:2: unknown collective 'allgatherv'"},
        {"allreduce 2 mps 0 inf ring\n", "t.txt:1: unknown sharing mode 'mps'"},
        {"allreduce 2 * 0 4X ring\n", "t.txt:1: sizes '0' '4X' do not read as bytes"},
        {"allreduce 2 * inf 4 ring\n", "t.txt:1: sizes"},
        {"allreduce 2 * 8K 4K ring\n", "t.txt:1: the range 8K to 4K is empty"},
        {"allreduce two * 0 inf ring\n", "t.txt:1: ranks 'two'"},
        {"allreduce 2,0 * 0 inf ring\n", "t.txt:1: ranks '2,0'"},
        {"\n\nallreduce 2 * 0 inf fastest\n",
         "t.txt:3: unknown algorithm 'fastest' (staged, auto, or one of allreduce's: one_shot, "
         "two_shot, ring, one_kernel)"},
        {"backend gpu\n", "t.txt:1: 'backend' takes one word"},
        {"backend emu\nbackend cuda\n", "t.txt:2: a second 'backend' line"},
        {"allreduce 2 * 0 4K staged\nallreduce 2,4 * 4K 1M two_shot\n",
         "t.txt:2: allreduce 2 *: 4K to 1M overlaps line 1"},
        {"bcast * shared-mps 0 inf direct\nbcast * shared-mps 1M 2M chain\n",
         "t.txt:2: bcast * shared-mps: 1M to 2M overlaps line 1"},
    };
    for (const Case& c : cases) {
        const Parsed p = parse(c.text);
        EXPECT_FALSE(p.ok) << c.text;
        EXPECT_NE(p.error.find(c.want), std::string::npos) << p.error << "\n  want: " << c.want;
    }
    // Not overlapping: another rank count, another sharing mode, adjacent ranges.
    const Parsed ok = parse(
        "allreduce 2 * 0 4K staged\nallreduce 4 * 0 4K ring\n"
        "allreduce 2 shared-mps 0 4K ring\nallreduce 2 * 4097 inf ring\n");
    EXPECT_TRUE(ok.ok) << ok.error;
}

TEST(SelectionTable, AnAlgorithmTheCollectiveLacksIsLeftOutWithAWarning) {
    const Parsed p = parse(
        "bcast 2 * 0 1M two_shot\n"
        "bcast 2 * 1M+1 inf direct\n");
    EXPECT_FALSE(p.ok);  // 1M+1 does not read
    const Parsed q = parse(
        "bcast 2 * 0 1M two_shot\n"
        "bcast 2 * 1048577 inf direct\n"
        "allreduce 2 * 0 inf hier\n"
        "reduce 2 * 0 inf auto\n");
    ASSERT_TRUE(q.ok) << q.error;
    ASSERT_EQ(q.warnings.size(), 2u);
    EXPECT_NE(q.warnings[0].find("t.txt:1: bcast has no algorithm 'two_shot' on one node "
                                 "(direct, chain); rule left out"),
              std::string::npos)
        << q.warnings[0];
    EXPECT_NE(q.warnings[1].find("t.txt:3: allreduce has no algorithm 'hier'"), std::string::npos)
        << q.warnings[1];
    const SelectionRules r = q.table.rules(2, GpuSharing::SharedMps);
    EXPECT_EQ(r.lookup(GPUCOLL_COLL_BCAST, 8), GPUCOLL_ALGO_AUTO);  // falls back
    EXPECT_EQ(r.lookup(GPUCOLL_COLL_BCAST, 2 << 20), GPUCOLL_ALGO_DIRECT);
    EXPECT_EQ(r.lookup(GPUCOLL_COLL_ALLREDUCE, 8), GPUCOLL_ALGO_AUTO);
    EXPECT_EQ(r.lookup(GPUCOLL_COLL_REDUCE, 8), GPUCOLL_ALGO_AUTO);
}

TEST(SelectionTable, FingerprintFollowsTheRulesNotTheText) {
    const Parsed a = parse("allreduce 2 * 0 4K staged\n");
    const Parsed b = parse("# the same rule\nallreduce   2  *  0  4096  staged  # comment\n");
    const Parsed c = parse("allreduce 2 * 0 4K one_shot\n");
    const Parsed d = parse("allreduce 4 * 0 4K staged\n");
    ASSERT_TRUE(a.ok && b.ok && c.ok && d.ok);
    EXPECT_NE(a.table.fingerprint(), 0u);
    EXPECT_EQ(a.table.fingerprint(), b.table.fingerprint());
    EXPECT_NE(a.table.fingerprint(), c.table.fingerprint());
    EXPECT_NE(a.table.fingerprint(), d.table.fingerprint());
}

TEST(SelectionTable, SharingModes) {
    EXPECT_EQ(gpu_sharing_of(false, false), GpuSharing::GpuPerRank);
    EXPECT_EQ(gpu_sharing_of(false, true), GpuSharing::GpuPerRank);
    EXPECT_EQ(gpu_sharing_of(true, true), GpuSharing::SharedMps);
    EXPECT_EQ(gpu_sharing_of(true, false), GpuSharing::SharedNoMps);
    EXPECT_STREQ(gpu_sharing_name(GpuSharing::SharedNoMps), "shared-no-mps");
}

TEST(SelectionTable, BuiltInTables) {
    EXPECT_STREQ(builtin_selection_text("emu"), "");
    const Parsed p = parse(builtin_selection_text("cuda"));
    ASSERT_TRUE(p.ok) << p.error;
    EXPECT_TRUE(p.warnings.empty());
    EXPECT_EQ(p.table.backend(), "cuda");
    // Measured: 2 and 4 ranks sharing one GPU, with and without MPS.
    for (int n : {2, 4})
        for (GpuSharing s : {GpuSharing::SharedMps, GpuSharing::SharedNoMps}) {
            const SelectionRules r = p.table.rules(n, s);
            for (gpucoll_coll_t c : {GPUCOLL_COLL_ALLREDUCE, GPUCOLL_COLL_BCAST,
                                     GPUCOLL_COLL_ALLGATHER, GPUCOLL_COLL_REDUCE_SCATTER_BLOCK})
                for (size_t bytes = 1; bytes <= size_t{1} << 34; bytes *= 2)
                    EXPECT_NE(r.lookup(c, bytes), GPUCOLL_ALGO_AUTO)
                        << n << " " << gpu_sharing_name(s) << " " << c << " " << bytes;
            EXPECT_EQ(r.lookup(GPUCOLL_COLL_ALLREDUCE, 8), GPUCOLL_ALGO_STAGED);
            EXPECT_EQ(r.lookup(GPUCOLL_COLL_REDUCE, 8), GPUCOLL_ALGO_AUTO);  // not measured
        }
    // Not measured: one GPU per rank, 3 ranks.
    EXPECT_TRUE(p.table.rules(2, GpuSharing::GpuPerRank).empty());
    EXPECT_TRUE(p.table.rules(3, GpuSharing::SharedMps).empty());
}

TEST(SelectionTable, LoadingAFile) {
    char path[] = "/tmp/gpucoll-selection-XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    {
        std::ofstream f(path);
        f << "backend cuda\nallreduce 2 * 0 inf ring\n";
    }
    std::string error;
    std::vector<std::string> warnings;
    bool builtin = true, first = false;
    // Another backend: not used, said.
    EXPECT_EQ(load_selection_table(path, "emu", &error, &warnings, &builtin, &first), nullptr);
    EXPECT_FALSE(builtin);
    EXPECT_TRUE(first);
    EXPECT_NE(error.find("the table is for the cuda backend, this process runs emu"),
              std::string::npos)
        << error;
    const SelectionTable* t =
        load_selection_table(path, "cuda", &error, &warnings, &builtin, &first);
    ASSERT_NE(t, nullptr) << error;
    EXPECT_TRUE(first);
    EXPECT_EQ(load_selection_table(path, "cuda", &error, &warnings, &builtin, &first), t);
    EXPECT_FALSE(first);  // once per process
    std::remove(path);
    EXPECT_EQ(load_selection_table("none", "cuda", &error, &warnings, &builtin, &first), nullptr);
    EXPECT_TRUE(error.empty());
    EXPECT_EQ(load_selection_table(nullptr, "emu", &error, &warnings, &builtin, &first), nullptr);
    EXPECT_TRUE(builtin);
    EXPECT_TRUE(error.empty());
    EXPECT_NE(load_selection_table("auto", "cuda", &error, &warnings, &builtin, &first), nullptr);
    EXPECT_EQ(
        load_selection_table("/nonexistent/table", "emu", &error, &warnings, &builtin, &first),
        nullptr);
    EXPECT_NE(error.find("/nonexistent/table"), std::string::npos) << error;
}

TEST(SelectionTable, SelectAlgorithmFollowsTheRulesAfterAForcedOne) {
    const Parsed p = parse(
        "allreduce 2 * 0 1K staged\n"
        "allreduce 2 * 1025 64K one_shot\n"
        "allreduce 2 * 65537 inf ring\n"
        "bcast 2 * 0 inf chain\n");
    ASSERT_TRUE(p.ok) << p.error;
    const SelectionRules rules = p.table.rules(2, GpuSharing::SharedMps);
    gpucoll_comm_config_t config;
    gpucoll_comm_config_init(&config);
    config.one_shot_max_bytes = 16 << 10;
    auto pick = [&](gpucoll_coll_t coll, size_t count, size_t slot) {
        gpucoll_call_t call{};
        call.coll = coll;
        call.count = count;
        call.dtype = GPUCOLL_FLOAT;
        const char* why = "";
        return intra::select_algorithm(call, 2, 4, config, slot, false, &why, nullptr, &rules);
    };
    EXPECT_EQ(pick(GPUCOLL_COLL_ALLREDUCE, 2, 16 << 10), GPUCOLL_ALGO_STAGED);
    EXPECT_EQ(pick(GPUCOLL_COLL_ALLREDUCE, 1024, 16 << 10), GPUCOLL_ALGO_ONE_SHOT);
    // One-shot beyond its scratch slot: the size thresholds instead.
    EXPECT_EQ(pick(GPUCOLL_COLL_ALLREDUCE, 8192, 16 << 10), GPUCOLL_ALGO_TWO_SHOT);
    EXPECT_EQ(pick(GPUCOLL_COLL_ALLREDUCE, 1 << 20, 16 << 10), GPUCOLL_ALGO_RING);
    EXPECT_EQ(pick(GPUCOLL_COLL_BCAST, 1, 16 << 10), GPUCOLL_ALGO_CHAIN);
    EXPECT_EQ(pick(GPUCOLL_COLL_ALLGATHER, 1, 16 << 10), GPUCOLL_ALGO_DIRECT);  // no rule
    config.algorithm[GPUCOLL_COLL_ALLREDUCE] = GPUCOLL_ALGO_TWO_SHOT;           // forced wins
    EXPECT_EQ(pick(GPUCOLL_COLL_ALLREDUCE, 2, 16 << 10), GPUCOLL_ALGO_TWO_SHOT);
}

}  // namespace
}  // namespace gpucoll
