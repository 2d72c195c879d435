// selection_table.cc - reading a measured selection table and resolving it
// for a node communicator (selection_table.h).
#include "core/selection_table.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <tuple>
#include <utility>

#include "common/immortal.h"
#include "common/text_file.h"

namespace gpucoll {

namespace {

constexpr size_t kInf = std::numeric_limits<size_t>::max();

constexpr const char* kSharingNames[] = {"*", "gpu-per-rank", "shared-mps", "shared-no-mps"};

bool is_between_nodes(gpucoll_algorithm_t a) {
    return a == GPUCOLL_ALGO_HIER || a == GPUCOLL_ALGO_LEADER;
}

// "16K" -> 16384; "inf" (to_inf only) -> kInf.
bool parse_bytes(const std::string& word, bool allow_inf, size_t* out) {
    if (allow_inf && (word == "inf" || word == "*")) {
        *out = kInf;
        return true;
    }
    if (word.empty() || !std::isdigit(static_cast<unsigned char>(word[0]))) return false;
    errno = 0;
    char* end = nullptr;
    const unsigned long long v = std::strtoull(word.c_str(), &end, 10);
    if (errno != 0) return false;
    std::string suffix(end);
    if (suffix.size() == 3 && (suffix.substr(1) == "iB" || suffix.substr(1) == "ib"))
        suffix.resize(1);  // KiB, MiB, ...
    int shift = 0;
    if (suffix.empty() || suffix == "B")
        shift = 0;
    else if (suffix == "K" || suffix == "k")
        shift = 10;
    else if (suffix == "M")
        shift = 20;
    else if (suffix == "G")
        shift = 30;
    else if (suffix == "T")
        shift = 40;
    else
        return false;
    if (v > (kInf >> shift)) return false;
    *out = static_cast<size_t>(v) << shift;
    return true;
}

std::string human(size_t bytes) {
    static const char* const units[] = {"", "K", "M", "G", "T"};
    int u = 0;
    while (u < 4 && bytes != 0 && bytes % 1024 == 0) bytes /= 1024, ++u;
    return std::to_string(bytes) + units[u];
}

std::string algorithms_of(gpucoll_coll_t coll) {
    std::string out;
    for (int a = GPUCOLL_ALGO_ONE_SHOT; a < GPUCOLL_ALGO_COUNT; ++a) {
        const auto algo = static_cast<gpucoll_algorithm_t>(a);
        if (!is_between_nodes(algo) && gpucoll_algorithm_valid(coll, algo) != 0)
            out += (out.empty() ? "" : ", ") + std::string(gpucoll_algorithm_name(algo));
    }
    return out;
}

uint64_t fnv1a(const std::string& text) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    return h == 0 ? 1 : h;
}

}  // namespace

const char* gpu_sharing_name(GpuSharing s) {
    const int i = static_cast<int>(s);
    return i >= 0 && i < 4 ? kSharingNames[i] : "unknown";
}

// ---------------------------------------------------------------- rules

bool SelectionRules::empty() const {
    for (const auto& r : ranges_)
        if (!r.empty()) return false;
    return true;
}

gpucoll_algorithm_t SelectionRules::lookup(gpucoll_coll_t coll, size_t bytes) const {
    if (coll < 0 || static_cast<size_t>(coll) >= ranges_.size()) return GPUCOLL_ALGO_AUTO;
    for (const SelectionRange& r : ranges_[static_cast<size_t>(coll)]) {
        if (bytes < r.from) break;  // sorted
        if (bytes <= r.to) return r.algo;
    }
    return GPUCOLL_ALGO_AUTO;
}

bool SelectionRules::names(gpucoll_coll_t coll, gpucoll_algorithm_t algo) const {
    if (coll < 0 || static_cast<size_t>(coll) >= ranges_.size()) return false;
    for (const SelectionRange& r : ranges_[static_cast<size_t>(coll)])
        if (r.algo == algo) return true;
    return false;
}

