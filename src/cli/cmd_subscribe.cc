// galaxy subscribe — an InfiniBand subnet's traps as its SA forwards them
// (IBA 13.4.8.3, 15.2.5.12): subscribes this port with an InformInfo Set to the master SM's SA,
// prints every Report (the Notice: trap number, issuer LID and GID) and answers it, and
// unsubscribes when done. Any master SM's SA will do (Galaxy's, OpenSM's). Through libibumad, like
// `galaxy sm`.
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <vector>

#include "base/json_text.h"
#include "cli/commands.h"
#include "cli/json_out.h"
#include "cli/option_checks.h"
#include "cli/run_control.h"
#include "cli/sa_client.h"
#include "nm/ib_sa.h"
#include "wire/ib_sa.h"

namespace galaxy::cli {
namespace {

struct SubscribeOptions {
  std::string fabric = "ib:";
  unsigned trap = wire::kInformAllTraps;
  unsigned count = 0;
  unsigned timeout_s = 0;
  int request_timeout_ms = 1000;
  bool json = false;
};

// Generic trap numbers (IBA 14.2.5.1, Table 132 ff.).
const char* trap_name(uint16_t n) {
  switch (n) {
    case 64:
      return "GID in service";
    case 65:
      return "GID out of service";
    case 128:
      return "link state change";
    case 129:
      return "local link integrity threshold";
    case 130:
      return "excessive buffer overrun threshold";
    case 131:
      return "flow control update watchdog";
    case 144:
      return "capability mask change";
    case 145:
      return "system image GUID change";
    case 256:
      return "bad M_Key";
    case 257:
      return "bad P_Key";
    case 258:
      return "bad Q_Key";
    default:
      return "trap";
  }
}

nlohmann::json notice_json(const wire::Notice& n) {
  return {{"generic", n.is_generic},
          {"type", n.type},
          {"producer", n.producer},
          {"trap", n.trap_number},
          {"name", trap_name(n.trap_number)},
          {"issuer_lid", n.issuer_lid},
          {"issuer_gid", wire::gid_text(n.issuer_gid)}};
}

// One InformInfo Set to the SA -> its status (0: done).
Result<uint16_t> inform(ib::SmpPort& port, bool subscribe, uint16_t trap, uint64_t tid,
                        int timeout_ms) {
  wire::Mad m;
  m.mgmt_class = wire::MgmtClass::kSubnAdm;
  m.class_version = wire::kSaClassVersion;
  m.method = wire::MadMethod::kSet;
  m.transaction_id = tid;
  m.attribute_id = static_cast<uint16_t>(wire::SaAttr::kInformInfo);
  wire::SaHeader h;
  h.attribute_offset = (wire::kInformInfoBytes + 7) / 8;
  encode_sa_header(m, h);
  wire::InformInfo i;
  i.subscribe = subscribe;
  i.trap_number = trap;
  encode_inform_info(i, wire::sa_data(m));
  auto answer = ask_sa(port, m, timeout_ms, "subscribe");
  if (!answer) return answer.error();
  return answer->status;
}

void run_subscribe(const SubscribeOptions& o) {
  auto port = open_sa_client(o.fabric, o.request_timeout_ms);
  if (!port) return report_error(port.error(), o.json);
  const std::atomic<bool>& stop = stop_on_signals(false, true);

  unsigned got = 0;
  // Reports (SA method Report, attribute Notice) are printed and answered with ReportResp.
  Status served = (*port)->serve_class(
      wire::MgmtClass::kSubnAdm, wire::kSaClassVersion,
      [&](const wire::Mad& req, const ib::GmpSource& from) -> std::optional<ib::GmpAnswer> {
        if (req.method != wire::MadMethod::kReport ||
            req.attribute_id != static_cast<uint16_t>(wire::SaAttr::kNotice))
          return std::nullopt;
        const wire::Notice n = wire::decode_notice(wire::sa_data(req));
        if (o.json) {
          nlohmann::json j = notice_json(n);
          j["from_lid"] = from.lid;
          std::printf("%s\n", json_text(j, -1).c_str());
        } else {
          std::printf("Report from LID %u: trap %u (%s), issuer LID %u (%s)\n", from.lid,
                      n.trap_number, trap_name(n.trap_number), n.issuer_lid,
                      wire::gid_text(n.issuer_gid).c_str());
        }
        std::fflush(stdout);
        ++got;
        ib::GmpAnswer a;
        a.mad = req;
        a.mad.method = wire::MadMethod::kReportResp;
        return a;
      });
  if (!served) return report_error(served.error(), o.json);

  const auto trap = static_cast<uint16_t>(o.trap);
  auto st = inform(**port, true, trap, nm::kIbReportTidBase - 2, o.request_timeout_ms);
  if (!st) return report_error(st.error(), o.json);
  if (*st != 0)
    return report_error(make_error(Code::kPermissionDenied, 7172,
                                   fmt::format("subscribe: the SA refused the subscription ({})",
                                               sa_status_text(*st))),
                        o.json);
  if (o.json) {
    std::printf("%s\n", json_text(nlohmann::json{{"subscribed", true},
                                                 {"sm_lid", (*port)->local().sm_lid},
                                                 {"trap", o.trap}},
                                  -1)
                            .c_str());
  } else {
    std::printf(
        "subscribed at the SA (LID %u) to %s\n", (*port)->local().sm_lid,
        o.trap == wire::kInformAllTraps ? "every trap" : fmt::format("trap {}", o.trap).c_str());
  }
  std::fflush(stdout);
  const auto start = std::chrono::steady_clock::now();
  while (!stop && (o.count == 0 || got < o.count) &&
         (o.timeout_s == 0 ||
          std::chrono::steady_clock::now() - start < std::chrono::seconds(o.timeout_s)))
    (*port)->serve(50);
  // Unsubscribed on the way out; a master gone meanwhile takes its subscriptions with it.
  (void)inform(**port, false, trap, nm::kIbReportTidBase - 1, o.request_timeout_ms);
  if (o.count != 0 && got < o.count) {
    report_error(make_error(Code::kTimeout, 7173,
                            fmt::format("subscribe: {} of {} Reports within {} s", got, o.count,
                                        o.timeout_s)),
                 o.json);
  }
}

void add_subscribe_command(CLI::App& app) {
  auto o = std::make_shared<SubscribeOptions>();
  auto* c = app.add_subcommand(
      "subscribe",
      "Subscribe to an InfiniBand subnet's traps at the master SM's SA (InformInfo) and print "
      "each Report (libibumad; ibsim under LD_PRELOAD=libumad2sim.so)");
  c->add_option("--fabric", o->fabric, "ib:[<adapter>[:<port>]] (the first active port by default)")
      ->capture_default_str();
  c->add_option("--trap", o->trap,
                "generic trap number (128: link state change); 65535: every trap")
      ->capture_default_str()
      ->check(integer_in(0, 65535));
  c->add_option("--count", o->count, "exit after this many Reports (0: until stopped)")
      ->capture_default_str()
      ->check(integer_in(0, 1000000));
  c->add_option("--timeout", o->timeout_s,
                "exit after this many seconds (0: never); with --count, fewer Reports is an error")
      ->capture_default_str()
      ->check(integer_in(0, 86400));
  c->add_option("--timeout-ms", o->request_timeout_ms, "wait for the SA's answer to a Set")
      ->capture_default_str()
      ->check(integer_in(1, 60000));
  c->add_flag("--json", o->json, "one JSON object per line: the subscription, then each Report");
  c->callback([o]() { run_subscribe(*o); });
}
const CommandRegistrar kSubscribeRegistrar("subscribe", add_subscribe_command);

}  // namespace
}  // namespace galaxy::cli
