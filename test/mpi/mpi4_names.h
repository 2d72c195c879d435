/*
 * mpi4_names.h - the MPI-4 names of the persistent collectives
 * (MPI_Allreduce_init, ...) on every Open MPI series gpucoll supports, for
 * the tests and benchmarks: Open MPI 5.0 and 6.0 declare them in mpi.h (5.0
 * still says MPI_VERSION 3, so the test is on OMPI_MAJOR_VERSION); 4.1 has
 * them only as MPIX_*_init, from its pcollreq extension (mpi-ext.h).
 */
#ifndef GPUCOLL_MPI4_NAMES_H
#define GPUCOLL_MPI4_NAMES_H

#include <mpi.h>

#if defined(OPEN_MPI) && OMPI_MAJOR_VERSION < 5
#include <mpi-ext.h>
#define MPI_Allgather_init MPIX_Allgather_init
#define MPI_Allgatherv_init MPIX_Allgatherv_init
#define MPI_Allreduce_init MPIX_Allreduce_init
#define MPI_Alltoall_init MPIX_Alltoall_init
#define MPI_Alltoallv_init MPIX_Alltoallv_init
#define MPI_Alltoallw_init MPIX_Alltoallw_init
#define MPI_Bcast_init MPIX_Bcast_init
#define MPI_Exscan_init MPIX_Exscan_init
#define MPI_Gather_init MPIX_Gather_init
#define MPI_Gatherv_init MPIX_Gatherv_init
#define MPI_Neighbor_allgather_init MPIX_Neighbor_allgather_init
#define MPI_Neighbor_allgatherv_init MPIX_Neighbor_allgatherv_init
#define MPI_Neighbor_alltoall_init MPIX_Neighbor_alltoall_init
#define MPI_Neighbor_alltoallv_init MPIX_Neighbor_alltoallv_init
#define MPI_Neighbor_alltoallw_init MPIX_Neighbor_alltoallw_init
#define MPI_Reduce_init MPIX_Reduce_init
#define MPI_Reduce_scatter_block_init MPIX_Reduce_scatter_block_init
#define MPI_Reduce_scatter_init MPIX_Reduce_scatter_init
#define MPI_Scan_init MPIX_Scan_init
#define MPI_Scatter_init MPIX_Scatter_init
#define MPI_Scatterv_init MPIX_Scatterv_init
#endif

#endif /* GPUCOLL_MPI4_NAMES_H */
