# Writes the OpenCL C file IN as a C++ raw string constant NAME into OUT.
file(READ ${IN} text)
file(WRITE ${OUT} "// Generated from ${IN}; do not edit.\n#pragma once\n"
                  "inline constexpr const char* ${NAME} = R\"dwellcl(${text})dwellcl\";\n")
