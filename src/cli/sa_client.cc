#include "cli/sa_client.h"

#include <fmt/format.h>

#include <chrono>

#include "ib/umad_port.h"
#include "wire/ib_sa.h"

namespace galaxy::cli {

Result<std::unique_ptr<ib::SmpPort>> open_sa_client(const std::string& fabric, int timeout_ms) {
  ib::UmadOptions uo;
  GALAXY_TRY(ib::parse_ib_fabric(fabric, uo));
  uo.timeout_ms = timeout_ms;
  uo.retries = 1;
  return ib::open_umad_port(uo);
}

Result<wire::Mad> ask_sa(ib::SmpPort& port, const wire::Mad& request, int timeout_ms,
                         std::string_view what) {
  const uint16_t sm_lid = port.local().sm_lid;
  if (sm_lid == 0)
    return make_error(
        Code::kNotFound, 7170,
        fmt::format("{}: the port knows no SM LID (no master SM has swept the subnet)", what));
  GALAXY_TRY(port.send_gmp(request, sm_lid));
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    auto c = port.receive(50);
    if (!c) continue;
    if (c->tid != static_cast<uint32_t>(request.transaction_id)) continue;
    if (!c->status) return c->status.error();
    if (!c->gmp) continue;
    return *c->gmp;
  }
  return make_error(
      Code::kTimeout, 7171,
      fmt::format("{}: the SA at LID {} did not answer within {} ms", what, sm_lid, timeout_ms));
}

std::string sa_status_text(uint16_t status) {
  switch (status) {
    case 0:
      return "ok";
    case wire::kMadStatusBadVersion:
      return "bad class version";
    case wire::kMadStatusBadMethod:
      return "method not supported";
    case wire::kMadStatusBadMethodAttr:
      return "method/attribute combination not supported";
    case wire::kMadStatusBadValue:
      return "invalid attribute value";
    default:
      break;
  }
  static constexpr const char* kSa[] = {"ok",
                                        "ERR_NO_RESOURCES",
                                        "ERR_REQ_INVALID",
                                        "ERR_NO_RECORDS",
                                        "ERR_TOO_MANY_RECORDS",
                                        "ERR_REQ_INVALID_GID",
                                        "ERR_REQ_INSUFFICIENT_COMPONENTS",
                                        "ERR_REQ_DENIED"};
  const unsigned sa = status >> 8;
  if ((status & 0xFF) == 0 && sa < std::size(kSa)) return kSa[sa];
  return fmt::format("status {:#06x}", status);
}

}  // namespace galaxy::cli
