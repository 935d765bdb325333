# Writes cuckoofilter.pc at install time (included from an install(CODE) block in the
# top-level CMakeLists.txt, which sets the CF_PC_* variables).
#
# CMAKE_INSTALL_PREFIX here is the prefix of this very install, which may differ from the
# configured one (`cmake --install build --prefix /opt/cf`). Directories under the prefix
# are written relative to ${prefix}, so `pkg-config --define-prefix` keeps working.

set(CF_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")

foreach(kind LIBDIR INCLUDEDIR)
    set(dir "${CF_PC_${kind}}")
    if(IS_ABSOLUTE "${dir}")
        set(CF_PC_${kind}_VALUE "${dir}")
    else()
        set(CF_PC_${kind}_VALUE "\${prefix}/${dir}")
    endif()
endforeach()

configure_file("${CF_PC_TEMPLATE}" "${CF_PC_OUTPUT}" @ONLY)
