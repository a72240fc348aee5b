// Full KV pages of earlier prompts, found again by their tokens: a session
// whose prompt starts with tokens some session already computed adopts
// those pages (shared, copy on write) instead of computing them — across
// sessions and across requests within one process.
//
// An entry is one logical page: the rows_per_page tokens it holds, the key
// of the entry before it (so a key names the whole prefix), its page ids
// for every layer, and, when its last token ended a prompt, the logits
// after that token (so an identical prompt needs no compute at all), and,
// for a hybrid model, the carried recurrent state after its last token
// when the publishing session had it there (a batch ended at the page's
// end): a hybrid session adopts pages only up to one that has it. The
// cache holds one reference on each page; entries whose pages nobody else
// holds are dropped least recently used first when the page pool runs
// short or the cache grows past its limit.
//
// Thread-safety: all members may be called from any thread.
// Ownership: holds page references in the KvPagePool, which must outlive it.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "dwell/core/base/export.hpp"
#include "dwell/core/kv/kv_page_pool.hpp"
#include "dwell/tensor.h"

namespace dwell {

class DWELL_CORE_API KvPrefixCache {
public:
    // max_pages: the most pages the cache keeps for itself (0 disables it).
    KvPrefixCache(KvPagePool& pages, MemoryPool& memory, int64_t max_pages);
    ~KvPrefixCache();
    KvPrefixCache(const KvPrefixCache&) = delete;
    KvPrefixCache& operator=(const KvPrefixCache&) = delete;

    // The key of the empty prefix of a KV layout: a model, a dtype and a
    // page size in rows.
    static uint64_t root_key(uint64_t model_id, dwell_dtype dtype, int64_t rows_per_page);
    // The key of the prefix `parent` followed by `tokens`.
    static uint64_t child_key(uint64_t parent, std::span<const int32_t> tokens);

    struct Hit {
        uint64_t key = 0;
        std::vector<int32_t> page_ids;  // retained for the caller: adopt or release them
        std::vector<float> logits;      // empty unless the page ended a prompt
        std::vector<float> state;       // the recurrent state after the page, or empty
    };
    // The page that follows `parent` with exactly `tokens`, if cached.
    std::optional<Hit> find(uint64_t parent, std::span<const int32_t> tokens);
    // Publishes a computed page (retains its pages). Keeps an existing
    // entry's pages; adds logits and state to it if it had none.
    void insert(uint64_t model_id, uint64_t parent, std::span<const int32_t> tokens,
                std::span<const int32_t> page_ids, std::span<const float> logits,
                std::span<const float> state = {});
    // Drops least recently used entries that only the cache holds until
    // `pages` pages were freed or none is left; returns the pages freed.
    int64_t reclaim(int64_t pages);
    // Drops every entry of a model (it is being unloaded).
    void forget_model(uint64_t model_id);

    int64_t entries() const;
    int64_t pages_held() const;

private:
    struct Entry {
        uint64_t model_id = 0;  // to forget a model's entries
        uint64_t parent = 0;    // key of the entry before (or the root)
        std::vector<int32_t> tokens;
        std::vector<int32_t> page_ids;
        std::vector<float> logits;
        std::vector<float> state;
        std::list<uint64_t>::iterator lru;  // position in lru_ (front: most recent)
    };
    void drop(std::unordered_map<uint64_t, Entry>::iterator it);  // caller locks
    int64_t reclaim_locked(int64_t pages);

    KvPagePool& pages_;
    MemoryPool& memory_;
    const int64_t max_pages_;
    mutable std::mutex mutex_;
    std::unordered_map<uint64_t, Entry> entries_;
    std::list<uint64_t> lru_;
    int64_t pages_held_ = 0;
};

}  // namespace dwell
