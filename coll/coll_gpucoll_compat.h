/*
 * coll_gpucoll_compat.h - everything that differs between the Open MPI
 * series gpucoll builds for, in one place: 4.1 (coll 2.0.0, module 2.3.0),
 * 5.0 (coll 2.4.0) and 6.0 (coll 3.0.0). The series is read from Open MPI's
 * own feature macro (the coll interface version its coll.h defines), not
 * from a list of releases; configure reads the same macro.
 *
 *                     4.1              5.0                   6.0
 *  counts             int, const int*  int, const int*       size_t, ompi_count_array_t
 *  displacements      const int*       const int*            ompi_disp_array_t
 *  installing entries the framework copies them after enable  the module, in enable;
 *                                                            disable restores them
 *  communicator id    c_contextid      ompi_comm_get_local_cid()
 *  opal_info_get      char* value      opal_cstring_t**
 *  export macro       OMPI_MODULE_DECLSPEC  OMPI_DECLSPEC
 *  half precision     none             MPIX_C_FLOAT16 = MPIX_SHORT_FLOAT (mpi-ext.h)
 *
 * Only coll/ includes this (after Open MPI's headers, through coll_gpucoll.h).
 */
#ifndef MCA_COLL_GPUCOLL_COMPAT_H
#define MCA_COLL_GPUCOLL_COMPAT_H

#include <stddef.h>
#include <string.h>

#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "ompi_config.h"
#include "opal/util/info.h"

#if defined(MCA_COLL_BASE_VERSION_3_0_0)
#define MCA_COLL_GPUCOLL_OMPI_SERIES 6
#define MCA_COLL_GPUCOLL_COLL_VERSION MCA_COLL_BASE_VERSION_3_0_0
#elif defined(MCA_COLL_BASE_VERSION_2_4_0)
#define MCA_COLL_GPUCOLL_OMPI_SERIES 5
#define MCA_COLL_GPUCOLL_COLL_VERSION MCA_COLL_BASE_VERSION_2_4_0
#elif defined(MCA_COLL_BASE_VERSION_2_0_0)
#define MCA_COLL_GPUCOLL_OMPI_SERIES 4
#define MCA_COLL_GPUCOLL_COLL_VERSION MCA_COLL_BASE_VERSION_2_0_0
#else
#error \
    "coll/gpucoll: this Open MPI's coll interface is none of 2.0.0 (4.1), 2.4.0 (5.0), 3.0.0 (6.0)"
#endif

typedef mca_coll_base_component_t mca_coll_gpucoll_base_component_t;

#ifdef OMPI_MODULE_DECLSPEC
#define MCA_COLL_GPUCOLL_DECLSPEC OMPI_MODULE_DECLSPEC
#else
#define MCA_COLL_GPUCOLL_DECLSPEC OMPI_DECLSPEC
#endif

/* ---------------------------------------------------------------------------
 * Counts and displacements as the coll entry points take them. Read an
 * array's element only through mca_coll_gpucoll_count_at/displ_at.
 * ------------------------------------------------------------------------- */
#if MCA_COLL_GPUCOLL_OMPI_SERIES >= 6
typedef size_t mca_coll_gpucoll_count_t;
typedef ompi_count_array_t mca_coll_gpucoll_counts_t;
typedef ompi_disp_array_t mca_coll_gpucoll_displs_t;
typedef ompi_disp_array_t mca_coll_gpucoll_adispls_t; /* neighbor_alltoallw: bytes */
static inline size_t mca_coll_gpucoll_count_at(mca_coll_gpucoll_counts_t a, size_t i) {
    return ompi_count_array_get(a, i);
}
static inline ptrdiff_t mca_coll_gpucoll_displ_at(mca_coll_gpucoll_displs_t a, size_t i) {
    return (ptrdiff_t)ompi_disp_array_get(a, i);
}
static inline ptrdiff_t mca_coll_gpucoll_adispl_at(mca_coll_gpucoll_adispls_t a, size_t i) {
    return (ptrdiff_t)ompi_disp_array_get(a, i);
}
static inline bool mca_coll_gpucoll_has_counts(mca_coll_gpucoll_counts_t a) {
    return NULL != ompi_count_array_ptr(a);
}
static inline bool mca_coll_gpucoll_has_displs(mca_coll_gpucoll_displs_t a) {
    return NULL != ompi_disp_array_ptr(a);
}
#else
typedef int mca_coll_gpucoll_count_t;
typedef const int* mca_coll_gpucoll_counts_t;
typedef const int* mca_coll_gpucoll_displs_t;
typedef const MPI_Aint* mca_coll_gpucoll_adispls_t; /* neighbor_alltoallw: bytes */
static inline size_t mca_coll_gpucoll_count_at(mca_coll_gpucoll_counts_t a, size_t i) {
    return (size_t)a[i];
}
static inline ptrdiff_t mca_coll_gpucoll_displ_at(mca_coll_gpucoll_displs_t a, size_t i) {
    return (ptrdiff_t)a[i];
}
static inline ptrdiff_t mca_coll_gpucoll_adispl_at(mca_coll_gpucoll_adispls_t a, size_t i) {
    return (ptrdiff_t)a[i];
}
static inline bool mca_coll_gpucoll_has_counts(mca_coll_gpucoll_counts_t a) { return NULL != a; }
static inline bool mca_coll_gpucoll_has_displs(mca_coll_gpucoll_displs_t a) { return NULL != a; }
#endif

