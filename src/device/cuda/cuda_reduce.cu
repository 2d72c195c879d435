__global__ void gpucoll_placeholder_kernel() {}
