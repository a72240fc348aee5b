#include "dwell/core/model/expert_cache.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "dwell/core/base/error.hpp"
#include "dwell/core/platform/posix_file.hpp"

namespace dwell {

namespace {

constexpr uint64_t kIoAlign = 4096;
constexpr size_t kReadLogMax = 4096;

uint64_t align_up(uint64_t v, uint64_t a) {
    return (v + a - 1) / a * a;
}

using Clock = std::chrono::steady_clock;

// Bytes of expert e's slice of a [K, N, E] tensor.
uint64_t slice_bytes(const SourceTensor& t) {
    return t.size / static_cast<uint64_t>(std::max<int64_t>(t.ne[2], 1));
}

// The part of a slot for tensor `which` of every layer: room for the
// largest slice read from a block-aligned file offset.
uint64_t part_bytes(const std::vector<ExpertLayerTensors>& layers, int which) {
    uint64_t m = 0;
    for (const ExpertLayerTensors& l : layers) {
        const SourceTensor& t = *l.tensors[static_cast<size_t>(which)];
        const uint64_t s = slice_bytes(t);
        for (int64_t e = 0; e < t.ne[2]; ++e) {
            const uint64_t lead = (t.stored.offset + static_cast<uint64_t>(e) * s) % kIoAlign;
            m = std::max(m, align_up(lead + s, kIoAlign));
        }
    }
    return m;
}

}  // namespace

struct ExpertCache::Impl {
    enum class State { Absent, Queued, Loading, Resident };
    struct Entry {
        State state = State::Absent;
        int32_t slot = -1;
        int32_t refs = 0;
        bool pending = false;  // prefetched, not consumed by its layer yet
        bool demand = false;   // a computing thread waits for it
        uint64_t last_used = 0;
        std::string error;
    };

    std::string path;
    std::vector<ExpertLayerTensors> layers;
    int64_t n_expert;
    FileDescriptor fd;
    bool direct = false;
    std::array<uint64_t, 3> part_off{};
    uint64_t stride = 0;
    PoolBuffer region;
    std::vector<int32_t> owner;  // slot -> entry, -1 free
    std::vector<Entry> entries;  // li * n_expert + e

    mutable std::mutex mutex;
    std::condition_variable cv;
    std::deque<int32_t> queue;  // entries to read: demand at the front
    std::deque<std::string> read_log;
    uint64_t tick = 0;
    bool stop = false;
    ExpertCacheStats stats;
    std::vector<std::thread> threads;

    Impl(const std::string& p, std::vector<ExpertLayerTensors> ls, int64_t ne, int64_t n_slots,
         int32_t readers, MemoryPool& pool)
        : path(p), layers(std::move(ls)), n_expert(ne) {
        uint64_t at = 0;
        for (int w = 0; w < 3; ++w) {
            part_off[static_cast<size_t>(w)] = at;
            at += part_bytes(layers, w);
        }
        stride = at;
        region = pool.allocate(static_cast<size_t>(stride * static_cast<uint64_t>(n_slots)),
                               "the expert cache of " + path, MemoryUse::Weights);
        owner.assign(static_cast<size_t>(n_slots), -1);
        entries.resize(layers.size() * static_cast<size_t>(n_expert));
        open_file();
        for (int32_t i = 0; i < std::max(readers, 1); ++i)
            threads.emplace_back([this] { reader_loop(); });
    }
    ~Impl() {
        {
            std::lock_guard lock(mutex);
            stop = true;
        }
        cv.notify_all();
        for (auto& t : threads) t.join();
    }

