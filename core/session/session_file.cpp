// Session files (layout in session_file.hpp). The header is read field by
// field in little-endian order; token, logit and KV row bytes are copied as
// they are, which is the file's order on every host dwell runs on.
#include "dwell/core/session/session_file.hpp"

#include <xxhash.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <system_error>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/platform/output_file.hpp"

namespace dwell {

static_assert(std::endian::native == std::endian::little,
              "session files store tokens, logits and KV rows in host byte order");

namespace {

constexpr char kMagic[8] = {'D', 'W', 'E', 'L', 'L', 'S', 'E', 'S'};
// 2: FP8_E4M3 keys hold offset keys (quant.h); version 1 files are read
// unless their keys are FP8.
// 3: the weights' fingerprint, the pending token and host data.
// 4: hybrid models' recurrent state (ABI 1.6).
constexpr uint32_t kVersion = 4;
constexpr size_t kHeaderBytesV2 = 56;
constexpr size_t kHeaderBytesV3 = 72;
constexpr size_t kHeaderBytes = 88;

size_t header_bytes(uint32_t version) {
    return version >= 4 ? kHeaderBytes : version == 3 ? kHeaderBytesV3 : kHeaderBytesV2;
}
constexpr size_t kChecksumBytes = 8;

bool is_kv_dtype(uint32_t t) {
    return t == DWELL_F16 || t == DWELL_F32 || t == DWELL_Q8_0 || t == DWELL_FP8_E4M3;
}

template <typename T>
void put_le(uint8_t*& p, T v) {
    const auto u = static_cast<uint64_t>(v);
    for (size_t i = 0; i < sizeof(T); ++i) *p++ = static_cast<uint8_t>(u >> (8 * i));
}

template <typename T>
T get_le(const uint8_t*& p) {
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= uint64_t{*p++} << (8 * i);
    return static_cast<T>(v);
}

struct XxhFree {
    void operator()(XXH3_state_t* s) const { XXH3_freeState(s); }
};

std::unique_ptr<XXH3_state_t, XxhFree> new_hash(const std::filesystem::path& path) {
    std::unique_ptr<XXH3_state_t, XxhFree> st(XXH3_createState());
    if (!st) throw Error(DWELL_ERR_OUT_OF_MEMORY, path.string() + ": cannot allocate a hash");
    XXH3_64bits_reset(st.get());
    return st;
}

// Bytes of the whole file the header describes; false if that overflows.
bool expected_file_bytes(const SessionFileHeader& h, const SessionFileModel& m, uint64_t* out) {
    const auto past = static_cast<uint64_t>(h.n_past);
    const auto n_layer = static_cast<uint64_t>(m.n_layer);
    uint64_t rows = 0;
    uint64_t kv = 0;
    uint64_t states = 0;
    uint64_t total = header_bytes(h.version) + kChecksumBytes + 4 * past +
                     4 * uint64_t(h.n_logits) + h.host_data_bytes;
    const uint64_t per_layer =
        h.version >= 4 ? static_cast<uint64_t>(m.state_elems[0] + m.state_elems[1]) * 4 : 0;
    return !__builtin_mul_overflow(n_layer * 2, past, &rows) &&
           !__builtin_mul_overflow(rows, h.row_bytes, &kv) &&
           !__builtin_mul_overflow(n_layer, per_layer, &states) &&
           !__builtin_add_overflow(total, kv, &total) &&
           !__builtin_add_overflow(total, states, out);
}

}  // namespace

// ---------------------------------------------------------------------------
// Writer

struct SessionFileWriter::Impl {
    // Sessions hold what the user typed and the model answered: 0600.
    explicit Impl(const std::filesystem::path& p) : out(p, 0600) {}
    OutputFile out;
    // KV rows arrive a few hundred bytes at a time; written in large blocks.
    std::vector<uint8_t> buffer;
    std::unique_ptr<XXH3_state_t, XxhFree> hash;
    bool finished = false;

