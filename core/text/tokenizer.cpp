// Tokenizer on SPM vocabularies or on dwell's byte-level BPE engine
// (bpe_tokenizer.hpp), made to tokenize exactly as llama.cpp does. An SPM
// vocabulary is loaded into sentencepiece, which checks it and keeps it for
// packs and .model files, but encoded by SpmEncoder (spm_encoder.hpp): the
// two differ on malformed UTF-8, on user-defined tokens and on merges into
// control tokens, and llama.cpp's ids are the ones a model was run with.
//
// llama.cpp applies no text normalisation besides the dummy prefix and
// replacing ' ' with U+2581, so every model we load is first rewritten to an
// identity NormalizerSpec with remove_extra_whitespaces = false. Real .model
// files need this: tok512.model stores only name = "identity", which leaves
// remove_extra_whitespaces at its proto default of true, and sentencepiece
// would then collapse "a  b" to "a b" and drop leading/trailing spaces.
//
// libsentencepiece ships without the ModelProto headers (no protobuf
// dependency for users), so the few messages we read or write are handled in
// the protobuf wire format directly; see sentencepiece_model.proto for the
// field numbers used below.
//
// decode() does not use sentencepiece's Decode: it is defined on token_bytes()
// so that StreamDecoder, which sees one token at a time, produces exactly the
// same text.
#include "dwell/core/text/tokenizer.hpp"

#include <sentencepiece_processor.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <utility>

#include "dwell/core/base/error.hpp"
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/platform/text_file.hpp"
#include "dwell/core/text/bpe_pre_tokenizer.hpp"
#include "dwell/core/text/bpe_tokenizer.hpp"
#include "dwell/core/text/special_token_split.hpp"
#include "dwell/core/text/spm_encoder.hpp"
#include "dwell/status.h"

