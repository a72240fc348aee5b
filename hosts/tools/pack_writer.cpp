// dwell pack writer: streams tensors into a new pack (the layout:
// dwell/core/formats/pack_layout.hpp, hosts/cli/docs/pack-format.md).
#include "dwell/tools/pack_writer.hpp"

#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/printable_name.hpp"
#include "dwell/core/formats/pack_layout.hpp"
#include "dwell/core/model/pack_file.hpp"
#include "dwell/core/platform/output_file.hpp"
#include "dwell/core/platform/posix_file.hpp"

namespace dwell {
namespace {

using namespace pack_layout;

constexpr size_t kMaxNameInMessage = 80;

std::string printable(std::string_view s) {
    return printable_name(s, kMaxNameInMessage);
}

std::string str(uint64_t v) {
    return std::to_string(v);
}

struct ZstdCCtxFree {
    void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct Xxh3Free {
    void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

}  // namespace

// ---------------------------------------------------------------------------
// PackWriter

struct PackWriter::Impl {
    std::filesystem::path path;
    Options options;
    std::optional<OutputFile> out;  // the temporary, renamed over `path` by finish()
    uint64_t pos = 0;               // the file's current length
    GgufWriter metadata;
    std::string tokenizer;
    std::vector<Entry> entries;
    std::vector<std::vector<std::pair<uint64_t, uint64_t>>> frames;  // per entry
    std::map<std::string, size_t, std::less<>> names;
    std::unique_ptr<ZSTD_CCtx, ZstdCCtxFree> cctx;
    bool finished = false;

    [[noreturn]] void io_fail(const std::string& what, int err) const { throw_io(path, what, err); }
    [[noreturn]] void invalid(const std::string& what) const {
        throw Error(DWELL_ERR_INVALID_ARGUMENT, path.string() + ": " + what);
    }

