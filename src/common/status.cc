#include "common/status.h"

#include <cstdarg>
#include <cstdio>

namespace gpucoll {

namespace {
thread_local char t_last_error[512] = "";
}

Status set_error(Status s, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(t_last_error, sizeof t_last_error, fmt, ap);
    va_end(ap);
    return s;
}

const char* last_error() { return t_last_error; }

void clear_error() { t_last_error[0] = '\0'; }

}  // namespace gpucoll
