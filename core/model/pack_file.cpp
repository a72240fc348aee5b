// dwell pack reader (the writer is a tool: hosts/tools/pack_writer.cpp).
//
// On-disk layout, version 1 (all integers little-endian; hosts/cli/docs/pack-format.md
// has the same table with the reasoning behind it):
//
//   offset 0, 128 bytes: header
//      0  char[8] magic "DWELLPK\0"
//      8  u32     version (1)
//     12  u32     header size (128)
//     16  u64     file size in bytes (a truncated copy fails here, first)
//     24  u64     metadata offset       32  u64  metadata size
//     40  u64     tokenizer offset      48  u64  tokenizer size (0: none)
//     56  u64     directory offset      64  u64  directory size
//     72  u64     frame tables offset   80  u64  frame tables size
//     88  u64     tensor count
//     96  u64[3]  reserved, 0
//    120  u64     XXH3-64 of header bytes [0, 120), then the metadata,
//                 tokenizer, directory and frame tables sections in order
//
//   tensor data: each tensor at a multiple of 16 KiB (kPackAlignment), zero
//   padding between; raw bytes, or the tensor's zstd frames back to back.
//
//   metadata: a GGUF v3 file with no tensors (GgufWriter::bytes()).
//   tokenizer: a serialized sentencepiece ModelProto.
//
//   directory: tensor count entries, back to back:
//     u32 name length (1..PackLimits::max_name), name bytes,
//     i32 dtype (dwell_dtype), u32 n_dims (1..4), i64 ne[4] (unused dims 1),
//     u64 data offset (multiple of 16 KiB), u64 stored size, u64 raw size,
//     u32 compression (0 none, 1 zstd), u32 reserved (0),
//     u64 frame raw size, u64 frame count, u64 frame table offset
//     (all 0 for raw tensors), u64 XXH3-64 of the raw bytes.
//
//   frame tables: per zstd tensor in directory order, frame count entries of
//   (u64 offset from the tensor's data offset, u64 compressed size); frames
//   are contiguous, and frame i holds raw bytes [i * frame raw size, ...),
//   the last frame shorter. Each frame is a single complete zstd frame that
//   records its content size, so any frame decompresses on its own.
//
// Metadata and the directory come after the tensor data because the writer
// streams tensors first and learns the directory only at the end; the header
// at offset 0 is rewritten last, so an unfinished file has no valid magic.
//
// The reader trusts nothing: section ranges, counts, names, shapes, sizes,
// offsets and frame tables are checked with overflow-safe arithmetic before
// use, the header checksum before the directory is parsed, and every tensor's
// checksum on open.
#include "dwell/core/model/pack_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <system_error>
#include <utility>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/core/base/printable_name.hpp"
#include "dwell/core/base/tensor_shape.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/formats/pack_layout.hpp"
#include "dwell/core/platform/mapped_file.hpp"
#include "dwell/core/platform/posix_file.hpp"
#include "dwell/core/platform/system_memory.hpp"

