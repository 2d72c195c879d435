// nvml_links.cc - NVLinks from NVML, loaded at run time (dlopen of
// libnvidia-ml.so.1, the driver's library): nothing to link, and a machine
// without the driver simply has no NVLink information. Compiled against the
// real nvml.h (the CUDA toolkit's, or the nvidia-nvml-dev wheel's); without
// it, NVML is not asked.
#include "config.h"
#include "topo/topology.h"

#if GPUCOLL_HAVE_NVML
#include <dlfcn.h>
#include <nvml.h>

#include <cstring>
#endif

namespace gpucoll::topo {

#if GPUCOLL_HAVE_NVML

namespace {

// The entry points used, by their real prototypes.
struct Nvml {
    void* lib = nullptr;
    decltype(&nvmlInit_v2) init = nullptr;
    decltype(&nvmlShutdown) shutdown = nullptr;
    decltype(&nvmlErrorString) error = nullptr;
    decltype(&nvmlDeviceGetHandleByPciBusId_v2) by_bus_id = nullptr;
    decltype(&nvmlDeviceGetNvLinkState) link_state = nullptr;
    decltype(&nvmlDeviceGetNvLinkRemotePciInfo_v2) remote_pci = nullptr;
    decltype(&nvmlDeviceGetNvLinkRemoteDeviceType) remote_type = nullptr;  // may be absent
    decltype(&nvmlDeviceGetName) device_name = nullptr;                    // may be absent
    bool initialized = false;

    Nvml() = default;
    Nvml(const Nvml&) = delete;
    Nvml& operator=(const Nvml&) = delete;
    ~Nvml() {
        if (initialized) shutdown();
        if (lib != nullptr) dlclose(lib);
    }

    template <typename F>
    bool sym(F* f, const char* name) {
        *f = reinterpret_cast<F>(dlsym(lib, name));
        return *f != nullptr;
    }

    bool open(std::string* why) {
        lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) {
            *why = "NVML not found: no NVIDIA driver on this machine";
            return false;
        }
        if (!sym(&init, "nvmlInit_v2") || !sym(&shutdown, "nvmlShutdown") ||
            !sym(&error, "nvmlErrorString") ||
            !sym(&by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2") ||
            !sym(&link_state, "nvmlDeviceGetNvLinkState") ||
            !sym(&remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2")) {
            *why = "NVML lacks the NVLink queries (driver too old)";
            return false;
        }
        sym(&remote_type, "nvmlDeviceGetNvLinkRemoteDeviceType");
        sym(&device_name, "nvmlDeviceGetName");
        const nvmlReturn_t rc = init();
        if (rc != NVML_SUCCESS) {
            *why = std::string("nvmlInit failed: ") + error(rc);
            return false;
        }
        initialized = true;
        return true;
    }
};

}  // namespace

bool query_nvml_links(Machine* m, std::string* why) {
    m->links.assign(m->gpus.size(), GpuLinks{});
    if (m->gpus.empty()) {
        *why = "no GPU to ask NVML about";
        return false;
    }
    Nvml nvml;
    if (!nvml.open(why)) return false;
    int answered = 0;
    for (size_t g = 0; g < m->gpus.size(); ++g) {
        nvmlDevice_t dev{};
        if (nvml.by_bus_id(m->gpus[g].bus_id.c_str(), &dev) != NVML_SUCCESS) continue;
        ++answered;
        // The product name for the report, where hwloc gave none (its CUDA
        // and NVML plugins are not in every build: Debian's has neither).
        char product[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
        if (m->gpus[g].name.empty() && nvml.device_name != nullptr &&
            nvml.device_name(dev, product, sizeof product) == NVML_SUCCESS)
            m->gpus[g].name = product;
        for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
            nvmlEnableState_t active = NVML_FEATURE_DISABLED;
            if (nvml.link_state(dev, link, &active) != NVML_SUCCESS ||
                active != NVML_FEATURE_ENABLED)
                continue;
            nvmlPciInfo_t remote{};
            if (nvml.remote_pci(dev, link, &remote) != NVML_SUCCESS) continue;
            const int peer = m->gpu_by_bus_id(remote.busId);
            nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
            if (nvml.remote_type != nullptr) nvml.remote_type(dev, link, &type);
            if (peer >= 0 && peer != static_cast<int>(g) && type != NVML_NVLINK_DEVICE_TYPE_SWITCH)
                ++m->links[g].to_gpu[peer];
            else if (peer < 0 && type != NVML_NVLINK_DEVICE_TYPE_IBMNPU)
                ++m->links[g].to_switch;  // not a GPU of this node: an NVSwitch
        }
    }
    if (answered == 0) {
        *why = "NVML knows none of the GPUs hwloc found";
        return false;
    }
    m->links_source = "NVML";
    return true;
}

#else

bool query_nvml_links(Machine* m, std::string* why) {
    m->links.assign(m->gpus.size(), GpuLinks{});
    *why = "gpucoll was built without nvml.h (configure --with-nvml=DIR)";
    return false;
}

#endif

}  // namespace gpucoll::topo