    void write_at(uint64_t offset, const uint8_t* p, uint64_t n) {
        out->write_at(offset, p, static_cast<size_t>(n));
    }
    void append(const uint8_t* p, uint64_t n) {
        write_at(pos, p, n);
        pos += n;
    }
    void pad_to_alignment() {
        static constexpr std::array<uint8_t, 4096> kZeros{};
        const uint64_t target = (pos + kPackAlignment - 1) / kPackAlignment * kPackAlignment;
        while (pos < target) append(kZeros.data(), std::min<uint64_t>(target - pos, kZeros.size()));
    }
};

PackWriter::PackWriter(const std::filesystem::path& path, Options options)
    : impl_(std::make_unique<Impl>()) {
    Impl& w = *impl_;
    w.path = path;
    w.options = options;
    if (options.compression != PackCompression::None &&
        options.compression != PackCompression::Zstd) {
        w.invalid("unknown compression " + str(static_cast<uint32_t>(options.compression)));
    }
    if (options.compression == PackCompression::Zstd) {
        if (options.frame_bytes == 0) w.invalid("zstd frame size is 0");
        if (options.zstd_level < ZSTD_minCLevel() || options.zstd_level > ZSTD_maxCLevel()) {
            w.invalid("zstd level " + std::to_string(options.zstd_level) + " is out of range " +
                      std::to_string(ZSTD_minCLevel()) + ".." + std::to_string(ZSTD_maxCLevel()));
        }
    }
    w.out.emplace(path);
    // A zero header until finish(): an interrupted pack is never mistaken
    // for a complete one.
    const std::array<uint8_t, kHeaderSize> zeros{};
    w.append(zeros.data(), zeros.size());
}

// An unfinished pack's temporary goes with its OutputFile.
PackWriter::~PackWriter() = default;

const std::filesystem::path& PackWriter::temporary() const {
    return impl_->out->temporary();
}

GgufWriter& PackWriter::metadata() {
    return impl_->metadata;
}

void PackWriter::set_tokenizer(std::string serialized_model) {
    impl_->tokenizer = std::move(serialized_model);
}

void PackWriter::add_tensor(std::string_view name, dwell_dtype dtype, std::span<const int64_t> ne,
                            std::span<const uint8_t> data) {
    Impl& w = *impl_;
    if (w.finished) w.invalid("add_tensor after finish");
    const std::string where = "tensor '" + printable(name) + "'";
    if (name.empty()) w.invalid("empty tensor name");
    if (name.find('\0') != std::string_view::npos) w.invalid(where + ": name contains a NUL byte");
    if (name.size() > PackLimits{}.max_name) {
        w.invalid(where + ": name longer than " + str(PackLimits{}.max_name) + " bytes");
    }
    if (w.names.count(name) != 0) w.invalid(where + ": added twice");
    if (!known_dtype(dtype)) w.invalid(where + ": unknown dtype " + std::to_string(dtype));
    const std::optional<uint64_t> expect = tensor_bytes(dtype, ne);
    if (!expect) {
        w.invalid(where + ": shape is not a valid " + std::string(dwell_dtype_name(dtype)) +
                  " shape of 1.." + str(DWELL_MAX_DIMS) + " positive dimensions");
    }
    if (data.size() != *expect) {
        w.invalid(where + ": " + str(data.size()) + " bytes of data, expected " + str(*expect) +
                  " for its " + dwell_dtype_name(dtype) + " shape");
    }

    Entry e;
    e.name = std::string(name);
    e.dtype = dtype;
    e.n_dims = static_cast<int32_t>(ne.size());
    std::copy(ne.begin(), ne.end(), e.ne);
    e.raw = data.size();
    e.checksum = XXH3_64bits(data.data(), data.size());
    w.pad_to_alignment();
    e.offset = w.pos;

    std::vector<std::pair<uint64_t, uint64_t>> frames;
    bool stored_raw = true;
    if (w.options.compression == PackCompression::Zstd) {
        if (!w.cctx) {
            w.cctx.reset(ZSTD_createCCtx());
            if (!w.cctx) {
                throw Error(DWELL_ERR_OUT_OF_MEMORY,
                            w.path.string() + ": cannot create a zstd context");
            }
        }
        // Frames are compressed into memory first: a tensor that zstd cannot
        // shrink is stored raw, so it is used in place instead of costing a
        // decompressed copy.
        const uint64_t frame_raw = std::min<uint64_t>(w.options.frame_bytes, data.size());
        std::vector<uint8_t> out;
        std::vector<uint8_t> buf(ZSTD_compressBound(static_cast<size_t>(frame_raw)));
        for (uint64_t begin = 0; begin < data.size() && out.size() < data.size();
             begin += frame_raw) {
            const size_t n =
                static_cast<size_t>(std::min<uint64_t>(frame_raw, data.size() - begin));
            const size_t c = ZSTD_compressCCtx(w.cctx.get(), buf.data(), buf.size(),
                                               data.data() + begin, n, w.options.zstd_level);
            if (ZSTD_isError(c)) {
                throw Error(DWELL_ERR_INTERNAL,
                            w.path.string() + ": " + where +
                                ": zstd compression failed: " + ZSTD_getErrorName(c));
            }
            frames.emplace_back(out.size(), c);
            out.insert(out.end(), buf.data(), buf.data() + c);
        }
        if (out.size() < data.size()) {
            stored_raw = false;
            e.compression = PackCompression::Zstd;
            e.frame_raw = frame_raw;
            e.frame_count = frames.size();
            e.stored = out.size();
            w.append(out.data(), out.size());
        } else {
            frames.clear();
        }
    }
    if (stored_raw) {
        e.stored = data.size();
        w.append(data.data(), data.size());
    }
    w.names.emplace(e.name, w.entries.size());
    w.entries.push_back(std::move(e));
    w.frames.push_back(std::move(frames));
}

std::vector<PackTensorStorage> PackWriter::finish() {
    Impl& w = *impl_;
    if (w.finished) w.invalid("finish called twice");
    Header h;
    h.tensor_count = w.entries.size();

    const std::vector<uint8_t> meta = w.metadata.bytes();
    h.metadata_offset = w.pos;
    h.metadata_size = meta.size();
    w.append(meta.data(), meta.size());

    h.tokenizer_offset = w.pos;
    h.tokenizer_size = w.tokenizer.size();
    w.append(reinterpret_cast<const uint8_t*>(w.tokenizer.data()), w.tokenizer.size());

    // Frame tables follow the directory; their offsets are known up front.
    std::vector<uint8_t> dir;
    uint64_t dir_size = 0;
    for (const Entry& e : w.entries) dir_size += 4 + e.name.size() + kEntryFixedBytes - 4;
    h.directory_offset = w.pos;
    h.directory_size = dir_size;
    h.frames_offset = h.directory_offset + dir_size;
    std::vector<uint8_t> tables;
    dir.reserve(static_cast<size_t>(dir_size));
    for (size_t i = 0; i < w.entries.size(); ++i) {
        Entry& e = w.entries[i];
        if (e.compression == PackCompression::Zstd) {
            e.frame_table = h.frames_offset + tables.size();
            for (const auto& [off, size] : w.frames[i]) {
                put_le(tables, off);
                put_le(tables, size);
            }
        }
        put_le(dir, static_cast<uint32_t>(e.name.size()));
        dir.insert(dir.end(), e.name.begin(), e.name.end());
        put_le(dir, static_cast<int32_t>(e.dtype));
        put_le(dir, static_cast<uint32_t>(e.n_dims));
        for (int d = 0; d < DWELL_MAX_DIMS; ++d) put_le(dir, e.ne[d]);
        put_le(dir, e.offset);
        put_le(dir, e.stored);
        put_le(dir, e.raw);
        put_le(dir, static_cast<uint32_t>(e.compression));
        put_le(dir, uint32_t{0});
        put_le(dir, e.frame_raw);
        put_le(dir, e.frame_count);
        put_le(dir, e.frame_table);
        put_le(dir, e.checksum);
    }
    w.append(dir.data(), dir.size());
    h.frames_size = tables.size();
    w.append(tables.data(), tables.size());
    h.file_size = w.pos;

    std::array<uint8_t, kHeaderSize> head = encode_header(h);
    std::unique_ptr<XXH3_state_t, Xxh3Free> st(XXH3_createState());
    if (!st) throw Error(DWELL_ERR_OUT_OF_MEMORY, w.path.string() + ": cannot allocate a hash");
    XXH3_64bits_reset(st.get());
    XXH3_64bits_update(st.get(), head.data(), kChecksumOffset);
    XXH3_64bits_update(st.get(), meta.data(), meta.size());
    XXH3_64bits_update(st.get(), w.tokenizer.data(), w.tokenizer.size());
    XXH3_64bits_update(st.get(), dir.data(), dir.size());
    XXH3_64bits_update(st.get(), tables.data(), tables.size());
    h.checksum = XXH3_64bits_digest(st.get());
    head = encode_header(h);
    w.write_at(0, head.data(), head.size());

    // Durable before it becomes visible under its final name.
    w.out->commit();
    w.finished = true;

    std::vector<PackTensorStorage> out;
    out.reserve(w.entries.size());
    for (const Entry& e : w.entries) {
        out.push_back({e.name, e.dtype, e.compression, e.raw, e.stored,
                       static_cast<uint32_t>(e.frame_count)});
    }
    return out;
}

}  // namespace dwell