std::string SelectionRules::summary(gpucoll_coll_t coll) const {
    if (coll < 0 || static_cast<size_t>(coll) >= ranges_.size()) return {};
    std::string out;
    size_t next = 0;
    for (const SelectionRange& r : ranges_[static_cast<size_t>(coll)]) {
        if (r.from > next)
            out += (out.empty() ? "" : ", ") + std::string("fallback to ") + human(r.from - 1);
        out += (out.empty() ? "" : ", ") + std::string(gpucoll_algorithm_name(r.algo)) +
               (r.to == kInf ? " above" : " to " + human(r.to));
        next = r.to == kInf ? kInf : r.to + 1;
    }
    if (!out.empty() && next != kInf) out += ", fallback above";
    return out;
}

// ---------------------------------------------------------------- table

bool SelectionTable::parse(const std::string& text, const std::string& origin, SelectionTable* out,
                           std::string* error, std::vector<std::string>* warnings) {
    SelectionTable t;
    t.origin_ = origin;
    std::istringstream in(text);
    std::string line;
    int number = 0;
    auto fail = [&](const std::string& what) {
        *error = origin + ":" + std::to_string(number) + ": " + what;
        return false;
    };
    while (std::getline(in, line)) {
        ++number;
        if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        std::istringstream words(line);
        std::vector<std::string> w;
        for (std::string word; words >> word;) w.push_back(word);
        if (w.empty()) continue;
        if (w[0] == "backend") {
            if (w.size() != 2 || (w[1] != "emu" && w[1] != "cuda"))
                return fail("'backend' takes one word, emu or cuda");
            if (!t.backend_.empty() && t.backend_ != w[1])
                return fail("a second 'backend' line names another backend");
            t.backend_ = w[1];
            continue;
        }
        if (w.size() != 6)
            return fail("expected 6 fields (collective ranks sharing from to algorithm), found " +
                        std::to_string(w.size()));
        Rule base{};
        int c = 0;
        for (; c < GPUCOLL_COLL_REDUCE_LOCAL; ++c)
            if (w[0] == gpucoll_coll_name(static_cast<gpucoll_coll_t>(c))) break;
        if (c == GPUCOLL_COLL_REDUCE_LOCAL)
            return fail("unknown collective '" + w[0] +
                        "' (allreduce, bcast, allgather, reduce_scatter, reduce_scatter_block, "
                        "reduce)");
        base.coll = static_cast<gpucoll_coll_t>(c);
        int s = 0;
        for (; s < 4; ++s)
            if (w[2] == kSharingNames[s]) break;
        if (s == 4)
            return fail("unknown sharing mode '" + w[2] +
                        "' (gpu-per-rank, shared-mps, shared-no-mps, or *)");
        base.sharing = static_cast<GpuSharing>(s);
        if (!parse_bytes(w[3], false, &base.range.from) || !parse_bytes(w[4], true, &base.range.to))
            return fail("sizes '" + w[3] + "' '" + w[4] +
                        "' do not read as bytes (a number with an optional K, M, G or T suffix; "
                        "'inf' as the upper end)");
        if (base.range.from > base.range.to)
            return fail("the range " + w[3] + " to " + w[4] + " is empty (from above to)");
        const gpucoll_algorithm_t algo = gpucoll_algorithm_from_name(w[5].c_str());
        if (algo == GPUCOLL_ALGO_COUNT)
            return fail("unknown algorithm '" + w[5] + "' (staged, auto, or one of " +
                        std::string(gpucoll_coll_name(base.coll)) +
                        "'s: " + algorithms_of(base.coll) + ")");
        base.range.algo = algo;
        base.range.line = number;
        std::vector<int> counts;
        if (w[1] == "*") {
            counts.push_back(0);
        } else {
            std::istringstream list(w[1]);
            for (std::string item; std::getline(list, item, ',');) {
                char* end = nullptr;
                errno = 0;
                const long n = std::strtol(item.c_str(), &end, 10);
                if (item.empty() || *end != '\0' || errno != 0 || n < 1 || n > 1 << 20)
                    return fail("ranks '" + w[1] +
                                "' is neither a rank count, a comma list of them, nor *");
                counts.push_back(static_cast<int>(n));
            }
        }
        if (algo != GPUCOLL_ALGO_AUTO && algo != GPUCOLL_ALGO_STAGED &&
            (is_between_nodes(algo) || gpucoll_algorithm_valid(base.coll, algo) == 0)) {
            if (warnings != nullptr)
                warnings->push_back(origin + ":" + std::to_string(number) + ": " + w[0] +
                                    " has no algorithm '" + w[5] + "' on one node (" +
                                    algorithms_of(base.coll) +
                                    "); rule left out, its sizes fall back");
            continue;
        }
        for (int n : counts) {
            Rule r = base;
            r.ranks = n;
            for (const Rule& o : t.rules_)
                if (o.coll == r.coll && o.ranks == r.ranks && o.sharing == r.sharing &&
                    o.range.from <= r.range.to && r.range.from <= o.range.to)
                    return fail(w[0] + " " + (n == 0 ? "*" : std::to_string(n)) + " " + w[2] +
                                ": " + human(r.range.from) + " to " +
                                (r.range.to == kInf ? "inf" : human(r.range.to)) +
                                " overlaps line " + std::to_string(o.range.line) +
                                " (a size must have one rule)");
            t.rules_.push_back(r);
        }
    }
    std::string canonical = "backend " + t.backend_ + "\n";
    for (const Rule& r : t.rules_)
        canonical += std::to_string(r.coll) + " " + std::to_string(r.ranks) + " " +
                     std::to_string(static_cast<int>(r.sharing)) + " " +
                     std::to_string(r.range.from) + " " + std::to_string(r.range.to) + " " +
                     std::to_string(r.range.algo) + "\n";
    t.fingerprint_ = fnv1a(canonical);
    *out = std::move(t);
    return true;
}

