// The network management agent, one implementation for NIC and NRC (docs/system.md 2.1, 2.4):
//   nmp_unpacker -> nmp_distributor (a table indexed by NMPType, one handler per type)
//   -> reg_access (1-2 registers; writes acknowledged at once) / eep_access (1-6 bytes)
//   -> nmp_collector (responses before fault reports, whole packets) -> output.
// Timeless: `NmaWork` tells the engine what the request cost so it can charge the time.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "base/fifo.h"
#include "base/status.h"
#include "wire/mgmt.h"

namespace galaxy::chip {

class Chip;
enum class FaultCode : uint8_t;

struct NmaWork {
  enum class Kind : uint8_t { kNone, kRegRead, kRegWrite, kEepromRead, kEepromWrite, kRejected };
  Kind kind = Kind::kNone;
  uint8_t count = 0;  // registers or EEPROM bytes accessed
};

struct NmaOutput {
  uint8_t port = 0;  // output port (NRC: backward route hop 0; NIC: its only port)
  wire::MgmtPacketBytes bytes{};
  bool is_report = false;
};

struct NmaOutcome {
  bool dropped = false;  // not for this chip (wrong DestID/DestType) or no way back: no answer
  NmaWork work;
  NmaOutput response;  // valid when !dropped
  wire::NmpType response_type = wire::NmpType::kRegError;
};

class Nma {
 public:
  explicit Nma(Chip& chip);

  // Executes a request absorbed by this chip at `now_ps` (the engine's clock, for the M_Key
  // lease). An error means the bytes are not a management packet (a dirty packet): the caller
  // discards and counts it.
  Result<NmaOutcome> process(std::span<const uint8_t> packet, uint64_t now_ps);

  // nmp_collector: the engine queues a response when its processing time has elapsed.
  void push_response(const NmaOutput& out) { responses_.push_back(out); }
  // active_report: builds a fault report to the server configured in FAULT_ROUTE/FAULT_DEST.
  bool queue_fault_report(FaultCode code, uint8_t port, uint32_t detail);
  // Responses always leave before fault reports.
  std::optional<NmaOutput> pop_output();
  size_t pending_outputs() const { return responses_.size() + reports_.size(); }

 private:
  using Handler = void (Nma::*)(const wire::MgmtPacket& req, wire::MgmtPacket& resp, NmaWork& work);
  void on_reg_read(const wire::MgmtPacket& req, wire::MgmtPacket& resp, NmaWork& work);
  void on_reg_write(const wire::MgmtPacket& req, wire::MgmtPacket& resp, NmaWork& work);
  void on_eeprom_read(const wire::MgmtPacket& req, wire::MgmtPacket& resp, NmaWork& work);
  void on_eeprom_write(const wire::MgmtPacket& req, wire::MgmtPacket& resp, NmaWork& work);
  void on_not_a_request(const wire::MgmtPacket& req, wire::MgmtPacket& resp, NmaWork& work);
  static void reject(const wire::MgmtPacket& req, wire::MgmtPacket& resp, NmaWork& work,
                     wire::NmpError error, uint16_t address);

  // nmp_distributor: one table, indexed by the 6-bit NMPType, serves every chip's agent.
  static const std::array<Handler, 64>& handlers();

  Chip& chip_;
  uint64_t now_ps_ = 0;  // of the request being served
  Fifo<NmaOutput> responses_;
  Fifo<NmaOutput> reports_;
};

}  // namespace galaxy::chip
