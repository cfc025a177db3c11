# The CMake package of an installed SDR, beside sdr.pc: <libdir>/cmake/sdr/sdrConfig.cmake (the
# imported target sdr::sdr) and sdrConfigVersion.cmake (same major version is compatible).
include(CMakePackageConfigHelpers)
set(SDR_CONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/sdr)
file(RELATIVE_PATH SDR_CONFIG_TO_PREFIX "/prefix/${SDR_CONFIG_DIR}" "/prefix")
get_target_property(SDR_LIBRARY_SOVERSION sdr SOVERSION)
get_target_property(SDR_LIBRARY_VERSION sdr VERSION)
set(SDR_LIBRARY_FILE libsdr.so.${SDR_LIBRARY_VERSION})
set(SDR_LIBRARY_SONAME libsdr.so.${SDR_LIBRARY_SOVERSION})
configure_file(${CMAKE_CURRENT_LIST_DIR}/sdrConfig.cmake.in ${PROJECT_BINARY_DIR}/sdrConfig.cmake @ONLY)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sdrConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sdrConfig.cmake ${PROJECT_BINARY_DIR}/sdrConfigVersion.cmake
  DESTINATION ${SDR_CONFIG_DIR})
