// GGUF reader. The file is untrusted: every length, count and offset is
// checked against the mapping and the limits before it is used, with
// overflow-safe arithmetic, and every failure names the file and the place.
#include "dwell/core/formats/gguf_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <limits>
#include <system_error>
#include <type_traits>
#include <utility>

#include "dwell/core/base/error.hpp"
#include "dwell/core/base/little_endian.hpp"
#include "dwell/core/base/printable_name.hpp"
#include "dwell/core/platform/mapped_file.hpp"
#include "dwell/core/platform/posix_file.hpp"

namespace dwell {
namespace {

// ---------------------------------------------------------------------------
// ggml type table

struct GgmlTypeInfo {
    const char* name;  // nullptr: no such type (never existed or removed)
    int64_t block_elems;
    uint64_t block_bytes;
    dwell_dtype dtype;
};

constexpr uint32_t kGgmlTypeCount = 40;

// Indexed by ggml type id. Ids 4 and 5 (Q4_2, Q4_3) and 31..33, 36..38 (the
// repacked Q4_0/IQ4_NL layouts) were dropped from the file format, so a file
// that uses them is corrupt, not merely unsupported.
constexpr std::array<GgmlTypeInfo, kGgmlTypeCount> kGgmlTypes = {{
    {"f32", 1, 4, DWELL_F32},                 // 0
    {"f16", 1, 2, DWELL_F16},                 // 1
    {"q4_0", 32, 18, DWELL_Q4_0},             // 2
    {"q4_1", 32, 20, DWELL_Q4_1},             // 3
    {nullptr, 0, 0, DWELL_DTYPE_COUNT},       // 4
    {nullptr, 0, 0, DWELL_DTYPE_COUNT},       // 5
    {"q5_0", 32, 22, DWELL_Q5_0},             // 6
    {"q5_1", 32, 24, DWELL_Q5_1},             // 7
    {"q8_0", 32, 34, DWELL_Q8_0},             // 8
    {"q8_1", 32, 36, DWELL_DTYPE_COUNT},      // 9
    {"q2_K", 256, 84, DWELL_DTYPE_COUNT},     // 10
    {"q3_K", 256, 110, DWELL_DTYPE_COUNT},    // 11
    {"q4_K", 256, 144, DWELL_Q4_K},           // 12
    {"q5_K", 256, 176, DWELL_Q5_K},           // 13
    {"q6_K", 256, 210, DWELL_Q6_K},           // 14
    {"q8_K", 256, 292, DWELL_DTYPE_COUNT},    // 15
    {"iq2_xxs", 256, 66, DWELL_DTYPE_COUNT},  // 16
    {"iq2_xs", 256, 74, DWELL_DTYPE_COUNT},   // 17
    {"iq3_xxs", 256, 98, DWELL_DTYPE_COUNT},  // 18
    {"iq1_s", 256, 50, DWELL_DTYPE_COUNT},    // 19
    {"iq4_nl", 32, 18, DWELL_DTYPE_COUNT},    // 20
    {"iq3_s", 256, 110, DWELL_DTYPE_COUNT},   // 21
    {"iq2_s", 256, 82, DWELL_DTYPE_COUNT},    // 22
    {"iq4_xs", 256, 136, DWELL_DTYPE_COUNT},  // 23
    {"i8", 1, 1, DWELL_DTYPE_COUNT},          // 24
    {"i16", 1, 2, DWELL_DTYPE_COUNT},         // 25
    {"i32", 1, 4, DWELL_I32},                 // 26
    {"i64", 1, 8, DWELL_DTYPE_COUNT},         // 27
    {"f64", 1, 8, DWELL_DTYPE_COUNT},         // 28
    {"iq1_m", 256, 56, DWELL_DTYPE_COUNT},    // 29
    {"bf16", 1, 2, DWELL_BF16},               // 30
    {nullptr, 0, 0, DWELL_DTYPE_COUNT},       // 31
    {nullptr, 0, 0, DWELL_DTYPE_COUNT},       // 32
    {nullptr, 0, 0, DWELL_DTYPE_COUNT},       // 33
    {"tq1_0", 256, 54, DWELL_DTYPE_COUNT},    // 34
    {"tq2_0", 256, 66, DWELL_DTYPE_COUNT},    // 35
    {nullptr, 0, 0, DWELL_DTYPE_COUNT},       // 36
    {nullptr, 0, 0, DWELL_DTYPE_COUNT},       // 37
    {nullptr, 0, 0, DWELL_DTYPE_COUNT},       // 38
    {"mxfp4", 32, 17, DWELL_DTYPE_COUNT},     // 39
}};

const GgmlTypeInfo* ggml_info(uint32_t type) {
    if (type >= kGgmlTypeCount || kGgmlTypes[type].name == nullptr) return nullptr;
    return &kGgmlTypes[type];
}

// ---------------------------------------------------------------------------
// Helpers

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr size_t kMaxNameInMessage = 80;

float load_f32(const uint8_t* p) {
    return std::bit_cast<float>(load_le<uint32_t>(p));
}
double load_f64(const uint8_t* p) {
    return std::bit_cast<double>(load_le<uint64_t>(p));
}

std::string printable(std::string_view s) {
    return printable_name(s, kMaxNameInMessage);
}

const char* type_name(GgufType t) {
    switch (t) {
        case GgufType::UINT8:
            return "uint8";
        case GgufType::INT8:
            return "int8";
        case GgufType::UINT16:
            return "uint16";
        case GgufType::INT16:
            return "int16";
        case GgufType::UINT32:
            return "uint32";
        case GgufType::INT32:
            return "int32";
        case GgufType::FLOAT32:
            return "float32";
        case GgufType::BOOL:
            return "bool";
        case GgufType::STRING:
            return "string";
        case GgufType::ARRAY:
            return "array";
        case GgufType::UINT64:
            return "uint64";
        case GgufType::INT64:
            return "int64";
        case GgufType::FLOAT64:
            return "float64";
    }
    return "unknown";
}

// Size of a fixed-size value; 0 for string/array/unknown.
uint64_t scalar_size(GgufType t) {
    switch (t) {
        case GgufType::UINT8:
        case GgufType::INT8:
        case GgufType::BOOL:
            return 1;
        case GgufType::UINT16:
        case GgufType::INT16:
            return 2;
        case GgufType::UINT32:
        case GgufType::INT32:
        case GgufType::FLOAT32:
            return 4;
        case GgufType::UINT64:
        case GgufType::INT64:
        case GgufType::FLOAT64:
            return 8;
        default:
            return 0;
    }
}

bool known_type(uint32_t t) {
    return t <= static_cast<uint32_t>(GgufType::FLOAT64);
}

// Reads an integer of type `t` at `p`; nullopt when it does not fit int64.
std::optional<int64_t> load_integer(GgufType t, const uint8_t* p) {
    switch (t) {
        case GgufType::UINT8:
        case GgufType::BOOL:
            return p[0];
        case GgufType::INT8:
            return static_cast<int8_t>(p[0]);
        case GgufType::UINT16:
            return load_le<uint16_t>(p);
        case GgufType::INT16:
            return load_le<int16_t>(p);
        case GgufType::UINT32:
            return load_le<uint32_t>(p);
        case GgufType::INT32:
            return load_le<int32_t>(p);
        case GgufType::INT64:
            return load_le<int64_t>(p);
        case GgufType::UINT64: {
            const uint64_t v = load_le<uint64_t>(p);
            if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
                return std::nullopt;
            }
            return static_cast<int64_t>(v);
        }
        default:
            return std::nullopt;
    }
}

// ---------------------------------------------------------------------------
// Memory mapping

// The bytes being parsed: a read-only file mapping, or a buffer handed to
// GgufFile::from_bytes (a pack's metadata blob). A moved-from vector keeps its
// buffer, so pointers into either form stay valid when the Mapping moves.
class Mapping {
public:
    Mapping() = default;
    explicit Mapping(MappedFile file) : region_(std::move(file)) {}
    explicit Mapping(std::vector<uint8_t> bytes) : owned_(std::move(bytes)) {}

