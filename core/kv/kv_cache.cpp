#include "dwell/core/kv/kv_cache.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/core/graph/graph.hpp"

namespace dwell {

namespace {

bool is_kv_dtype(dwell_dtype t) {
    return t == DWELL_F16 || t == DWELL_F32 || t == DWELL_Q8_0 || t == DWELL_FP8_E4M3;
}

}  // namespace

KvCache::KvCache(KvPagePool& pages, int32_t n_layer, int64_t kv_width, int64_t n_ctx,
                 dwell_dtype dtype)
    : pages_(&pages),
      n_layer_(n_layer),
      kv_width_(kv_width),
      n_ctx_(n_ctx),
      dtype_(dtype),
      row_bytes_(0),
      rows_per_page_(0),
      n_used_(n_layer),
      tables_(static_cast<size_t>(n_layer)),
      table_tensors_(static_cast<size_t>(n_layer)) {
    if (!is_kv_dtype(dtype)) {
        throw Error(DWELL_ERR_UNSUPPORTED, std::string("KV cache type ") + dwell_dtype_name(dtype) +
                                               " is not supported: use f16, q8_0, fp8_e4m3 or f32");
    }
    if (dtype == DWELL_Q8_0 && kv_width % DWELL_QK8_0 != 0) {
        throw Error(DWELL_ERR_UNSUPPORTED,
                    "KV cache type q8_0 needs rows of a multiple of 32 values; this model's are " +
                        std::to_string(kv_width) + ": use f16 or fp8_e4m3");
    }
    row_bytes_ = dwell_row_bytes(dtype, kv_width);
    rows_per_page_ = static_cast<int64_t>(pages.page_bytes() / row_bytes_);
    if (rows_per_page_ == 0) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "a KV row of this model takes " + format_bytes(row_bytes_) +
                        ", more than a memory page of " + format_bytes(pages.page_bytes()) +
                        ": raise [memory] page_kb in the manifest");
    }
    const int64_t ne[3] = {kv_width, rows_per_page_, std::max<int64_t>(1, pages.capacity())};
    space_ = make_tensor(dtype, 3, ne);
    space_.nb[2] = pages.page_bytes();
    space_.nb[3] = space_.nb[2] * static_cast<uint64_t>(ne[2]);
    space_.data = pages.base();
    refresh_tensors();
}

KvCache::KvCache(KvCache&& other) noexcept
    : pages_(other.pages_),
      n_layer_(other.n_layer_),
      kv_width_(other.kv_width_),
      n_ctx_(other.n_ctx_),
      dtype_(other.dtype_),
      row_bytes_(other.row_bytes_),
      rows_per_page_(other.rows_per_page_),
      n_logical_(std::exchange(other.n_logical_, 0)),
      used_(other.used_),
      n_used_(other.n_used_),
      tables_(std::move(other.tables_)),
      space_(other.space_),
      table_tensors_(std::move(other.table_tensors_)) {
    other.tables_.assign(static_cast<size_t>(other.n_layer_), {});
    other.table_tensors_.assign(static_cast<size_t>(other.n_layer_), dwell_tensor{});
    refresh_tensors();
}

KvCache::~KvCache() {
    release_all();
}

void KvCache::release_all() noexcept {
    for (auto& table : tables_) {
        for (int32_t page : table) {
            if (page == kNoPage) continue;
            try {
                pages_->release(page);
            } catch (...) {
                // A page this cache does not hold is a bug elsewhere; a
                // destructor cannot report it.
            }
        }
        table.clear();
    }
    n_logical_ = 0;
}

KvCache KvCache::fork() const {
    KvCache copy(*pages_, n_layer_, kv_width_, n_ctx_, dtype_);
    if (!used_.empty()) copy.use_layers(used_);
    for (int64_t i = 0; i < n_logical_; ++i) copy.adopt_page(page_ids(i));
    return copy;
}

void KvCache::use_layers(std::vector<bool> used) {
    if (n_logical_ != 0 || used.size() != static_cast<size_t>(n_layer_)) {
        throw Error(DWELL_ERR_INTERNAL, "KV cache: the layers with KV are set before any page, " +
                                            std::to_string(used.size()) + " for " +
                                            std::to_string(n_layer_) + " layers");
    }
    n_used_ = static_cast<int32_t>(std::count(used.begin(), used.end(), true));
    used_ = std::move(used);
}

void KvCache::refresh_tensors() {
    for (int32_t l = 0; l < n_layer_; ++l) {
        const int64_t ne[2] = {2, std::max<int64_t>(1, n_logical_)};
        dwell_tensor t = make_tensor(DWELL_I32, 2, ne);
        t.data = tables_[static_cast<size_t>(l)].data();
        table_tensors_[static_cast<size_t>(l)] = t;
    }
}