namespace dwell {
namespace {

using namespace pack_layout;

// zstd never produces more than a 128 KiB block from a 4-byte (RLE) block, so
// no valid frame expands more than this; a larger claim is rejected before
// any memory is reserved for it.
constexpr uint64_t kMaxZstdExpansion = ZSTD_BLOCKSIZE_MAX / 4;
constexpr size_t kMaxNameInMessage = 80;

std::string printable(std::string_view s) {
    return printable_name(s, kMaxNameInMessage);
}

std::string hex64(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
    return buf;
}

std::string str(uint64_t v) {
    return std::to_string(v);
}

// POSIX resources: posix_file.hpp (FileDescriptor, MappedRegion, map_*), and
// the guarded file mapping, mapped_file.hpp.
using Fd = FileDescriptor;
using Mapping = MappedRegion;

struct ZstdDCtxFree {
    void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};
struct ZstdCCtxFree {
    void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct Xxh3Free {
    void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

// ---------------------------------------------------------------------------
// Header

// ---------------------------------------------------------------------------
// Reader

class PackReader {
public:
    PackReader(std::filesystem::path path, const PackLimits& limits)
        : path_(std::move(path)), limits_(limits) {}

    [[noreturn]] void fail(const std::string& what) const {
        throw Error(DWELL_ERR_CORRUPT, path_.string() + ": " + what);
    }
    [[noreturn]] void fail(const Entry& e, const std::string& what) const {
        fail("tensor '" + printable(e.name) + "': " + what);
    }

    const std::filesystem::path& path() const { return path_; }
    const PackLimits& limits() const { return limits_; }

    // [offset, offset + size) lies inside the file; `what` names it on failure.
    void check_range(uint64_t offset, uint64_t size, const std::string& what,
                     uint64_t file_size) const {
        uint64_t end = 0;
        if (__builtin_add_overflow(offset, size, &end)) {
            fail(what + " [offset " + str(offset) + ", " + str(size) + " bytes] overflows");
        }
        if (offset < kHeaderSize && size != 0) {
            fail(what + " [offset " + str(offset) + ", " + str(size) +
                 " bytes] overlaps the header");
        }
        if (end > file_size) {
            fail("truncated: " + what + " [offset " + str(offset) + ", " + str(size) +
                 " bytes] runs past the end of the file (" + str(file_size) + " bytes)");
        }
    }

    Header read_header(const uint8_t* base, uint64_t size) const {
        if (size < kHeaderSize) {
            fail("truncated: " + str(size) + " bytes, shorter than the " + str(kHeaderSize) +
                 "-byte pack header");
        }
        if (std::memcmp(base, kPackMagic, sizeof kPackMagic) != 0) {
            fail("not a dwell pack (bad magic)");
        }
        const uint32_t version = load_le<uint32_t>(base + 8);
        if (version != kPackVersion) {
            fail("unsupported pack version " + str(version) + " (this build reads version " +
                 str(kPackVersion) + ")");
        }
        const uint32_t header_size = load_le<uint32_t>(base + 12);
        if (header_size != kHeaderSize) {
            fail("header size " + str(header_size) + ", expected " + str(kHeaderSize));
        }
        Header h;
        h.file_size = load_le<uint64_t>(base + 16);
        h.metadata_offset = load_le<uint64_t>(base + 24);
        h.metadata_size = load_le<uint64_t>(base + 32);
        h.tokenizer_offset = load_le<uint64_t>(base + 40);
        h.tokenizer_size = load_le<uint64_t>(base + 48);
        h.directory_offset = load_le<uint64_t>(base + 56);
        h.directory_size = load_le<uint64_t>(base + 64);
        h.frames_offset = load_le<uint64_t>(base + 72);
        h.frames_size = load_le<uint64_t>(base + 80);
        h.tensor_count = load_le<uint64_t>(base + 88);
        h.checksum = load_le<uint64_t>(base + kChecksumOffset);
        for (uint64_t off = 96; off < kChecksumOffset; off += 8) {
            if (load_le<uint64_t>(base + off) != 0) {
                fail("reserved header field at byte " + str(off) + " is not zero");
            }
        }
        if (h.file_size != size) {
            if (h.file_size > size) {
                fail("truncated: the header records " + str(h.file_size) + " bytes, the file has " +
                     str(size));
            }
            fail("the header records " + str(h.file_size) + " bytes, the file has " + str(size) +
                 " (trailing data)");
        }
        check_range(h.metadata_offset, h.metadata_size, "metadata section", size);
        check_range(h.tokenizer_offset, h.tokenizer_size, "tokenizer section", size);
        check_range(h.directory_offset, h.directory_size, "directory section", size);
        check_range(h.frames_offset, h.frames_size, "frame table section", size);
        if (h.tensor_count > limits_.max_tensors) {
            fail("tensor count " + str(h.tensor_count) + " exceeds the limit of " +
                 str(limits_.max_tensors));
        }
        if (h.tensor_count > h.directory_size / (kEntryFixedBytes + 1)) {
            fail("tensor count " + str(h.tensor_count) + " cannot fit in the " +
                 str(h.directory_size) + "-byte directory");
        }
        if (h.frames_size % kFrameEntryBytes != 0) {
            fail("frame table section size " + str(h.frames_size) + " is not a multiple of " +
                 str(kFrameEntryBytes));
        }

        // Covers every byte the directory and frame tables describe data
        // with, so a flipped bit there cannot silently point elsewhere.
        std::unique_ptr<XXH3_state_t, Xxh3Free> st(XXH3_createState());
        if (!st) throw Error(DWELL_ERR_OUT_OF_MEMORY, path_.string() + ": cannot allocate a hash");
        XXH3_64bits_reset(st.get());
        XXH3_64bits_update(st.get(), base, kChecksumOffset);
        XXH3_64bits_update(st.get(), base + h.metadata_offset, h.metadata_size);
        XXH3_64bits_update(st.get(), base + h.tokenizer_offset, h.tokenizer_size);
        XXH3_64bits_update(st.get(), base + h.directory_offset, h.directory_size);
        XXH3_64bits_update(st.get(), base + h.frames_offset, h.frames_size);
        const uint64_t computed = XXH3_64bits_digest(st.get());
        if (computed != h.checksum && verify_checksums()) {
            fail("header checksum mismatch (stored " + hex64(h.checksum) + ", computed " +
                 hex64(computed) + "): the header, metadata, tokenizer or directory is corrupt");
        }
        return h;
    }

    // Fuzzing builds skip checksum comparisons (only the comparisons), or the
    // fuzzer could never reach the checks behind them.
    static constexpr bool verify_checksums() {
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
        return false;
#else
        return true;
#endif
    }

    std::vector<Entry> read_directory(const uint8_t* base, const Header& h) const {
        const uint8_t* p = base + h.directory_offset;
        const uint64_t size = h.directory_size;
        uint64_t pos = 0;
        std::vector<Entry> entries;
        // tensor_count was bounded by the directory size and the limits.
        entries.reserve(static_cast<size_t>(h.tensor_count));
        for (uint64_t i = 0; i < h.tensor_count; ++i) {
            const std::string nth = "directory entry " + str(i + 1) + " of " + str(h.tensor_count);
            if (size - pos < 4) fail("truncated: " + nth + " runs past the directory");
            const uint32_t name_len = load_le<uint32_t>(p + pos);
            pos += 4;
            if (name_len == 0) fail(nth + ": empty tensor name");
            if (name_len > limits_.max_name) {
                fail(nth + ": name length " + str(name_len) + " exceeds the limit of " +
                     str(limits_.max_name));
            }
            if (size - pos < name_len || size - pos - name_len < kEntryFixedBytes - 4) {
                fail("truncated: " + nth + " runs past the directory");
            }
            Entry e;
            e.name.assign(reinterpret_cast<const char*>(p + pos), name_len);
            pos += name_len;
            // Tensors are looked up by NUL-terminated name across the plugin ABI.
            if (e.name.find('\0') != std::string::npos) {
                fail(nth + ": tensor name '" + printable(e.name) + "' contains a NUL byte");
            }
            const uint8_t* q = p + pos;
            pos += kEntryFixedBytes - 4;

            const int32_t dtype = load_le<int32_t>(q);
            const uint32_t n_dims = load_le<uint32_t>(q + 4);
            for (int d = 0; d < DWELL_MAX_DIMS; ++d)
                e.ne[d] = load_le<int64_t>(q + 8 + 8 * static_cast<ptrdiff_t>(d));
            q += 8 + 8 * DWELL_MAX_DIMS;
            e.offset = load_le<uint64_t>(q);
            e.stored = load_le<uint64_t>(q + 8);
            e.raw = load_le<uint64_t>(q + 16);
            const uint32_t compression = load_le<uint32_t>(q + 24);
            const uint32_t reserved = load_le<uint32_t>(q + 28);
            e.frame_raw = load_le<uint64_t>(q + 32);
            e.frame_count = load_le<uint64_t>(q + 40);
            e.frame_table = load_le<uint64_t>(q + 48);
            e.checksum = load_le<uint64_t>(q + 56);

            if (!known_dtype(dtype)) fail(e, "unknown dtype " + std::to_string(dtype));
            e.dtype = static_cast<dwell_dtype>(dtype);
            if (n_dims < 1 || n_dims > DWELL_MAX_DIMS) {
                fail(e, "n_dims " + str(n_dims) + " is out of range 1.." + str(DWELL_MAX_DIMS));
            }
            e.n_dims = static_cast<int32_t>(n_dims);
            for (uint32_t d = n_dims; d < DWELL_MAX_DIMS; ++d) {
                if (e.ne[d] != 1) {
                    fail(e, "unused dimension " + str(d) + " is " + std::to_string(e.ne[d]) +
                                ", expected 1");
                }
            }
            const std::optional<uint64_t> expect = tensor_bytes(e.dtype, {e.ne, n_dims});
            if (!expect) {
                fail(e, "shape " + shape_str(e.n_dims, e.ne) + " is not a valid " +
                            dwell_dtype_name(e.dtype) + " shape");
            }
            if (e.raw != *expect) {
                fail(e, "raw size " + str(e.raw) + " does not match its " +
                            dwell_dtype_name(e.dtype) + " shape " + shape_str(e.n_dims, e.ne) +
                            " (" + str(*expect) + " bytes)");
            }
            if (e.raw > limits_.max_tensor_bytes) {
                fail(e,
                     str(e.raw) + " bytes exceeds the limit of " + str(limits_.max_tensor_bytes));
            }
            if (reserved != 0) fail(e, "reserved field is not zero");
            if (e.offset == 0 || e.offset % kPackAlignment != 0) {
                fail(e, "data offset " + str(e.offset) + " is not a nonzero multiple of " +
                            str(kPackAlignment));
            }
            uint64_t end = 0;
            if (__builtin_add_overflow(e.offset, e.stored, &end)) {
                fail(e,
                     "data [offset " + str(e.offset) + ", " + str(e.stored) + " bytes] overflows");
            }
            if (end > h.file_size) {
                fail(e, "truncated: data [offset " + str(e.offset) + ", " + str(e.stored) +
                            " bytes] runs past the end of the file (" + str(h.file_size) +
                            " bytes)");
            }
            if (compression == static_cast<uint32_t>(PackCompression::None)) {
                e.compression = PackCompression::None;
                if (e.stored != e.raw) {
                    fail(e, "stored size " + str(e.stored) +
                                " of an uncompressed tensor is not "
                                "its raw size " +
                                str(e.raw));
                }
                if (e.frame_raw != 0 || e.frame_count != 0 || e.frame_table != 0) {
                    fail(e, "an uncompressed tensor has a frame table");
                }
            } else if (compression == static_cast<uint32_t>(PackCompression::Zstd)) {
                e.compression = PackCompression::Zstd;
                check_zstd_entry(e, h);
            } else {
                fail(e, "unknown compression " + str(compression));
            }
            entries.push_back(std::move(e));
        }
        if (pos != size) {
            fail("directory has " + str(size - pos) + " bytes after its " + str(h.tensor_count) +
                 " entries");
        }
        check_unique_and_disjoint(entries, h);
        return entries;
    }

    void check_zstd_entry(const Entry& e, const Header& h) const {
        if (e.frame_raw == 0) fail(e, "frame raw size is 0");
        const uint64_t frames = (e.raw - 1) / e.frame_raw + 1;  // raw >= 1 (checked shape)
        if (e.frame_count != frames) {
            fail(e, "frame count " + str(e.frame_count) + " does not match " + str(e.raw) +
                        " raw bytes in frames of " + str(e.frame_raw) + " (" + str(frames) +
                        " frames)");
        }
        if (e.frame_count > limits_.max_frames_per_tensor) {
            fail(e, "frame count " + str(e.frame_count) + " exceeds the limit of " +
                        str(limits_.max_frames_per_tensor));
        }
        if (e.stored < e.frame_count) {
            fail(e, "stored size " + str(e.stored) + " is too small for " + str(e.frame_count) +
                        " zstd frames");
        }
        uint64_t bound = 0;
        if (!__builtin_mul_overflow(e.stored, kMaxZstdExpansion, &bound) && e.raw > bound) {
            fail(e, str(e.stored) + " stored bytes cannot decompress to " + str(e.raw) + " bytes");
        }
        // frame_count <= max_frames_per_tensor keeps this product small.
        const uint64_t table_bytes = e.frame_count * kFrameEntryBytes;
        uint64_t table_end = 0;
        if (e.frame_table < h.frames_offset ||
            __builtin_add_overflow(e.frame_table, table_bytes, &table_end) ||
            table_end > h.frames_offset + h.frames_size) {
            fail(e, "frame table [offset " + str(e.frame_table) + ", " + str(table_bytes) +
                        " bytes] is outside the frame table section");
        }
        if ((e.frame_table - h.frames_offset) % kFrameEntryBytes != 0) {
            fail(e, "frame table offset " + str(e.frame_table) + " is misaligned");
        }
    }

    void check_unique_and_disjoint(const std::vector<Entry>& entries, const Header& h) const {
        std::map<std::string_view, size_t, std::less<>> names;
        for (size_t i = 0; i < entries.size(); ++i) {
            const auto [it, inserted] = names.emplace(entries[i].name, i);
            if (!inserted) {
                fail("duplicate tensor name '" + printable(entries[i].name) + "' (entries " +
                     str(it->second + 1) + " and " + str(i + 1) + ")");
            }
        }
        // Data ranges may not overlap each other or the non-data sections:
        // each tensor owns its bytes, as the writer lays them out.
        struct Range {
            uint64_t begin, end;
            const Entry* tensor;  // nullptr: a section
            const char* section;
        };
        std::vector<Range> ranges;
        ranges.reserve(entries.size() + 4);
        for (const Entry& e : entries) {
            if (e.stored != 0) ranges.push_back({e.offset, e.offset + e.stored, &e, nullptr});
        }
        const auto section = [&](uint64_t off, uint64_t size, const char* what) {
            if (size != 0) ranges.push_back({off, off + size, nullptr, what});
        };
        section(h.metadata_offset, h.metadata_size, "the metadata section");
        section(h.tokenizer_offset, h.tokenizer_size, "the tokenizer section");
        section(h.directory_offset, h.directory_size, "the directory");
        section(h.frames_offset, h.frames_size, "the frame table section");
        std::sort(ranges.begin(), ranges.end(),
                  [](const Range& a, const Range& b) { return a.begin < b.begin; });
        for (size_t i = 1; i < ranges.size(); ++i) {
            const Range& a = ranges[i - 1];
            const Range& b = ranges[i];
            if (b.begin >= a.end) continue;
            // Name a tensor first, so the message says which one is wrong.
            const Range& t = b.tensor != nullptr ? b : a;
            const Range& other = b.tensor != nullptr ? a : b;
            const std::string what = other.tensor != nullptr
                                         ? "tensor '" + printable(other.tensor->name) + "'"
                                         : std::string(other.section);
            if (t.tensor == nullptr) fail(std::string(b.section) + " overlaps " + a.section);
            fail(*t.tensor, "data [offset " + str(t.begin) + ", " + str(t.end - t.begin) +
                                " bytes] overlaps " + what);
        }
    }

    // Reads the frame table of a zstd tensor: checks the frames are contiguous
    // and cover exactly the stored bytes. Returns (offset, size) pairs.
    std::vector<std::pair<uint64_t, uint64_t>> read_frames(const uint8_t* base,
                                                           const Entry& e) const {
        std::vector<std::pair<uint64_t, uint64_t>> frames;
        frames.reserve(static_cast<size_t>(e.frame_count));  // bounded by the section size
        const uint8_t* t = base + e.frame_table;
        uint64_t next = 0;
        for (uint64_t i = 0; i < e.frame_count; ++i) {
            const uint64_t off = load_le<uint64_t>(t + kFrameEntryBytes * i);
            const uint64_t size = load_le<uint64_t>(t + kFrameEntryBytes * i + 8);
            const std::string nth = "zstd frame " + str(i + 1) + " of " + str(e.frame_count);
            if (off != next) {
                fail(e, nth + " starts at " + str(off) + ", expected " + str(next) +
                            " (frames must be contiguous)");
            }
            if (size == 0 || size > e.stored - next) {
                fail(e, nth + " size " + str(size) + " does not fit the " + str(e.stored) +
                            " stored bytes");
            }
            next += size;
            frames.emplace_back(off, size);
        }
        if (next != e.stored) {
            fail(e, "frames cover " + str(next) + " of " + str(e.stored) + " stored bytes");
        }
        return frames;
    }

    void decompress(const uint8_t* base, const Entry& e, uint8_t* dst, ZSTD_DCtx* dctx) const {
        const auto frames = read_frames(base, e);
        const uint8_t* data = base + e.offset;
        for (size_t i = 0; i < frames.size(); ++i) {
            const auto [off, size] = frames[i];
            const uint64_t raw_begin = e.frame_raw * i;
            const uint64_t expect = std::min(e.frame_raw, e.raw - raw_begin);
            const std::string nth = "zstd frame " + str(i + 1) + " of " + str(frames.size());
            const uint8_t* src = data + off;
            const size_t found = ZSTD_findFrameCompressedSize(src, size);
            if (ZSTD_isError(found)) {
                if (ZSTD_getErrorCode(found) == ZSTD_error_srcSize_wrong) {
                    fail(e, nth + " is truncated");
                }
                fail(e, nth + " is not a valid zstd frame (" + ZSTD_getErrorName(found) + ")");
            }
            if (found != size) {
                fail(e, nth + " holds " + str(size - found) + " bytes after its zstd frame");
            }
            const unsigned long long content = ZSTD_getFrameContentSize(src, size);
            if (content == ZSTD_CONTENTSIZE_ERROR) fail(e, nth + " has a corrupt frame header");
            if (content == ZSTD_CONTENTSIZE_UNKNOWN) {
                fail(e, nth + " does not record its content size");
            }
            if (content != expect) {
                fail(e, nth + " holds " + str(content) + " bytes, expected " + str(expect));
            }
            const size_t n = ZSTD_decompressDCtx(dctx, dst + raw_begin, expect, src, size);
            if (ZSTD_isError(n)) {
                fail(e, nth + " does not decompress: " + ZSTD_getErrorName(n));
            }
            if (n != expect) {
                fail(e, nth + " decompressed to " + str(n) + " bytes, expected " + str(expect));
            }
        }
    }

    void verify(const Entry& e, const uint8_t* raw) const {
        const uint64_t computed = XXH3_64bits(raw, e.raw);
        if (computed != e.checksum && verify_checksums()) {
            fail(e, "checksum mismatch (stored " + hex64(e.checksum) + ", computed " +
                        hex64(computed) + "): the file is corrupt");
        }
    }

private:
    std::filesystem::path path_;
    PackLimits limits_;
};

// ---------------------------------------------------------------------------
// PackSource

class PackSourceImpl final : public PackSource {
public:
    PackSourceImpl(const std::filesystem::path& path, const PackLimits& limits, TensorData data)
        : path_(path), limits_(limits), file_(path) {
        PackReader r(path, limits);
        const uint8_t* base = file_.data();
        const Header h = r.read_header(base, file_.size());

        std::vector<uint8_t> blob(base + h.metadata_offset,
                                  base + h.metadata_offset + h.metadata_size);
        meta_file_.emplace(GgufFile::from_bytes(std::move(blob), path.string() + ": metadata"));
        if (!meta_file_->tensors().empty()) {
            r.fail("the metadata section holds " + str(meta_file_->tensors().size()) +
                   " tensors, expected none");
        }
        tokenizer_ = std::string_view(reinterpret_cast<const char*>(base + h.tokenizer_offset),
                                      static_cast<size_t>(h.tokenizer_size));

        entries_ = r.read_directory(base, h);
        tensors_.reserve(entries_.size());
        storage_.reserve(entries_.size());
        for (const Entry& e : entries_) {
            SourceTensor s;
            s.name = e.name;
            s.dtype = e.dtype;
            s.type_name = dwell_dtype_name(e.dtype);
            s.n_dims = e.n_dims;
            std::copy(e.ne, e.ne + DWELL_MAX_DIMS, s.ne);
            s.size = e.raw;
            s.stored.offset = e.offset;
            s.stored.bytes = e.stored;
            if (r.verify_checksums()) s.stored.xxh3 = e.checksum;
            if (e.compression == PackCompression::Zstd) {
                s.stored.frame_raw = e.frame_raw;
                for (const auto& [off, size] : r.read_frames(base, e)) {
                    s.stored.frame_sizes.push_back(size);
                }
            }
            // Compressed tensors wait for make_resident: a tensor no model
            // asks for is never decompressed.
            s.data = e.compression == PackCompression::None ? base + e.offset : nullptr;
            storage_.push_back({e.name, e.dtype, e.compression, e.raw, e.stored,
                                static_cast<uint32_t>(e.frame_count)});
            tensors_.push_back(std::move(s));
        }
        verified_.assign(entries_.size(), false);
        for (size_t i = 0; i < tensors_.size(); ++i) index_.emplace(tensors_[i].name, i);
        if (data == TensorData::Resident) {
            std::vector<std::string> all;
            all.reserve(tensors_.size());
            for (const SourceTensor& t : tensors_) all.push_back(t.name);
            make_resident(all, [&](uint64_t bytes) {
                const uint64_t available = available_memory_bytes();
                if (available != 0 && bytes > available) {
                    throw Error(DWELL_ERR_OUT_OF_MEMORY,
                                path_.string() + ": decompressing its tensors needs " +
                                    format_bytes(bytes) + " but " + format_bytes(available) +
                                    " of memory is available");
                }
            });
        }

        inner_ = gguf_metadata(*meta_file_);
        meta_ = inner_;
        meta_.self = this;
        meta_.get_int = [](void* self, const char* key, int64_t* out) -> int32_t {
            const dwell_metadata& m = static_cast<PackSourceImpl*>(self)->inner_;
            return m.get_int(m.self, key, out);
        };
        meta_.get_float = [](void* self, const char* key, double* out) -> int32_t {
            const dwell_metadata& m = static_cast<PackSourceImpl*>(self)->inner_;
            return m.get_float(m.self, key, out);
        };
        meta_.get_string = [](void* self, const char* key, const char** out,
                              size_t* len) -> int32_t {
            const dwell_metadata& m = static_cast<PackSourceImpl*>(self)->inner_;
            return m.get_string(m.self, key, out, len);
        };
        meta_.get_array_length = [](void* self, const char* key, uint64_t* out) -> int32_t {
            const dwell_metadata& m = static_cast<PackSourceImpl*>(self)->inner_;
            return m.get_array_length(m.self, key, out);
        };
        // Tensors live in the directory, not in the metadata blob.
        meta_.get_tensor = [](void* self, const char* name, dwell_dtype* dtype, int32_t* n_dims,
                              int64_t ne[DWELL_MAX_DIMS]) -> int32_t {
            const SourceTensor* t =
                name ? static_cast<PackSourceImpl*>(self)->find_tensor(name) : nullptr;
            if (t == nullptr) return 0;
            if (dtype) *dtype = t->dtype;
            if (n_dims) *n_dims = t->n_dims;
            if (ne) std::copy(t->ne, t->ne + DWELL_MAX_DIMS, ne);
            return 1;
        };
    }

    const std::filesystem::path& path() const override { return path_; }
    std::string format() const override { return "dwell pack"; }
    const dwell_metadata& metadata() const override { return meta_; }
    const SourceTensor* find_tensor(std::string_view name) const override {
        auto it = index_.find(name);
        return it == index_.end() ? nullptr : &tensors_[it->second];
    }
    const std::vector<SourceTensor>& tensors() const override { return tensors_; }
    Tokenizer tokenizer() const override {
        if (tokenizer_.empty()) {
            throw Error(DWELL_ERR_CORRUPT, path_.string() + ": the pack holds no tokenizer");
        }
        return Tokenizer::from_serialized_model(tokenizer_, path_.string());
    }
    const std::vector<PackTensorStorage>& storage() const override { return storage_; }
    std::string_view tokenizer_model() const override { return tokenizer_; }
    std::string file_problem(bool check_file) const override { return file_.problem(check_file); }

    void make_resident(const std::vector<std::string>& names,
                       const std::function<void(uint64_t)>& reserve) override {
        PackReader r(path_, limits_);
        std::vector<size_t> wanted;
        wanted.reserve(std::min(names.size(), tensors_.size()));
        std::vector<bool> seen(tensors_.size(), false);
        uint64_t bytes = 0;
        for (const std::string& name : names) {
            const auto it = index_.find(name);
            if (it == index_.end() || seen[it->second]) continue;
            const size_t i = it->second;
            seen[i] = true;
            wanted.push_back(i);
            if (tensors_[i].data != nullptr) continue;
            if (__builtin_add_overflow(bytes, entries_[i].raw, &bytes) ||
                decompressed_bytes_ + bytes > limits_.max_decompressed_bytes) {
                r.fail(entries_[i], "decompressed tensors exceed the limit of " +
                                        str(limits_.max_decompressed_bytes) + " bytes");
            }
        }
        // Every byte is accounted for before the first one is allocated.
        reserve(bytes);
        const uint8_t* base = file_.data();
        std::unique_ptr<ZSTD_DCtx, ZstdDCtxFree> dctx;
        for (const size_t i : wanted) {
            const Entry& e = entries_[i];
            SourceTensor& s = tensors_[i];
            if (s.data == nullptr) {
                if (!dctx) {
                    dctx.reset(ZSTD_createDCtx());
                    if (!dctx) {
                        throw Error(DWELL_ERR_OUT_OF_MEMORY,
                                    path_.string() + ": cannot create a zstd context");
                    }
                }
                Mapping m = map_anonymous(path_, "tensor '" + printable(e.name) + "'", e.raw);
                r.decompress(base, e, m.data(), dctx.get());
                r.verify(e, m.data());  // before the bytes become visible to anyone
                // Read-only from here on, like mapped tensors.
                ::mprotect(m.data(), m.size(), PROT_READ);
                decompressed_.push_back(std::move(m));
                s.data = decompressed_.back().data();
                decompressed_bytes_ += e.raw;
            } else if (!verified_[i]) {
                r.verify(e, s.data);
            }
            verified_[i] = true;
        }
    }

private:
    std::filesystem::path path_;
    PackLimits limits_;
    MappedFile file_;
    std::vector<Entry> entries_;  // the directory, parallel to tensors_
    std::vector<bool> verified_;  // checksum checked, parallel to tensors_
    uint64_t decompressed_bytes_ = 0;
    std::vector<Mapping> decompressed_;
    std::optional<GgufFile> meta_file_;  // heap-backed, so inner_ stays valid
    std::string_view tokenizer_;         // into file_
    std::vector<SourceTensor> tensors_;
    std::vector<PackTensorStorage> storage_;
    std::map<std::string, size_t, std::less<>> index_;
    dwell_metadata inner_{};  // the GGUF metadata adapter
    dwell_metadata meta_{};   // inner_ plus the pack's tensors
};

}  // namespace

std::unique_ptr<PackSource> open_pack_source(const std::filesystem::path& path,
                                             const PackLimits& limits, TensorData data) {
    return std::make_unique<PackSourceImpl>(path, limits, data);
}

}  // namespace dwell