    const uint8_t* data() const {
        return region_.data() != nullptr ? region_.data() : owned_.data();
    }
    size_t size() const { return region_.data() != nullptr ? region_.size() : owned_.size(); }

    // "" while the bytes can be trusted (mapped_file.hpp); owned bytes always can.
    std::string problem(bool check_file) const {
        return region_.data() != nullptr ? region_.problem(check_file) : std::string();
    }

private:
    MappedFile region_;
    std::vector<uint8_t> owned_;
};

Mapping map_file(const std::filesystem::path& path) {
    return Mapping(MappedFile(path));
}

// ---------------------------------------------------------------------------
// Parsed metadata

struct Kv {
    std::string_view key;  // into the mapping
    GgufType type;
    GgufType elem_type;    // arrays only
    uint64_t count;        // arrays: element count; strings: byte length
    const uint8_t* value;  // first byte of the value (after any array header)
};

// Everything open() learns about the file; GgufFile::Impl is this state.
struct State {
    std::filesystem::path path;
    Mapping map;
    uint32_t version = 0;
    uint64_t alignment = kDefaultAlignment;
    std::vector<Kv> kvs;
    std::map<std::string_view, size_t, std::less<>> kv_index;  // keys point into the map
    std::vector<GgufFile::TensorInfo> tensors;
    std::map<std::string_view, size_t, std::less<>> tensor_index;

