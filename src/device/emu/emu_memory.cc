#include "device/emu/emu_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "device/emu/emu_poison.h"

namespace gpucoll {

// ---- RAII wrappers ------------------------------------------------------------

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = other.release();
    }
    return *this;
}

UniqueFd::~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
}

int UniqueFd::release() { return std::exchange(fd_, -1); }

PageMapping::PageMapping(PageMapping&& other) noexcept
    : addr_(std::exchange(other.addr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PageMapping& PageMapping::operator=(PageMapping&& other) noexcept {
    if (this != &other) {
        reset();
        addr_ = std::exchange(other.addr_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

PageMapping::~PageMapping() { reset(); }

void PageMapping::reset() {
    if (addr_ != nullptr) {
        unpoison_for_asan(addr_, bytes_);
        ::munmap(addr_, bytes_);
    }
    addr_ = nullptr;
    bytes_ = 0;
}

// ---- helpers ------------------------------------------------------------------

size_t page_size() {
    static const size_t size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    return size;
}

bool round_up_to_pages(size_t bytes, size_t* rounded) {
    const size_t page = page_size();
    if (bytes == 0) bytes = 1;
    if (bytes > SIZE_MAX - (page - 1)) return false;
    *rounded = (bytes + page - 1) / page * page;
    return true;
}

uint64_t next_emu_buffer_id() {
    static std::atomic<uint64_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

namespace {

Status map_error(const char* what, size_t bytes) {
    const int err = errno;
    return set_error(err == ENOMEM ? GPUCOLL_ERR_OUT_OF_MEMORY : GPUCOLL_ERR_SYSTEM,
                     "emu device: %s of %zu bytes failed: %s", what, bytes, std::strerror(err));
}

}  // namespace

Status reserve_with_guard_page(size_t bytes, PageMapping* out) {
    if (bytes > SIZE_MAX - page_size()) {
        return set_error(GPUCOLL_ERR_OUT_OF_MEMORY, "emu device: %zu bytes is too large", bytes);
    }
    const size_t total = bytes + page_size();
    void* p = ::mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return map_error("mmap (reservation)", total);
    *out = PageMapping(p, total);
    return kSuccess;
}

Status map_device_pages(int fd, size_t size, size_t mapped_bytes, PageMapping* device_view,
                        PageMapping* host_view) {
    void* user = ::mmap(nullptr, mapped_bytes, PROT_NONE, MAP_SHARED, fd, 0);
    if (user == MAP_FAILED) return map_error("mmap (device view)", mapped_bytes);
    PageMapping user_pages(user, mapped_bytes);
    PageMapping rw_pages;
    GPUCOLL_TRY(reserve_with_guard_page(mapped_bytes, &rw_pages));
    void* rw = ::mmap(rw_pages.data(), mapped_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                      fd, 0);
    if (rw == MAP_FAILED) return map_error("mmap (backend view)", mapped_bytes);
    poison_for_asan(rw_pages.data() + size, rw_pages.bytes() - size);
    *host_view = std::move(rw_pages);
    *device_view = std::move(user_pages);
    return kSuccess;
}

// ---- EmuMemory ----------------------------------------------------------------

struct EmuMemory::OwnedPages {
    UniqueFd fd;
    PageMapping device_view;
    PageMapping host_view;
    uint64_t inode = 0;
};

namespace {

constexpr uint64_t kIpcMagic = 0x676370636f6c6c45ull;  // "gpcollE"

// What ipc_export puts into IpcHandle::bytes.
struct EmuIpcHandle {
    uint64_t magic;
    int32_t pid;
    int32_t fd;
    uint64_t size;
    uint64_t mapped_bytes;
    uint64_t buffer_id;
    uint64_t inode;
    uint64_t base;  // the exporter's address of the allocation
};
static_assert(sizeof(EmuIpcHandle) <= sizeof(IpcHandle::bytes));

class EmuIpcMapping final : public IpcMapping {
public:
    EmuIpcMapping(std::shared_ptr<EmuMemory> memory, PageMapping device_view, PageMapping host_view,
                  size_t size, size_t resident)
        : memory_(std::move(memory)),
          device_view_(std::move(device_view)),
          host_view_(std::move(host_view)),
          size_(size),
          resident_(resident) {}
    ~EmuIpcMapping() override { memory_->unregister_import(device_view_.data()); }

    void* address() const override { return device_view_.data(); }
    size_t size() const override { return size_; }
    size_t resident() const override { return resident_; }

private:
    std::shared_ptr<EmuMemory> memory_;
    PageMapping device_view_;
    PageMapping host_view_;
    size_t size_;
    size_t resident_;
};

}  // namespace

std::shared_ptr<EmuMemory> EmuMemory::create() {
    return std::shared_ptr<EmuMemory>(new EmuMemory());
}

EmuMemory::~EmuMemory() = default;

Status EmuMemory::alloc(void** ptr, size_t bytes, bool exportable, int device) {
    if (ptr == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "emu alloc: ptr is NULL");
    size_t mapped_bytes = 0;
    if (!round_up_to_pages(bytes, &mapped_bytes)) {
        return set_error(GPUCOLL_ERR_OUT_OF_MEMORY, "emu alloc: %zu bytes is too large", bytes);
    }
    auto pages = std::make_unique<OwnedPages>();
    const uint64_t id = next_emu_buffer_id();
    char name[48];
    std::snprintf(name, sizeof name, "gpucoll-emu-%llu", static_cast<unsigned long long>(id));
    pages->fd = UniqueFd(::memfd_create(name, MFD_CLOEXEC));
    if (pages->fd.get() < 0) {
        return set_error(GPUCOLL_ERR_SYSTEM,
                         "emu alloc: memfd_create failed: %s (too many open files? raise "
                         "`ulimit -n`)",
                         std::strerror(errno));
    }
    if (::ftruncate(pages->fd.get(), static_cast<off_t>(mapped_bytes)) != 0) {
        return map_error("ftruncate", mapped_bytes);
    }
    struct stat st {};
    if (::fstat(pages->fd.get(), &st) != 0) {
        return set_error(GPUCOLL_ERR_SYSTEM, "emu alloc: fstat failed: %s", std::strerror(errno));
    }
    pages->inode = st.st_ino;
    GPUCOLL_TRY(map_device_pages(pages->fd.get(), bytes, mapped_bytes, &pages->device_view,
                                 &pages->host_view));

    Region region;
    region.size = bytes;
    region.mapped_bytes = mapped_bytes;
    region.host_view = pages->host_view.data();
    region.buffer_id = id;
    region.device = device;
    region.exportable = exportable;
    void* user = pages->device_view.data();
    region.owned = std::move(pages);
    {
        std::unique_lock lock(mutex_);
        widen_bounds(reinterpret_cast<uintptr_t>(user), region.mapped_bytes);
        regions_.emplace(reinterpret_cast<uintptr_t>(user), std::move(region));
    }
    *ptr = user;
    return kSuccess;
}

Status EmuMemory::free(void* ptr) {
    if (ptr == nullptr) return kSuccess;
    RegionMap::node_type node;  // released after the lock is dropped
    {
        std::unique_lock lock(mutex_);
        auto it = regions_.find(reinterpret_cast<uintptr_t>(ptr));
        if (it == regions_.end()) {
            if (find_region(reinterpret_cast<uintptr_t>(ptr)) != regions_.end()) {
                return set_error(GPUCOLL_ERR_INVALID_ARG,
                                 "emu free: %p points inside an allocation, not at its start; "
                                 "pass the pointer that alloc returned",
                                 ptr);
            }
            return set_error(GPUCOLL_ERR_NOT_FOUND,
                             "emu free: %p was not allocated by the emu device (already freed, "
                             "or host memory?)",
                             ptr);
        }
        if (!it->second.owned) {
            return set_error(GPUCOLL_ERR_INVALID_ARG,
                             "emu free: %p is an imported IPC mapping; destroy the IpcMapping "
                             "instead",
                             ptr);
        }
        node = regions_.extract(it);
    }
    return kSuccess;
}

EmuMemory::RegionMap::const_iterator EmuMemory::find_region(uintptr_t addr) const {
    auto it = regions_.upper_bound(addr);
    if (it == regions_.begin()) return regions_.end();
    --it;
    if (addr - it->first >= it->second.mapped_bytes) return regions_.end();
    return it;
}

void EmuMemory::widen_bounds(uintptr_t start, size_t bytes) {
    if (start < __atomic_load_n(&span_.lo, __ATOMIC_RELAXED))
        __atomic_store_n(&span_.lo, start, __ATOMIC_RELEASE);
    if (start + bytes > __atomic_load_n(&span_.hi, __ATOMIC_RELAXED))
        __atomic_store_n(&span_.hi, start + bytes, __ATOMIC_RELEASE);
}

void EmuMemory::query(const void* ptr, PointerInfo* info) const {
    *info = PointerInfo{};
    if (surely_host(ptr)) return;  // outside every device region
    std::shared_lock lock(mutex_);
    auto it = find_region(reinterpret_cast<uintptr_t>(ptr));
    if (it == regions_.end()) return;
    info->type = GPUCOLL_MEM_DEVICE;
    info->device = it->second.device;
    info->base = reinterpret_cast<void*>(it->first);
    info->size = it->second.size;
    info->buffer_id = it->second.buffer_id;
}

Status EmuMemory::translate(const void* ptr, size_t bytes, void** host_view) const {
    const auto addr = reinterpret_cast<uintptr_t>(ptr);
    if (surely_host(ptr)) {
        *host_view = const_cast<void*>(ptr);  // host memory
        return kSuccess;
    }
    std::shared_lock lock(mutex_);
    auto it = find_region(addr);
    if (it == regions_.end()) {
        *host_view = const_cast<void*>(ptr);
        return kSuccess;
    }
    const size_t offset = addr - it->first;
    const size_t size = it->second.size;
    if (offset > size || bytes > size - offset) {
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "emu device: range [%p, +%zu bytes) runs past the end of its "
                         "allocation (%p, %zu bytes)",
                         ptr, bytes, reinterpret_cast<void*>(it->first), size);
    }
    *host_view = it->second.host_view + offset;
    return kSuccess;
}

Status EmuMemory::export_handle(void* base, IpcHandle* handle) const {
    if (handle == nullptr)
        return set_error(GPUCOLL_ERR_INVALID_ARG, "emu ipc_export: handle is NULL");
    std::shared_lock lock(mutex_);
    auto it = regions_.find(reinterpret_cast<uintptr_t>(base));
    if (it == regions_.end()) {
        if (find_region(reinterpret_cast<uintptr_t>(base)) != regions_.end()) {
            return set_error(GPUCOLL_ERR_INVALID_ARG,
                             "emu ipc_export: %p is inside an allocation; export its base "
                             "(PointerInfo::base)",
                             base);
        }
        return set_error(GPUCOLL_ERR_NOT_FOUND,
                         "emu ipc_export: %p is not an allocation of the emu device", base);
    }
    const Region& region = it->second;
    if (!region.owned) {
        return set_error(GPUCOLL_ERR_UNSUPPORTED,
                         "emu ipc_export: %p is itself an imported mapping; export the "
                         "allocation in the process that owns it",
                         base);
    }
    if (!region.exportable) {
        return set_error(GPUCOLL_ERR_UNSUPPORTED,
                         "emu ipc_export: %p is pool-like memory that IPC cannot export; copy "
                         "through an exportable scratch buffer",
                         base);
    }
    EmuIpcHandle h{};
    h.magic = kIpcMagic;
    h.pid = static_cast<int32_t>(::getpid());
    h.fd = region.owned->fd.get();
    h.size = region.size;
    h.mapped_bytes = region.mapped_bytes;
    h.buffer_id = region.buffer_id;
    h.inode = region.owned->inode;
    h.base = reinterpret_cast<uintptr_t>(base);
    std::memset(handle->bytes, 0, sizeof handle->bytes);
    std::memcpy(handle->bytes, &h, sizeof h);
    return kSuccess;
}

Status EmuMemory::import_handle(const IpcHandle& handle, std::unique_ptr<IpcMapping>* out,
                                int device) {
    if (out == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "emu ipc_import: out is NULL");
    EmuIpcHandle h;
    std::memcpy(&h, handle.bytes, sizeof h);
    if (h.magic != kIpcMagic) {
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "emu ipc_import: not an emu IPC handle (do both processes use the "
                         "emu backend? set GPUCOLL_DEVICE the same everywhere)");
    }
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(h.pid),
                  static_cast<int>(h.fd));
    UniqueFd fd(::open(path, O_RDWR | O_CLOEXEC));
    if (fd.get() < 0) {
        return set_error(GPUCOLL_ERR_SYSTEM,
                         "emu ipc_import: cannot open %s: %s (the exporting process must be "
                         "alive, on this node, and run as the same user)",
                         path, std::strerror(errno));
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || static_cast<uint64_t>(st.st_ino) != h.inode ||
        static_cast<uint64_t>(st.st_size) < h.mapped_bytes) {
        return set_error(GPUCOLL_ERR_NOT_FOUND,
                         "emu ipc_import: the exported allocation (buffer id %llu of pid %d) "
                         "no longer exists; it was freed before the import",
                         static_cast<unsigned long long>(h.buffer_id), static_cast<int>(h.pid));
    }
    const std::pair<int, uint64_t> range_key{h.pid, h.base};
    {
        std::shared_lock lock(mutex_);
        // Every open import of that process (a few: the cache bounds them;
        // imports are cache misses).
        for (auto it = imported_ranges_.lower_bound({h.pid, 0});
             it != imported_ranges_.end() && it->first.first == h.pid; ++it) {
            const uint64_t start = it->first.second;
            if (start < h.base + h.mapped_bytes && h.base < it->second.end &&
                it->second.buffer_id != h.buffer_id) {
                return set_error(
                    GPUCOLL_ERR_DEVICE,
                    "emu ipc_import: resource already mapped: buffer id %llu of pid %d overlaps "
                    "buffer id %llu, which that process freed but this one still maps (the emu "
                    "device imitates cudaErrorAlreadyMapped; close stale mappings first)",
                    static_cast<unsigned long long>(h.buffer_id), static_cast<int>(h.pid),
                    static_cast<unsigned long long>(it->second.buffer_id));
            }
        }
    }
    PageMapping device_view;
    PageMapping host_view;
    if (h.size > h.mapped_bytes) {
        return set_error(GPUCOLL_ERR_INVALID_ARG,
                         "emu ipc_import: handle claims %llu bytes in %llu mapped bytes",
                         static_cast<unsigned long long>(h.size),
                         static_cast<unsigned long long>(h.mapped_bytes));
    }
    GPUCOLL_TRY(map_device_pages(fd.get(), h.size, h.mapped_bytes, &device_view, &host_view));

    Region region;
    region.size = h.size;
    region.mapped_bytes = h.mapped_bytes;
    region.host_view = host_view.data();
    region.buffer_id = next_emu_buffer_id();
    region.device = device;
    const auto key = reinterpret_cast<uintptr_t>(device_view.data());
    {
        std::unique_lock lock(mutex_);
        widen_bounds(key, region.mapped_bytes);
        regions_.emplace(key, std::move(region));
        imported_ranges_.emplace(range_key,
                                 ImportedRange{h.base + h.mapped_bytes, h.buffer_id, key});
    }
    *out = std::make_unique<EmuIpcMapping>(shared_from_this(), std::move(device_view),
                                           std::move(host_view), h.size, h.mapped_bytes);
    return kSuccess;
}

void EmuMemory::unregister_import(const void* base) {
    const auto local = reinterpret_cast<uintptr_t>(base);
    std::unique_lock lock(mutex_);
    regions_.erase(local);
    for (auto it = imported_ranges_.begin(); it != imported_ranges_.end(); ++it) {
        if (it->second.local == local) {
            imported_ranges_.erase(it);
            break;
        }
    }
}

// ---- EmuPinnedHost ------------------------------------------------------------

Status EmuPinnedHost::alloc(void** ptr, size_t bytes) {
    if (ptr == nullptr) return set_error(GPUCOLL_ERR_INVALID_ARG, "emu alloc_host: ptr is NULL");
    size_t mapped_bytes = 0;
    if (!round_up_to_pages(bytes, &mapped_bytes)) {
        return set_error(GPUCOLL_ERR_OUT_OF_MEMORY, "emu alloc_host: %zu bytes is too large",
                         bytes);
    }
    PageMapping block;
    GPUCOLL_TRY(reserve_with_guard_page(mapped_bytes, &block));
    if (::mprotect(block.data(), mapped_bytes, PROT_READ | PROT_WRITE) != 0) {
        return map_error("alloc_host (mprotect)", mapped_bytes);
    }
    poison_for_asan(block.data() + bytes, block.bytes() - bytes);
    void* p = block.data();
    std::lock_guard lock(mutex_);
    blocks_.emplace(reinterpret_cast<uintptr_t>(p), std::move(block));
    *ptr = p;
    return kSuccess;
}

Status EmuPinnedHost::free(void* ptr) {
    if (ptr == nullptr) return kSuccess;
    PageMapping block;  // unmapped after the lock is dropped
    {
        std::lock_guard lock(mutex_);
        auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
        if (it == blocks_.end()) {
            return set_error(GPUCOLL_ERR_NOT_FOUND,
                             "emu free_host: %p was not allocated by alloc_host (already "
                             "freed?)",
                             ptr);
        }
        block = std::move(it->second);
        blocks_.erase(it);
    }
    return kSuccess;
}

}  // namespace gpucoll
