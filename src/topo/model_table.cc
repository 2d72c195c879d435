// model_table.cc - the cost model's selection table for a node communicator.
#include "topo/model_table.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "common/immortal.h"
namespace gpucoll::topo {

std::string base_preset(const std::string& backend) {
    return backend == "emu" ? "emu" : "h100-nvswitch";
}

bool resolve_model(const std::string& spec, const std::string& backend, ModelParams* out,
                   std::string* error) {
    if (preset(spec, out)) return true;
    ModelParams p;
    preset(base_preset(backend), &p);
    std::string why;
    if (!load_params(spec, &p, &why)) {
        std::string names;
        for (const std::string& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
        *error =
            "'" + spec + "' is neither a preset (" + names + ") nor a readable params file: " + why;
        return false;
    }
    *out = std::move(p);
    return true;
}

const ModelParams* load_model(const std::string& spec, const std::string& backend,
                              std::string* error) {
    // Entries are never removed: the pointers stay valid for the process.
    static std::mutex lock;
    // Never destroyed: a communicator created at exit still finds it.
    static Immortal<std::map<std::pair<std::string, std::string>,
                             std::pair<std::unique_ptr<ModelParams>, std::string>>>
        known;
    std::lock_guard<std::mutex> guard(lock);
    auto& entry = (*known)[{spec, backend}];
    if (entry.first == nullptr && entry.second.empty()) {
        auto p = std::make_unique<ModelParams>();
        if (resolve_model(spec, backend, p.get(), &entry.second)) entry.first = std::move(p);
    }
    *error = entry.second;
    return entry.first.get();
}

uint64_t model_fingerprint(const ModelParams& params) {
    const std::string text = format_params(params);
    uint64_t h = 1469598103934665603ull;  // FNV-1a
    for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
    return h == 0 ? 1 : h;
}

int ModelTable::size_class(size_t bytes) {
    // ceil(log2(bytes)): the smallest b with 2^b >= bytes (a lookup per call).
    const int b = bytes <= 1 ? 0 : static_cast<int>(std::bit_width(bytes - 1));
    return std::min(b, kClasses - 1);
}

void ModelTable::build(const ModelParams& params, int size, size_t scratch_slot_bytes) {
    table_.assign(GPUCOLL_COLL_REDUCE_LOCAL, {});
    for (int c = 0; c < GPUCOLL_COLL_REDUCE_LOCAL; ++c) {
        const auto coll = static_cast<gpucoll_coll_t>(c);
        for (int b = 0; b < kClasses; ++b) {
            const size_t bytes = size_t{1} << b;
            gpucoll_algorithm_t pick = GPUCOLL_ALGO_AUTO;
            for (const Choice& choice : rank_algorithms(coll, bytes, Shape{size, 1}, params)) {
                // rank_algorithms lists what the one-node table has (and
                // staged); one-shot also needs the call to fit its slot.
                const gpucoll_algorithm_t a = choice.algo;
                // Not finite: sorted last, and no prediction (size thresholds).
                if (!std::isfinite(choice.prediction.time_us)) break;
                if (a == GPUCOLL_ALGO_ONE_SHOT && bytes > scratch_slot_bytes) continue;
                pick = a;
                break;
            }
            table_[static_cast<size_t>(c)][static_cast<size_t>(b)] = pick;
        }
    }
}

gpucoll_algorithm_t ModelTable::lookup(gpucoll_coll_t coll, size_t bytes) const {
    if (coll < 0 || static_cast<size_t>(coll) >= table_.size()) return GPUCOLL_ALGO_AUTO;
    return table_[static_cast<size_t>(coll)][static_cast<size_t>(size_class(bytes))];
}

std::string ModelTable::summary() const {
    auto human = [](int b) {
        static const char* const units[] = {"", "K", "M", "G", "T"};
        return std::to_string(size_t{1} << (b % 10)) + units[b / 10];
    };
    std::string out;
    for (size_t c = 0; c < table_.size(); ++c) {
        out +=
            (c ? "; " : "") + std::string(gpucoll_coll_name(static_cast<gpucoll_coll_t>(c))) + ":";
        for (int b = 0; b < kClasses; ++b) {
            const gpucoll_algorithm_t a = table_[c][static_cast<size_t>(b)];
            if (b + 1 < kClasses && table_[c][static_cast<size_t>(b + 1)] == a) continue;
            out += std::string(" ") + gpucoll_algorithm_name(a) +
                   (b + 1 < kClasses ? " to " + human(b) + "," : " above");
        }
    }
    return out;
}

}  // namespace gpucoll::topo