namespace dwell {
namespace {

// ---------------------------------------------------------------------------
// Protobuf wire format (proto2, the subset sentencepiece models use).

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Field numbers from sentencepiece_model.proto.
namespace model_proto {
constexpr uint32_t kPieces = 1;
constexpr uint32_t kTrainerSpec = 2;
constexpr uint32_t kNormalizerSpec = 3;
constexpr uint32_t kSelfTestData = 4;
constexpr uint32_t kDenormalizerSpec = 5;
}  // namespace model_proto
namespace piece_proto {
constexpr uint32_t kPiece = 1;
constexpr uint32_t kScore = 2;
constexpr uint32_t kType = 3;
}  // namespace piece_proto
namespace trainer_proto {
constexpr uint32_t kModelType = 3;
constexpr uint32_t kVocabSize = 4;
constexpr uint32_t kByteFallback = 35;
constexpr uint32_t kUnkId = 40;
constexpr uint32_t kBosId = 41;
constexpr uint32_t kEosId = 42;
constexpr uint32_t kUnkPiece = 45;
constexpr uint32_t kBosPiece = 46;
constexpr uint32_t kEosPiece = 47;
constexpr uint64_t kModelTypeBpe = 2;
}  // namespace trainer_proto
namespace normalizer_proto {
constexpr uint32_t kName = 1;
constexpr uint32_t kAddDummyPrefix = 3;
constexpr uint32_t kRemoveExtraWhitespaces = 4;
constexpr uint32_t kEscapeWhitespaces = 5;
}  // namespace normalizer_proto

// ModelProto.SentencePiece.Type; GGUF's tokenizer.ggml.token_type uses the
// same numbers.
enum PieceType : int32_t {
    kNormal = 1,
    kUnknown = 2,
    kControl = 3,
    kUserDefined = 4,
    kUnused = 5,
    kByte = 6,
};

class ProtoWriter {
public:
    void add_varint(uint32_t field, uint64_t v) {
        tag(field, kVarint);
        varint(v);
    }
    // int32 fields are varints of the sign-extended 64-bit value.
    void add_int32(uint32_t field, int32_t v) {
        add_varint(field, static_cast<uint64_t>(static_cast<int64_t>(v)));
    }
    void add_bool(uint32_t field, bool v) { add_varint(field, v ? 1 : 0); }
    void add_float(uint32_t field, float v) {
        tag(field, kFixed32);
        uint32_t bits = 0;
        std::memcpy(&bits, &v, sizeof bits);
        for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
    }
    void add_bytes(uint32_t field, std::string_view v) {
        tag(field, kLengthDelimited);
        varint(v.size());
        out_.append(v);
    }
    void append_raw(std::string_view encoded) { out_.append(encoded); }
    const std::string& data() const { return out_; }

private:
    void tag(uint32_t field, WireType wire) { varint((uint64_t{field} << 3) | wire); }
    void varint(uint64_t v) {
        while (v >= 0x80) {
            out_.push_back(static_cast<char>((v & 0x7F) | 0x80));
            v >>= 7;
        }
        out_.push_back(static_cast<char>(v));
    }
    std::string out_;
};

struct ProtoField {
    uint32_t number = 0;
    uint32_t wire = 0;
    uint64_t value = 0;        // varint fields
    std::string_view payload;  // length-delimited fields
    std::string_view raw;      // the whole field, tag included
};

// Splits one message into its top-level fields; nullopt if it is not
// well-formed wire format.
std::optional<std::vector<ProtoField>> parse_fields(std::string_view msg) {
    std::vector<ProtoField> fields;
    size_t pos = 0;
    auto read_varint = [&](uint64_t& out) {
        out = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (pos >= msg.size()) return false;
            const auto byte = static_cast<uint8_t>(msg[pos++]);
            out |= uint64_t{byte & 0x7Fu} << shift;
            if ((byte & 0x80) == 0) return true;
        }
        return false;
    };
    while (pos < msg.size()) {
        const size_t start = pos;
        uint64_t key = 0;
        if (!read_varint(key)) return std::nullopt;
        ProtoField f;
        f.number = static_cast<uint32_t>(key >> 3);
        f.wire = static_cast<uint32_t>(key & 7);
        if (f.number == 0 || (key >> 3) > 0x1FFFFFFF) return std::nullopt;
        switch (f.wire) {
            case kVarint:
                if (!read_varint(f.value)) return std::nullopt;
                break;
            case kFixed64:
            case kFixed32: {
                const size_t n = f.wire == kFixed64 ? 8 : 4;
                if (msg.size() - pos < n) return std::nullopt;
                pos += n;
                break;
            }
            case kLengthDelimited: {
                uint64_t n = 0;
                if (!read_varint(n) || n > msg.size() - pos) return std::nullopt;
                f.payload = msg.substr(pos, n);
                pos += n;
                break;
            }
            default:  // groups (3, 4) are not used by sentencepiece models
                return std::nullopt;
        }
        f.raw = msg.substr(start, pos - start);
        fields.push_back(f);
    }
    return fields;
}

// The normalisation llama.cpp applies: none, except the optional dummy
// prefix and ' ' -> U+2581.
std::string llama_normalizer_spec(bool add_dummy_prefix) {
    ProtoWriter w;
    w.add_bytes(normalizer_proto::kName, "identity");
    w.add_bool(normalizer_proto::kAddDummyPrefix, add_dummy_prefix);
    w.add_bool(normalizer_proto::kRemoveExtraWhitespaces, false);
    w.add_bool(normalizer_proto::kEscapeWhitespaces, true);
    return w.data();
}

// Rewrites a serialized ModelProto for llama.cpp-compatible tokenization:
// the NormalizerSpec becomes identity (its precompiled charsmap, e.g.
// nmt_nfkc, is dropped, as llama.cpp's GGUF conversion drops it) keeping only
// add_dummy_prefix; the denormalizer goes too. The self-test samples go as
// well, because sentencepiece re-runs them on load and samples recorded under
// the old normaliser would now fail.
std::string with_llama_normalizer(std::string_view serialized, const std::string& source,
                                  bool* add_dummy_prefix) {
    const auto fields = parse_fields(serialized);
    if (!fields) {
        throw Error(DWELL_ERR_CORRUPT,
                    source + ": not a sentencepiece model (malformed protobuf data)");
    }
    bool has_pieces = false;
    *add_dummy_prefix = true;  // the proto default
    ProtoWriter out;
    for (const ProtoField& f : *fields) {
        if (f.number == model_proto::kNormalizerSpec && f.wire == kLengthDelimited) {
            const auto spec = parse_fields(f.payload);
            if (!spec) {
                throw Error(DWELL_ERR_CORRUPT,
                            source + ": not a sentencepiece model (malformed normalizer_spec)");
            }
            for (const ProtoField& s : *spec) {
                if (s.number == normalizer_proto::kAddDummyPrefix && s.wire == kVarint) {
                    *add_dummy_prefix = s.value != 0;
                }
            }
            continue;
        }
        if (f.number == model_proto::kSelfTestData || f.number == model_proto::kDenormalizerSpec) {
            continue;
        }
        has_pieces = has_pieces || f.number == model_proto::kPieces;
        out.append_raw(f.raw);
    }
    if (!has_pieces) {
        throw Error(DWELL_ERR_CORRUPT, source + ": not a sentencepiece model (no pieces)");
    }
    out.add_bytes(model_proto::kNormalizerSpec, llama_normalizer_spec(*add_dummy_prefix));
    return out.data();
}

// ---------------------------------------------------------------------------
// UTF-8

enum class Utf8Status { kValid, kInvalid, kTruncated };

// Classifies the character at the start of non-empty `s` by the well-formed
// byte sequences of Unicode table 3-7 (no overlongs, surrogates or values
// past U+10FFFF). *len is its length when valid, 1 when invalid.
Utf8Status next_utf8(std::string_view s, size_t* len) {
    const auto b0 = static_cast<uint8_t>(s[0]);
    size_t need = 0;
    uint8_t lo = 0x80;  // bounds of the second byte; later ones are 80..BF
    uint8_t hi = 0xBF;
    if (b0 < 0x80) {
        *len = 1;
        return Utf8Status::kValid;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        *len = 1;
        return Utf8Status::kInvalid;
    }
    for (size_t i = 1; i < need; ++i) {
        if (i >= s.size()) {
            *len = 1;
            return Utf8Status::kTruncated;
        }
        const auto b = static_cast<uint8_t>(s[i]);
        if (b < (i == 1 ? lo : 0x80) || b > (i == 1 ? hi : 0xBF)) {
            *len = 1;
            return Utf8Status::kInvalid;
        }
    }
    *len = need;
    return Utf8Status::kValid;
}

constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// Appends `bytes` to `out` as valid UTF-8, one U+FFFD per byte that does not
// begin a well-formed character (as sentencepiece's own decoder does). Unless
// `flush`, a trailing character that later bytes could still complete is
// left out. Returns the number of bytes consumed. The decision for each byte
// depends only on the bytes of its own character, so feeding the input in
// pieces gives the same text as feeding it whole.
size_t append_utf8(std::string_view bytes, bool flush, std::string& out) {
    size_t pos = 0;
    while (pos < bytes.size()) {
        size_t len = 0;
        const Utf8Status st = next_utf8(bytes.substr(pos), &len);
        if (st == Utf8Status::kTruncated && !flush) break;
        if (st == Utf8Status::kValid) {
            out.append(bytes.substr(pos, len));
        } else {
            out.append(kReplacementChar);
        }
        pos += len;
    }
    return pos;
}

// "<0x0A>" -> 0x0A; sentencepiece has already checked the form of BYTE pieces.
std::optional<char> byte_piece_value(std::string_view piece) {
    if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return std::nullopt;
    unsigned value = 0;
    for (char c : piece.substr(3, 2)) {
        value <<= 4;
        if (c >= '0' && c <= '9') {
            value |= static_cast<unsigned>(c - '0');
        } else if (c >= 'A' && c <= 'F') {
            value |= static_cast<unsigned>(c - 'A' + 10);
        } else if (c >= 'a' && c <= 'f') {
            value |= static_cast<unsigned>(c - 'a' + 10);
        } else {
            return std::nullopt;
        }
    }
    return static_cast<char>(value);
}

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";  // U+2581, "▁"
// What an unknown token decodes to: sentencepiece's default unk_surface, a
// spaced U+2047. (tok512.model stores it as escaped text, " \342\201\207 ",
// which we do not want to print.)
constexpr std::string_view kUnknownSurface = " \xE2\x81\x87 ";

std::string replace_space_symbol(std::string_view piece) {
    std::string out;
    out.reserve(piece.size());
    size_t pos = 0;
    while (pos < piece.size()) {
        const size_t hit = piece.find(kSpaceSymbol, pos);
        if (hit == std::string_view::npos) {
            out.append(piece.substr(pos));
            break;
        }
        out.append(piece.substr(pos, hit - pos));
        out.push_back(' ');
        pos = hit + kSpaceSymbol.size();
    }
    return out;
}

std::string status_message(const sentencepiece::util::Status& st) {
    return sentencepiece_error_text(st.message());
}

// sentencepiece reports most malformed models through its status, but some
// (a piece that starts with a NUL byte) escape as exceptions: both become
// the returned message, empty when the model loaded.
std::string load_serialized_proto(sentencepiece::SentencePieceProcessor& sp,
                                  std::string_view proto) {
    try {
        const auto st = sp.LoadFromSerializedProto(proto);
        return st.ok() ? std::string() : status_message(st);
    } catch (const std::exception& e) {
        return sentencepiece_error_text(e.what());
    }
}

// An optional integer key: absent is nullopt, but present with another type
// is an error naming both, so a wrong type never silently means the default.
std::optional<int64_t> optional_int(const GgufFile& file, const char* key) {
    if (auto v = file.get_int(key)) return v;
    const auto type = file.type_of(key);
    if (!type) return std::nullopt;
    const char* kind = *type == GgufType::STRING   ? "a string"
                       : *type == GgufType::ARRAY  ? "an array"
                       : *type == GgufType::UINT64 ? "an integer above INT64_MAX"
                                                   : "a float";
    throw Error(DWELL_ERR_CORRUPT, file.path().string() + ": metadata key " + key +
                                       " is not an integer (it is " + kind + ")");
}

// The type of each of the n pieces of a serialized ModelProto (NORMAL where
// a piece states none); sentencepiece's API does not tell user-defined
// pieces from normal ones.
std::vector<int32_t> piece_types(std::string_view serialized, int n) {
    std::vector<int32_t> types(static_cast<size_t>(n), kNormal);
    const auto fields = parse_fields(serialized);
    if (!fields) return types;
    size_t i = 0;
    for (const ProtoField& f : *fields) {
        if (f.number != model_proto::kPieces || f.wire != kLengthDelimited) continue;
        if (i >= types.size()) break;
        if (const auto piece = parse_fields(f.payload)) {
            for (const ProtoField& p : *piece) {
                if (p.number == piece_proto::kType && p.wire == kVarint) {
                    types[i] = static_cast<int32_t>(p.value);
                }
            }
        }
        ++i;
    }
    return types;
}

}  // namespace

