// libFuzzer target: the monitor board protocol (wire/oob.h). A frame that decodes re-encodes to
// the same bytes; a decoded request is executed by a board of two chips (chip/monitor_board.h),
// which answers every request with an outcome and never fails otherwise.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "chip/monitor_board.h"
#include "chip/nic.h"
#include "chip/nrc.h"
#include "wire/oob.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace galaxy;
  std::span<const uint8_t> in(data, size);
  if (auto r = wire::decode_oob_response(in); r.ok()) {
    auto out = wire::encode_oob_response(*r);
    if (std::memcmp(out.data(), data, size) != 0) std::abort();
  }
  auto req = wire::decode_oob_request(in);
  if (!req.ok()) return 0;
  auto out = wire::encode_oob_request(*req);
  if (std::memcmp(out.data(), data, size) != 0) std::abort();
  chip::Nrc nrc(24);
  chip::Nic nic(1);
  chip::MonitorBoard board;
  if (!board.add_chip(0, &nrc).ok() || !board.add_chip(1, &nic).ok()) std::abort();
  auto o = board.execute(*req, 1'000'000, [](uint32_t) {});
  if (o.response.chip != req->chip || o.response.tag != req->tag) std::abort();
  // Twice: a second request sees what the first left (a chip off, a register written).
  o = board.execute(*req, 2'000'000'000, [](uint32_t) {});
  if (o.response.op != req->op) std::abort();
  return 0;
}
