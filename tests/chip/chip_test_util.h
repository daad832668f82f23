#pragma once

#include "chip/nma.h"
#include "chip/nrc.h"
#include "wire/mgmt.h"

namespace galaxy::chip::testing {

// A request as the server NIC (chip 100, VP 8) would send it to an NRC one hop away whose
// response leaves through port 3.
inline wire::MgmtPacket request(wire::NmpType type, std::vector<uint16_t> addrs,
                                std::vector<uint64_t> values = {}, uint16_t dest = 7) {
  wire::MgmtPacket p;
  p.dest_id = dest;
  p.dest_type = wire::ChipType::kNrc;
  p.src_id = 100;
  p.src_type = wire::ChipType::kNic;
  p.dest_vp = 8;
  p.src_vp = 8;
  p.transaction_id = 0xBEEF;
  p.nmp_type = type;
  (void)p.backward_route.push(3);
  p.data.count = static_cast<uint8_t>(addrs.size());
  for (size_t i = 0; i < addrs.size(); ++i) {
    p.data.address[i] = addrs[i];
    if (i < values.size()) {
      if (wire::is_eeprom(type))
        p.data.bytes[i] = static_cast<uint8_t>(values[i]);
      else
        p.data.value[i] = values[i];
    }
  }
  return p;
}

inline wire::MgmtPacketBytes bytes_of(const wire::MgmtPacket& p) {
  return wire::encode_mgmt_packet(p).value();
}

// Runs a request through the NMA and decodes the response.
// Serves `req` at `now_ps` on the engine's clock (the M_Key lease counts in it).
inline wire::MgmtPacket serve(Chip& chip, const wire::MgmtPacket& req, NmaWork* work = nullptr,
                              uint64_t now_ps = 0) {
  auto b = bytes_of(req);
  auto out = chip.nma().process(b, now_ps);
  EXPECT_TRUE(out.ok());
  EXPECT_FALSE(out->dropped);
  if (work) *work = out->work;
  return wire::decode_mgmt_packet(out->response.bytes).value();
}

}  // namespace galaxy::chip::testing