    const Kv* find(std::string_view key) const {
        auto it = kv_index.find(key);
        return it == kv_index.end() ? nullptr : &kvs[it->second];
    }
    [[noreturn]] void fail(const std::string& what) const {
        throw Error(DWELL_ERR_CORRUPT, path.string() + ": " + what);
    }
    const Kv& array_of(std::string_view key, const char* expected) const;
};

const Kv& State::array_of(std::string_view key, const char* expected) const {
    static const Kv kEmpty{{}, GgufType::ARRAY, GgufType::UINT8, 0, nullptr};
    const Kv* kv = find(key);
    if (kv == nullptr) return kEmpty;
    if (kv->type != GgufType::ARRAY) {
        fail("metadata '" + printable(key) + "' is a " + type_name(kv->type) +
             ", expected an array of " + expected);
    }
    return *kv;
}

// The text of a message location given as a string or a lazy callable.
template <typename Where>
std::string describe(const Where& where) {
    if constexpr (std::is_invocable_v<const Where&>) {
        return where();
    } else {
        return std::string(where);
    }
}

// Bounds-checked cursor over the mapping. `where` describes the item being
// read so that a truncation message can say which one ran out.
class Parser {
public:
    Parser(const State& f, const GgufLimits& limits)
        : f_(f), limits_(limits), base_(f.map.data()), size_(f.map.size()) {}

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }
    const uint8_t* at(uint64_t off) const { return base_ + off; }

    // `where` names the item for messages: a string, or a callable that
    // builds one only on failure (for per-element reads in long arrays).
    template <typename Where>
    const uint8_t* take(uint64_t n, const Where& where) {
        if (n > remaining()) truncated(describe(where));
        const uint8_t* p = base_ + pos_;
        pos_ += n;
        return p;
    }
    template <typename T, typename Where>
    T read(const Where& where) {
        return load_le<T>(take(sizeof(T), where));
    }

    template <typename Where>
    std::string_view read_string(const Where& where) {
        return read_string(where, limits_.max_string, "string");
    }
    // `max` bounds the length; `what` is the kind of string a message names.
    template <typename Where>
    std::string_view read_string(const Where& where, uint64_t max, const char* what) {
        const uint64_t len = read<uint64_t>(where);
        if (len > max) {
            f_.fail(describe(where) + ": " + what + " length " + std::to_string(len) +
                    " exceeds the limit of " + std::to_string(max));
        }
        const uint8_t* p = take(len, where);
        return {reinterpret_cast<const char*>(p), static_cast<size_t>(len)};
    }

