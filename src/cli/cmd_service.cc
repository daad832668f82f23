// galaxy service — registers or deletes an InfiniBand service at the master SM's SA
// (ServiceRecord Set and Delete, IBA 15.2.5.14), as an application providing a service does, so
// that others find it with `saquery SR`. The service is this port's (its ServiceGID is this
// port's GID); with a lease it ends unless registered again within the lease. Through
// libibumad, like `galaxy subscribe`.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "base/json_text.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/sa_client.h"
#include "nm/ib_sa.h"
#include "wire/ib_sa.h"

namespace galaxy::cli {
namespace {

struct ServiceOptions {
  std::string fabric = "ib:";
  uint64_t id = 0;
  std::string name;
  uint32_t lease_s = 0;
  uint64_t sm_key = 0;
  int timeout_ms = 1000;
  bool json = false;
};

// Transaction ids of this command's requests, clear of an SM's on the same port.
constexpr uint64_t kServiceTid = 0x5E000001;

std::string name_text(const wire::ServiceRecord& r) {
  const auto* p = reinterpret_cast<const char*>(r.name.data());
  return std::string(p, strnlen(p, r.name.size()));
}

nlohmann::json record_json(const wire::ServiceRecord& r) {
  return {{"id", fmt::format("{:#018x}", r.id)},
          {"gid", wire::gid_text(r.gid)},
          {"pkey", fmt::format("{:#06x}", r.pkey)},
          {"lease_s", r.lease == wire::kServiceLeaseInfinite ? nlohmann::json(nullptr)
                                                             : nlohmann::json(r.lease)},
          {"name", name_text(r)}};
}

void run_service(const ServiceOptions& o, bool remove) {
  const char* what = remove ? "service delete" : "service register";
  if (o.name.size() > wire::ServiceRecord{}.name.size())
    return report_error(make_error(Code::kInvalidArgument, 7174,
                                   fmt::format("{}: --name is {} bytes; a ServiceName holds 64",
                                               what, o.name.size())),
                        o.json);
  auto port = open_sa_client(o.fabric, o.timeout_ms);
  if (!port) return report_error(port.error(), o.json);

  namespace m = wire::sr_mask;
  wire::Mad req;
  req.mgmt_class = wire::MgmtClass::kSubnAdm;
  req.class_version = wire::kSaClassVersion;
  req.method = remove ? wire::MadMethod::kDelete : wire::MadMethod::kSet;
  req.transaction_id = kServiceTid;
  req.attribute_id = static_cast<uint16_t>(wire::SaAttr::kServiceRecord);
  wire::SaHeader h;
  h.sm_key = o.sm_key;
  h.attribute_offset = wire::kServiceRecordBytes / 8;
  h.component_mask = m::kId | m::kGid | m::kPkey;
  wire::ServiceRecord r;
  r.id = o.id;
  r.gid = {nm::kIbDefaultGidPrefix, (*port)->local().port_guid};
  r.pkey = nm::kIbDefaultPkey;
  if (!remove) {
    std::copy(o.name.begin(), o.name.end(), r.name.begin());
    r.lease = o.lease_s == 0 ? wire::kServiceLeaseInfinite : o.lease_s;
    h.component_mask |= m::kName | m::kLease;
  }
  encode_sa_header(req, h);
  encode_service_record(r, wire::sa_data(req));
  auto answer = ask_sa(**port, req, o.timeout_ms, what);
  if (!answer) return report_error(answer.error(), o.json);
  if (answer->status != 0)
    return report_error(make_error(Code::kPermissionDenied, 7175,
                                   fmt::format("{}: the SA refused service {:#x} ({})", what, o.id,
                                               sa_status_text(answer->status))),
                        o.json);
  const wire::ServiceRecord got = wire::decode_service_record(wire::sa_data(*answer));
  if (o.json) {
    nlohmann::json j = record_json(got);
    j[remove ? "deleted" : "registered"] = true;
    j["sm_lid"] = (*port)->local().sm_lid;
    std::printf("%s\n", json_text(j, 2).c_str());
    return;
  }
  std::printf("%s service %#llx \"%s\" at the SA (LID %u): GID %s, P_Key %#06x, lease %s\n",
              remove ? "deleted" : "registered", static_cast<unsigned long long>(got.id),
              name_text(got).c_str(), (*port)->local().sm_lid, wire::gid_text(got.gid).c_str(),
              got.pkey,
              got.lease == wire::kServiceLeaseInfinite ? "infinite"
                                                       : fmt::format("{} s", got.lease).c_str());
}

void add_common(CLI::App* c, ServiceOptions& o) {
  c->add_option("--fabric", o.fabric, "ib:[<adapter>[:<port>]] (the first active port by default)")
      ->capture_default_str();
  c->add_option("--id", o.id, "ServiceID (decimal or 0x hex)")->required()->check(any_uint64());
  c->add_option("--sm-key", o.sm_key,
                "SM_Key to send (a trusted request: the answer shows the ServiceKey)")
      ->check(any_uint64());
  c->add_option("--timeout-ms", o.timeout_ms, "wait for the SA's answer")
      ->capture_default_str()
      ->check(integer_in(1, 60000));
  c->add_flag("--json", o.json, "the record the SA answered with, as JSON");
}

void add_service_command(CLI::App& app) {
  auto* c = app.add_subcommand(
      "service",
      "Register or delete a service of this InfiniBand port at the master SM's SA "
      "(ServiceRecord; find services with `saquery SR`)");
  c->require_subcommand(1);
  auto reg_o = std::make_shared<ServiceOptions>();
  auto* reg = c->add_subcommand("register", "Register (or renew) a service of this port");
  add_common(reg, *reg_o);
  reg->add_option("--name", reg_o->name, "ServiceName (at most 64 bytes)")->required();
  reg->add_option("--lease", reg_o->lease_s,
                  "seconds the registration lasts unless renewed (0: until deleted)")
      ->capture_default_str()
      ->check(integer_in(0, 0xFFFFFFFEll));
  reg->callback([reg_o]() { run_service(*reg_o, false); });
  auto del_o = std::make_shared<ServiceOptions>();
  auto* del = c->add_subcommand("delete", "Delete a service this port registered");
  add_common(del, *del_o);
  del->callback([del_o]() { run_service(*del_o, true); });
}
const CommandRegistrar kServiceRegistrar("service", add_service_command);

}  // namespace
}  // namespace galaxy::cli
