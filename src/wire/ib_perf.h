// Performance management (IBA 16.1, class 0x04): the PortCounters attribute a scan reads from
// every port's PMA, in the 192 data bytes that follow a GMP's 40 reserved bytes (layout:
// docs/protocol.md; checked field by field against libibmad in tests/ib/ib_perf_test.cc).
#pragma once

#include <array>
#include <cstdint>

#include "base/status.h"
#include "wire/ib_mad.h"

namespace galaxy::wire {

inline constexpr uint16_t kPerfPortCounters = 0x0012;
// The Q_Key every GSI (QP1) packet carries (IBA 13.5.3).
inline constexpr uint32_t kGsiQKey = 0x80010000;
// Where a PerfMgt attribute starts in Mad::data (the MAD's byte 64).
inline constexpr size_t kPerfDataAt = 40;

struct PortCounters {
  uint8_t port_select = 0;
  uint16_t counter_select = 0;
  uint16_t symbol_errors = 0;
  uint8_t link_error_recoveries = 0;
  uint8_t link_downed = 0;
  uint16_t rcv_errors = 0;
  uint16_t rcv_remote_physical_errors = 0;
  uint16_t rcv_switch_relay_errors = 0;
  uint16_t xmit_discards = 0;
  uint8_t xmit_constraint_errors = 0;
  uint8_t rcv_constraint_errors = 0;
  uint8_t local_link_integrity_errors = 0;  // 4 bits
  uint8_t excessive_buffer_overruns = 0;    // 4 bits
  uint16_t vl15_dropped = 0;
  uint32_t xmit_data = 0;  // in units of 4 bytes
  uint32_t rcv_data = 0;
  uint32_t xmit_pkts = 0;
  uint32_t rcv_pkts = 0;
  uint32_t xmit_wait = 0;
  bool operator==(const PortCounters&) const = default;
};

enum class CounterKind : uint8_t { kSelect, kError, kTraffic };

// Every field of PortCounters once (IBA 16.1.3.5), in the attribute's order: its IBA name, kind,
// byte offset in the attribute, bytes read and the bits within them; `f` gets the member
// (Counters: PortCounters or const PortCounters).
template <class Counters, class F>
void for_each_port_counter_field(Counters& c, F&& f) {
  using K = CounterKind;
  f("PortSelect", K::kSelect, 1, 1, 0, 8, c.port_select);
  f("CounterSelect", K::kSelect, 2, 2, 0, 16, c.counter_select);
  f("SymbolErrorCounter", K::kError, 4, 2, 0, 16, c.symbol_errors);
  f("LinkErrorRecoveryCounter", K::kError, 6, 1, 0, 8, c.link_error_recoveries);
  f("LinkDownedCounter", K::kError, 7, 1, 0, 8, c.link_downed);
  f("PortRcvErrors", K::kError, 8, 2, 0, 16, c.rcv_errors);
  f("PortRcvRemotePhysicalErrors", K::kError, 10, 2, 0, 16, c.rcv_remote_physical_errors);
  f("PortRcvSwitchRelayErrors", K::kError, 12, 2, 0, 16, c.rcv_switch_relay_errors);
  f("PortXmitDiscards", K::kError, 14, 2, 0, 16, c.xmit_discards);
  f("PortXmitConstraintErrors", K::kError, 16, 1, 0, 8, c.xmit_constraint_errors);
  f("PortRcvConstraintErrors", K::kError, 17, 1, 0, 8, c.rcv_constraint_errors);
  f("LocalLinkIntegrityErrors", K::kError, 19, 1, 4, 4, c.local_link_integrity_errors);
  f("ExcessiveBufferOverrunErrors", K::kError, 19, 1, 0, 4, c.excessive_buffer_overruns);
  f("VL15Dropped", K::kError, 22, 2, 0, 16, c.vl15_dropped);
  f("PortXmitData", K::kTraffic, 24, 4, 0, 32, c.xmit_data);
  f("PortRcvData", K::kTraffic, 28, 4, 0, 32, c.rcv_data);
  f("PortXmitPkts", K::kTraffic, 32, 4, 0, 32, c.xmit_pkts);
  f("PortRcvPkts", K::kTraffic, 36, 4, 0, 32, c.rcv_pkts);
  f("PortXmitWait", K::kTraffic, 40, 4, 0, 32, c.xmit_wait);
}

// The error counters (CounterKind::kError), added.
uint64_t port_counter_errors(const PortCounters& c);

// A Get of PortCounters for `port` (0xFF: all ports of a switch, where supported).
Mad port_counters_get(uint8_t port);
// The attribute from a GetResp's data; errors when the MAD is not a PerfMgt PortCounters answer.
Result<PortCounters> decode_port_counters(const Mad& answer);
// Its 192 bytes, the rest of the MAD's data zero (a test PMA's answer).
void encode_port_counters(const PortCounters& c, Mad& into);

}  // namespace galaxy::wire