    void flush() {
        out.write(buffer.data(), buffer.size());
        buffer.clear();
    }
};

SessionFileWriter::SessionFileWriter(const std::filesystem::path& path,
                                     const SessionFileModel& model, const SessionFileHeader& header)
    : impl_(std::make_unique<Impl>(path)) {
    // Written to a temporary beside the target and renamed (OutputFile), so
    // a failed save never leaves a half-written session under the real name.
    impl_->hash = new_hash(path);
    std::array<uint8_t, kHeaderBytes> bytes{};
    uint8_t* p = bytes.data();
    std::memcpy(p, kMagic, sizeof kMagic);
    p += sizeof kMagic;
    put_le<uint32_t>(p, kVersion);
    put_le<uint32_t>(p, static_cast<uint32_t>(header.kv_dtype));
    put_le<uint32_t>(p, static_cast<uint32_t>(model.n_layer));
    put_le<uint32_t>(p, static_cast<uint32_t>(header.n_ctx));
    put_le<uint64_t>(p, static_cast<uint64_t>(model.kv_width));
    put_le<uint64_t>(p, static_cast<uint64_t>(model.n_vocab));
    put_le<uint64_t>(p, model.weight_bytes);
    put_le<uint32_t>(p, static_cast<uint32_t>(header.n_past));
    put_le<uint32_t>(p, static_cast<uint32_t>(header.n_logits));
    put_le<uint64_t>(p, model.fingerprint);
    put_le<int32_t>(p, header.pending_token);
    put_le<uint32_t>(p, header.host_data_bytes);
    put_le<uint64_t>(p, static_cast<uint64_t>(model.state_elems[0]));
    put_le<uint64_t>(p, static_cast<uint64_t>(model.state_elems[1]));
    write(bytes.data(), bytes.size());
}

SessionFileWriter::~SessionFileWriter() = default;

void SessionFileWriter::write(const void* data, size_t bytes) {
    constexpr size_t kBlock = size_t{1} << 20;
    XXH3_64bits_update(impl_->hash.get(), data, bytes);
    const auto* p = static_cast<const uint8_t*>(data);
    impl_->buffer.insert(impl_->buffer.end(), p, p + bytes);
    if (impl_->buffer.size() >= kBlock) impl_->flush();
}

void SessionFileWriter::finish() {
    std::array<uint8_t, kChecksumBytes> bytes{};
    uint8_t* p = bytes.data();
    put_le<uint64_t>(p, XXH3_64bits_digest(impl_->hash.get()));
    impl_->buffer.insert(impl_->buffer.end(), bytes.begin(), bytes.end());
    impl_->flush();
    impl_->out.commit();
    impl_->finished = true;
}

// ---------------------------------------------------------------------------
// Reader

struct SessionFileReader::Impl {
    std::filesystem::path path;
    SessionFileModel model;
    SessionFileHeader header;
    std::ifstream in;
    std::unique_ptr<XXH3_state_t, XxhFree> hash;

