// emu_poison.h - what AddressSanitizer knows of the emulated device's memory.
//
// The backend's views of device memory are whole pages mapped with mmap(),
// which ASan treats as addressable from end to end: an access past an
// allocation's requested size would read the page's slack silently. The emu
// memory poisons that slack (and the guard page after it) so that ASan
// reports such an access where a GPU would fault or read garbage. Without
// ASan these calls compile to nothing.
#pragma once

#include <cstddef>

#include "common/sanitizers.h"

#if defined(GPUCOLL_ADDRESS_SANITIZER)
#include <sanitizer/asan_interface.h>
#endif

namespace gpucoll {

#if defined(GPUCOLL_ADDRESS_SANITIZER)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

// [addr, addr + bytes) becomes unaddressable for ASan (a no-op without it).
inline void poison_for_asan([[maybe_unused]] void* addr, [[maybe_unused]] size_t bytes) {
#if defined(GPUCOLL_ADDRESS_SANITIZER)
    ASAN_POISON_MEMORY_REGION(addr, bytes);
#endif
}

// [addr, addr + bytes) becomes addressable again: before the pages are
// unmapped, so that whatever mmap() puts there next starts clean.
inline void unpoison_for_asan([[maybe_unused]] void* addr, [[maybe_unused]] size_t bytes) {
#if defined(GPUCOLL_ADDRESS_SANITIZER)
    ASAN_UNPOISON_MEMORY_REGION(addr, bytes);
#endif
}

}  // namespace gpucoll