    [[noreturn]] void truncated(const std::string& where) const {
        f_.fail("truncated: " + where + " runs past the end of the file (" + std::to_string(size_) +
                " bytes)");
    }

    const GgufLimits& limits() const { return limits_; }

private:
    const State& f_;
    const GgufLimits& limits_;
    const uint8_t* base_;
    uint64_t size_;
    uint64_t pos_ = 0;
};

std::string nth(const char* what, uint64_t i, uint64_t n) {
    return std::string(what) + " " + std::to_string(i + 1) + " of " + std::to_string(n);
}

// Reads one value of type `t` (not an array) and checks it; `where` names it.
void skip_scalar(const State& f, Parser& p, GgufType t, const std::string& where) {
    if (t == GgufType::STRING) {
        p.read_string(where);
        return;
    }
    const uint8_t* v = p.take(scalar_size(t), where);
    if (t == GgufType::BOOL && v[0] > 1) {
        f.fail(where + ": bool value " + std::to_string(v[0]) + " is not 0 or 1");
    }
}

void parse_kv(State& f, Parser& p, uint64_t i, uint64_t n) {
    const std::string pair = nth("metadata pair", i, n);
    const std::string_view key = p.read_string(pair + " key");
    const std::string where = pair + " ('" + printable(key) + "')";
    const uint32_t raw_type = p.read<uint32_t>(where + " type");
    if (!known_type(raw_type)) {
        f.fail(where + ": unknown value type " + std::to_string(raw_type));
    }
    Kv kv{key, static_cast<GgufType>(raw_type), GgufType::UINT8, 0, nullptr};
    if (kv.type == GgufType::ARRAY) {
        const uint32_t raw_elem = p.read<uint32_t>(where + " array type");
        if (!known_type(raw_elem)) {
            f.fail(where + ": unknown array element type " + std::to_string(raw_elem));
        }
        kv.elem_type = static_cast<GgufType>(raw_elem);
        if (kv.elem_type == GgufType::ARRAY) {
            f.fail(where + ": arrays of arrays are not supported");
        }
        kv.count = p.read<uint64_t>(where + " array length");
        if (kv.count > p.limits().max_array) {
            f.fail(where + ": array length " + std::to_string(kv.count) + " exceeds the limit of " +
                   std::to_string(p.limits().max_array));
        }
        kv.value = p.at(p.pos());
        if (kv.elem_type == GgufType::STRING) {
            for (uint64_t e = 0; e < kv.count; ++e) {
                p.read_string([&] {
                    return where + " element " + std::to_string(e + 1) + " of " +
                           std::to_string(kv.count);
                });
            }
        } else {
            const uint64_t esize = scalar_size(kv.elem_type);
            // Checked before the multiply so that the product cannot wrap.
            if (kv.count > p.remaining() / esize) {
                p.truncated(where + " (" + std::to_string(kv.count) + " x " +
                            type_name(kv.elem_type) + ")");
            }
            const uint8_t* v = p.take(kv.count * esize, where);
            if (kv.elem_type == GgufType::BOOL) {
                for (uint64_t e = 0; e < kv.count; ++e) {
                    if (v[e] > 1) {
                        f.fail(where + ": element " + std::to_string(e + 1) + ": bool value " +
                               std::to_string(v[e]) + " is not 0 or 1");
                    }
                }
            }
        }
    } else if (kv.type == GgufType::STRING) {
        const std::string_view s = p.read_string(where + " value");
        kv.value = reinterpret_cast<const uint8_t*>(s.data());
        kv.count = s.size();
    } else {
        kv.value = p.at(p.pos());
        skip_scalar(f, p, kv.type, where + " value");
    }
    const auto [it, inserted] = f.kv_index.emplace(key, f.kvs.size());
    if (!inserted) {
        f.fail("duplicate metadata key '" + printable(key) + "' (pairs " +
               std::to_string(it->second + 1) + " and " + std::to_string(i + 1) + ")");
    }
    f.kvs.push_back(kv);
}

