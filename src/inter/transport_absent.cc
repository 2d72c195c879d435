// transport_absent.cc - the Transport when gpucoll was built without UCX:
// communicators that span nodes stay on the staged path.
#include "inter/transport.h"

namespace gpucoll::inter {

class Endpoint {};
struct Transport::Impl {};

Transport::Transport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Transport::~Transport() = default;

Status Transport::create(bool, const std::string&, std::unique_ptr<Transport>*) {
    return set_error(GPUCOLL_ERR_UNSUPPORTED,
                     "gpucoll was built without UCX (configure --with-ucx; Debian: libucx-dev)");
}

namespace {
const std::vector<uint8_t> kNoAddress;
const std::string kNone = "none";
}  // namespace

const std::vector<uint8_t>& Transport::address() const { return kNoAddress; }
bool Transport::cuda_memory() const { return false; }
const std::string& Transport::description() const { return kNone; }
Status Transport::connect(const uint8_t*, size_t, Endpoint**) { return GPUCOLL_ERR_UNSUPPORTED; }
Status Transport::send(Endpoint*, uint64_t, const void*, size_t, MemKind, Request*) {
    return GPUCOLL_ERR_UNSUPPORTED;
}
Status Transport::recv(uint64_t, uint64_t, void*, size_t, MemKind, Request*) {
    return GPUCOLL_ERR_UNSUPPORTED;
}
Status Transport::test(Request*, bool* done) {
    *done = true;
    return kSuccess;
}
void Transport::cancel(Request*) {}
bool Transport::failed(const Endpoint*) const { return false; }
void Transport::progress() {}
void Transport::wait(int) {}
bool Transport::device_capable(Endpoint*, std::string*) { return false; }

bool watch_unmaps(void (*)(const void*, size_t), bool) { return false; }
bool unmaps_still_reported() { return false; }

}  // namespace gpucoll::inter
