#include "intra/ipc_cache.h"

#include <unistd.h>

#include <algorithm>

namespace gpucoll::intra {

Status IpcCache::describe(Device* device, const void* ptr, BufferDesc* desc) {
    PointerInfo info;
    GPUCOLL_TRY(device->query(ptr, &info));
    if (info.type != GPUCOLL_MEM_DEVICE)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "IPC export of %p: not device memory", ptr);
    desc->buffer_id = info.buffer_id;
    desc->base = reinterpret_cast<uintptr_t>(info.base);
    desc->offset =
        static_cast<uint64_t>(static_cast<const char*>(ptr) - static_cast<const char*>(info.base));
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = exports_.find(info.buffer_id);
    if (it != exports_.end()) {
        desc->handle = it->second;
        return kSuccess;
    }
    if (unexportable_.count(info.buffer_id) != 0)
        return set_error(GPUCOLL_ERR_UNSUPPORTED, "IPC cannot export %p (pool memory)", ptr);
    const Status s = device->ipc_export(info.base, &desc->handle);
    if (s != kSuccess && s != GPUCOLL_ERR_UNSUPPORTED) return s;
    if (s == kSuccess)
        exports_.emplace(info.buffer_id, desc->handle);
    else
        unexportable_.insert(info.buffer_id);
    export_order_.push_back(info.buffer_id);
    // Buffer ids are never reused, so old entries only cost memory: bound them.
    while (export_order_.size() > 4 * capacity_ + 16) {
        exports_.erase(export_order_.front());
        unexportable_.erase(export_order_.front());
        export_order_.pop_front();
    }
    return s;
}

Status IpcCache::resolve(Device* device, int owner_pid, const BufferDesc& desc, void** out,
                         std::shared_ptr<IpcMapping>* pin) {
    if (owner_pid == getpid()) {  // our own memory (or a thread-rank of this process)
        *out = reinterpret_cast<char*>(desc.base) + desc.offset;
        return kSuccess;
    }
    const Key key{owner_pid, desc.buffer_id};
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = imports_.find(key);
    if (it == imports_.end()) {
        std::unique_ptr<IpcMapping> mapping;
        GPUCOLL_TRY(device->ipc_import(desc.handle, &mapping));
        evict_locked();
        lru_.push_front(key);
        it =
            imports_
                .emplace(key, Import{std::shared_ptr<IpcMapping>(std::move(mapping)), lru_.begin()})
                .first;
    } else {
        lru_.splice(lru_.begin(), lru_, it->second.lru);
    }
    *pin = it->second.mapping;
    *out = static_cast<char*>(it->second.mapping->address()) + desc.offset;
    return kSuccess;
}

void IpcCache::evict_locked() {
    while (!lru_.empty() && imports_.size() >= capacity_) {
        imports_.erase(lru_.back());
        lru_.pop_back();
    }
}

void IpcCache::reserve_capacity(size_t entries) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = std::max(capacity_, entries);
}

void IpcCache::clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    imports_.clear();
    lru_.clear();
    exports_.clear();
    unexportable_.clear();
    export_order_.clear();
}

}  // namespace gpucoll::intra
