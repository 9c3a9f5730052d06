# A shared library loaded with ctypes by the Python side (found by tailscope.native.native_library):
# C11, warnings as errors unless TAILSCOPE_WERROR is OFF, -O2 in every build type (their speed is part of their
# contract, see bench/), installed into TAILSCOPE_NATIVE_LIB_DIR. Usable from the root project and from a
# standalone build of the library's own directory.
if(NOT DEFINED TAILSCOPE_NATIVE_LIB_DIR)
  set(TAILSCOPE_NATIVE_LIB_DIR "lib")
endif()
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release)
endif()

function(tailscope_ctypes_library name)
  add_library(${name} SHARED ${ARGN})
  set_target_properties(${name} PROPERTIES
    C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF C_VISIBILITY_PRESET default)
  target_compile_options(${name} PRIVATE -Wall -Wextra -O2)
  if(NOT DEFINED TAILSCOPE_WERROR OR TAILSCOPE_WERROR)
    target_compile_options(${name} PRIVATE -Werror)
  endif()
  install(TARGETS ${name} LIBRARY DESTINATION ${TAILSCOPE_NATIVE_LIB_DIR})
endfunction()
