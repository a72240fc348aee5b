// Writes GGUF v3 files: used by `dwell synth` and by tests that need model
// files of a given shape or a given corruption.
//
// Thread-safety: none; one writer per thread. Ownership: copies everything
// it is given.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dwell/tensor.h"

namespace dwell {

class GgufWriter {
public:
    explicit GgufWriter(uint64_t alignment = 32);

    void add_uint32(std::string_view key, uint32_t v);
    void add_int32(std::string_view key, int32_t v);
    void add_uint64(std::string_view key, uint64_t v);
    void add_float32(std::string_view key, float v);
    void add_bool(std::string_view key, bool v);
    void add_string(std::string_view key, std::string_view v);
    void add_string_array(std::string_view key, std::span<const std::string> v);
    void add_float32_array(std::string_view key, std::span<const float> v);
    void add_int32_array(std::string_view key, std::span<const int32_t> v);

    // `data` holds the tensor in its dtype's block layout; its size must be
    // ne[0]/block * block_bytes * ne[1] * ... (checked).
    void add_tensor(std::string_view name, dwell_dtype dtype, std::span<const int64_t> ne,
                    std::span<const uint8_t> data);

    // From now on, tensor data goes to an unnamed temporary file in
    // `folder` as it is added instead of staying in memory, so a file larger
    // than RAM can be written (the 30B-class bench models); write() copies
    // it after the header. Call before the first add_tensor.
    void spill_tensors_to(const std::filesystem::path& folder);

    // The whole file as bytes (tests corrupt these; not once spilling), or
    // written to `path`.
    std::vector<uint8_t> bytes() const;
    void write(const std::filesystem::path& path) const;

private:
    // Everything before the first tensor's data, padded to the alignment.
    std::vector<uint8_t> header_bytes() const;

    struct Tensor {
        std::string name;
        dwell_dtype dtype;
        std::vector<int64_t> ne;
        std::vector<uint8_t> data;  // empty when spilled
        uint64_t size = 0;
    };
    uint64_t alignment_;
    uint64_t n_kv_ = 0;
    std::vector<uint8_t> kv_;  // serialised key/value section
    std::vector<Tensor> tensors_;
    // The spilled tensors' data, back to back, unpadded (libdwell keeps its
    // FileDescriptor to itself).
    struct Spill {
        int fd = -1;
        Spill() = default;
        Spill(const Spill&) = delete;
        Spill& operator=(const Spill&) = delete;
        ~Spill();
        int get() const { return fd; }
    };
    Spill spill_;
    std::filesystem::path spill_folder_;
    uint64_t spilled_ = 0;
};

}  // namespace dwell
