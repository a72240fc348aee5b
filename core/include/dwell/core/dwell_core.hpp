// The umbrella header for hosts (the CLI, the server, the C API, apps that
// embed dwell in C++): every public core header, folder by folder in the
// order of the layering (base first). Core code itself includes what it
// uses, never this header (tests/scripts/check_layering.sh).
#pragma once

// base
#include "dwell/core/base/error.hpp"
#include "dwell/core/base/export.hpp"
#include "dwell/core/base/format_bytes.hpp"
#include "dwell/core/base/little_endian.hpp"
#include "dwell/core/base/printable_name.hpp"
#include "dwell/core/base/tensor_shape.hpp"
#include "dwell/core/base/version.hpp"

// platform
#include "dwell/core/platform/device_file.hpp"
#include "dwell/core/platform/file_sha256.hpp"
#include "dwell/core/platform/mapped_file.hpp"
#include "dwell/core/platform/mapped_pages.hpp"
#include "dwell/core/platform/output_file.hpp"
#include "dwell/core/platform/posix_file.hpp"
#include "dwell/core/platform/system_memory.hpp"
#include "dwell/core/platform/text_file.hpp"

// memory
#include "dwell/core/memory/memory_pool.hpp"

// graph
#include "dwell/core/graph/activation_plan.hpp"
#include "dwell/core/graph/graph.hpp"
#include "dwell/core/graph/graph_builder.hpp"

// formats
#include "dwell/core/formats/gguf_file.hpp"
#include "dwell/core/formats/pack_layout.hpp"

// thermal
#include "dwell/core/thermal/pid_controller.hpp"
#include "dwell/core/thermal/thermal_governor.hpp"
#include "dwell/core/thermal/thermal_policy.hpp"
#include "dwell/core/thermal/thermal_sensors.hpp"

// config
#include "dwell/core/config/device_facts.hpp"
#include "dwell/core/config/manifest.hpp"
#include "dwell/core/config/manifest_choice.hpp"

// text
#include "dwell/core/text/bpe_byte_map.hpp"
#include "dwell/core/text/bpe_pre_tokenizer.hpp"
#include "dwell/core/text/bpe_tokenizer.hpp"
#include "dwell/core/text/chat_prompt.hpp"
#include "dwell/core/text/chat_template.hpp"
#include "dwell/core/text/special_token_split.hpp"
#include "dwell/core/text/tokenizer.hpp"

// backend
#include "dwell/core/backend/backend.hpp"
#include "dwell/core/backend/backend_health.hpp"
#include "dwell/core/backend/host_services.hpp"
#include "dwell/core/backend/isolated_step.hpp"
#include "dwell/core/backend/plugin_loader.hpp"
#include "dwell/core/backend/step_worker.hpp"

// kv
#include "dwell/core/kv/context_shift.hpp"
#include "dwell/core/kv/kv_cache.hpp"
#include "dwell/core/kv/kv_page_pool.hpp"
#include "dwell/core/kv/kv_prefix_cache.hpp"

// runtime
#include "dwell/core/runtime/runtime.hpp"
#include "dwell/core/runtime/runtime_thermal.hpp"

// model
#include "dwell/core/model/load_progress.hpp"
#include "dwell/core/model/model.hpp"
#include "dwell/core/model/model_source.hpp"
#include "dwell/core/model/pack_file.hpp"
#include "dwell/core/model/weight_streamer.hpp"

// scheduler
#include "dwell/core/scheduler/scheduler.hpp"

// session
#include "dwell/core/session/session.hpp"
#include "dwell/core/session/session_file.hpp"

// llm
#include "dwell/core/llm/generate.hpp"
#include "dwell/core/llm/sampler.hpp"
#include "dwell/core/llm/text_generation.hpp"