void parse_alignment(State& f) {
    const Kv* kv = f.find("general.alignment");
    if (kv == nullptr) return;
    if (!gguf_type_is_integer(kv->type)) {
        f.fail(std::string("general.alignment has type ") + type_name(kv->type) +
               ", expected uint32");
    }
    const std::optional<int64_t> v = load_integer(kv->type, kv->value);
    if (!v || *v <= 0 || !std::has_single_bit(static_cast<uint64_t>(*v))) {
        const std::string shown =
            v ? std::to_string(*v) : std::to_string(load_le<uint64_t>(kv->value));
        f.fail("general.alignment " + shown + " is not a power of two");
    }
    f.alignment = static_cast<uint64_t>(*v);
}

// Reads one tensor info; offsets stay relative to the data section until the
// header's end (and so the data section's start) is known.
void parse_tensor_info(State& f, Parser& p, uint64_t i, uint64_t n) {
    const std::string info = nth("tensor info", i, n);
    const std::string_view name = p.read_string(info + " name", p.limits().max_name, "name");
    const std::string where = info + " ('" + printable(name) + "')";
    // Tensors are looked up by NUL-terminated name across the plugin ABI.
    if (name.find('\0') != std::string_view::npos) f.fail(where + ": name contains a NUL byte");

    GgufFile::TensorInfo t{};
    t.name = std::string(name);
    const uint32_t n_dims = p.read<uint32_t>(where + " n_dims");
    if (n_dims < 1 || n_dims > DWELL_MAX_DIMS) {
        f.fail(where + ": n_dims " + std::to_string(n_dims) + " is out of range 1.." +
               std::to_string(DWELL_MAX_DIMS));
    }
    t.n_dims = static_cast<int32_t>(n_dims);
    uint64_t nelem = 1;
    for (int d = 0; d < DWELL_MAX_DIMS; ++d) t.ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
        const uint64_t dim = p.read<uint64_t>(where + " dimension " + std::to_string(d));
        if (dim == 0) f.fail(where + ": dimension " + std::to_string(d) + " is 0");
        if (dim > static_cast<uint64_t>(p.limits().max_dim)) {
            f.fail(where + ": dimension " + std::to_string(d) + " is " + std::to_string(dim) +
                   ", over the limit of " + std::to_string(p.limits().max_dim));
        }
        if (__builtin_mul_overflow(nelem, dim, &nelem) ||
            nelem > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            f.fail(where + ": element count overflows (dimension " + std::to_string(d) + " is " +
                   std::to_string(dim) + ")");
        }
        t.ne[d] = static_cast<int64_t>(dim);
    }
    t.ggml_type = p.read<uint32_t>(where + " type");
    const GgmlTypeInfo* ti = ggml_info(t.ggml_type);
    if (ti == nullptr) f.fail(where + ": unknown ggml type " + std::to_string(t.ggml_type));
    t.dtype = ti->dtype;
    if (t.ne[0] % ti->block_elems != 0) {
        f.fail(where + ": ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of the " +
               ti->name + " block size " + std::to_string(ti->block_elems));
    }
    // nelem fits int64 and block_bytes <= block_elems * 8 for every type, so
    // this product is checked rather than trusted.
    const uint64_t blocks = nelem / static_cast<uint64_t>(ti->block_elems);
    if (__builtin_mul_overflow(blocks, ti->block_bytes, &t.size)) {
        f.fail(where + ": data size overflows (" + std::to_string(nelem) + " " + ti->name +
               " elements)");
    }
    t.offset = p.read<uint64_t>(where + " offset");
    if (t.offset % f.alignment != 0) {
        f.fail(where + ": offset " + std::to_string(t.offset) +
               " is not a multiple of the alignment " + std::to_string(f.alignment));
    }
    const auto [it, inserted] = f.tensor_index.emplace(name, f.tensors.size());
    if (!inserted) {
        f.fail("duplicate tensor name '" + printable(name) + "' (tensors " +
               std::to_string(it->second + 1) + " and " + std::to_string(i + 1) + ")");
    }
    f.tensors.push_back(std::move(t));
}

