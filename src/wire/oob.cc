#include "wire/oob.h"

#include <fmt/format.h>

#include "wire/big_endian.h"

namespace galaxy::wire {

std::string_view oob_op_name(OobOp op) {
  switch (op) {
    case OobOp::kStatus:
      return "status";
    case OobOp::kPowerOn:
      return "power-on";
    case OobOp::kPowerOff:
      return "power-off";
    case OobOp::kReset:
      return "reset";
    case OobOp::kReadTemperature:
      return "temperature";
    case OobOp::kReadVoltage:
      return "voltage";
    case OobOp::kReadRegister:
      return "read";
    case OobOp::kWriteRegister:
      return "write";
  }
  return "unknown";
}

namespace {

void put_head(std::span<uint8_t> b, OobOp op) {
  put_be(b, 0, 4, kOobMagic);
  b[4] = kOobVersion;
  b[5] = static_cast<uint8_t>(op);
}

Result<OobOp> check_head(std::span<const uint8_t> b, size_t size, const char* what) {
  if (b.size() != size)
    return make_error(Code::kMalformed, 1950,
                      fmt::format("monitor board {}: {} bytes, expected {}", what, b.size(), size));
  if (get_be(b, 0, 4) != kOobMagic)
    return make_error(Code::kMalformed, 1951,
                      fmt::format("monitor board {}: magic 0x{:08x}, expected 0x{:08x} (\"GMB1\")",
                                  what, get_be(b, 0, 4), kOobMagic));
  if (b[4] != kOobVersion)
    return make_error(
        Code::kUnsupported, 1952,
        fmt::format("monitor board {}: version {}, this build speaks {}", what, b[4], kOobVersion));
  if (b[5] >= kOobOpCount)
    return make_error(Code::kMalformed, 1953,
                      fmt::format("monitor board {}: op {} is none of the {} operations", what,
                                  b[5], kOobOpCount));
  return static_cast<OobOp>(b[5]);
}

Status reserved_zero(std::span<const uint8_t> b, size_t at, unsigned n, const char* what) {
  if (get_be(b, at, n) != 0)
    return make_error(Code::kMalformed, 1954,
                      fmt::format("monitor board {}: reserved bytes {}..{} are 0x{:x}, not 0", what,
                                  at, at + n - 1, get_be(b, at, n)));
  return {};
}

}  // namespace

std::array<uint8_t, kOobRequestBytes> encode_oob_request(const OobRequest& r) {
  std::array<uint8_t, kOobRequestBytes> b{};
  put_head(b, r.op);
  put_be(b, 8, 4, r.chip);
  put_be(b, 12, 4, r.tag);
  put_be(b, 16, 2, r.address);
  put_be(b, 24, 8, r.value);
  return b;
}

std::array<uint8_t, kOobResponseBytes> encode_oob_response(const OobResponse& r) {
  std::array<uint8_t, kOobResponseBytes> b{};
  put_head(b, r.op);
  put_be(b, 6, 2, r.error_id);
  put_be(b, 8, 4, r.chip);
  put_be(b, 12, 4, r.tag);
  put_be(b, 16, 4, r.flags);
  put_be(b, 24, 8, r.value);
  put_be(b, 32, 8, r.bus_ns);
  return b;
}

Result<OobRequest> decode_oob_request(std::span<const uint8_t> b) {
  auto op = check_head(b, kOobRequestBytes, "request");
  if (!op.ok()) return op.error();
  GALAXY_TRY(reserved_zero(b, 6, 2, "request"));
  GALAXY_TRY(reserved_zero(b, 18, 6, "request"));
  OobRequest r;
  r.op = *op;
  r.chip = static_cast<uint32_t>(get_be(b, 8, 4));
  r.tag = static_cast<uint32_t>(get_be(b, 12, 4));
  r.address = static_cast<uint16_t>(get_be(b, 16, 2));
  r.value = get_be(b, 24, 8);
  return r;
}

Result<OobResponse> decode_oob_response(std::span<const uint8_t> b) {
  auto op = check_head(b, kOobResponseBytes, "response");
  if (!op.ok()) return op.error();
  GALAXY_TRY(reserved_zero(b, 20, 4, "response"));
  OobResponse r;
  r.op = *op;
  r.error_id = static_cast<uint16_t>(get_be(b, 6, 2));
  r.chip = static_cast<uint32_t>(get_be(b, 8, 4));
  r.tag = static_cast<uint32_t>(get_be(b, 12, 4));
  r.flags = static_cast<uint32_t>(get_be(b, 16, 4));
  r.value = get_be(b, 24, 8);
  r.bus_ns = get_be(b, 32, 8);
  return r;
}

}  // namespace galaxy::wire