    [[noreturn]] void corrupt(const std::string& why) const {
        throw Error(DWELL_ERR_CORRUPT, path.string() + ": not a usable dwell session: " + why);
    }
    void read(void* p, size_t n) {
        in.read(static_cast<char*>(p), static_cast<std::streamsize>(n));
        if (static_cast<size_t>(in.gcount()) != n) corrupt("the file is truncated");
        XXH3_64bits_update(hash.get(), p, n);
    }
    void check_header(uint64_t file_bytes);
};

void SessionFileReader::Impl::check_header(uint64_t file_bytes) {
    std::array<uint8_t, kHeaderBytes> bytes{};
    if (file_bytes < kHeaderBytesV2) corrupt("the file is truncated");
    read(bytes.data(), kHeaderBytesV2);
    if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) corrupt("bad magic");
    const uint8_t* p = bytes.data() + sizeof kMagic;
    const auto version = get_le<uint32_t>(p);
    if (version < 1 || version > kVersion) {
        corrupt("version " + std::to_string(version) + ", this dwell reads 1 to " +
                std::to_string(kVersion));
    }
    if (version >= 3) {
        if (file_bytes < header_bytes(version)) corrupt("the file is truncated");
        read(bytes.data() + kHeaderBytesV2, header_bytes(version) - kHeaderBytesV2);
    }
    const auto dtype = get_le<uint32_t>(p);
    if (version == 1 && dtype == DWELL_FP8_E4M3) {
        throw Error(
            DWELL_ERR_UNSUPPORTED,
            path.string() + ": the session's FP8 keys are in the plain encoding of " +
                "dwell ABI 1.3 and earlier (file version 1), which this dwell no longer reads: " +
                "run the conversation's prompt again instead of restoring it");
    }
    const auto n_layer = get_le<uint32_t>(p);
    const auto n_ctx = get_le<uint32_t>(p);
    const auto kv_width = get_le<uint64_t>(p);
    const auto n_vocab = get_le<uint64_t>(p);
    const auto weight_bytes = get_le<uint64_t>(p);
    const auto n_past = get_le<uint32_t>(p);
    const auto n_logits = get_le<uint32_t>(p);
    uint64_t fingerprint = 0;
    int32_t pending = -1;
    uint32_t host_bytes = 0;
    if (version >= 3) {
        fingerprint = get_le<uint64_t>(p);
        pending = get_le<int32_t>(p);
        host_bytes = get_le<uint32_t>(p);
    }
    uint64_t state_elems[2] = {0, 0};
    if (version >= 4) {
        state_elems[0] = get_le<uint64_t>(p);
        state_elems[1] = get_le<uint64_t>(p);
    }
    if (n_layer != static_cast<uint64_t>(model.n_layer) ||
        kv_width != static_cast<uint64_t>(model.kv_width) ||
        n_vocab != static_cast<uint64_t>(model.n_vocab) || weight_bytes != model.weight_bytes) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    path.string() + ": the session was saved with another model than " +
                        model.source + " (" + std::to_string(n_layer) + " layers, KV width " +
                        std::to_string(kv_width) + ", vocabulary " + std::to_string(n_vocab) +
                        "); restore it with the model it was saved with");
    }
    // Older files have no fingerprint: their shape check above is all there is.
    if (version >= 3 && fingerprint != model.fingerprint) {
        throw Error(DWELL_ERR_INVALID_ARGUMENT,
                    path.string() + ": the session was saved with other weights than " +
                        model.source +
                        " (same shape, different weights: a fine-tune or another "
                        "quantization?); restore it with the model it was saved with");
    }
    // A model's state sizes are part of its shape; a file from before
    // version 4 has none, which only a model without state agrees with.
    if (state_elems[0] != static_cast<uint64_t>(model.state_elems[0]) ||
        state_elems[1] != static_cast<uint64_t>(model.state_elems[1])) {
        const std::string theirs = " (" + std::to_string(model.state_elems[0]) + " and " +
                                   std::to_string(model.state_elems[1]) + " values per layer)";
        throw Error(
            DWELL_ERR_INVALID_ARGUMENT,
            path.string() +
                (version < 4
                     ? ": a version " + std::to_string(version) +
                           " session file, from before dwell saved the "
                           "recurrent state that " +
                           model.source + " has" + theirs
                     : ": the session's recurrent state (" + std::to_string(state_elems[0]) +
                           " and " + std::to_string(state_elems[1]) +
                           " values per layer) does not match " + model.source + theirs) +
                ": run the conversation's prompt again instead of restoring it");
    }
    if (pending < -1 || pending >= static_cast<int64_t>(n_vocab)) {
        corrupt("pending token " + std::to_string(pending) + " is outside the vocabulary");
    }
    if (host_bytes > kSessionMaxHostData) {
        corrupt(std::to_string(host_bytes) + " bytes of host data exceed the limit of " +
                std::to_string(kSessionMaxHostData));
    }
    if (!is_kv_dtype(dtype)) {
        corrupt("KV type " + std::to_string(dtype) + " is not one dwell stores (f16, f32, q8_0, " +
                "fp8_e4m3)");
    }
    if (n_ctx == 0 || n_ctx > static_cast<uint32_t>(kSessionMaxContext)) {
        corrupt("context of " + std::to_string(n_ctx) + " tokens is outside 1.." +
                std::to_string(kSessionMaxContext));
    }
    if (n_past > n_ctx) {
        corrupt(std::to_string(n_past) + " tokens do not fit its context of " +
                std::to_string(n_ctx));
    }
    if (n_logits != 0 && n_logits != n_vocab) {
        corrupt(std::to_string(n_logits) + " logits for a vocabulary of " +
                std::to_string(n_vocab));
    }
    header.kv_dtype = static_cast<dwell_dtype>(dtype);
    header.n_ctx = static_cast<int32_t>(n_ctx);
    header.n_past = static_cast<int32_t>(n_past);
    header.n_logits = static_cast<int32_t>(n_logits);
    header.pending_token = pending;
    header.host_data_bytes = host_bytes;
    header.version = version;
    header.row_bytes = dwell_row_bytes(header.kv_dtype, model.kv_width);
    if (header.row_bytes == 0) {
        corrupt(std::string("KV width ") + std::to_string(model.kv_width) + " is not whole " +
                dwell_dtype_name(header.kv_dtype) + " blocks");
    }
    uint64_t expected = 0;
    if (!expected_file_bytes(header, model, &expected)) {
        corrupt("its sizes overflow (" + std::to_string(n_past) + " tokens)");
    }
    if (file_bytes < expected) {
        corrupt("the file is truncated (" + std::to_string(file_bytes) +
                " bytes; its header asks " + "for " + std::to_string(expected) + ")");
    }
    if (file_bytes > expected) {
        corrupt(std::to_string(file_bytes - expected) + " bytes follow the checksum");
    }
}

