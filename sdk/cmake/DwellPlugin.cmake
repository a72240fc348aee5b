# dwell_add_plugin(<name> SOURCES ... [KIT backend|model] [LIBRARIES ...]):
# a plugin shared library named libdwell-<name>.so in
# ${DWELL_PLUGIN_OUTPUT_DIR}, linked only against the SDK (and LIBRARIES).
#
# KIT names the SDK's C++ kits the plugin uses (sdk/kit, installed as
# share/dwell/kit): their folder goes on the include path (#include
# "backend/backend_plugin_kit.hpp", "model/model_kit.hpp") and their sources
# are compiled into this plugin, with its flags and hidden visibility, so
# only the C ABI crosses the plugin's boundary; no kit library is linked.
#
# The kits' folder: DWELL_KIT_DIR when set (the installed package sets it),
# else sdk/kit beside this file in the source tree.
if(NOT DEFINED DWELL_KIT_DIR)
  get_filename_component(DWELL_KIT_DIR "${CMAKE_CURRENT_LIST_DIR}/../kit" ABSOLUTE)
endif()

# dwell_kit_sources(<kit> <var>): the sources of one kit (backend is
# header-only), for a target that cannot use dwell_add_plugin.
function(dwell_kit_sources kit var)
  if(kit STREQUAL "backend")
    set(files)
  elseif(kit STREQUAL "model")
    set(files metadata_reader.cpp rope_scaling.cpp transformer_hparams.cpp graph_builder.cpp transformer_blocks.cpp
              decoder_family.cpp model_plugin_entry.cpp moe_feed_forward.cpp)
  else()
    message(FATAL_ERROR "dwell: no kit named '${kit}' (the kits are backend and model)")
  endif()
  list(TRANSFORM files PREPEND "${DWELL_KIT_DIR}/${kit}/")
  set(${var} ${files} PARENT_SCOPE)
endfunction()

function(dwell_add_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES;KIT" ${ARGN})
  set(target dwell-plugin-${name})
  set(kit_sources)
  foreach(kit IN LISTS ARG_KIT)
    dwell_kit_sources(${kit} sources)
    list(APPEND kit_sources ${sources})
  endforeach()
  add_library(${target} MODULE ${ARG_SOURCES} ${kit_sources})
  target_link_libraries(${target} PRIVATE dwell::sdk ${ARG_LIBRARIES})
  if(ARG_KIT)
    target_include_directories(${target} PRIVATE ${DWELL_KIT_DIR})
    target_compile_features(${target} PRIVATE cxx_std_17)
  endif()
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME "dwell-${name}"
    LIBRARY_OUTPUT_DIRECTORY "${DWELL_PLUGIN_OUTPUT_DIR}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  install(TARGETS ${target} LIBRARY DESTINATION lib/dwell)
endfunction()
