#include "family_reference.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

namespace dwell::test {

FamilyReference read_family_reference(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path.string() + ": cannot open");
    FamilyReference r;
    std::string line;
    while (std::getline(in, line) && line != "data f32le") {
        std::istringstream fields(line);
        std::string key;
        fields >> key;
        const auto ids = [&] {
            return std::vector<int32_t>(std::istream_iterator<int32_t>(fields),
                                        std::istream_iterator<int32_t>());
        };
        if (key == "sha256") fields >> r.sha256;
        if (key == "n_pos") fields >> r.n_pos;
        if (key == "n_vocab") fields >> r.n_vocab;
        if (key == "tokens") r.tokens = ids();
        if (key == "greedy") r.greedy = ids();
        if (key == "greedy_min_margin") fields >> r.greedy_min_margin;
    }
    if (line != "data f32le" || r.n_pos <= 0 || r.n_vocab <= 0 ||
        static_cast<int64_t>(r.tokens.size()) != r.n_pos)
        throw std::runtime_error(path.string() + ": malformed header");
    r.logits.resize(static_cast<size_t>(r.n_pos * r.n_vocab));
    in.read(reinterpret_cast<char*>(r.logits.data()),
            static_cast<std::streamsize>(r.logits.size() * sizeof(float)));
    if (in.gcount() != static_cast<std::streamsize>(r.logits.size() * sizeof(float)))
        throw std::runtime_error(path.string() + ": truncated logits");
    return r;
}

std::filesystem::path family_reference_path(const std::string& family) {
    return std::filesystem::path(DWELL_TEST_SOURCE_DIR) / "tests" / "data" / "families" /
           (family + ".logits");
}

double logits_cosine(const float* a, const float* b, int64_t n) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < n; ++i) {
        ab += double(a[i]) * b[i];
        aa += double(a[i]) * a[i];
        bb += double(b[i]) * b[i];
    }
    return ab / std::sqrt(aa * bb);
}

int32_t greedy_argmax(std::span<const float> logits) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

}  // namespace dwell::test
