// The messages between a process using libglex on a `sim:` fabric and the simulation server that
// runs that fabric (`galaxy simd`, sim_server.h): one request, one response, over a Unix
// SOCK_SEQPACKET socket, so that every libglex call of every process happens at a point of
// simulated time. Both ends are built from this file; the server checks every field anyway.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "base/env.h"

namespace galaxy::glex::simwire {

inline constexpr uint32_t kVersion = 1;

enum class Op : uint32_t {
  kHello = 1,      // a[0] pid, a[1] wanted NIC (chip id, or UINT64_MAX), a[2] rank
  kOpenVp,         // a[0] wanted VP (int32 as uint64; -1 any)
  kCloseVp,        // vp
  kPostMgmt,       // vp, data: the management descriptor (64 bytes, 128 when wide)
  kWaitMgmt,       // vp, a[0] timeout ps -> data: the management packet
  kNow,            // -> a[0] host time ps
  kReadRegister,   // a[0] address -> a[0] value
  kRegister,       // a[0] addr, a[1] len, a[2] access -> a[0] mh
  kDeregister,     // a[0] mh
  kSendMp,         // vp, a[0] dest, flags, data
  kRecvMp,         // vp, timeout_ms -> a[0] src, data
  kRdma,           // vp, flags, a[]: see glex_rdma_req, data: immediate bytes
  kPollCq,         // vp, timeout_ms -> cq entry in a[] and error
  kFence,          // vp, timeout_ms
  kWaitEvent,      // a[0] addr, timeout_ms -> a[0], a[1]
  kPostColl,       // vp, a[0] cookie, data: chip::CollDescriptor as it lies in memory
  kRdmaTriggered,  // as kRdma, with the CP count in timeout_ms
  kResetColl,      // vp
  kCollTiming,     // -> a[0..3]: glex_device::CollTiming in order
  kResolveNic,     // data: a NIC's name (no NUL) -> a[0] its chip id
  kNodeName,       // a[0] chip id -> data: its name (no NUL)
};
inline constexpr uint32_t kMaxOp = static_cast<uint32_t>(Op::kNodeName);

inline constexpr size_t kDataBytes = 256;

struct Request {
  uint32_t version = kVersion;
  uint32_t op = 0;
  uint32_t vp = 0;
  int32_t timeout_ms = 0;
  uint32_t flags = 0;
  uint32_t len = 0;  // bytes of data
  uint64_t a[12] = {};
  uint8_t data[kDataBytes] = {};
};

struct Response {
  int32_t ret = 0;   // glex_ret_t
  uint32_t len = 0;  // bytes of data
  uint64_t a[6] = {};
  char error[256] = {};
  uint8_t data[kDataBytes] = {};
};

// Where the server of `fabric` listens: $GLEX_SIM_SOCKET, else a name in /tmp made from the
// user and the fabric specification.
inline std::string socket_path(const std::string& fabric) {
  if (auto p = env_string("GLEX_SIM_SOCKET")) return *p;
  std::string name;
  for (char c : fabric) name += (std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (name.size() > 60) name = name.substr(0, 60);
  return fmt::format("/tmp/galaxy-sim-{}-{}.sock", getuid(), name);
}

}  // namespace galaxy::glex::simwire