// ---------------------------------------------------------------------------

struct Tokenizer::Impl {
    sentencepiece::SentencePieceProcessor sp;  // SPM vocabularies
    std::unique_ptr<SpmEncoder> spm;           // SPM vocabularies: encodes as llama.cpp
    std::unique_ptr<bpe::BpeTokenizer> bpe;    // byte-level BPE vocabularies
    std::vector<std::string> pieces;           // BPE: piece() of every id
    std::string source;                        // file name, for messages
    std::vector<std::string> bytes;            // token_bytes() of every id
    std::vector<bool> control;
    // Control, unknown and user-defined tokens, and the user-defined ones
    // alone, in the order split_at_special_tokens() wants.
    std::vector<SpecialToken> specials;
    std::vector<SpecialToken> user_defined;
    int32_t bos = -1;
    int32_t eos = -1;
    int32_t unk = -1;
    bool add_dummy_prefix = true;
    bool add_bos = true;

    // One run of text between special tokens; each run gets its own dummy
    // prefix, as llama.cpp gives every run after a special token one.
    void encode_spm(std::string_view text, std::vector<int32_t>& out) const {
        std::string escaped;
        escaped.reserve(text.size() + text.size() / 2 + kSpaceSymbol.size());
        if (add_dummy_prefix) escaped.append(kSpaceSymbol);
        for (char c : text) {
            if (c == ' ') {
                escaped.append(kSpaceSymbol);
            } else {
                escaped.push_back(c);
            }
        }
        spm->encode(escaped, out);
    }

