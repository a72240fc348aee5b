// ModelSource over a GGUF file: tensors are used in place in the mapping.
#include <algorithm>
#include <map>

#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/model/model_source.hpp"

namespace dwell {

namespace {

class GgufSource final : public ModelSource {
public:
    explicit GgufSource(GgufFile file) : file_(std::move(file)), meta_(gguf_metadata(file_)) {
        for (const auto& t : file_.tensors()) {
            SourceTensor s;
            s.name = t.name;
            s.dtype = t.dtype;
            s.type_name = ggml_type_name(t.ggml_type);
            s.n_dims = t.n_dims;
            std::copy(t.ne, t.ne + DWELL_MAX_DIMS, s.ne);
            s.data = t.data;
            s.size = t.size;
            s.stored.offset = t.offset;
            s.stored.bytes = t.size;
            tensors_.push_back(std::move(s));
        }
        for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
    }

    const std::filesystem::path& path() const override { return file_.path(); }
    std::string format() const override { return "GGUF"; }
    const dwell_metadata& metadata() const override { return meta_; }
    const SourceTensor* find_tensor(std::string_view name) const override {
        auto it = index_.find(name);
        return it == index_.end() ? nullptr : &tensors_[it->second];
    }
    const std::vector<SourceTensor>& tensors() const override { return tensors_; }
    Tokenizer tokenizer() const override { return Tokenizer::from_gguf(file_); }
    std::string file_problem(bool check_file) const override {
        return file_.mapping_problem(check_file);
    }

private:
    GgufFile file_;
    dwell_metadata meta_;  // points at file_, which never moves again
    std::vector<SourceTensor> tensors_;
    std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace

std::unique_ptr<ModelSource> make_gguf_source(GgufFile file) {
    return std::make_unique<GgufSource>(std::move(file));
}

}  // namespace dwell
