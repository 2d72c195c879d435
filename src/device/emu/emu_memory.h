// emu_memory.h - device memory of the emulated GPU, and its range table.
//
// Every allocation is a memfd mapped twice: a PROT_NONE mapping whose address
// the user gets (a host load or store through it segfaults, exactly like a
// real GPU pointer reaching host code) and a read-write mapping of the same
// pages that only the backend touches. The range table translates any
// address inside an allocation, or inside a peer allocation imported through
// IPC, to the read-write mapping.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "device/device.h"

namespace gpucoll {

// An owned file descriptor, closed on destruction.
class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : fd_(fd) {}
    UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept;
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;
    ~UniqueFd();

    int get() const { return fd_; }
    int release();

private:
    int fd_ = -1;
};

// An owned mmap() region, unmapped on destruction.
class PageMapping {
public:
    PageMapping() = default;
    PageMapping(void* addr, size_t bytes) : addr_(addr), bytes_(bytes) {}
    PageMapping(PageMapping&& other) noexcept;
    PageMapping& operator=(PageMapping&& other) noexcept;
    PageMapping(const PageMapping&) = delete;
    PageMapping& operator=(const PageMapping&) = delete;
    ~PageMapping();

    std::byte* data() const { return static_cast<std::byte*>(addr_); }
    size_t bytes() const { return bytes_; }

private:
    void reset();
    void* addr_ = nullptr;
    size_t bytes_ = 0;
};

// The system page size.
size_t page_size();

// Rounds bytes up to whole pages (at least one page); false on overflow.
bool round_up_to_pages(size_t bytes, size_t* rounded);

// Maps fd (mapped_bytes, whole pages) twice: device_view PROT_NONE (the
// address users see) and host_view read-write (what the backend works on).
// host_view ends in one inaccessible guard page, and everything in it from
// size on (the pages' slack and the guard) is poisoned for AddressSanitizer:
// a backend access past the allocation's end is reported (ASan) or faults
// (past the last page), instead of reading the slack silently.
Status map_device_pages(int fd, size_t size, size_t mapped_bytes, PageMapping* device_view,
                        PageMapping* host_view);

// Reserves bytes (whole pages) of anonymous memory followed by one
// inaccessible guard page, all PROT_NONE; *out covers both.
Status reserve_with_guard_page(size_t bytes, PageMapping* out);

// Device memory of one emu device, plus the peer allocations it imported.
// Thread-safe. Held by shared_ptr so that IPC mappings may outlive the device.
class EmuMemory : public std::enable_shared_from_this<EmuMemory> {
public:
    static std::shared_ptr<EmuMemory> create();
    ~EmuMemory();

    // exportable false: ipc_export refuses it, like CUDA pool memory.
    // device: the emulated GPU it lives on (the allocating thread's current one).
    Status alloc(void** ptr, size_t bytes, bool exportable = true, int device = 0);
    Status free(void* ptr);

    // DEVICE (its device, base, requested size, buffer id) for any address
    // inside an allocation or an imported mapping; HOST otherwise.
    void query(const void* ptr, PointerInfo* info) const;
    // Outside [lowest, highest) of every allocation and mapping: host
    // memory for sure (two loads, no lock). Inside: ask query().
    bool surely_host(const void* ptr) const {
        const auto addr = reinterpret_cast<uintptr_t>(ptr);
        return addr < __atomic_load_n(&span_.lo, __ATOMIC_ACQUIRE) ||
               addr >= __atomic_load_n(&span_.hi, __ATOMIC_ACQUIRE);
    }
    // The two bounds themselves (Device::set_device_span), read atomically.
    const gpucoll_device_span_t& span() const { return span_; }

    // Host-accessible view of [ptr, ptr + bytes): the read-write mapping for
    // emu device memory (INVALID_ARG if the range leaves its allocation),
    // ptr itself for host memory.
    Status translate(const void* ptr, size_t bytes, void** host_view) const;

    Status export_handle(void* base, IpcHandle* handle) const;
    // device: the importing thread's current device, the only one whose
    // kernels may touch the mapping (CUDA maps it into that device's context).
    Status import_handle(const IpcHandle& handle, std::unique_ptr<IpcMapping>* out, int device = 0);

    // Called by an imported mapping when it is destroyed.
    void unregister_import(const void* base);

private:
    EmuMemory() = default;

    struct OwnedPages;  // fd + both mappings of an allocation made here
    struct Region {
        size_t size = 0;          // requested size
        size_t mapped_bytes = 0;  // whole pages
        std::byte* host_view = nullptr;
        uint64_t buffer_id = 0;
        int device = 0;  // allocated on, or imported into
        bool exportable = true;
        std::unique_ptr<OwnedPages> owned;  // null for imported mappings
    };
    using RegionMap = std::map<uintptr_t, Region>;

    // The region holding addr, or end(); caller holds mutex_.
    RegionMap::const_iterator find_region(uintptr_t addr) const;

    // Records [start, end) in the bounds below (caller holds mutex_).
    void widen_bounds(uintptr_t start, size_t bytes);

    mutable std::shared_mutex mutex_;
    RegionMap regions_;
    // Lowest start and highest end of every region ever registered (never
    // narrowed): an address outside them is host memory, answered without
    // the lock. Host-buffer calls then cost a comparison, not a lookup.
    gpucoll_device_span_t span_{UINTPTR_MAX, 0};  // lowest, highest (atomic builtins)
    // Open imports by exporter: (pid, exporter's base) -> (end, buffer id).
    // Like CUDA (cudaErrorAlreadyMapped), importing an allocation that
    // overlaps, in the exporter's address space, another allocation of that
    // process still mapped here fails: the stale mapping of a freed buffer
    // must be closed first.
    struct ImportedRange {
        uint64_t end;
        uint64_t buffer_id;
        uintptr_t local;  // the device view here
    };
    // By (exporter pid, exporter base); one entry per open import (each
    // GPU's import of the same buffer has its own).
    std::multimap<std::pair<int, uint64_t>, ImportedRange> imported_ranges_;
};

// Never reused for the life of the process (shared by allocations and imports).
uint64_t next_emu_buffer_id();

// Pinned host memory of the emu device: ordinary page-aligned host memory,
// followed by a guard page, its slack poisoned for AddressSanitizer.
class EmuPinnedHost {
public:
    Status alloc(void** ptr, size_t bytes);
    Status free(void* ptr);

private:
    std::mutex mutex_;
    std::map<uintptr_t, PageMapping> blocks_;
};

}  // namespace gpucoll
