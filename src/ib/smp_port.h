// Where a subnet manager's SMPs go (docs/system.md 3): a port of an InfiniBand channel adapter or
// switch that sends subnet management packets and receives their answers. The subnet manager
// (nm/ib_sm.h) sees only this; UmadPort (umad_port.h) is the one over the kernel's user MAD
// interface, which also reaches ibsim through libumad2sim.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "base/status.h"
#include "wire/ib_mad.h"
#include "wire/ib_smp.h"

namespace galaxy::ib {

// The local end: what the subnet manager starts discovery from.
struct LocalPort {
  std::string ca;     // "mlx5_0", "ibsim0"
  unsigned port = 0;  // 0 on a switch's management port
  uint64_t port_guid = 0;
  uint16_t lid = 0;
  uint16_t sm_lid = 0;
  unsigned state = 0;  // IBA port state as the kernel reports it
};

// One finished request: its answer, or why there is none (timed out, refused by the transport).
struct SmpCompletion {
  uint32_t tid = 0;  // the low 32 bits of the transaction id (the transport owns the high ones)
  Status status;
  wire::Smp smp;  // the answer when status is ok
  // A general management packet's answer (SmpPort::send_gmp) instead of an SMP's.
  std::optional<wire::Mad> gmp;
};

// A request addressed to the SM behind this port rather than to its SMA (another SM's SMInfo
// Get or Set, IBA 14.4) -> the answer to send back (method and data set; the port turns it
// round), or nullopt to leave it unanswered.
using SmRequestHandler = std::function<std::optional<wire::Smp>(const wire::Smp& request)>;

// A general management request addressed to the SM behind this port (subnet administration,
// class 0x03) -> the answer, or nullopt to leave it unanswered. The handler sets the method,
// status, attribute and data; the port turns the transaction id and the address round.
// `length` is the bytes that go: a GetTable answer ends after its last record (IBA 15.2.5).
struct GmpAnswer {
  wire::Mad mad;
  unsigned length = wire::kMadBytes;
};
// Where a request came from: the sender's LID and QP.
struct GmpSource {
  uint16_t lid = 0;
  uint32_t qp = 0;
};
using GmpRequestHandler =
    std::function<std::optional<GmpAnswer>(const wire::Mad& request, const GmpSource& from)>;

class SmpPort {
 public:
  virtual ~SmpPort() = default;
  virtual const LocalPort& local() const = 0;
  // Queues one request. `dlid` is wire::kPermissiveLid for a directed route, else the LID a
  // LID-routed SMP goes to. The low 32 bits of the transaction id name the request.
  virtual Status send(const wire::Smp& smp, uint16_t dlid) = 0;
  // The next completion, waiting at most `timeout_ms`; Code::kTimeout when none came. A request
  // that was never answered completes with Code::kTimeout after the transport's timeout.
  virtual Result<SmpCompletion> receive(int timeout_ms) = 0;
  // Queues a general management packet (GSI, QP1: the PerfMgt class a scan reads counters
  // with) to the port at LID `dlid`; its answer completes like an SMP's, in `gmp`.
  virtual Status send_gmp(const wire::Mad& mad, uint16_t dlid) {
    (void)mad;
    (void)dlid;
    return make_error(Code::kUnsupported, 7025, "this port sends no general management packets");
  }
  // Makes the port an SM's (the IsSM capability, IBA 14.2.5.6, so that other SMs find it) and
  // answers the requests addressed to that SM with `h` whenever receive() or serve() runs.
  virtual Status serve_sm(SmRequestHandler h) {
    (void)h;
    return make_error(Code::kUnsupported, 7028, "this port answers no requests to an SM");
  }
  // Answers the requests of management class `cls` (version `class_version`) with `h` whenever
  // receive() or serve() runs.
  virtual Status serve_class(wire::MgmtClass cls, uint8_t class_version, GmpRequestHandler h) {
    (void)cls;
    (void)class_version;
    (void)h;
    return make_error(Code::kUnsupported, 7031, "this port answers no management requests");
  }
  // Requests received that did not decode: discarded unanswered, and counted here.
  virtual uint64_t malformed_requests() const { return 0; }
  // Waits `timeout_ms` with nothing of its own in flight, answering requests to the SM (answers
  // to requests already given up are dropped).
  virtual void serve(int timeout_ms) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
  }
  // How many requests may be outstanding at once without the transport itself stalling
  // (UINT32_MAX: no limit of its own).
  virtual uint32_t max_in_flight() const { return UINT32_MAX; }
};

}  // namespace galaxy::ib