void parse(State& f, const GgufLimits& limits) {
    Parser p(f, limits);
    const uint32_t magic = p.read<uint32_t>("magic");
    if (magic != kMagic) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "not a GGUF file (bad magic 0x%08x)", magic);
        f.fail(buf);
    }
    f.version = p.read<uint32_t>("version");
    if (f.version != 2 && f.version != 3) {
        std::string what = "unsupported GGUF version " + std::to_string(f.version);
        // A big-endian file reads as a byte-swapped version.
        if (f.version == 0x02000000 || f.version == 0x03000000) {
            what += " (a big-endian file; only little-endian is supported)";
        } else {
            what += " (supported: 2 and 3)";
        }
        f.fail(what);
    }
    const uint64_t n_tensors = p.read<uint64_t>("tensor count");
    const uint64_t n_kv = p.read<uint64_t>("metadata pair count");
    if (n_tensors > limits.max_tensors) {
        f.fail("tensor count " + std::to_string(n_tensors) + " exceeds the limit of " +
               std::to_string(limits.max_tensors));
    }
    if (n_kv > limits.max_kv) {
        f.fail("metadata pair count " + std::to_string(n_kv) + " exceeds the limit of " +
               std::to_string(limits.max_kv));
    }

    // Reserve no more than the remaining bytes could describe: a pair takes at
    // least 13 bytes (key length, type, one byte of value), a tensor info 32.
    f.kvs.reserve(static_cast<size_t>(std::min(n_kv, p.remaining() / 13)));
    for (uint64_t i = 0; i < n_kv; ++i) parse_kv(f, p, i, n_kv);
    parse_alignment(f);

    f.tensors.reserve(static_cast<size_t>(std::min(n_tensors, p.remaining() / 32)));
    for (uint64_t i = 0; i < n_tensors; ++i) parse_tensor_info(f, p, i, n_tensors);

    // The data section starts at the first aligned offset after the header.
    const uint64_t header_end = p.pos();
    uint64_t data_start = 0;
    if (__builtin_add_overflow(header_end, f.alignment - 1, &data_start)) {
        f.fail("data section start overflows (alignment " + std::to_string(f.alignment) + ")");
    }
    data_start &= ~(f.alignment - 1);

    const uint64_t file_size = f.map.size();
    for (size_t i = 0; i < f.tensors.size(); ++i) {
        GgufFile::TensorInfo& t = f.tensors[i];
        const std::string where = "tensor '" + printable(t.name) + "'";
        uint64_t begin = 0;
        uint64_t end = 0;
        if (__builtin_add_overflow(data_start, t.offset, &begin) ||
            __builtin_add_overflow(begin, t.size, &end)) {
            f.fail(where + ": offset " + std::to_string(t.offset) + " + size " +
                   std::to_string(t.size) + " overflows");
        }
        if (end > file_size) {
            f.fail("truncated: " + where + " data [offset " + std::to_string(begin) + ", " +
                   std::to_string(t.size) + " bytes] runs past the end of the file (" +
                   std::to_string(file_size) + " bytes)");
        }
        t.offset = begin;
        t.data = f.map.data() + begin;
    }
}

}  // namespace

struct GgufFile::Impl : State {};

// ---------------------------------------------------------------------------
// GgufFile

GgufFile::GgufFile(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::open(const std::filesystem::path& path, const GgufLimits& limits) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->map = map_file(path);
    parse(*impl, limits);
    return GgufFile(std::move(impl));
}

