// MgmtPort over a libglex endpoint: the management server's requests go through the same
// library an application uses (docs/system.md 2.3), whatever engine is behind the device, through
// include/glex.h alone.
#pragma once

#include <memory>

#include "glex.h"
#include "nm/mgmt_port.h"

namespace galaxy::nm {

class GlexMgmtPort final : public MgmtPort {
 public:
  // Opens an endpoint on `device` (a DMA VP, -1 = any free one).
  static Result<std::unique_ptr<GlexMgmtPort>> open(glex_device_handle_t device, int32_t vp = -1);
  ~GlexMgmtPort() override;

  wire::ChipId server_chip_id() const override;
  uint8_t server_vp() const override;
  Status send(const MgmtRequest& request, uint16_t transaction_id) override;
  Result<wire::MgmtPacket> receive(Picoseconds timeout) override;
  Picoseconds now() const override;
  Result<uint64_t> read_local_register(uint16_t addr) override;

 private:
  GlexMgmtPort(glex_device_handle_t device, glex_ep_handle_t ep) : device_(device), ep_(ep) {}
  glex_device_handle_t device_;
  glex_ep_handle_t ep_;
};

}  // namespace galaxy::nm
