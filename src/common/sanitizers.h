// sanitizers.h - which sanitizer this translation unit is built with
// (configure --enable-sanitizers; docs/testing.md, "Sanitizers").
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define GPUCOLL_ADDRESS_SANITIZER 1
#endif
#if defined(__SANITIZE_THREAD__)
#define GPUCOLL_THREAD_SANITIZER 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(GPUCOLL_ADDRESS_SANITIZER)
#define GPUCOLL_ADDRESS_SANITIZER 1
#endif
#if __has_feature(thread_sanitizer) && !defined(GPUCOLL_THREAD_SANITIZER)
#define GPUCOLL_THREAD_SANITIZER 1
#endif
#endif
