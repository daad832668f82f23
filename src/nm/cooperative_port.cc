#include "nm/cooperative_port.h"

#include <algorithm>

namespace galaxy::nm {

namespace {

// One level deep per thread: while the group is being served, waits do not serve it again.
thread_local bool g_serving = false;

Error stopped_error() {
  return make_error(Code::kIoError, 5474, "this server has stopped (its port sends nothing)");
}

}  // namespace

Status CooperativePort::send(const MgmtRequest& r, uint16_t tid) {
  if (stopped_) return stopped_error();
  return inner_.send(r, tid);
}

Result<uint64_t> CooperativePort::read_local_register(uint16_t a) {
  if (stopped_) return stopped_error();
  return inner_.read_local_register(a);
}

Result<wire::MgmtPacket> CooperativePort::receive(Picoseconds timeout) {
  const Picoseconds end = inner_.now() + timeout;
  for (;;) {
    if (stopped_) return stopped_error();
    const Picoseconds before = inner_.now();
    const Picoseconds step = std::min(slice_, end > before ? end - before : Picoseconds{0});
    auto p = inner_.receive(step);
    // Time passed for every server, not only this one: the others act in it.
    if (inner_.now() > before && !g_serving && serve_others_) {
      g_serving = true;
      serve_others_();
      g_serving = false;
    }
    if (p.ok() || p.error().code != Code::kTimeout || inner_.now() >= end) return p;
  }
}

}  // namespace galaxy::nm
