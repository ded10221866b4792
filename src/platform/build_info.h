/*
 * build_info — what was built: the CMake project version and the git
 * revision of the tree (12 hex digits, "-dirty" when tracked files were
 * changed, "unknown" outside a git checkout). The definitions are generated
 * at build time (cmake/build_info.cmake), so `tollgate --version` and the
 * tollgate_build_info metric name the commit actually built.
 */
#ifndef TG_BUILD_INFO_H
#define TG_BUILD_INFO_H

const char *build_info_version(void);
const char *build_info_revision(void);

#endif
