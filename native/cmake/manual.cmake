# Turn the header comment of a probe's source (its manual) into a C header holding it as a string, for
# `PROBE --help`. Run as: cmake -DSRC=probe.c -DOUT=probe_manual.h -DNAME=PROBE_MANUAL -P manual.cmake
file(READ "${SRC}" text)
string(FIND "${text}" "*/" end)
if(end LESS 0)
  message(FATAL_ERROR "${SRC}: no header comment (/* ... */) to use as the manual")
endif()
string(SUBSTRING "${text}" 0 ${end} head)
string(REGEX REPLACE "^[ \t\r\n]*/\\*[ \t]*\r?\n?" "" head "${head}")
set(head "\n${head}")
# strip the comment's left margin: " * text" -> "text", " *" -> ""
string(REGEX REPLACE "\n \\* " "\n" head "${head}")
string(REGEX REPLACE "\n \\*\n" "\n\n" head "${head}")
string(REGEX REPLACE "\n \\*\n" "\n\n" head "${head}")
string(REGEX REPLACE "^\n+" "" head "${head}")
string(REGEX REPLACE "[ \t\n]+$" "\n" head "${head}")
# C string literal
string(REPLACE "\\" "\\\\" head "${head}")
string(REPLACE "\"" "\\\"" head "${head}")
string(REPLACE "\n" "\\n\"\n    \"" head "${head}")
file(WRITE "${OUT}.tmp" "/* Generated from ${SRC} by manual.cmake: the header comment is the manual. */\n"
                        "static const char ${NAME}[] =\n    \"${head}\";\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")
