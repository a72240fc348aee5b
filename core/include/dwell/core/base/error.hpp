// The exception type used inside libdwell. It carries the ABI status code so
// that hosts and the C API can turn it back into a status plus message.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "dwell/core/base/export.hpp"
#include "dwell/status.h"

namespace dwell {

class DWELL_CORE_API Error : public std::runtime_error {
public:
    Error(dwell_status status, const std::string& message)
        : std::runtime_error(message), status_(status) {}
    dwell_status status() const noexcept { return status_; }

private:
    dwell_status status_;
};

// A session's context has no room for the tokens fed to it. Its own type so
// that a host can tell it apart and word the advice in its own terms (the
// C API has n_ctx where the CLI has --ctx); its status stays what hosts
// that only map statuses already expect.
class DWELL_CORE_API ContextFullError : public Error {
public:
    ContextFullError(const std::string& message, int64_t n_past, int64_t n_tokens, int64_t n_ctx)
        : Error(DWELL_ERR_OUT_OF_MEMORY, message),
          n_past_(n_past),
          n_tokens_(n_tokens),
          n_ctx_(n_ctx) {}
    int64_t n_past() const noexcept { return n_past_; }      // tokens in the context
    int64_t n_tokens() const noexcept { return n_tokens_; }  // tokens that did not fit
    int64_t n_ctx() const noexcept { return n_ctx_; }

private:
    int64_t n_past_, n_tokens_, n_ctx_;
};

}  // namespace dwell
