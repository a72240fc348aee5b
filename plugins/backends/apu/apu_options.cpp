#include "apu_options.hpp"

#include <cstdlib>
#include <filesystem>
#include <map>

#include "backend/backend_plugin_kit.hpp"
#include "neuron_adapter_api.hpp"
#include "neuron_objects.hpp"

namespace dwell::apu {

namespace {

template <typename T>
T pick(const std::string& key, const std::string& value, const std::map<std::string, T>& choices) {
    const auto it = choices.find(value);
    if (it != choices.end()) return it->second;
    std::string known;
    for (const auto& [name, v] : choices) known += (known.empty() ? "" : ", ") + name;
    throw ApuError(DWELL_ERR_INVALID_ARGUMENT,
                   "option '" + key + "' must be one of " + known + ", got '" + value + "'");
}

}  // namespace

ApuOptions parse_options(const dwell_option* options, size_t n_options) {
    ApuOptions o;
    for (size_t i = 0; i < n_options; ++i) {
        const auto [key, value] = plugin_kit::option_text(options[i]);
        if (key == "preference") {
            o.preference = pick<int32_t>(key, value,
                                         {{"fast_single_answer", NEURON_PREFER_FAST_SINGLE_ANSWER},
                                          {"sustained_speed", NEURON_PREFER_SUSTAINED_SPEED},
                                          {"low_power", NEURON_PREFER_LOW_POWER}});
        } else if (key == "priority") {
            o.priority = pick<int32_t>(key, value,
                                       {{"low", NEURON_PRIORITY_LOW},
                                        {"medium", NEURON_PRIORITY_MEDIUM},
                                        {"high", NEURON_PRIORITY_HIGH}});
        } else if (key == "weights") {
            o.weights = pick<WeightMode>(key, value,
                                         {{"auto", WeightMode::Auto},
                                          {"fp16", WeightMode::Fp16},
                                          {"int8", WeightMode::Int8}});
        } else if (key == "prefill_chunk") {
            char* end = nullptr;
            const long v = std::strtol(value.c_str(), &end, 10);
            if (value.empty() || *end != 0 || v < 2 || v > 4096)
                throw ApuError(
                    DWELL_ERR_INVALID_ARGUMENT,
                    "option 'prefill_chunk' must be an integer in 2..4096, got '" + value + "'");
            o.prefill_chunk = static_cast<uint32_t>(v);
        } else if (key == "cache_dir") {
            std::error_code ec;
            std::filesystem::create_directories(value, ec);
            if (value.empty() || !std::filesystem::is_directory(value))
                throw ApuError(DWELL_ERR_INVALID_ARGUMENT,
                               "option 'cache_dir': cannot create folder '" + value + "'" +
                                   (ec ? ": " + ec.message() : ""));
            o.cache_dir = value;
        } else if (!plugin_kit::is_host_option(key)) {
            throw ApuError(
                DWELL_ERR_INVALID_ARGUMENT,
                "unknown apu backend option '" + key +
                    "' (known: preference, priority, cache_dir, prefill_chunk, weights)");
        }
    }
    return o;
}

}  // namespace dwell::apu
