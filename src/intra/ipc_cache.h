// ipc_cache.h - the per-process caches of IPC exports and imports.
//
// Opening an IPC handle is expensive (and CUDA allows it once per context),
// so mappings of peers' allocations are kept, keyed by (owner pid, unique
// buffer id, the GPU that mapped it) - never by address: memory freed and
// allocated again at the same address has a new buffer id, so a stale
// mapping is never returned; and a mapping opened in one GPU's context is
// no address for another GPU's kernels (a process set up again on another
// GPU, or using two). The import cache is bounded (least recently used
// goes first).
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>

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
    // The same, for a pointer the caller has just queried (info).
    Status describe(Device* device, const void* ptr, const PointerInfo& info, BufferDesc* desc);
    // This process's address of the buffer that owner_pid described, for
    // the kernels of GPU ordinal (current while this runs: the mapping is
    // opened in its context). *pin keeps the mapping alive while the caller
    // uses it, even if evicted.
    Status resolve(Device* device, int ordinal, int owner_pid, const BufferDesc& desc, void** out,
                   std::shared_ptr<IpcMapping>* pin);

    // Maps a peer's allocation outside the cache (a communicator's internal
    // buffers), after closing cached mappings of the owner's allocations that
    // overlap it in the owner's address space: those were freed (a process
    // has no two live allocations at one address), and CUDA refuses to open a
    // handle while such a stale mapping is open (cudaErrorAlreadyMapped).
    Status import(Device* device, int owner_pid, const BufferDesc& desc,
                  std::unique_ptr<IpcMapping>* out);

    // Raises the capacity to at least entries (communicators of different
    // sizes share the cache: the largest need wins).
    void reserve_capacity(size_t entries);
    // Bounds the bytes of peers' allocations kept mapped (the largest bound
    // asked for wins). A single allocation larger than the bound is mapped
    // for the call that needs it only, never cached.
    void reserve_bytes(size_t bytes);
    size_t mapped_bytes() const;
    void clear();

private:
    struct Key {
        int pid;             // the owner
        uint64_t buffer_id;  // the owner's
        int ordinal;         // the GPU whose context mapped it
        auto operator<=>(const Key&) const = default;
    };
    struct Import {
        std::shared_ptr<IpcMapping> mapping;
        std::list<Key>::iterator lru;
        uint64_t base;  // the owner's address range of the allocation
        uint64_t end;
    };
    // Makes room for an entry of incoming bytes.
    void evict_locked(size_t incoming);
    void erase_locked(std::map<Key, Import>::iterator it);
    // Closes the cached mappings of owner_pid overlapping [base, end) in the
    // owner's address space, except buffer keep_id (a scan: the cache holds
    // a few hundred entries at most, and imports are rare).
    void forget_overlapping_locked(int owner_pid, uint64_t base, uint64_t end, uint64_t keep_id);
    Status import_locked(Device* device, int owner_pid, const BufferDesc& desc,
                         std::unique_ptr<IpcMapping>* out);

    mutable std::mutex mutex_;
    size_t capacity_;
    size_t capacity_bytes_ = 0;  // 0 until a communicator sets it: no byte bound
    size_t bytes_ = 0;           // sum of the cached mappings' resident bytes
    std::map<Key, Import> imports_;
    std::list<Key> lru_;                     // front: most recently used
    std::map<uint64_t, IpcHandle> exports_;  // by local buffer id; unexportable: not here
    std::list<uint64_t> export_order_;
    std::set<uint64_t> unexportable_;  // local buffer ids IPC refused (bounded like exports_)
};

}  // namespace gpucoll::intra