    void check_id(int32_t id) const {
        if (id < 0 || static_cast<size_t>(id) >= bytes.size()) {
            throw Error(DWELL_ERR_INVALID_ARGUMENT, source + ": token id " + std::to_string(id) +
                                                        " is out of range (vocabulary size " +
                                                        std::to_string(bytes.size()) + ")");
        }
    }

    // Fills the per-id tables and the encoder once sp holds the model.
    void index_pieces() {
        const int n = sp.GetPieceSize();
        const std::vector<int32_t> types = piece_types(sp.serialized_model_proto(), n);
        bytes.resize(static_cast<size_t>(n));
        control.resize(static_cast<size_t>(n));
        std::vector<std::string> texts(static_cast<size_t>(n));
        std::vector<float> scores(static_cast<size_t>(n));
        for (int id = 0; id < n; ++id) {
            const std::string& piece = sp.IdToPiece(id);
            const auto i = static_cast<size_t>(id);
            texts[i] = piece;
            scores[i] = sp.GetScore(id);
            control[i] = sp.IsControl(id);
            // llama.cpp matches user-defined tokens in the text before
            // anything else, parse_special or not.
            if (control[i] || sp.IsUnknown(id) || types[i] == kUserDefined) {
                specials.push_back(SpecialToken{piece, id});
            }
            if (types[i] == kUserDefined) user_defined.push_back(SpecialToken{piece, id});
            if (control[i]) continue;  // bytes stay empty: control tokens are invisible
            if (sp.IsUnknown(id)) {
                bytes[i] = kUnknownSurface;
            } else if (const auto b = sp.IsByte(id) ? byte_piece_value(piece) : std::nullopt) {
                bytes[i] = std::string(1, *b);
            } else {
                bytes[i] = replace_space_symbol(piece);
            }
        }
        sort_special_tokens(specials);
        sort_special_tokens(user_defined);
        spm = std::make_unique<SpmEncoder>(std::move(texts), std::move(scores), unk);
    }
};