    // O_DIRECT where one aligned read of the first slice works, else the
    // page cache (dropped after each read); decided once, so the readers
    // share an fd that never changes.
    void open_file() {
        int f = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
        if (f >= 0) {
            uint8_t* probe = static_cast<uint8_t*>(region.data());
            const SourceTensor& t = *layers.front().tensors[0];
            const off_t at = static_cast<off_t>(t.stored.offset / kIoAlign * kIoAlign);
            if (::pread(f, probe, kIoAlign, at) < 0) {
                ::close(f);
                f = -1;
            } else {
                direct = true;
            }
        }
        if (f < 0) f = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (f < 0) throw_io(path, "cannot open for streaming experts", errno);
        fd = FileDescriptor(f);
    }

    Entry& entry(int32_t li, int32_t e) {
        return entries[static_cast<size_t>(li) * static_cast<size_t>(n_expert) +
                       static_cast<size_t>(e)];
    }
    int32_t id_of(int32_t li, int32_t e) const { return li * static_cast<int32_t>(n_expert) + e; }
    std::string name_of(int32_t id) const {
        return std::to_string(id / n_expert) + ":" + std::to_string(id % n_expert);
    }

    // The slot for a new read, under the lock; -1 when every slot is
    // protected. A victim whose read is queued is cancelled; one being read
    // is waited for.
    int32_t pick_victim(std::unique_lock<std::mutex>& lock) {
        for (;;) {
            int32_t best = -1;
            for (size_t s = 0; s < owner.size(); ++s) {
                const int32_t o = owner[s];
                if (o < 0) return static_cast<int32_t>(s);
                const Entry& v = entries[static_cast<size_t>(o)];
                if (v.refs > 0 || v.pending) continue;
                if (best < 0 ||
                    v.last_used <
                        entries[static_cast<size_t>(owner[static_cast<size_t>(best)])].last_used)
                    best = static_cast<int32_t>(s);
            }
            if (best < 0) return -1;
            const int32_t o = owner[static_cast<size_t>(best)];
            Entry& v = entries[static_cast<size_t>(o)];
            if (v.state == State::Loading) {
                cv.wait(lock, [&] { return v.state != State::Loading; });
                continue;  // the slot may have been freed by a failure
            }
            if (v.state == State::Queued) {
                queue.erase(std::find(queue.begin(), queue.end(), o));
                ++stats.cancelled;
            }
            v.state = State::Absent;
            v.slot = -1;
            owner[static_cast<size_t>(best)] = -1;
            return best;
        }
    }

    void assign(int32_t id, int32_t slot, bool demand) {
        Entry& v = entries[static_cast<size_t>(id)];
        owner[static_cast<size_t>(slot)] = id;
        v.slot = slot;
        v.state = State::Queued;
        v.demand = demand;
        v.error.clear();
        if (demand) {
            queue.push_front(id);
        } else {
            queue.push_back(id);
        }
        if (read_log.size() == kReadLogMax) read_log.pop_front();
        read_log.push_back(name_of(id));
        cv.notify_all();
    }

    void reader_loop() {
        std::unique_lock lock(mutex);
        for (;;) {
            cv.wait(lock, [&] { return stop || !queue.empty(); });
            if (stop) return;
            const int32_t id = queue.front();
            queue.pop_front();
            Entry& v = entries[static_cast<size_t>(id)];
            v.state = State::Loading;
            uint8_t* slot =
                static_cast<uint8_t*>(region.data()) + static_cast<uint64_t>(v.slot) * stride;
            lock.unlock();
            std::string error;
            uint64_t bytes = 0;
            const auto t0 = Clock::now();
            try {
                bytes = read_expert(id, slot);
            } catch (const std::exception& e) {
                error = e.what();
            }
            const double s = std::chrono::duration<double>(Clock::now() - t0).count();
            lock.lock();
            stats.read_seconds += s;
            stats.bytes_read += bytes;
            ++stats.reads;
            if (error.empty()) {
                v.state = State::Resident;
            } else {
                v.state = State::Absent;
                owner[static_cast<size_t>(v.slot)] = -1;
                v.slot = -1;
                v.pending = false;
                v.error = std::move(error);
            }
            v.demand = false;
            cv.notify_all();
        }
    }

