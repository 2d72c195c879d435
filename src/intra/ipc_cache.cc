#include "intra/ipc_cache.h"

#include <unistd.h>

#include <algorithm>
#include <string>

namespace gpucoll::intra {

Status IpcCache::describe(Device* device, const void* ptr, BufferDesc* desc) {
    PointerInfo info;
    GPUCOLL_TRY(device->query(ptr, &info));
    return describe(device, ptr, info, desc);
}

Status IpcCache::describe(Device* device, const void* ptr, const PointerInfo& info,
                          BufferDesc* desc) {
    if (info.type != GPUCOLL_MEM_DEVICE)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "IPC export of %p: not device memory", ptr);
    if (!info.complete) {
        const std::string why = last_error();
        return set_error(GPUCOLL_ERR_DEVICE,
                         "IPC export of %p: the device backend could not tell the allocation "
                         "holding it (%s); this call is staged",
                         ptr, why.c_str());
    }
    desc->buffer_id = info.buffer_id;
    desc->base = reinterpret_cast<uintptr_t>(info.base);
    desc->size = info.size;
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

Status IpcCache::resolve(Device* device, int ordinal, int owner_pid, const BufferDesc& desc,
                         void** out, std::shared_ptr<IpcMapping>* pin) {
    if (owner_pid == getpid()) {  // our own memory (or a thread-rank of this process)
        *out = reinterpret_cast<char*>(desc.base) + desc.offset;
        return kSuccess;
    }
    const Key key{owner_pid, desc.buffer_id, ordinal};
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = imports_.find(key);
    if (it == imports_.end()) {
        std::unique_ptr<IpcMapping> mapping;
        GPUCOLL_TRY(import_locked(device, owner_pid, desc, &mapping));
        const size_t size = mapping->resident();  // what it keeps mapped, not the claim
        if (capacity_bytes_ != 0 && size > capacity_bytes_) {
            // Larger than the whole bound: for this call only.
            *pin = std::shared_ptr<IpcMapping>(std::move(mapping));
            *out = static_cast<char*>((*pin)->address()) + desc.offset;
            return kSuccess;
        }
        evict_locked(size);
        bytes_ += size;
        lru_.push_front(key);
        const uint64_t end = desc.base + std::max<uint64_t>(desc.size, 1);
        it = imports_
                 .emplace(key, Import{std::shared_ptr<IpcMapping>(std::move(mapping)), lru_.begin(),
                                      desc.base, end})
                 .first;
    } else {
        lru_.splice(lru_.begin(), lru_, it->second.lru);
    }
    *pin = it->second.mapping;
    *out = static_cast<char*>(it->second.mapping->address()) + desc.offset;
    return kSuccess;
}

Status IpcCache::import(Device* device, int owner_pid, const BufferDesc& desc,
                        std::unique_ptr<IpcMapping>* out) {
    std::lock_guard<std::mutex> lock(mutex_);
    return import_locked(device, owner_pid, desc, out);
}

Status IpcCache::import_locked(Device* device, int owner_pid, const BufferDesc& desc,
                               std::unique_ptr<IpcMapping>* out) {
    forget_overlapping_locked(owner_pid, desc.base, desc.base + std::max<uint64_t>(desc.size, 1),
                              desc.buffer_id);
    const Status s = device->ipc_import(desc.handle, out);
    if (s == kSuccess) return s;
    // A mapping this cache cannot see as overlapping (an owner that did not
    // report sizes) may still block the import: close every mapping of that
    // owner and try once more. Mappings a running call pins stay open.
    bool dropped = false;
    for (auto it = imports_.begin(); it != imports_.end();) {
        auto next = std::next(it);
        if (it->first.pid == owner_pid && it->first.buffer_id != desc.buffer_id) {
            erase_locked(it);
            dropped = true;
        }
        it = next;
    }
    return dropped ? device->ipc_import(desc.handle, out) : s;
}

void IpcCache::forget_overlapping_locked(int owner_pid, uint64_t base, uint64_t end,
                                         uint64_t keep_id) {
    for (auto it = imports_.begin(); it != imports_.end();) {
        auto next = std::next(it);
        if (it->first.pid == owner_pid && it->first.buffer_id != keep_id && it->second.base < end &&
            it->second.end > base)
            erase_locked(it);
        it = next;
    }
}

void IpcCache::erase_locked(std::map<Key, Import>::iterator it) {
    bytes_ -= std::min(bytes_, it->second.mapping->resident());
    lru_.erase(it->second.lru);
    imports_.erase(it);
}

void IpcCache::evict_locked(size_t incoming) {
    while (!lru_.empty() && (imports_.size() >= capacity_ ||
                             (capacity_bytes_ != 0 && bytes_ + incoming > capacity_bytes_))) {
        auto it = imports_.find(lru_.back());
        if (it == imports_.end()) {
            lru_.pop_back();
            continue;
        }
        erase_locked(it);
    }
}

void IpcCache::reserve_capacity(size_t entries) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = std::max(capacity_, entries);
}

void IpcCache::reserve_bytes(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_bytes_ = std::max(capacity_bytes_, bytes);
}

size_t IpcCache::mapped_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return bytes_;
}

void IpcCache::clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    imports_.clear();
    lru_.clear();
    bytes_ = 0;
    exports_.clear();
    unexportable_.clear();
    export_order_.clear();
}

}  // namespace gpucoll::intra
