// GGUF v3 writer. It writes what it is told: keys and tensor names are not
// checked for duplicates, so tests can build the hostile files the reader
// must reject; shapes and data sizes are checked, since a wrong size would
// silently shift every tensor that follows.
#include "dwell/tools/gguf_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/platform/output_file.hpp"

namespace dwell {
namespace {

constexpr uint64_t kDefaultAlignment = 32;

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
    static_assert(std::is_integral_v<T> && sizeof(T) <= 8);
    const auto u = static_cast<uint64_t>(static_cast<std::make_unsigned_t<T>>(v));
    for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<uint8_t>(u >> (8 * i)));
}

void put_f32(std::vector<uint8_t>& out, float v) {
    put(out, std::bit_cast<uint32_t>(v));
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
    put(out, static_cast<uint64_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
}

void put_key(std::vector<uint8_t>& out, std::string_view key, GgufType type) {
    put_string(out, key);
    put(out, static_cast<uint32_t>(type));
}

void put_array_header(std::vector<uint8_t>& out, std::string_view key, GgufType elem,
                      size_t count) {
    put_key(out, key, GgufType::ARRAY);
    put(out, static_cast<uint32_t>(elem));
    put(out, static_cast<uint64_t>(count));
}

void pad_to(std::vector<uint8_t>& out, uint64_t alignment) {
    out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
}

[[noreturn]] void spill_error(const std::filesystem::path& folder, const std::string& what,
                              int err) {
    throw Error(DWELL_ERR_IO, folder.string() + ": " + what + ": " + std::strerror(err));
}

[[noreturn]] void invalid(const std::string& what) {
    throw Error(DWELL_ERR_INVALID_ARGUMENT, "GGUF writer: " + what);
}

}  // namespace

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
    // Above 2^31 the uint32 general.alignment key could not describe it.
    if (!std::has_single_bit(alignment) || alignment > (uint64_t{1} << 31)) {
        invalid("alignment " + std::to_string(alignment) + " is not a power of two up to 2^31");
    }
}

void GgufWriter::add_uint32(std::string_view key, uint32_t v) {
    put_key(kv_, key, GgufType::UINT32);
    put(kv_, v);
    ++n_kv_;
}

void GgufWriter::add_int32(std::string_view key, int32_t v) {
    put_key(kv_, key, GgufType::INT32);
    put(kv_, v);
    ++n_kv_;
}

void GgufWriter::add_uint64(std::string_view key, uint64_t v) {
    put_key(kv_, key, GgufType::UINT64);
    put(kv_, v);
    ++n_kv_;
}

void GgufWriter::add_float32(std::string_view key, float v) {
    put_key(kv_, key, GgufType::FLOAT32);
    put_f32(kv_, v);
    ++n_kv_;
}

void GgufWriter::add_bool(std::string_view key, bool v) {
    put_key(kv_, key, GgufType::BOOL);
    put(kv_, static_cast<uint8_t>(v ? 1 : 0));
    ++n_kv_;
}

void GgufWriter::add_string(std::string_view key, std::string_view v) {
    put_key(kv_, key, GgufType::STRING);
    put_string(kv_, v);
    ++n_kv_;
}

void GgufWriter::add_string_array(std::string_view key, std::span<const std::string> v) {
    put_array_header(kv_, key, GgufType::STRING, v.size());
    for (const std::string& s : v) put_string(kv_, s);
    ++n_kv_;
}

void GgufWriter::add_float32_array(std::string_view key, std::span<const float> v) {
    put_array_header(kv_, key, GgufType::FLOAT32, v.size());
    for (float f : v) put_f32(kv_, f);
    ++n_kv_;
}

void GgufWriter::add_int32_array(std::string_view key, std::span<const int32_t> v) {
    put_array_header(kv_, key, GgufType::INT32, v.size());
    for (int32_t i : v) put(kv_, i);
    ++n_kv_;
}

void GgufWriter::add_tensor(std::string_view name, dwell_dtype dtype, std::span<const int64_t> ne,
                            std::span<const uint8_t> data) {
    const std::string where = "tensor '" + std::string(name) + "'";
    const uint32_t type = ggml_from_dtype(dtype);
    if (ne.empty() || ne.size() > DWELL_MAX_DIMS) {
        invalid(where + ": " + std::to_string(ne.size()) + " dimensions, expected 1.." +
                std::to_string(DWELL_MAX_DIMS));
    }
    const int64_t block = ggml_block_elems(type);
    if (ne[0] <= 0 || ne[0] % block != 0) {
        invalid(where + ": ne[0] = " + std::to_string(ne[0]) + " is not a positive multiple of " +
                "the " + ggml_type_name(type) + " block size " + std::to_string(block));
    }
    uint64_t expected = static_cast<uint64_t>(ne[0] / block);
    if (__builtin_mul_overflow(expected, ggml_block_bytes(type), &expected)) {
        invalid(where + ": size overflows");
    }
    for (size_t d = 1; d < ne.size(); ++d) {
        if (ne[d] <= 0) invalid(where + ": ne[" + std::to_string(d) + "] is not positive");
        if (__builtin_mul_overflow(expected, static_cast<uint64_t>(ne[d]), &expected)) {
            invalid(where + ": size overflows");
        }
    }
    if (data.size() != expected) {
        invalid(where + ": " + std::to_string(data.size()) + " bytes of data, expected " +
                std::to_string(expected) + " for its " + dwell_dtype_name(dtype) + " shape");
    }
    if (spill_.get() >= 0) {
        for (size_t done = 0; done < data.size();) {
            const ssize_t n = ::write(spill_.get(), data.data() + done, data.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) spill_error(spill_folder_, "writing tensor data to a temporary", errno);
            done += static_cast<size_t>(n);
        }
        spilled_ += data.size();
        tensors_.push_back(Tensor{
            std::string(name), dtype, std::vector<int64_t>(ne.begin(), ne.end()), {}, data.size()});
        return;
    }
    tensors_.push_back(Tensor{std::string(name), dtype, std::vector<int64_t>(ne.begin(), ne.end()),
                              std::vector<uint8_t>(data.begin(), data.end()), data.size()});
}

