# dwell_add_plugin(<name> SOURCES ...): a plugin shared library named
# libdwell-<name>.so in <build>/lib/dwell, linked only against the SDK.
function(dwell_add_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  set(target dwell-plugin-${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE dwell::sdk ${ARG_LIBRARIES})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME "dwell-${name}"
    LIBRARY_OUTPUT_DIRECTORY "${DWELL_PLUGIN_OUTPUT_DIR}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  install(TARGETS ${target} LIBRARY DESTINATION lib/dwell)
endfunction()