std::string sentencepiece_error_text(std::string_view message) {
    std::string msg(message);
    // "./src/x.cc(1101) [check expression] text": the location and the
    // expression mean nothing to a user.
    if (const size_t at = msg.find(".cc("); at != std::string::npos) {
        const size_t close = msg.find("] ", at);
        const size_t end = msg.find(')', at);
        if (close != std::string::npos) {
            msg.erase(0, close + 2);
        } else if (end != std::string::npos) {
            msg.erase(0, end + 1);
        }
    }
    if (message.find("ParseFrom") != std::string_view::npos) msg = "protobuf parse failed";
    if (message.find("all normalized characters are not consumed") != std::string_view::npos)
        msg = "no normal token of the vocabulary covers it (only control tokens?)";
    for (char& c : msg) {
        if (c == '\n' || c == '\r') c = ' ';
    }
    while (!msg.empty() && msg.front() == ' ') msg.erase(0, 1);
    return msg.empty() ? "sentencepiece refused it" : msg;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_model_file(const std::filesystem::path& path) {
    const std::string source = path.string();
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        throw Error(DWELL_ERR_IO, source + ": cannot open sentencepiece model: is a directory");
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw Error(DWELL_ERR_IO,
                    source + ": cannot open sentencepiece model: " + std::strerror(errno));
    }
    in.close();
    // Bounded like every other file read whole: the largest sentencepiece
    // models (256K-token vocabularies) are under 20 MB.
    const std::string serialized =
        read_text_file(path, "sentencepiece model", kMaxTokenizerModelBytes);
    return from_serialized_model(serialized, source);
}

Tokenizer Tokenizer::from_serialized_model(std::string_view serialized, const std::string& source) {
    auto impl = std::make_unique<Impl>();
    impl->source = source;
    const std::string patched = with_llama_normalizer(serialized, source, &impl->add_dummy_prefix);
    if (const std::string e = load_serialized_proto(impl->sp, patched); !e.empty())
        throw Error(DWELL_ERR_CORRUPT, source + ": not a usable sentencepiece model: " + e);
    impl->bos = impl->sp.bos_id();
    impl->eos = impl->sp.eos_id();
    impl->unk = impl->sp.unk_id();
    impl->index_pieces();
    return Tokenizer(std::move(impl));
}