    // The three slices of entry `id` into `slot`; returns the bytes read.
    uint64_t read_expert(int32_t id, uint8_t* slot) const {
        const ExpertLayerTensors& l = layers[static_cast<size_t>(id / n_expert)];
        const auto e = static_cast<uint64_t>(id % n_expert);
        uint64_t total = 0;
        for (size_t w = 0; w < 3; ++w) {
            const SourceTensor& t = *l.tensors[w];
            const uint64_t s = slice_bytes(t);
            total += read_slice(t, t.stored.offset + e * s, s, slot + part_off[w],
                                static_cast<int32_t>(e));
        }
        return total;
    }

    uint64_t read_slice(const SourceTensor& t, uint64_t offset, uint64_t bytes, uint8_t* dst,
                        int32_t expert) const {
        const uint64_t lead = direct ? offset % kIoAlign : 0;
        const uint64_t start = offset - lead;
        const uint64_t want = lead + bytes;
        const uint64_t total = direct ? align_up(want, kIoAlign) : bytes;
        uint64_t done = 0;
        while (done < want) {
            const ssize_t n =
                ::pread(fd.get(), dst + done, total - done, static_cast<off_t>(start + done));
            if (n < 0) {
                if (errno == EINTR) continue;
                throw_io(path, "reading expert " + std::to_string(expert) + " of '" + t.name + "'",
                         errno);
            }
            // A direct read comes back short only at the end of the file
            // (and the next one, unaligned, would be refused).
            if (n == 0 || (direct && static_cast<uint64_t>(n) < total - done &&
                           done + static_cast<uint64_t>(n) < want)) {
                done += static_cast<uint64_t>(n);
                throw Error(DWELL_ERR_CORRUPT,
                            path + ": expert " + std::to_string(expert) + " of tensor '" + t.name +
                                "' [offset " + std::to_string(offset) + ", " +
                                std::to_string(bytes) +
                                " bytes] is cut short: the file ends at byte " +
                                std::to_string(start + done) +
                                " (was it truncated or replaced while the model was loaded?)");
            }
            done += static_cast<uint64_t>(n);
        }
        // Direct reads start at the block below the slice: move it to the
        // part's start, where every expert's slice is.
        if (lead != 0) std::memmove(dst, dst + lead, bytes);
        if (!direct)
            ::posix_fadvise(fd.get(), static_cast<off_t>(start), static_cast<off_t>(done),
                            POSIX_FADV_DONTNEED);
        return done;
    }
};

uint64_t ExpertCache::slot_bytes(const std::vector<ExpertLayerTensors>& layers) {
    return part_bytes(layers, 0) + part_bytes(layers, 1) + part_bytes(layers, 2);
}

ExpertCache::ExpertCache(const std::string& path, std::vector<ExpertLayerTensors> layers,
                         int64_t n_expert, int64_t slots, int32_t readers, MemoryPool& pool)
    : impl_(std::make_unique<Impl>(path, std::move(layers), n_expert, slots, readers, pool)) {}

ExpertCache::~ExpertCache() = default;

std::vector<int32_t> ExpertCache::acquire(int32_t li, const std::vector<int32_t>& needed) {
    Impl& m = *impl_;
    std::unique_lock lock(m.mutex);
    // Mispredictions for this layer lose their protection.
    for (int32_t e = 0; e < m.n_expert; ++e) {
        Impl::Entry& v = m.entry(li, e);
        if (v.pending && std::find(needed.begin(), needed.end(), e) == needed.end())
            v.pending = false;
    }
    std::vector<int32_t> held;
    const auto give_back = [&] {
        for (const int32_t e : held) --m.entry(li, e).refs;
        m.cv.notify_all();
    };
    // Hits are held first, so a miss of this layer never evicts an expert
    // the same layer needs; then each miss takes a slot, in `needed` order.
    std::vector<int32_t> missing;
    for (const int32_t e : needed) {
        Impl::Entry& v = m.entry(li, e);
        ++m.stats.needed;
        if (v.state == Impl::State::Absent) {
            missing.push_back(e);
            continue;
        }
        ++m.stats.hits;
        if (v.pending) ++m.stats.prefetch_hits;
        if (v.state == Impl::State::Queued && !v.demand) {
            // A prefetch not started yet: read it before the others.
            const int32_t id = m.id_of(li, e);
            m.queue.erase(std::find(m.queue.begin(), m.queue.end(), id));
            m.queue.push_front(id);
            v.demand = true;
        }
        v.pending = false;
        ++v.refs;
        v.last_used = ++m.tick;
        held.push_back(e);
    }
    for (const int32_t e : missing) {
        Impl::Entry& v = m.entry(li, e);
        ++m.stats.misses;
        const int32_t s = m.pick_victim(lock);
        if (s < 0) {
            give_back();
            throw Error(DWELL_ERR_INTERNAL,
                        m.path + ": the expert cache has no free slot for layer " +
                            std::to_string(m.layers[static_cast<size_t>(li)].layer) + " (its " +
                            std::to_string(m.owner.size()) + " slots are all held)");
        }
        m.assign(m.id_of(li, e), s, true);
        v.pending = false;
        ++v.refs;
        v.last_used = ++m.tick;
        held.push_back(e);
    }
    const auto t0 = Clock::now();
    m.cv.wait(lock, [&] {
        return std::all_of(needed.begin(), needed.end(), [&](int32_t e) {
            const Impl::Entry& v = m.entry(li, e);
            return v.state == Impl::State::Resident || !v.error.empty();
        });
    });
    m.stats.wait_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<int32_t> slots;
    for (const int32_t e : needed) {
        Impl::Entry& v = m.entry(li, e);
        if (!v.error.empty()) {
            std::string what = std::move(v.error);
            v.error.clear();
            give_back();
            throw Error(DWELL_ERR_IO, what);
        }
        slots.push_back(v.slot);
    }
    return slots;
}

void ExpertCache::release(int32_t li, const std::vector<int32_t>& needed) {
    Impl& m = *impl_;
    std::lock_guard lock(m.mutex);
    for (const int32_t e : needed) --m.entry(li, e).refs;
    m.cv.notify_all();
}

int32_t ExpertCache::prefetch(int32_t li, const std::vector<int32_t>& predicted) {
    Impl& m = *impl_;
    std::unique_lock lock(m.mutex);
    int32_t queued = 0;
    for (const int32_t e : predicted) {
        Impl::Entry& v = m.entry(li, e);
        if (v.state != Impl::State::Absent) continue;
        const int32_t s = m.pick_victim(lock);
        if (s < 0) break;
        m.assign(m.id_of(li, e), s, false);
        v.pending = true;
        v.last_used = ++m.tick;
        ++m.stats.prefetches;
        ++queued;
    }
    return queued;
}

uint8_t* ExpertCache::base() const {
    return static_cast<uint8_t*>(impl_->region.data());
}
uint64_t ExpertCache::stride() const {
    return impl_->stride;
}
uint64_t ExpertCache::part_offset(int p) const {
    return impl_->part_off[static_cast<size_t>(p)];
}
int64_t ExpertCache::slots() const {
    return static_cast<int64_t>(impl_->owner.size());
}
int32_t ExpertCache::readers() const {
    return static_cast<int32_t>(impl_->threads.size());
}
bool ExpertCache::direct_io() const {
    return impl_->direct;
}
uint64_t ExpertCache::region_bytes() const {
    return impl_->region.size();
}

ExpertCacheStats ExpertCache::stats() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->stats;
}

std::vector<std::string> ExpertCache::read_log() const {
    std::lock_guard lock(impl_->mutex);
    return {impl_->read_log.begin(), impl_->read_log.end()};
}

}  // namespace dwell
