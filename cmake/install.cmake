# Install rules, man pages and the Debian packages (CPack). Included from the
# top CMakeLists.txt; everything here works with BUILD_TESTING=OFF.
#
#   cmake -S . -B build -DCMAKE_INSTALL_PREFIX=/usr && cmake --install build puts
#     bin/tollgate, bin/tollgate-stub
#     etc/tollgate/tollgate.ini                     (/etc with prefix /usr)
#     lib/systemd/system/tollgate.service
#     share/man/man1/tollgate.1, tollgate-stub.1, share/man/man5/tollgate.ini.5
#     share/doc/tollgate/ (the operator's docs, the alert rules, the dashboard)
#   cpack --config build/CPackConfig.cmake -G DEB  builds
#     tollgate_<version>_<arch>.deb and tollgate-stub_<version>_<arch>.deb
#   (docs/packaging.md says more.)

install(TARGETS tollgate RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tollgate)
install(TARGETS tollgate-stub RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT stub)
# /etc with prefix /usr (GNUInstallDirs), else <prefix>/etc: configure with
# -DCMAKE_INSTALL_PREFIX=/usr for a system install and for the packages.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/tollgate.ini
        DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/tollgate COMPONENT tollgate)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/tollgate.service
        DESTINATION lib/systemd/system COMPONENT tollgate)
install(FILES ${PROJECT_SOURCE_DIR}/docs/operating.md ${PROJECT_SOURCE_DIR}/docs/config.md
              ${PROJECT_SOURCE_DIR}/docs/packaging.md ${PROJECT_SOURCE_DIR}/openapi.yaml
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT tollgate)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/observability/
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/observability COMPONENT tollgate
        PATTERN "tests" EXCLUDE)

# --- man pages: tollgate(1) and tollgate-stub(1) by help2man from the
# programs' own --help (generated from their option tables), tollgate.ini(5)
# by scdoc from `tollgate config defaults --format scdoc` (the key table).
find_program(HELP2MAN help2man)
find_program(SCDOC scdoc)
set(TG_MANPAGES_DEFAULT OFF)
if(HELP2MAN AND SCDOC)
  set(TG_MANPAGES_DEFAULT ON)
endif()
option(TG_MANPAGES "Generate the man pages (needs help2man and scdoc)" ${TG_MANPAGES_DEFAULT})
if(TG_MANPAGES)
  if(NOT HELP2MAN OR NOT SCDOC)
    message(FATAL_ERROR "TG_MANPAGES needs help2man and scdoc (apt-get install help2man scdoc)")
  endif()
  set(man ${CMAKE_BINARY_DIR}/man)
  add_custom_command(
    OUTPUT ${man}/tollgate.1
    COMMAND ${CMAKE_COMMAND} -E make_directory ${man}
    COMMAND ${CMAKE_COMMAND} -DTOLLGATE=$<TARGET_FILE:tollgate> -DOUT=${man}/commands.h2m
            -P ${PROJECT_SOURCE_DIR}/cmake/man_commands.cmake
    COMMAND ${HELP2MAN} --no-info --no-discard-stderr --section 1
            --name "one exit for a refund provider's call quota"
            --include ${man}/commands.h2m --include ${PROJECT_SOURCE_DIR}/packaging/tollgate.h2m
            --output ${man}/tollgate.1 $<TARGET_FILE:tollgate>
    DEPENDS tollgate ${PROJECT_SOURCE_DIR}/cmake/man_commands.cmake
            ${PROJECT_SOURCE_DIR}/packaging/tollgate.h2m
    VERBATIM)
  add_custom_command(
    OUTPUT ${man}/tollgate-stub.1
    COMMAND ${CMAKE_COMMAND} -E make_directory ${man}
    COMMAND ${HELP2MAN} --no-info --no-discard-stderr --section 1
            --name "a refund provider stand-in with fault modes, for testing tollgate"
            --include ${PROJECT_SOURCE_DIR}/packaging/tollgate-stub.h2m
            --output ${man}/tollgate-stub.1 $<TARGET_FILE:tollgate-stub>
    DEPENDS tollgate-stub ${PROJECT_SOURCE_DIR}/packaging/tollgate-stub.h2m
    VERBATIM)
  add_custom_command(
    OUTPUT ${man}/tollgate.ini.5
    COMMAND ${CMAKE_COMMAND} -E make_directory ${man}
    COMMAND sh -c "\"$1\" config defaults --format scdoc | \"$2\" > \"$3\""
            sh $<TARGET_FILE:tollgate> ${SCDOC} ${man}/tollgate.ini.5
    DEPENDS tollgate
    VERBATIM)
  add_custom_target(man ALL DEPENDS ${man}/tollgate.1 ${man}/tollgate-stub.1
                                    ${man}/tollgate.ini.5)
  install(FILES ${man}/tollgate.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT tollgate)
  install(FILES ${man}/tollgate.ini.5 DESTINATION ${CMAKE_INSTALL_MANDIR}/man5
          COMPONENT tollgate)
  install(FILES ${man}/tollgate-stub.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT stub)
endif()

# --- Debian packages ----------------------------------------------------------
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "tollgate")
set(CPACK_PACKAGE_VENDOR "tollgate")
set(CPACK_PACKAGE_CONTACT "tollgate maintainers <dev@tollgate.invalid>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "one exit for a refund provider's call quota")
set(CPACK_PACKAGING_INSTALL_PREFIX "${CMAKE_INSTALL_PREFIX}")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL tollgate stub)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "net")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
# Runtime libraries from the binaries themselves (dpkg-shlibdeps).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_TOLLGATE_PACKAGE_NAME "tollgate")
set(CPACK_DEBIAN_TOLLGATE_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_TOLLGATE_PACKAGE_SUGGESTS "tollgate-stub, mariadb-server, prometheus")
set(CPACK_DEBIAN_TOLLGATE_DESCRIPTION
    "one exit for a refund provider's call quota
 tollgate keeps refunds in a durable backlog (SQLite or MariaDB) and sends
 every call to the provider through one gate: a smooth start rate, an
 in-flight cap and timeouts; unknown outcomes are reconciled by a query
 with the same idempotency key, the rest goes to a manual-review queue.")
set(CPACK_DEBIAN_TOLLGATE_PACKAGE_CONTROL_EXTRA
    "${PROJECT_SOURCE_DIR}/packaging/deb/conffiles;${PROJECT_SOURCE_DIR}/packaging/deb/postinst;${PROJECT_SOURCE_DIR}/packaging/deb/prerm;${PROJECT_SOURCE_DIR}/packaging/deb/postrm")
set(CPACK_DEBIAN_TOLLGATE_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_STUB_PACKAGE_NAME "tollgate-stub")
set(CPACK_DEBIAN_STUB_DESCRIPTION
    "refund provider stand-in for testing tollgate
 tollgate-stub is a real HTTP server that plays a refund provider with
 fault modes (slow, drop after execute, 429/503, resets) and a ledger of
 what it executed. For tests and drills, not for production.")
include(CPack)