std::string Tokenizer::serialized_model() const {
    if (impl_->bpe) {
        throw Error(DWELL_ERR_UNSUPPORTED,
                    impl_->source +
                        ": a dwell pack can hold only an SPM (sentencepiece) vocabulary, and this "
                        "one is byte-level BPE (tokenizer.ggml.model = 'gpt2'); run the GGUF file "
                        "as it is");
    }
    return impl_->sp.serialized_model_proto();
}

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
    const std::string source = file.path().string();
    auto corrupt = [&](const std::string& what) {
        return Error(DWELL_ERR_CORRUPT, source + ": " + what);
    };

    const auto model = file.get_string("tokenizer.ggml.model");
    if (!model) throw corrupt("no vocabulary (string key tokenizer.ggml.model is missing)");
    if (*model == "gpt2") return from_bpe_gguf(file);
    if (*model != "llama") {
        throw Error(DWELL_ERR_UNSUPPORTED,
                    source + ": tokenizer.ggml.model is '" + std::string(*model) +
                        "': only SPM ('llama') and byte-level BPE ('gpt2') vocabularies are "
                        "supported");
    }
    if (!file.has("tokenizer.ggml.tokens")) throw corrupt("tokenizer.ggml.tokens is missing");
    const std::vector<std::string_view> tokens = file.get_string_array("tokenizer.ggml.tokens");
    const size_t n = tokens.size();
    if (n == 0) throw corrupt("tokenizer.ggml.tokens is empty");
    if (n > static_cast<size_t>(INT32_MAX)) throw corrupt("tokenizer.ggml.tokens is too long");

    // llama.cpp treats scores and types as optional (0.0 and NORMAL).
    std::vector<float> scores(n, 0.0f);
    if (file.has("tokenizer.ggml.scores")) {
        scores = file.get_float_array("tokenizer.ggml.scores");
        if (scores.size() != n) {
            throw corrupt("tokenizer.ggml.scores has " + std::to_string(scores.size()) +
                          " entries but tokenizer.ggml.tokens has " + std::to_string(n));
        }
    }
    std::vector<int32_t> types(n, kNormal);
    if (file.has("tokenizer.ggml.token_type")) {
        types = file.get_int_array("tokenizer.ggml.token_type");
        if (types.size() != n) {
            throw corrupt("tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                          " entries but tokenizer.ggml.tokens has " + std::to_string(n));
        }
    }

    auto special_id = [&](const char* key, int64_t fallback) {
        const int64_t id = optional_int(file, key).value_or(fallback);
        if (id < 0 || static_cast<uint64_t>(id) >= n) {
            throw corrupt(std::string(key) + " = " + std::to_string(id) +
                          " is not a token id (vocabulary size " + std::to_string(n) + ")");
        }
        return static_cast<int32_t>(id);
    };
    const int32_t bos = special_id("tokenizer.ggml.bos_token_id", 1);
    const int32_t eos = special_id("tokenizer.ggml.eos_token_id", 2);
    const int32_t unk = special_id("tokenizer.ggml.unknown_token_id", 0);
    const bool add_space_prefix =
        optional_int(file, "tokenizer.ggml.add_space_prefix").value_or(1) != 0;

    bool has_unknown = false;
    bool has_bytes = false;
    for (size_t i = 0; i < n; ++i) {
        int32_t& t = types[i];
        if (t == 0) t = kNormal;  // llama.cpp's "undefined"
        if (t < kNormal || t > kByte) {
            throw corrupt("tokenizer.ggml.token_type[" + std::to_string(i) +
                          "] = " + std::to_string(t) + " is not a token type (1..6)");
        }
        if (tokens[i].empty()) {
            throw corrupt("tokenizer.ggml.tokens[" + std::to_string(i) + "] is empty");
        }
        has_unknown = has_unknown || t == kUnknown;
        has_bytes = has_bytes || t == kByte;
    }
    // sentencepiece needs exactly one UNKNOWN piece; llama.cpp only needs the id.
    if (!has_unknown) types[static_cast<size_t>(unk)] = kUnknown;

    ProtoWriter proto;
    for (size_t i = 0; i < n; ++i) {
        ProtoWriter piece;
        piece.add_bytes(piece_proto::kPiece, tokens[i]);
        piece.add_float(piece_proto::kScore, scores[i]);
        piece.add_varint(piece_proto::kType, static_cast<uint64_t>(types[i]));
        proto.add_bytes(model_proto::kPieces, piece.data());
    }
    ProtoWriter trainer;
    trainer.add_varint(trainer_proto::kModelType, trainer_proto::kModelTypeBpe);
    trainer.add_int32(trainer_proto::kVocabSize, static_cast<int32_t>(n));
    trainer.add_bool(trainer_proto::kByteFallback, has_bytes);
    trainer.add_int32(trainer_proto::kUnkId, unk);
    trainer.add_int32(trainer_proto::kBosId, bos);
    trainer.add_int32(trainer_proto::kEosId, eos);
    trainer.add_bytes(trainer_proto::kUnkPiece, tokens[static_cast<size_t>(unk)]);
    trainer.add_bytes(trainer_proto::kBosPiece, tokens[static_cast<size_t>(bos)]);
    trainer.add_bytes(trainer_proto::kEosPiece, tokens[static_cast<size_t>(eos)]);
    proto.add_bytes(model_proto::kTrainerSpec, trainer.data());
    proto.add_bytes(model_proto::kNormalizerSpec, llama_normalizer_spec(add_space_prefix));

    auto impl = std::make_unique<Impl>();
    impl->source = source;
    if (const std::string e = load_serialized_proto(impl->sp, proto.data()); !e.empty())
        throw corrupt("the SPM vocabulary (tokenizer.ggml.*) is not usable: " + e);
    impl->bos = bos;
    impl->eos = eos;
    impl->unk = unk;
    impl->add_dummy_prefix = add_space_prefix;
    // SPM vocabularies add BOS unless the file says otherwise.
    impl->add_bos = optional_int(file, "tokenizer.ggml.add_bos_token").value_or(1) != 0;
    impl->index_pieces();
    return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_bpe_gguf(const GgufFile& file) {
    const std::string source = file.path().string();
    auto corrupt = [&](const std::string& what) {
        return Error(DWELL_ERR_CORRUPT, source + ": " + what);
    };

    const auto pre = file.get_string("tokenizer.ggml.pre");
    if (!pre) {
        throw Error(DWELL_ERR_UNSUPPORTED,
                    source +
                        ": tokenizer.ggml.pre is missing, so the BPE pre-tokenizer is "
                        "unknown; set it to one of " +
                        bpe::supported_pre_tokenizers());
    }
    const auto kind = bpe::pre_tokenizer_kind(*pre);
    if (!kind) {
        throw Error(DWELL_ERR_UNSUPPORTED,
                    source + ": tokenizer.ggml.pre is '" + std::string(*pre) +
                        "', a BPE pre-tokenizer dwell does not support (supported: " +
                        bpe::supported_pre_tokenizers() + ")");
    }
    if (!file.has("tokenizer.ggml.tokens")) throw corrupt("tokenizer.ggml.tokens is missing");
    const std::vector<std::string_view> tokens = file.get_string_array("tokenizer.ggml.tokens");
    const size_t n = tokens.size();
    if (n == 0) throw corrupt("tokenizer.ggml.tokens is empty");
    if (n > static_cast<size_t>(INT32_MAX)) throw corrupt("tokenizer.ggml.tokens is too long");
    if (!file.has("tokenizer.ggml.merges")) {
        throw corrupt("tokenizer.ggml.merges is missing (a BPE vocabulary needs its merges)");
    }
    const std::vector<std::string_view> merges = file.get_string_array("tokenizer.ggml.merges");

    std::vector<int32_t> types(n, kNormal);
    if (file.has("tokenizer.ggml.token_type")) {
        types = file.get_int_array("tokenizer.ggml.token_type");
        if (types.size() != n) {
            throw corrupt("tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                          " entries but tokenizer.ggml.tokens has " + std::to_string(n));
        }
    }
    for (size_t i = 0; i < n; ++i) {
        if (types[i] < 0 || types[i] > kByte) {
            throw corrupt("tokenizer.ggml.token_type[" + std::to_string(i) +
                          "] = " + std::to_string(types[i]) + " is not a token type (0..6)");
        }
        if (tokens[i].empty()) {
            throw corrupt("tokenizer.ggml.tokens[" + std::to_string(i) + "] is empty");
        }
    }
    auto optional_id = [&](const char* key) {
        const auto id = optional_int(file, key);
        if (!id) return int32_t{-1};
        if (*id < 0 || static_cast<uint64_t>(*id) >= n) {
            throw corrupt(std::string(key) + " = " + std::to_string(*id) +
                          " is not a token id (vocabulary size " + std::to_string(n) + ")");
        }
        return static_cast<int32_t>(*id);
    };

    auto impl = std::make_unique<Impl>();
    impl->source = source;
    impl->bpe = std::make_unique<bpe::BpeTokenizer>(tokens, merges, *kind);
    impl->bos = optional_id("tokenizer.ggml.bos_token_id");
    impl->eos = optional_id("tokenizer.ggml.eos_token_id");
    impl->unk = optional_id("tokenizer.ggml.unknown_token_id");
    optional_id("tokenizer.ggml.padding_token_id");  // only checked
    impl->add_dummy_prefix = false;
    // Llama 3's vocabularies add BOS unless the file says otherwise.
    impl->add_bos = optional_int(file, "tokenizer.ggml.add_bos_token")
                        .value_or(*kind == bpe::PreTokenizerKind::llama3) != 0;
    impl->pieces.reserve(n);
    impl->bytes.reserve(n);
    impl->control.resize(n);
    for (size_t i = 0; i < n; ++i) {
        const auto id = static_cast<int32_t>(i);
        impl->pieces.emplace_back(tokens[i]);
        impl->bytes.push_back(bpe::token_bytes(tokens[i], types[i]));
        impl->control[i] = types[i] == kControl;
        if (types[i] == kControl || types[i] == kUnknown) {
            impl->specials.push_back(SpecialToken{std::string(tokens[i]), id});
        } else if (types[i] == kUserDefined) {
            impl->specials.push_back(SpecialToken{std::string(tokens[i]), id});
            impl->user_defined.push_back(SpecialToken{std::string(tokens[i]), id});
        }
    }
    sort_special_tokens(impl->specials);
    sort_special_tokens(impl->user_defined);
    return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
    std::vector<int32_t> out;
    if (add_bos && impl_->add_bos) {
        if (impl_->bos < 0) {
            throw Error(DWELL_ERR_UNSUPPORTED,
                        impl_->source + ": the vocabulary has no BOS token to prepend");
        }
        out.push_back(impl_->bos);
    }
    const std::vector<SpecialToken>& specials =
        parse_special ? impl_->specials : impl_->user_defined;
    for (const TextPiece& piece : split_at_special_tokens(text, specials)) {
        if (piece.id >= 0) {
            out.push_back(piece.id);
        } else if (impl_->bpe) {
            impl_->bpe->encode(piece.text, out);
        } else {
            impl_->encode_spm(piece.text, out);
        }
    }
    return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
    for (int32_t id : ids) impl_->check_id(id);
    std::string bytes;
    bool at_start = impl_->add_dummy_prefix;
    for (int32_t id : ids) {
        const auto i = static_cast<size_t>(id);
        if (impl_->control[i]) continue;
        std::string_view b = impl_->bytes[i];
        if (at_start) {
            at_start = false;
            if (!b.empty() && b.front() == ' ') b.remove_prefix(1);
        }
        bytes.append(b);
    }
    std::string out;
    out.reserve(bytes.size());
    append_utf8(bytes, /*flush=*/true, out);
    return out;
}

std::string Tokenizer::token_bytes(int32_t id) const {
    impl_->check_id(id);
    return impl_->bytes[static_cast<size_t>(id)];
}

std::string_view Tokenizer::piece(int32_t id) const {
    impl_->check_id(id);
    if (impl_->bpe) return impl_->pieces[static_cast<size_t>(id)];
    return impl_->sp.IdToPiece(id);
}

int32_t Tokenizer::n_vocab() const {
    return static_cast<int32_t>(impl_->bytes.size());
}
int32_t Tokenizer::bos() const {
    return impl_->bos;
}
int32_t Tokenizer::eos() const {
    return impl_->eos;
}
int32_t Tokenizer::unk() const {
    return impl_->unk;
}

bool Tokenizer::is_control(int32_t id) const {
    impl_->check_id(id);
    return impl_->control[static_cast<size_t>(id)];
}

bool Tokenizer::wants_bos() const {
    return impl_->add_bos;
}

bool Tokenizer::is_byte_level_bpe() const {
    return impl_->bpe != nullptr;
}

// ---------------------------------------------------------------------------

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool strip_leading_space)
    : tokenizer_(&tokenizer),
      // Only a dummy prefix added by encode() is dropped, as decode() does.
      at_start_(strip_leading_space && tokenizer.impl_->add_dummy_prefix) {}

std::string StreamDecoder::push(int32_t id) {
    if (tokenizer_->is_control(id)) return {};
    std::string_view b = tokenizer_->impl_->bytes[static_cast<size_t>(id)];
    if (at_start_) {
        at_start_ = false;
        if (!b.empty() && b.front() == ' ') b.remove_prefix(1);
    }
    pending_.append(b);
    std::string out;
    const size_t used = append_utf8(pending_, /*flush=*/false, out);
    pending_.erase(0, used);
    return out;
}

std::string StreamDecoder::finish() {
    std::string out;
    append_utf8(pending_, /*flush=*/true, out);
    pending_.clear();
    return out;
}

}  // namespace dwell
