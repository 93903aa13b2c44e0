# SPDX-License-Identifier: BSD-3-Clause
# What `cmake --install` puts where, by component (one Debian package each:
# librpmem1, librpmem-dev, rpmemd; debian/*.install pick the same files out
# of what dh_auto_install installs):
#   lib     librpmem.so.1
#   dev     librpmem.h, librpmem.so, librpmem.pc, the CMake package, man 3 and 7
#   daemon  rpmemd, man 1, the systemd units, the sysusers.d entry and
#           /etc/rpmemd/rpmemd.conf
# Configure with -DCMAKE_INSTALL_PREFIX=/usr for a system install: the config
# file then goes to /etc (GNUInstallDirs), which is where rpmemd reads it.
include(CMakePackageConfigHelpers)

install(TARGETS rpmem EXPORT librpmemTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT lib NAMELINK_COMPONENT dev
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(TARGETS rpmemd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT daemon)

configure_file(${PROJECT_SOURCE_DIR}/packaging/librpmem.pc.in librpmem.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/librpmem.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT dev)

# find_package(librpmem) -> librpmem::rpmem
set(RPMEM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/librpmem)
install(EXPORT librpmemTargets NAMESPACE librpmem:: DESTINATION ${RPMEM_CMAKE_DIR}
  COMPONENT dev)
configure_package_config_file(${PROJECT_SOURCE_DIR}/packaging/librpmemConfig.cmake.in
  ${PROJECT_BINARY_DIR}/librpmemConfig.cmake INSTALL_DESTINATION ${RPMEM_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/librpmemConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/librpmemConfig.cmake
  ${PROJECT_BINARY_DIR}/librpmemConfigVersion.cmake
  DESTINATION ${RPMEM_CMAKE_DIR} COMPONENT dev)

# Man pages; the aliases are ".so" pages that man(1) follows.
file(GLOB RPMEM_MAN3 CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/doc/man/*.3)
install(FILES ${RPMEM_MAN3} DESTINATION ${CMAKE_INSTALL_MANDIR}/man3 COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/doc/man/librpmem.7
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man7 COMPONENT dev)
install(FILES ${PROJECT_SOURCE_DIR}/doc/man/rpmemd.1
  DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT daemon)

# systemd: units where the distribution keeps them when installing to /usr
# (Debian 12: /lib/systemd/system, from systemd.pc), under the prefix
# otherwise (relative paths are relative to the prefix). Both are cache
# variables, to be overridden for other layouts (debian/rules sets both).
set(_unitdir lib/systemd/system)
set(_sysusersdir lib/sysusers.d)
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  pkg_get_variable(_pc_unitdir systemd systemdsystemunitdir)
  pkg_get_variable(_pc_sysusersdir systemd sysusersdir)
  if(_pc_unitdir)
    set(_unitdir ${_pc_unitdir})
  endif()
  if(_pc_sysusersdir)
    set(_sysusersdir ${_pc_sysusersdir})
  endif()
endif()
set(RPMEM_SYSTEMD_UNITDIR ${_unitdir} CACHE PATH "Where rpmemd.service and rpmemd.socket go")
set(RPMEM_SYSUSERSDIR ${_sysusersdir} CACHE PATH "Where the sysusers.d entry for user rpmemd goes")
install(FILES ${PROJECT_SOURCE_DIR}/packaging/rpmemd.service
  ${PROJECT_SOURCE_DIR}/packaging/rpmemd.socket
  DESTINATION ${RPMEM_SYSTEMD_UNITDIR} COMPONENT daemon)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/rpmemd.sysusers
  DESTINATION ${RPMEM_SYSUSERSDIR} RENAME rpmemd.conf COMPONENT daemon)
# /etc for a /usr prefix (absolute: `cmake --install --prefix` does not move
# it, DESTDIR does), <prefix>/etc otherwise.
if(CMAKE_INSTALL_FULL_SYSCONFDIR STREQUAL "/etc")
  set(RPMEM_CONFDIR /etc/rpmemd)
else()
  set(RPMEM_CONFDIR ${CMAKE_INSTALL_SYSCONFDIR}/rpmemd)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/packaging/rpmemd.conf
  DESTINATION ${RPMEM_CONFDIR} COMPONENT daemon)
