// The device behind a glex handle: one NIC, on the simulated engine (SimDevice) or, later, the
// live one. The C API in include/glex.h and nm's GlexMgmtPort both use it.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "wire/mgmt.h"

struct glex_device {
  virtual ~glex_device() = default;
  virtual galaxy::Result<uint8_t> open_vp(int32_t wanted) = 0;
  virtual void close_vp(uint8_t vp) = 0;
  virtual galaxy::Status post_mgmt(uint8_t vp, const galaxy::wire::MgmtDescriptor& d) = 0;
  // The next management packet in `vp`'s MPQ, waiting at most `timeout_ps`.
  virtual galaxy::Result<galaxy::wire::MgmtPacket> wait_mgmt(uint8_t vp, uint64_t timeout_ps) = 0;
  virtual uint64_t now_ps() const = 0;
  virtual galaxy::Result<uint64_t> read_local_register(uint16_t addr) = 0;
  virtual uint16_t chip_id() const = 0;
};

struct glex_ep {
  glex_device* device = nullptr;
  uint8_t vp = 0;
  uint16_t next_tid = 0;
};
