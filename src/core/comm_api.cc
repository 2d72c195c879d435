// comm_api.cc - the C interface of communicators (gpucoll_comm_*).
#include <memory>

#include "core/runtime.h"
#include "gpucoll.h"
#include "intra/node_comm.h"

struct gpucoll_comm {
    std::unique_ptr<gpucoll::intra::NodeComm> node;
};

extern "C" {

void gpucoll_comm_config_init(gpucoll_comm_config_t* config) {
    if (config == nullptr) return;
    *config = gpucoll_comm_config_t{};
    for (auto& a : config->algorithm) a = GPUCOLL_ALGO_AUTO;
    config->uniform_memory = 0;
    config->one_shot_max_bytes = 0;  // the backend's default (NodeComm::create)
    config->chain_min_bytes = size_t{8} << 20;
    config->chunk_bytes = size_t{1} << 20;
    config->ipc_cache_entries = 128;
    config->ipc_cache_bytes = 0;
    config->device_flags = GPUCOLL_FLAGS_AUTO;
    config->host_pipeline = -1;
    config->verbose = 0;
    config->log = nullptr;
}

int gpucoll_comm_create(const gpucoll_bootstrap_t* bootstrap, const gpucoll_comm_config_t* config,
                        gpucoll_comm_t** out) {
    if (bootstrap == nullptr || out == nullptr || bootstrap->allgather == nullptr ||
        bootstrap->size < 1 || bootstrap->rank < 0 || bootstrap->rank >= bootstrap->size)
        return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_comm_create: bad bootstrap");
    *out = nullptr;
    gpucoll_comm_config_t defaults;
    gpucoll_comm_config_init(&defaults);
    std::unique_ptr<gpucoll::intra::NodeComm> node;
    int s = gpucoll::intra::NodeComm::create(*bootstrap, config ? *config : defaults, &node);
    if (s != GPUCOLL_SUCCESS || !node) return s;
    auto comm = std::make_unique<gpucoll_comm>();
    comm->node = std::move(node);
    *out = comm.release();  // owned by the caller until gpucoll_comm_destroy
    return GPUCOLL_SUCCESS;
}

void gpucoll_comm_destroy(gpucoll_comm_t* comm) { std::unique_ptr<gpucoll_comm> owned(comm); }

int gpucoll_comm_decline(gpucoll_comm_t* comm) {
    if (comm == nullptr)
        return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_comm_decline: NULL argument");
    return comm->node->decline();
}

int gpucoll_comm_run(gpucoll_comm_t* comm, const gpucoll_call_t* call) {
    if (comm == nullptr || call == nullptr)
        return gpucoll::set_error(GPUCOLL_ERR_INVALID_ARG, "gpucoll_comm_run: NULL argument");
    return comm->node->run(*call);
}

}  // extern "C"
