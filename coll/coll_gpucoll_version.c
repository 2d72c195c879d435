/*
 * coll_gpucoll_version.c - the component runs only inside the Open MPI
 * release it was built against.
 *
 * Open MPI's component loader checks no release: libmpi.so.40 is the soname
 * of 4.1, 5.0 and 6.0, and layouts the component reads change inside a
 * series (5.0.7 added a field to ompi_communicator_t ahead of c_coll; 5.0.10
 * one to the coll module ahead of base_data). A build for one release loaded
 * into another reads the wrong fields. So the first thing the component does
 * (at parameter registration, before it touches any Open MPI structure)
 * compares the release it was built for (the version of its headers) with
 * the one it runs in (MPI_Get_library_version, which any MPI process may
 * call at any time), and on a mismatch declines with one line: Open MPI goes
 * on without it. Only functions every series has are called before the check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_gpucoll.h"

/* The release of the headers this was built with: "4.1.4", "6.0.0rc2" (mpi.h's
 * numbers and the greek suffix; 4.1's opal_config.h says OMPI_VERSION "4"). */
#define GPUCOLL_STR_(x) #x
#define GPUCOLL_STR(x) GPUCOLL_STR_(x)
#define GPUCOLL_BUILT_RELEASE       \
    GPUCOLL_STR(OMPI_MAJOR_VERSION) \
    "." GPUCOLL_STR(OMPI_MINOR_VERSION) "." GPUCOLL_STR(OMPI_RELEASE_VERSION) OMPI_GREEK_VERSION

/* The release in "Open MPI v5.0.7, package: ..." (or NULL). */
static const char* running_release(char* buf, size_t len) {
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    if (MPI_SUCCESS != MPI_Get_library_version(lib, &n)) return NULL;
    const char* v = strstr(lib, "Open MPI v");
    if (NULL == v) return NULL;
    v += strlen("Open MPI v");
    size_t k = strcspn(v, ", \n");
    if (0 == k || k >= len) return NULL;
    memcpy(buf, v, k);
    buf[k] = '\0';
    return buf;
}

/* major.minor of a release string ("5.0" of "5.0.7"): its length. */
static size_t series_len(const char* release) {
    const char* dot = strchr(release, '.');
    if (NULL == dot) return strlen(release);
    return (size_t)(strcspn(dot + 1, ".") + (size_t)(dot + 1 - release));
}

bool mca_coll_gpucoll_release_matches(const char* built, const char* running, int mode) {
    if (MCA_COLL_GPUCOLL_VERSION_CHECK_OFF == mode) return true;
    if (NULL == running) return false;
    if (MCA_COLL_GPUCOLL_VERSION_CHECK_SERIES == mode) {
        size_t n = series_len(built);
        return n == series_len(running) && 0 == strncmp(built, running, n);
    }
    return 0 == strcmp(built, running);
}

int mca_coll_gpucoll_version_guard(int mode) {
    char buf[64];
    const char* running = running_release(buf, sizeof buf);
    if (mca_coll_gpucoll_release_matches(GPUCOLL_BUILT_RELEASE, running, mode)) return OMPI_SUCCESS;
    /* One line per job: from the first rank (or a process mpirun did not start). */
    const char* rank = getenv("OMPI_COMM_WORLD_RANK");
    if (NULL == rank || 0 == strcmp(rank, "0")) {
        fprintf(stderr,
                "coll:gpucoll: built for Open MPI %s, running in Open MPI %s: not loaded "
                "(rebuild gpucoll against this Open MPI; coll_gpucoll_version_check=series "
                "accepts any release of the series it was built for)\n",
                GPUCOLL_BUILT_RELEASE, NULL != running ? running : "(unknown release)");
    }
    return OMPI_ERR_NOT_AVAILABLE;
}
