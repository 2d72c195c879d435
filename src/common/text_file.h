// text_file.h - reads a small description file (an NVLink description, a
// cost model's params) whole, and says why it cannot: a missing file, a
// directory (fopen accepts one; only reading it fails), a read error.
#pragma once

#include <string>

namespace gpucoll {

// The whole of path in *text. False with *error set ("cannot read 'PATH':
// Is a directory") when it cannot be opened or read, or holds more than
// max_bytes (a device or a wrong file given by mistake).
bool read_text_file(const std::string& path, std::string* text, std::string* error,
                    size_t max_bytes = size_t{1} << 20);

}  // namespace gpucoll
