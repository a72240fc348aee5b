// The pack header's byte encoding (pack_layout.hpp).
#include "dwell/core/formats/pack_layout.hpp"

#include <cstring>

namespace dwell::pack_layout {

std::array<uint8_t, kHeaderSize> encode_header(const Header& h) {
    std::array<uint8_t, kHeaderSize> b{};
    std::memcpy(b.data(), kPackMagic, sizeof kPackMagic);
    store_le<uint32_t>(b.data() + 8, kPackVersion);
    store_le<uint32_t>(b.data() + 12, static_cast<uint32_t>(kHeaderSize));
    store_le(b.data() + 16, h.file_size);
    store_le(b.data() + 24, h.metadata_offset);
    store_le(b.data() + 32, h.metadata_size);
    store_le(b.data() + 40, h.tokenizer_offset);
    store_le(b.data() + 48, h.tokenizer_size);
    store_le(b.data() + 56, h.directory_offset);
    store_le(b.data() + 64, h.directory_size);
    store_le(b.data() + 72, h.frames_offset);
    store_le(b.data() + 80, h.frames_size);
    store_le(b.data() + 88, h.tensor_count);
    store_le(b.data() + kChecksumOffset, h.checksum);
    return b;
}

}  // namespace dwell::pack_layout
