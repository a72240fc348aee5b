// libFuzzer target: a session file (what `dwell chat /load` and the C API
// restore) read as Session::restore reads it: the header checked against
// the model, then the tokens, the logits, every KV row, the recurrent
// states and the checksum.
// dwell::Error is the expected outcome for a bad file; anything else is a
// finding, and so is a header that passes while asking for more bytes than
// the file holds (the reader must refuse that before anything is sized by
// it).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "dwell/core/base/error.hpp"
#include "dwell/core/session/session_file.hpp"
#include "scratch_file.hpp"
#include "session_file_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const dwell::fuzz::ScratchFile scratch("session");
    static const dwell::SessionFileModel model = dwell::fuzz::session_file_model();
    if (!scratch.write(data, size)) return 0;
    try {
        dwell::SessionFileReader in(scratch.path(), model);
        const dwell::SessionFileHeader& h = in.header();
        const uint64_t header = h.version >= 4 ? 88 : h.version >= 3 ? 72 : 56;
        const uint64_t n_states =
            uint64_t(model.n_layer) * uint64_t(model.state_elems[0] + model.state_elems[1]);
        const uint64_t claimed =
            header + 8 + 4 * uint64_t(h.n_past) + 4 * uint64_t(h.n_logits) + h.host_data_bytes +
            2 * uint64_t(model.n_layer) * uint64_t(h.n_past) * h.row_bytes + 4 * n_states;
        if (claimed != size || h.n_past > h.n_ctx) __builtin_trap();
        const std::vector<int32_t> tokens = in.read_tokens();
        for (int32_t t : tokens)
            if (t < 0 || t >= model.n_vocab) __builtin_trap();
        (void)in.read_logits();
        if (in.read_host_data().size() != h.host_data_bytes) __builtin_trap();
        std::vector<uint8_t> row(h.row_bytes);
        for (int64_t i = 0; i < 2 * model.n_layer * int64_t{h.n_past}; ++i) in.read_row(row);
        std::vector<float> states(n_states);
        in.read_states(states);
        in.finish();
    } catch (const dwell::Error&) {
    }
    return 0;
}
