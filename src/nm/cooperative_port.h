// Several management servers on one simulated fabric in one thread (the SM fault campaign,
// nmd/sm_campaign.h, and the election tests): each server's port waits in slices and, between
// them, lets the other servers answer what reached them, as their own processes would. A server
// that is not served is a dead one; stop() makes this one dead on purpose (a crashed process:
// its NIC stays in the fabric, nothing answers there any more).
#pragma once

#include <functional>

#include "nm/mgmt_port.h"

namespace galaxy::nm {

class CooperativePort final : public MgmtPort {
 public:
  // `serve_others` runs between slices of every wait longer than `slice`; never nested (an
  // answering server does not serve the group again).
  CooperativePort(MgmtPort& inner, Picoseconds slice, std::function<void()> serve_others)
      : inner_(inner), slice_(slice), serve_others_(std::move(serve_others)) {}

  wire::ChipId server_chip_id() const override { return inner_.server_chip_id(); }
  uint8_t server_vp() const override { return inner_.server_vp(); }
  Status send(const MgmtRequest& r, uint16_t tid) override;
  Result<wire::MgmtPacket> receive(Picoseconds timeout) override;
  Picoseconds now() const override { return inner_.now(); }
  Result<uint64_t> read_local_register(uint16_t a) override;

  // From now on nothing is sent and nothing received: every call fails at once.
  void stop() { stopped_ = true; }
  bool stopped() const { return stopped_; }

 private:
  MgmtPort& inner_;
  Picoseconds slice_;
  std::function<void()> serve_others_;
  bool stopped_ = false;
};

}  // namespace galaxy::nm