void GgufWriter::spill_tensors_to(const std::filesystem::path& folder) {
    if (!tensors_.empty()) invalid("spill_tensors_to must come before the first tensor");
    // O_TMPFILE: the temporary has no name, so nothing is left behind
    // whatever happens to this process.
    const int fd = ::open(folder.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) spill_error(folder, "creating a temporary for tensor data", errno);
    if (spill_.fd >= 0) ::close(spill_.fd);
    spill_.fd = fd;
    spill_folder_ = folder;
}

GgufWriter::Spill::~Spill() {
    if (fd >= 0) ::close(fd);
}

std::vector<uint8_t> GgufWriter::header_bytes() const {
    const bool explicit_alignment = alignment_ != kDefaultAlignment;
    std::vector<uint8_t> out;
    put(out, uint32_t{0x46554747});  // "GGUF"
    put(out, uint32_t{3});
    put(out, static_cast<uint64_t>(tensors_.size()));
    put(out, n_kv_ + (explicit_alignment ? 1 : 0));
    out.insert(out.end(), kv_.begin(), kv_.end());
    if (explicit_alignment) {
        put_key(out, "general.alignment", GgufType::UINT32);
        put(out, static_cast<uint32_t>(alignment_));
    }

    uint64_t offset = 0;  // relative to the data section
    for (const Tensor& t : tensors_) {
        put_string(out, t.name);
        put(out, static_cast<uint32_t>(t.ne.size()));
        for (int64_t d : t.ne) put(out, static_cast<uint64_t>(d));
        put(out, ggml_from_dtype(t.dtype));
        put(out, offset);
        offset += (t.size + alignment_ - 1) / alignment_ * alignment_;
    }

    // Every tensor, the last included, is padded as ggml does, so the file
    // length is a multiple of the alignment past the header.
    pad_to(out, alignment_);
    return out;
}

std::vector<uint8_t> GgufWriter::bytes() const {
    if (spill_.get() >= 0) invalid("bytes() is not for a writer that spills its tensors");
    std::vector<uint8_t> out = header_bytes();
    for (const Tensor& t : tensors_) {
        out.insert(out.end(), t.data.begin(), t.data.end());
        pad_to(out, alignment_);
    }
    return out;
}

void GgufWriter::write(const std::filesystem::path& path) const {
    // Tensor by tensor, not through bytes(): a second copy of every tensor
    // would double the memory a large file needs.
    OutputFile out(path);
    const std::vector<uint8_t> header = header_bytes();
    out.write(header.data(), header.size());
    const std::vector<uint8_t> zeros(static_cast<size_t>(std::min<uint64_t>(alignment_, 65536)), 0);
    std::vector<uint8_t> chunk;
    uint64_t spill_at = 0;
    for (const Tensor& t : tensors_) {
        if (spill_.get() >= 0) {
            chunk.resize(static_cast<size_t>(std::min<uint64_t>(t.size, uint64_t{8} << 20)));
            for (uint64_t done = 0; done < t.size;) {
                const size_t want =
                    static_cast<size_t>(std::min<uint64_t>(chunk.size(), t.size - done));
                const ssize_t n =
                    ::pread(spill_.get(), chunk.data(), want, static_cast<off_t>(spill_at + done));
                if (n < 0 && errno == EINTR) continue;
                if (n <= 0)
                    spill_error(spill_folder_, "reading back spilled tensor data",
                                n < 0 ? errno : EIO);
                out.write(chunk.data(), static_cast<size_t>(n));
                done += static_cast<uint64_t>(n);
            }
            spill_at += t.size;
        } else {
            out.write(t.data.data(), t.data.size());
        }
        const uint64_t rest = t.size % alignment_;
        for (uint64_t pad = rest ? alignment_ - rest : 0; pad > 0;) {
            const uint64_t n = std::min<uint64_t>(pad, zeros.size());
            out.write(zeros.data(), static_cast<size_t>(n));
            pad -= n;
        }
    }
    out.commit();
}

}  // namespace dwell