GgufFile GgufFile::from_bytes(std::vector<uint8_t> bytes, const std::filesystem::path& display_name,
                              const GgufLimits& limits) {
    auto impl = std::make_unique<Impl>();
    impl->path = display_name;
    impl->map = Mapping(std::move(bytes));
    parse(*impl, limits);
    return GgufFile(std::move(impl));
}

const std::filesystem::path& GgufFile::path() const {
    return impl_->path;
}
uint32_t GgufFile::version() const {
    return impl_->version;
}
uint64_t GgufFile::alignment() const {
    return impl_->alignment;
}
uint64_t GgufFile::file_size() const {
    return impl_->map.size();
}

bool GgufFile::has(std::string_view key) const {
    return impl_->find(key) != nullptr;
}

std::optional<GgufType> GgufFile::type_of(std::string_view key) const {
    const Kv* kv = impl_->find(key);
    if (kv == nullptr) return std::nullopt;
    return kv->type;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
    const Kv* kv = impl_->find(key);
    if (kv == nullptr || !(gguf_type_is_integer(kv->type) || kv->type == GgufType::BOOL)) {
        return std::nullopt;
    }
    return load_integer(kv->type, kv->value);
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
    const Kv* kv = impl_->find(key);
    if (kv == nullptr) return std::nullopt;
    switch (kv->type) {
        case GgufType::FLOAT32:
            return load_f32(kv->value);
        case GgufType::FLOAT64:
            return load_f64(kv->value);
        case GgufType::UINT64:
            return static_cast<double>(load_le<uint64_t>(kv->value));
        default:
            if (!gguf_type_is_integer(kv->type)) return std::nullopt;
            return static_cast<double>(*load_integer(kv->type, kv->value));
    }
}

std::optional<uint64_t> GgufFile::get_uint64(std::string_view key) const {
    const Kv* kv = impl_->find(key);
    if (kv == nullptr || kv->type != GgufType::UINT64) return std::nullopt;
    return load_le<uint64_t>(kv->value);
}

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const {
    const Kv* kv = impl_->find(key);
    if (kv == nullptr || kv->type != GgufType::STRING) return std::nullopt;
    return std::string_view(reinterpret_cast<const char*>(kv->value), kv->count);
}

std::optional<uint64_t> GgufFile::array_length(std::string_view key) const {
    const Kv* kv = impl_->find(key);
    if (kv == nullptr || kv->type != GgufType::ARRAY) return std::nullopt;
    return kv->count;
}

std::optional<GgufType> GgufFile::array_type(std::string_view key) const {
    const Kv* kv = impl_->find(key);
    if (kv == nullptr || kv->type != GgufType::ARRAY) return std::nullopt;
    return kv->elem_type;
}

std::vector<std::string_view> GgufFile::get_string_array(std::string_view key) const {
    const Kv& kv = impl_->array_of(key, "string");
    std::vector<std::string_view> out;
    if (kv.count == 0) return out;
    if (kv.elem_type != GgufType::STRING) {
        impl_->fail("metadata '" + printable(key) + "' is an array of " + type_name(kv.elem_type) +
                    ", expected an array of string");
    }
    out.reserve(kv.count);
    // Lengths were validated against the mapping when the file was opened.
    const uint8_t* p = kv.value;
    for (uint64_t i = 0; i < kv.count; ++i) {
        const uint64_t len = load_le<uint64_t>(p);
        out.emplace_back(reinterpret_cast<const char*>(p + 8), static_cast<size_t>(len));
        p += 8 + len;
    }
    return out;
}

std::vector<float> GgufFile::get_float_array(std::string_view key) const {
    const Kv& kv = impl_->array_of(key, "float32");
    std::vector<float> out;
    if (kv.count == 0) return out;
    if (kv.elem_type != GgufType::FLOAT32 && kv.elem_type != GgufType::FLOAT64) {
        impl_->fail("metadata '" + printable(key) + "' is an array of " + type_name(kv.elem_type) +
                    ", expected an array of float32");
    }
    out.reserve(kv.count);
    for (uint64_t i = 0; i < kv.count; ++i) {
        out.push_back(kv.elem_type == GgufType::FLOAT32
                          ? load_f32(kv.value + 4 * i)
                          : static_cast<float>(load_f64(kv.value + 8 * i)));
    }
    return out;
}

