// ipc_cache.h - the per-process caches of IPC exports and imports.
//
// Opening an IPC handle is expensive (and CUDA allows it once per context),
// so mappings of peers' allocations are kept, keyed by (owner pid, unique
// buffer id) - never by address: memory freed and allocated again at the same
// address has a new buffer id, so a stale mapping is never returned. The
// import cache is bounded (least recently used goes first).
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "device/device.h"
#include "intra/shared_segment.h"

namespace gpucoll::intra {

class IpcCache {
public:
    // Capacity 0 until a communicator asks for some (reserve_capacity).
    explicit IpcCache(size_t capacity = 0) : capacity_(capacity) {}

    // Fills desc so that a peer can reach ptr (device memory of this process).
    // GPUCOLL_ERR_UNSUPPORTED if the backend cannot export that memory.
    Status describe(Device* device, const void* ptr, BufferDesc* desc);
    // This process's address of the buffer that owner_pid described. *pin
    // keeps the mapping alive while the caller uses it, even if evicted.
    Status resolve(Device* device, int owner_pid, const BufferDesc& desc, void** out,
                   std::shared_ptr<IpcMapping>* pin);

    // Raises the capacity to at least entries (communicators of different
    // sizes share the cache: the largest need wins).
    void reserve_capacity(size_t entries);
    void clear();

private:
    using Key = std::pair<int, uint64_t>;  // owner pid, buffer id
    struct Import {
        std::shared_ptr<IpcMapping> mapping;
        std::list<Key>::iterator lru;
    };
    void evict_locked();

    mutable std::mutex mutex_;
    size_t capacity_;
    std::map<Key, Import> imports_;
    std::list<Key> lru_;                     // front: most recently used
    std::map<uint64_t, IpcHandle> exports_;  // by local buffer id; unexportable: not here
    std::list<uint64_t> export_order_;
    std::set<uint64_t> unexportable_;  // local buffer ids IPC refused (bounded like exports_)
};

}  // namespace gpucoll::intra
