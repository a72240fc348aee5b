// The one way the server turns JSON into text: bytes that are not UTF-8
// (a model's file name, a client's path echoed in an error, a partial
// character from the tokenizer) become U+FFFD instead of an exception.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace dwell::server {

inline std::string json_text(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace dwell::server