std::vector<int32_t> GgufFile::get_int_array(std::string_view key) const {
    const Kv& kv = impl_->array_of(key, "int32");
    std::vector<int32_t> out;
    if (kv.count == 0) return out;
    if (!gguf_type_is_integer(kv.elem_type)) {
        impl_->fail("metadata '" + printable(key) + "' is an array of " + type_name(kv.elem_type) +
                    ", expected an array of int32");
    }
    const uint64_t esize = scalar_size(kv.elem_type);
    out.reserve(kv.count);
    for (uint64_t i = 0; i < kv.count; ++i) {
        const std::optional<int64_t> v = load_integer(kv.elem_type, kv.value + esize * i);
        if (!v || *v < std::numeric_limits<int32_t>::min() ||
            *v > std::numeric_limits<int32_t>::max()) {
            impl_->fail("metadata '" + printable(key) + "' element " + std::to_string(i + 1) +
                        " does not fit in int32");
        }
        out.push_back(static_cast<int32_t>(*v));
    }
    return out;
}

std::vector<std::string> GgufFile::keys() const {
    std::vector<std::string> out;
    out.reserve(impl_->kvs.size());
    for (const Kv& kv : impl_->kvs) out.emplace_back(kv.key);
    return out;
}

std::string GgufFile::mapping_problem(bool check_file) const {
    return impl_->map.problem(check_file);
}

const std::vector<GgufFile::TensorInfo>& GgufFile::tensors() const {
    return impl_->tensors;
}

const GgufFile::TensorInfo* GgufFile::find_tensor(std::string_view name) const {
    auto it = impl_->tensor_index.find(name);
    return it == impl_->tensor_index.end() ? nullptr : &impl_->tensors[it->second];
}

// ---------------------------------------------------------------------------
// ggml type helpers

dwell_dtype dtype_from_ggml(uint32_t ggml_type) {
    const GgmlTypeInfo* ti = ggml_info(ggml_type);
    return ti == nullptr ? DWELL_DTYPE_COUNT : ti->dtype;
}

uint32_t ggml_from_dtype(dwell_dtype dtype) {
    for (uint32_t id = 0; id < kGgmlTypeCount; ++id) {
        if (kGgmlTypes[id].name != nullptr && kGgmlTypes[id].dtype == dtype &&
            dtype != DWELL_DTYPE_COUNT) {
            return id;
        }
    }
    throw Error(DWELL_ERR_UNSUPPORTED,
                std::string("dtype ") + dwell_dtype_name(dtype) + " has no GGUF (ggml) type");
}

const char* ggml_type_name(uint32_t ggml_type) {
    const GgmlTypeInfo* ti = ggml_info(ggml_type);
    return ti == nullptr ? "unknown" : ti->name;
}

int64_t ggml_block_elems(uint32_t ggml_type) {
    const GgmlTypeInfo* ti = ggml_info(ggml_type);
    return ti == nullptr ? 0 : ti->block_elems;
}

uint64_t ggml_block_bytes(uint32_t ggml_type) {
    const GgmlTypeInfo* ti = ggml_info(ggml_type);
    return ti == nullptr ? 0 : ti->block_bytes;
}

bool gguf_type_is_integer(GgufType t) {
    switch (t) {
        case GgufType::UINT8:
        case GgufType::INT8:
        case GgufType::UINT16:
        case GgufType::INT16:
        case GgufType::UINT32:
        case GgufType::INT32:
        case GgufType::UINT64:
        case GgufType::INT64:
            return true;
        default:
            return false;
    }
}

}  // namespace dwell