/* ---------------------------------------------------------------------------
 * Communicators and info objects
 * ------------------------------------------------------------------------- */
static inline unsigned mca_coll_gpucoll_comm_cid(struct ompi_communicator_t* comm) {
#if MCA_COLL_GPUCOLL_OMPI_SERIES >= 5
    return (unsigned)ompi_comm_get_local_cid(comm);
#else
    return (unsigned)comm->c_contextid;
#endif
}

/* The value of key in info, as a C string in value[len] (cut to fit); *flag
 * says whether the key is set. OPAL_SUCCESS or an error. */
static inline int mca_coll_gpucoll_info_get(opal_info_t* info, const char* key, char* value,
                                            size_t len, int* flag) {
    *flag = 0;
    if (NULL == info || 0 == len) return OPAL_ERR_BAD_PARAM;
#if MCA_COLL_GPUCOLL_OMPI_SERIES >= 5
    opal_cstring_t* s = NULL;
    int rc = opal_info_get(info, key, &s, flag);
    if (OPAL_SUCCESS == rc && *flag && NULL != s) {
        size_t n = s->length < len - 1 ? s->length : len - 1;
        memcpy(value, s->string, n);
        value[n] = '\0';
    }
    if (NULL != s) OBJ_RELEASE(s);
    return rc;
#else
    value[len - 1] = '\0';
    return opal_info_get(info, key, (int)len - 1, value, flag);
#endif
}

/* ---------------------------------------------------------------------------
 * Installing a module's entries. 4.1 and 5.0: the framework copies every
 * non-NULL entry of the module into comm->c_coll after enable (and retains
 * the module). 6.0: enable installs them itself, and disable (called once
 * per module, in the reverse order of enable) puts back what it replaced.
 * ------------------------------------------------------------------------- */
#if MCA_COLL_GPUCOLL_OMPI_SERIES >= 6
#define MCA_COLL_GPUCOLL_INSTALLS_ITSELF 1
#else
#define MCA_COLL_GPUCOLL_INSTALLS_ITSELF 0
#endif

/* ---------------------------------------------------------------------------
 * Requests. After a nonblocking or persistent call returns, Open MPI's
 * bindings cast the request to ompi_coll_base_nbc_request_t and write into
 * it to retain a user-defined op or a derived datatype until completion
 * (ompi_coll_base_retain_op/_datatypes), and its class's constructor runs
 * on every request of a subclass: gpucoll's requests are such requests.
 * 5.0 and 6.0: the type itself (5.0 moved the retained objects into
 * data.refcounted and added release_arrays[7]). 4.1: its header includes
 * Fortran headers that Debian 12's libopenmpi-dev does not ship, so the
 * type is spelled out here, field for field as in 4.1's coll_base_util.h.
 * ------------------------------------------------------------------------- */
#if MCA_COLL_GPUCOLL_OMPI_SERIES >= 5
#include "ompi/mca/coll/base/coll_base_util.h"
typedef ompi_coll_base_nbc_request_t mca_coll_gpucoll_nbc_request_t;
#else
#include "ompi/request/request.h"
typedef struct mca_coll_gpucoll_nbc_request {
    ompi_request_t super;
    union {
        ompi_request_complete_fn_t req_complete_cb;
        ompi_request_free_fn_t req_free;
    } cb;
    void* req_complete_cb_data;
    union {
        struct {
            void* first;
            void* second;
        } objs;
    } data;
} mca_coll_gpucoll_nbc_request_t;
OMPI_DECLSPEC extern opal_class_t ompi_coll_base_nbc_request_t_class;
#endif

/* ---------------------------------------------------------------------------
 * Half precision. Open MPI 5.0 and later have the shortfloat extension
 * (mpi-ext.h): MPIX_SHORT_FLOAT, and MPIX_C_FLOAT16 (the same datatype) where
 * the compiler that built Open MPI has a 16-bit float. 4.1 has neither.
 * Read from the extension's own macro, not from the series.
 * ------------------------------------------------------------------------- */
#if defined(__has_include)
#if __has_include("mpi-ext.h")
#include "mpi-ext.h"
#endif
#endif
#if defined(OMPI_HAVE_MPI_EXT_SHORTFLOAT) && OMPI_HAVE_MPI_EXT_SHORTFLOAT && defined(MPIX_C_FLOAT16)
#define MCA_COLL_GPUCOLL_HAVE_FLOAT16 1
#else
#define MCA_COLL_GPUCOLL_HAVE_FLOAT16 0
#endif

#endif /* MCA_COLL_GPUCOLL_COMPAT_H */
