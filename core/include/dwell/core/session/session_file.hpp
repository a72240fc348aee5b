// The session file: a saved conversation (its tokens, the logits after the
// last one, and the KV rows of every layer), as Session::save writes it and
// Session::restore reads it. The reader treats the file as untrusted: the
// whole header is checked against the model, and the file's size against
// the header, before the caller allocates anything for it.
//
// Little-endian, version 4:
//   char[8] "DWELLSES", u32 version, u32 KV dtype (dwell_dtype), u32 n_layer,
//   u32 n_ctx, u64 kv_width, u64 n_vocab, u64 weight bytes, u32 n_past,
//   u32 n_logits (0 or n_vocab), u64 weights fingerprint, i32 pending token
//   (-1: none), u32 host data bytes, u64 state_elems[2],
//   i32 tokens[n_past], f32 logits[n_logits], u8 host data[host data bytes],
//   per layer: its K rows [0, n_past), then its V rows,
//   per layer: f32 recurrent state 0 [state_elems[0]], then state 1,
//   u64 XXH3-64 of every byte before it.
// Version 3 ends the header at the host data bytes and has no recurrent
// state: it is read for models without one. Versions 1 and 2 end the
// header at n_logits and have no host data; they are read without the
// fingerprint check (version 1 unless its keys are FP8).
//
// Thread-safety: a reader or writer is used by one thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dwell/tensor.h"

namespace dwell {

// What a session file must agree with: the model it was saved with.
struct SessionFileModel {
    int64_t n_layer = 0;
    int64_t kv_width = 0;
    int64_t n_vocab = 0;
    uint64_t weight_bytes = 0;  // tells apart two models of one shape
    // A hash of the weights' names, shapes and sampled bytes
    // (session_weights_fingerprint): tells apart a fine-tune of one shape.
    uint64_t fingerprint = 0;
    std::string source;  // the model file, for messages
    // F32 values per layer of the carried states 0 and 1 (hybrid models).
    int64_t state_elems[2] = {0, 0};
};

// The conversation's sizes, as the header records them.
struct SessionFileHeader {
    dwell_dtype kv_dtype = DWELL_F16;
    int32_t n_ctx = 0;
    int32_t n_past = 0;
    int32_t n_logits = 0;    // 0 (nothing decoded yet) or n_vocab
    uint64_t row_bytes = 0;  // one KV row: dwell_row_bytes(kv_dtype, kv_width)
    // The last generated token, not yet in the KV cache (-1: none): saved
    // so a session whose context is full can still be saved.
    int32_t pending_token = -1;
    // Bytes the host keeps with the session (chat: the conversation), so
    // the two are written and renamed as one file.
    uint32_t host_data_bytes = 0;
    uint32_t version = 0;  // as read (the writer always writes the newest)
};

// The longest host data a session file may hold.
inline constexpr uint32_t kSessionMaxHostData = uint32_t{64} << 20;

// The longest context a session file may record: the longest training
// context a model may declare.
inline constexpr int32_t kSessionMaxContext = int32_t{1} << 24;

class SessionFileWriter {
public:
    // Writes a 0600 temporary beside `path` (output_file.hpp), renamed to
    // `path` by finish(); an unfinished file is removed. Throws naming the
    // file on I/O errors, a `path` that is not a regular file, or another
    // writer that replaced `path` first.
    SessionFileWriter(const std::filesystem::path& path, const SessionFileModel& model,
                      const SessionFileHeader& header);
    ~SessionFileWriter();
    SessionFileWriter(const SessionFileWriter&) = delete;
    SessionFileWriter& operator=(const SessionFileWriter&) = delete;

    // In file order: the tokens, the logits, the host data, every KV row,
    // then every layer's recurrent states.
    void write(const void* data, size_t bytes);
    void finish();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

class SessionFileReader {
public:
    // Opens `path` and checks its header: magic and version, the model
    // (DWELL_ERR_INVALID_ARGUMENT for a file of another model, or of other
    // weights of the same shape when the file has a fingerprint, or of
    // other recurrent state sizes or none where the model has some), the KV type,
    // the sizes, and that the file is exactly as long as they say
    // (DWELL_ERR_CORRUPT otherwise). Nothing sized by the file is allocated.
    SessionFileReader(const std::filesystem::path& path, const SessionFileModel& model);
    ~SessionFileReader();
    SessionFileReader(const SessionFileReader&) = delete;
    SessionFileReader& operator=(const SessionFileReader&) = delete;

    const SessionFileHeader& header() const;

    // Then, in file order:
    std::vector<int32_t> read_tokens();  // each checked to be a token id
    std::vector<float> read_logits();
    std::string read_host_data();
    void read_row(std::span<uint8_t> row);  // row.size() == header().row_bytes
    // All layers' states (model.state_elems), as RecurrentState::all() holds
    // them; nothing for a file without (the header check refused one that
    // lacks a state the model has).
    void read_states(std::span<float> values);
    // Checks the checksum and that nothing follows it.
    void finish();

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace dwell
