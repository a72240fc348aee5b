#include "dwell/core/kv/kv_prefix_cache.hpp"

#include <xxhash.h>

#include <algorithm>
#include <string>

namespace dwell {

KvPrefixCache::KvPrefixCache(KvPagePool& pages, MemoryPool& memory, int64_t max_pages)
    : pages_(pages), memory_(memory), max_pages_(max_pages) {}

KvPrefixCache::~KvPrefixCache() {
    std::lock_guard lock(mutex_);
    while (!entries_.empty()) drop(entries_.begin());
}

uint64_t KvPrefixCache::root_key(uint64_t model_id, dwell_dtype dtype, int64_t rows_per_page) {
    const uint64_t fields[3] = {model_id, static_cast<uint64_t>(dtype),
                                static_cast<uint64_t>(rows_per_page)};
    return XXH3_64bits(fields, sizeof fields);
}

uint64_t KvPrefixCache::child_key(uint64_t parent, std::span<const int32_t> tokens) {
    return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

std::optional<KvPrefixCache::Hit> KvPrefixCache::find(uint64_t parent,
                                                      std::span<const int32_t> tokens) {
    if (max_pages_ == 0) return std::nullopt;
    const uint64_t key = child_key(parent, tokens);
    std::lock_guard lock(mutex_);
    auto it = entries_.find(key);
    // The tokens and the parent are compared too: a key collision must never
    // hand out another prompt's cache, nor another scope's (sessions'
    // prefix_scope lives in the root key).
    if (it == entries_.end() || it->second.parent != parent ||
        !std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin(),
                    it->second.tokens.end())) {
        return std::nullopt;
    }
    Entry& e = it->second;
    lru_.splice(lru_.begin(), lru_, e.lru);
    for (int32_t p : e.page_ids) pages_.retain(p);
    return Hit{key, e.page_ids, e.logits, e.state};
}

void KvPrefixCache::insert(uint64_t model_id, uint64_t parent, std::span<const int32_t> tokens,
                           std::span<const int32_t> page_ids, std::span<const float> logits,
                           std::span<const float> state) {
    if (max_pages_ == 0) return;
    // Logits and states are optimisations; without room they are skipped.
    // (Not charge(): its reclaimer would take this cache's lock.)
    const auto keep = [&](std::vector<float>& into, std::span<const float> values) {
        if (into.empty() && !values.empty() &&
            memory_.try_charge(values.size_bytes(), MemoryUse::Kv)) {
            into.assign(values.begin(), values.end());
        }
    };
    const uint64_t key = child_key(parent, tokens);
    std::lock_guard lock(mutex_);
    if (auto it = entries_.find(key); it != entries_.end()) {
        Entry& e = it->second;
        lru_.splice(lru_.begin(), lru_, e.lru);
        if (e.parent == parent &&
            std::equal(tokens.begin(), tokens.end(), e.tokens.begin(), e.tokens.end())) {
            keep(e.logits, logits);
            keep(e.state, state);
        }
        return;
    }
    const auto n = static_cast<int64_t>(page_ids.size());
    if (pages_held_ + n > max_pages_ && reclaim_locked(pages_held_ + n - max_pages_) == 0 &&
        pages_held_ + n > max_pages_) {
        return;  // full of pages sessions still use
    }
    Entry e;
    e.model_id = model_id;
    e.parent = parent;
    e.tokens.assign(tokens.begin(), tokens.end());
    e.page_ids.assign(page_ids.begin(), page_ids.end());
    keep(e.logits, logits);
    keep(e.state, state);
    for (int32_t p : e.page_ids) pages_.retain(p);
    pages_held_ += n;
    lru_.push_front(key);
    e.lru = lru_.begin();
    entries_.emplace(key, std::move(e));
}

void KvPrefixCache::drop(std::unordered_map<uint64_t, Entry>::iterator it) {
    Entry& e = it->second;
    for (int32_t p : e.page_ids) pages_.release(p);
    if (!e.logits.empty()) memory_.uncharge(e.logits.size() * sizeof(float), MemoryUse::Kv);
    if (!e.state.empty()) memory_.uncharge(e.state.size() * sizeof(float), MemoryUse::Kv);
    pages_held_ -= static_cast<int64_t>(e.page_ids.size());
    lru_.erase(e.lru);
    entries_.erase(it);
}

int64_t KvPrefixCache::reclaim_locked(int64_t pages) {
    int64_t freed = 0;
    // Oldest first; an entry whose pages a session still holds stays.
    const std::vector<uint64_t> oldest_first(lru_.rbegin(), lru_.rend());
    for (uint64_t key : oldest_first) {
        if (freed >= pages) break;
        auto it = entries_.find(key);
        const auto& ids = it->second.page_ids;
        if (!std::all_of(ids.begin(), ids.end(),
                         [&](int32_t p) { return pages_.refcount(p) == 1; })) {
            continue;
        }
        freed += static_cast<int64_t>(ids.size());
        drop(it);
    }
    return freed;
}

int64_t KvPrefixCache::reclaim(int64_t pages) {
    std::lock_guard lock(mutex_);
    return reclaim_locked(pages);
}

void KvPrefixCache::forget_model(uint64_t model_id) {
    std::lock_guard lock(mutex_);
    std::vector<uint64_t> doomed;
    for (const auto& [key, e] : entries_) {
        if (e.model_id == model_id) doomed.push_back(key);
    }
    for (uint64_t key : doomed) drop(entries_.find(key));
}

int64_t KvPrefixCache::entries() const {
    std::lock_guard lock(mutex_);
    return static_cast<int64_t>(entries_.size());
}

int64_t KvPrefixCache::pages_held() const {
    std::lock_guard lock(mutex_);
    return pages_held_;
}

}  // namespace dwell