SelectionRules SelectionTable::rules(int ranks, GpuSharing sharing) const {
    SelectionRules out;
    const std::pair<int, GpuSharing> keys[] = {
        {ranks, sharing}, {ranks, GpuSharing::Any}, {0, sharing}, {0, GpuSharing::Any}};
    for (int c = 0; c < GPUCOLL_COLL_REDUCE_LOCAL; ++c) {
        auto& ranges = out.ranges_[static_cast<size_t>(c)];
        for (const auto& [n, s] : keys) {
            for (const Rule& r : rules_)
                if (r.coll == c && r.ranks == n && r.sharing == s) ranges.push_back(r.range);
            if (!ranges.empty()) break;
        }
        std::sort(ranges.begin(), ranges.end(),
                  [](const SelectionRange& a, const SelectionRange& b) { return a.from < b.from; });
    }
    return out;
}

// ---------------------------------------------------------------- loading

const SelectionTable* load_selection_table(const char* spec, const std::string& backend,
                                           std::string* error, std::vector<std::string>* warnings,
                                           bool* builtin, bool* first) {
    const std::string name = spec == nullptr ? "" : spec;
    error->clear();
    warnings->clear();
    *first = false;
    *builtin = name.empty() || name == "auto";
    if (name == "none") return nullptr;
    struct Entry {
        std::unique_ptr<SelectionTable> table;
        std::string error;
        std::vector<std::string> warnings;
    };
    // Entries are never removed: the pointers stay valid for the process.
    static std::mutex lock;
    static Immortal<std::map<std::pair<std::string, std::string>, std::unique_ptr<Entry>>> known;
    std::lock_guard<std::mutex> guard(lock);
    auto& slot = (*known)[{*builtin ? std::string() : name, backend}];
    if (slot == nullptr) {
        *first = true;
        slot = std::make_unique<Entry>();
        std::string text, origin = *builtin ? "built-in " + backend + " table" : name;
        bool ok = true;
        if (*builtin)
            text = builtin_selection_text(backend);
        else
            ok = read_text_file(name, &text, &slot->error);
        if (ok && !(*builtin && text.empty())) {
            auto t = std::make_unique<SelectionTable>();
            if (SelectionTable::parse(text, origin, t.get(), &slot->error, &slot->warnings)) {
                if (!t->backend().empty() && t->backend() != backend)
                    slot->error = origin + ": the table is for the " + t->backend() +
                                  " backend, this process runs " + backend +
                                  " (measure this backend: contrib/selection-table.py)";
                else
                    slot->table = std::move(t);
            }
        }
    }
    *error = slot->error;
    *warnings = slot->warnings;
    return slot->table.get();
}

}  // namespace gpucoll
