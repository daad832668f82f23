#include "wire/ib_perf.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>
#include <type_traits>

#include "wire/big_endian.h"

namespace galaxy::wire {

uint64_t port_counter_errors(const PortCounters& c) {
  uint64_t sum = 0;
  for_each_port_counter_field(
      c, [&](const char*, CounterKind kind, size_t, unsigned, unsigned, unsigned, const auto& v) {
        if (kind == CounterKind::kError) sum += v;
      });
  return sum;
}

Mad port_counters_get(uint8_t port) {
  Mad m;
  m.mgmt_class = MgmtClass::kPerformance;
  m.class_version = 1;
  m.method = MadMethod::kGet;
  m.attribute_id = kPerfPortCounters;
  m.data[kPerfDataAt + 1] = port;
  return m;
}

namespace {

constexpr uint64_t mask(unsigned bits) {
  return (uint64_t{1} << bits) - 1;
}

}  // namespace

Result<PortCounters> decode_port_counters(const Mad& m) {
  if (m.mgmt_class != MgmtClass::kPerformance || m.attribute_id != kPerfPortCounters ||
      m.method != MadMethod::kGetResp)
    return make_error(Code::kMalformed, 1240,
                      fmt::format("not a PortCounters answer (class {:#04x}, attribute {:#06x}, "
                                  "method {:#04x})",
                                  static_cast<unsigned>(m.mgmt_class), m.attribute_id,
                                  static_cast<unsigned>(m.method)));
  const std::span<const uint8_t> d(m.data.data() + kPerfDataAt, m.data.size() - kPerfDataAt);
  PortCounters c;
  for_each_port_counter_field(c, [&](const char*, CounterKind, size_t at, unsigned bytes,
                                     unsigned shift, unsigned bits, auto& v) {
    v = static_cast<std::remove_reference_t<decltype(v)>>((get_be(d, at, bytes) >> shift) &
                                                          mask(bits));
  });
  return c;
}

void encode_port_counters(const PortCounters& c, Mad& m) {
  std::fill(m.data.begin(), m.data.end(), 0);
  const std::span<uint8_t> d(m.data.data() + kPerfDataAt, m.data.size() - kPerfDataAt);
  for_each_port_counter_field(c, [&](const char*, CounterKind, size_t at, unsigned bytes,
                                     unsigned shift, unsigned bits, const auto& v) {
    put_be(d, at, bytes, get_be(d, at, bytes) | ((uint64_t{v} & mask(bits)) << shift));
  });
}

}  // namespace galaxy::wire