void KvCache::prepare_write(int64_t begin, int64_t end) {
    if (begin < 0 || end > n_ctx_ || begin >= end) {
        if (begin == end) return;
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "KV cache: positions " + std::to_string(begin) + ".." + std::to_string(end) +
                        " are outside the context of " + std::to_string(n_ctx_));
    }
    const int64_t first = begin / rows_per_page_;
    const int64_t last = (end - 1) / rows_per_page_;
    const std::string what = "the KV cache (" + std::to_string(end) + " tokens)";
    // Copy on write: shared pages of the range get a private copy.
    for (int64_t i = first; i <= std::min(last, n_logical_ - 1); ++i) {
        for (int32_t l = 0; l < n_layer_; ++l) {
            if (!uses_layer(l)) continue;
            for (int which = 0; which < 2; ++which) {
                int32_t& page = tables_[static_cast<size_t>(l)][static_cast<size_t>(2 * i + which)];
                if (pages_->refcount(page) <= 1) continue;
                const int32_t own = pages_->allocate(what);
                std::memcpy(pages_->data(own), pages_->data(page), pages_->page_bytes());
                pages_->release(std::exchange(page, own));
            }
        }
    }
    // New pages past the end, one logical page (all layers) at a time so a
    // failure leaves whole logical pages only.
    std::vector<int32_t> ids;
    while (n_logical_ <= last) {
        ids.clear();
        try {
            for (int32_t l = 0; l < n_layer_; ++l) {
                ids.push_back(uses_layer(l) ? pages_->allocate(what) : kNoPage);
                ids.push_back(uses_layer(l) ? pages_->allocate(what) : kNoPage);
            }
        } catch (...) {
            for (int32_t page : ids)
                if (page != kNoPage) pages_->release(page);
            refresh_tensors();
            throw;
        }
        append_page(ids);
    }
    refresh_tensors();
}

void KvCache::append_page(std::span<const int32_t> ids) {
    for (int32_t l = 0; l < n_layer_; ++l) {
        auto& table = tables_[static_cast<size_t>(l)];
        table.push_back(ids[static_cast<size_t>(2 * l)]);
        table.push_back(ids[static_cast<size_t>(2 * l + 1)]);
    }
    ++n_logical_;
}

void KvCache::truncate(int64_t n_rows) {
    const int64_t keep = n_rows <= 0 ? 0 : (n_rows - 1) / rows_per_page_ + 1;
    if (keep >= n_logical_) return;
    for (auto& table : tables_) {
        for (size_t i = static_cast<size_t>(2 * keep); i < table.size(); ++i) {
            if (table[i] != kNoPage) pages_->release(table[i]);
        }
        table.resize(static_cast<size_t>(2 * keep));
    }
    n_logical_ = keep;
    refresh_tensors();
}

void KvCache::adopt_page(std::span<const int32_t> ids) {
    if (ids.size() != static_cast<size_t>(n_layer_) * 2) {
        throw Error(DWELL_ERR_INTERNAL, "KV cache: adopt_page got " + std::to_string(ids.size()) +
                                            " page ids for " + std::to_string(n_layer_) +
                                            " layers");
    }
    if ((n_logical_ + 1) * rows_per_page_ > n_ctx_ + rows_per_page_ - 1) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    "KV cache: no room for another page in a context of " + std::to_string(n_ctx_));
    }
    for (int32_t l = 0; l < n_layer_; ++l) {
        const int32_t k = ids[static_cast<size_t>(2 * l)], v = ids[static_cast<size_t>(2 * l + 1)];
        if ((k == kNoPage || v == kNoPage) != !uses_layer(l)) {
            throw Error(DWELL_ERR_INTERNAL, "KV cache: adopt_page got a page of layer " +
                                                std::to_string(l) +
                                                " that does not match the layers with KV");
        }
    }
    for (int32_t page : ids)
        if (page != kNoPage) pages_->retain(page);
    append_page(ids);
    refresh_tensors();
}

std::vector<int32_t> KvCache::page_ids(int64_t logical) const {
    std::vector<int32_t> ids;
    ids.reserve(static_cast<size_t>(n_layer_) * 2);
    for (const auto& table : tables_) {
        ids.push_back(table.at(static_cast<size_t>(2 * logical)));
        ids.push_back(table.at(static_cast<size_t>(2 * logical + 1)));
    }
    return ids;
}

const dwell_tensor* KvCache::tensor(int32_t layer, int32_t which) const {
    if (layer < 0 || layer >= n_layer_ || which < 0 || which > 1 || !uses_layer(layer))
        return nullptr;
    return which == 0 ? &space_ : &table_tensors_[static_cast<size_t>(layer)];
}

unsigned char* KvCache::row(int32_t layer, int32_t which, int64_t pos) const {
    const auto& table = tables_.at(static_cast<size_t>(layer));
    const int32_t page = table.at(static_cast<size_t>(2 * (pos / rows_per_page_) + which));
    if (page == kNoPage)
        throw Error(DWELL_ERR_INTERNAL, "KV cache: layer " + std::to_string(layer) + " has no KV");
    return pages_->data(page) + static_cast<size_t>(pos % rows_per_page_) * row_bytes_;
}

uint64_t KvCache::bytes() const {
    return static_cast<uint64_t>(pages_held()) * pages_->page_bytes();
}

}  // namespace dwell