SessionFileReader::SessionFileReader(const std::filesystem::path& path,
                                     const SessionFileModel& model)
    : impl_(std::make_unique<Impl>()) {
    impl_->path = path;
    impl_->model = model;
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
        throw Error(DWELL_ERR_IO,
                    path.string() + ": cannot open the session file: not a regular file");
    }
    impl_->in.open(path, std::ios::binary);
    if (!impl_->in) {
        throw Error(DWELL_ERR_IO,
                    path.string() + ": cannot open the session file: " + std::strerror(errno));
    }
    const uint64_t file_bytes = std::filesystem::file_size(path, ec);
    if (ec) {
        throw Error(DWELL_ERR_IO,
                    path.string() + ": cannot open the session file: " + ec.message());
    }
    impl_->hash = new_hash(path);
    impl_->check_header(file_bytes);
}

SessionFileReader::~SessionFileReader() = default;

const SessionFileHeader& SessionFileReader::header() const {
    return impl_->header;
}

std::vector<int32_t> SessionFileReader::read_tokens() {
    std::vector<int32_t> tokens(static_cast<size_t>(impl_->header.n_past));
    impl_->read(tokens.data(), tokens.size() * sizeof(int32_t));
    for (int32_t t : tokens) {
        if (t < 0 || t >= impl_->model.n_vocab) {
            impl_->corrupt("token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                           std::to_string(impl_->model.n_vocab - 1) + ")");
        }
    }
    return tokens;
}

std::vector<float> SessionFileReader::read_logits() {
    std::vector<float> logits(static_cast<size_t>(impl_->header.n_logits));
    impl_->read(logits.data(), logits.size() * sizeof(float));
    return logits;
}

std::string SessionFileReader::read_host_data() {
    std::string data(impl_->header.host_data_bytes, '\0');
    impl_->read(data.data(), data.size());
    return data;
}

void SessionFileReader::read_row(std::span<uint8_t> row) {
    if (row.size() != impl_->header.row_bytes) {
        throw Error(DWELL_ERR_INTERNAL, impl_->path.string() + ": a KV row of " +
                                            std::to_string(row.size()) + " bytes was asked for, " +
                                            "the file holds rows of " +
                                            std::to_string(impl_->header.row_bytes));
    }
    impl_->read(row.data(), row.size());
}

void SessionFileReader::read_states(std::span<float> values) {
    const SessionFileModel& m = impl_->model;
    const uint64_t want = impl_->header.version >= 4
                              ? static_cast<uint64_t>(m.n_layer) *
                                    static_cast<uint64_t>(m.state_elems[0] + m.state_elems[1])
                              : 0;
    if (values.size() != want) {
        throw Error(DWELL_ERR_INTERNAL,
                    impl_->path.string() + ": " + std::to_string(values.size()) +
                        " state values were asked for, the file holds " + std::to_string(want));
    }
    impl_->read(values.data(), values.size_bytes());
}

void SessionFileReader::finish() {
    const uint64_t want = XXH3_64bits_digest(impl_->hash.get());
    std::array<uint8_t, kChecksumBytes> bytes{};
    impl_->in.read(reinterpret_cast<char*>(bytes.data()), bytes.size());
    if (static_cast<size_t>(impl_->in.gcount()) != bytes.size())
        impl_->corrupt("the file is truncated");
    const uint8_t* p = bytes.data();
    const auto got = get_le<uint64_t>(p);
    if (got != want) impl_->corrupt("the checksum does not match (the file is damaged)");
    if (impl_->in.peek() != std::char_traits<char>::eof())
        impl_->corrupt("bytes follow the checksum");
}

}  // namespace dwell
