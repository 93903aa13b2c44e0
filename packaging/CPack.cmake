# SPDX-License-Identifier: BSD-3-Clause
# Debian packages, one per install component (install.cmake):
#   librpmem1     lib     librpmem.so.1
#   librpmem-dev  dev     header, librpmem.so, librpmem.pc, CMake package, man 3/7
#   rpmemd        daemon  rpmemd, man 1, systemd units, sysusers.d, rpmemd.conf
# Build them with `cpack -G DEB` in a build tree configured with
# -DCMAKE_INSTALL_PREFIX=/usr (tests/packaging/test-packages.sh does).
#
# Versions. PMDK's own packages had these names (Debian <= 11 shipped
# librpmem1, librpmem-dev, librpmem1-debug and rpmemd from PMDK 1.10; PMDK's
# `make dpkg` built librpmem, librpmem-dev, librpmem-debug). librpmem left
# PMDK in 1.13, so every PMDK librpmem package is below 1.13. Our packages are
# 1.13.0+rpmem<project version>: apt sees them as upgrades of PMDK's, and
# our own releases sort among themselves by the part after "+rpmem".
set(RPMEM_DEB_VERSION "1.13.0+rpmem${PROJECT_VERSION}")
set(RPMEM_DEB_RELEASE 1)
set(RPMEM_DEB_FULL_VERSION "${RPMEM_DEB_VERSION}-${RPMEM_DEB_RELEASE}")
set(RPMEM_PACKAGE_MAINTAINER "rpmem maintainers <rpmem@localhost>" CACHE STRING
  "Maintainer field of the Debian packages")

if(NOT CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  message(STATUS "rpmem: CMAKE_INSTALL_PREFIX is ${CMAKE_INSTALL_PREFIX}; "
    "configure with -DCMAKE_INSTALL_PREFIX=/usr to build Debian packages")
endif()

set(CPACK_PACKAGE_NAME rpmem)
set(CPACK_PACKAGE_VENDOR "rpmem")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${RPMEM_PACKAGE_MAINTAINER}")
set(CPACK_RESOURCE_FILE_README "${PROJECT_SOURCE_DIR}/README.md")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_DIRECTORY "${PROJECT_BINARY_DIR}/packages")
# The packages install exactly what `cmake --install` would.
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_STRIP_FILES ON)
# Only our three components: anything else a subdirectory installs (tests,
# tools) stays out of the packages.
set(CPACK_COMPONENTS_ALL lib dev daemon)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_VERSION "${RPMEM_DEB_VERSION}")
set(CPACK_DEBIAN_PACKAGE_RELEASE "${RPMEM_DEB_RELEASE}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${RPMEM_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Library dependencies from dpkg-shlibdeps (package dpkg-dev): libc6,
# libstdc++6, libpmem1, libboost-program-options, ... as the binaries need.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# A shlibs file for packages with shared objects (librpmem1 only), so that
# programs packaged against it depend on librpmem1 (>= this version).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# Each description's first line is the package's summary.

# librpmem1
set(CPACK_DEBIAN_LIB_PACKAGE_NAME librpmem1)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_PACKAGE_CONFLICTS "librpmem1-debug, librpmem, librpmem-debug")
set(CPACK_DEBIAN_LIB_PACKAGE_REPLACES "librpmem1-debug, librpmem, librpmem-debug")
set(CPACK_DEBIAN_LIB_DESCRIPTION "remote persistent memory replication - client library
librpmem.so.1 replicates a local memory region to a pool file on another
machine: rpmem_persist() returns when the bytes are durable there. It has
PMDK's librpmem C API (1.3) and ABI (soname, LIBRPMEM_1.0 symbols), so
programs and PMDK's libpmemobj built for it use it unchanged. Data travels
over TCP (or RDMA); the target runs rpmemd, reached over ssh.")

# librpmem-dev
set(CPACK_DEBIAN_DEV_PACKAGE_NAME librpmem-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "librpmem1 (= ${RPMEM_DEB_FULL_VERSION})")
set(CPACK_DEBIAN_DEV_PACKAGE_RECOMMENDS "pkg-config")
set(CPACK_DEBIAN_DEV_DESCRIPTION "remote persistent memory replication - development files
The header librpmem.h, the librpmem.so link, pkg-config (librpmem.pc) and
CMake (find_package(librpmem), target librpmem::rpmem) files, and the
librpmem(7) and rpmem_*(3) man pages.")

# rpmemd
set(CPACK_DEBIAN_DAEMON_PACKAGE_NAME rpmemd)
set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION net)
# The postinst creates user rpmemd with one or the other.
set(CPACK_DEBIAN_DAEMON_PACKAGE_DEPENDS "systemd | adduser")
set(CPACK_DEBIAN_DAEMON_PACKAGE_SUGGESTS "openssh-server")
set(CPACK_DEBIAN_DAEMON_DESCRIPTION "remote persistent memory replication - target daemon
rpmemd owns the pool files on the target node of librpmem: started by the
client over ssh, one per pool, or as a long-running systemd service that
authenticates clients with mutual TLS. Pools are PMDK pool sets, mapped
with libpmem, readable by pmempool and libpmemobj.")
# Maintainer scripts, and /etc/rpmemd/rpmemd.conf as a conffile (kept on
# upgrade when edited, removed on purge).
file(WRITE ${PROJECT_BINARY_DIR}/deb/rpmemd/conffiles
  "${CMAKE_INSTALL_FULL_SYSCONFDIR}/rpmemd/rpmemd.conf\n")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/packaging/deb/rpmemd/postinst
  ${PROJECT_SOURCE_DIR}/packaging/deb/rpmemd/prerm
  ${PROJECT_SOURCE_DIR}/packaging/deb/rpmemd/postrm
  ${PROJECT_BINARY_DIR}/deb/rpmemd/conffiles)

include(CPack)
cpack_add_component(lib DISPLAY_NAME "librpmem1")
cpack_add_component(dev DISPLAY_NAME "librpmem-dev" DEPENDS lib)
cpack_add_component(daemon DISPLAY_NAME "rpmemd")
