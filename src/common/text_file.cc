// text_file.cc - see text_file.h.
#include "common/text_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace gpucoll {

bool read_text_file(const std::string& path, std::string* text, std::string* error,
                    size_t max_bytes) {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "r"), std::fclose);
    if (f == nullptr) {
        *error = "cannot open '" + path + "': " + std::strerror(errno);
        return false;
    }
    std::string out;
    char buf[4096];
    size_t got = 0;
    while ((got = std::fread(buf, 1, sizeof buf, f.get())) > 0) {
        out.append(buf, got);
        if (out.size() > max_bytes) {
            *error = "'" + path + "' is larger than " + std::to_string(max_bytes) +
                     " bytes: not a description file";
            return false;
        }
    }
    if (std::ferror(f.get()) != 0) {  // a directory opens, and fails here (EISDIR)
        *error = "cannot read '" + path + "': " + std::strerror(errno);
        return false;
    }
    *text = std::move(out);
    return true;
}

}  // namespace gpucoll
