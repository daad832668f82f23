// The management server's view of the fabric (docs/architecture.md: nm/ never
// knows which engine it runs on): send a request, receive the next response or fault report, read
// the clock. Implementations: GlexMgmtPort (libglex, on the simulated engine now and the live one
// later).
#pragma once

#include <cstdint>

#include "base/status.h"
#include "base/time_units.h"
#include "wire/mgmt.h"

namespace galaxy::nm {

using Picoseconds = uint64_t;
inline constexpr Picoseconds kUs = units::kMicrosecond;
inline constexpr Picoseconds kMs = units::kMillisecond;
inline constexpr Picoseconds kSec = units::kSecond;

// Where a request goes: the chip and the two source routes (docs/system.md 2.2).
struct MgmtTarget {
  wire::ChipId chip_id = wire::kUnconfiguredId;
  wire::ChipType type = wire::ChipType::kNrc;
  wire::SourceRoute forward;
  wire::SourceRoute backward;
};

struct MgmtRequest {
  MgmtTarget target;
  wire::NmpType type = wire::NmpType::kRegReadRequest;
  wire::NmpData data;
  uint64_t m_key = 0;  // SMInfo: the SM_Key
  // SMInfo packets only: the other server's VP (requests' answers come back to the sender's).
  uint8_t dest_vp = 0;

  static MgmtRequest read(const MgmtTarget& t, uint16_t addr);
  static MgmtRequest read2(const MgmtTarget& t, uint16_t a0, uint16_t a1);
  static MgmtRequest write(const MgmtTarget& t, uint16_t addr, uint64_t value);
  static MgmtRequest write2(const MgmtTarget& t, uint16_t a0, uint64_t v0, uint16_t a1,
                            uint64_t v1);
  // An SMInfo packet of `type` to the server at (`nic`, `vp`): it travels `to` (its backward
  // route) and names `back` as the way back (its forward route); `sm_key` in the key field.
  static MgmtRequest sm_info(wire::NmpType type, wire::ChipId nic, uint8_t vp,
                             const wire::SourceRoute& to, const wire::SourceRoute& back,
                             uint64_t sm_key, const wire::NmpSmInfo& info);
};

class MgmtPort {
 public:
  virtual ~MgmtPort() = default;
  // The server NIC's chip id and the VP responses and fault reports come back to.
  virtual wire::ChipId server_chip_id() const = 0;
  virtual uint8_t server_vp() const = 0;
  // Queue one request; it does not wait for the answer.
  virtual Status send(const MgmtRequest& request, uint16_t transaction_id) = 0;
  // The next management packet for this VP (a response or a fault report), waiting at most
  // `timeout`; Code::kTimeout when none came.
  virtual Result<wire::MgmtPacket> receive(Picoseconds timeout) = 0;
  // The clock the management logic runs on (simulated or real time).
  virtual Picoseconds now() const = 0;
  // A register of the server's own NIC, read by the host directly (no network): discovery
  // starts from the peer identity of the NIC's port.
  virtual Result<uint64_t> read_local_register(uint16_t addr) = 0;
};

}  // namespace galaxy::nm
