#include "nmd/scan_json.h"

#include <fmt/format.h>

namespace galaxy::nmd {

namespace {

std::string chip_name(const Session& s, wire::ChipId chip) {
  const auto& plan = s.plan();
  return chip < plan.num_nodes() ? plan.name(chip) : fmt::format("chip{}", chip);
}

}  // namespace

nlohmann::json scan_summary_json(const Session& s, const nm::ScanResult& r, unsigned top) {
  unsigned nrc = 0, nic = 0;
  for (const auto& c : r.chips) (s.discovery.map.topology.is_nic(c.node) ? nic : nrc) += 1;
  nlohmann::json dead = nlohmann::json::array();
  for (size_t i = 0; i < r.non_responding.size() && dead.size() < top; ++i) {
    wire::ChipId id = s.discovery.map.chip_id[r.non_responding[i]];
    dead.push_back({{"chip", id}, {"name", chip_name(s, id)}, {"reached_by_discovery", true}});
  }
  for (size_t i = 0; i < r.unreached.size() && dead.size() < top; ++i)
    dead.push_back({{"chip", r.unreached[i]},
                    {"name", chip_name(s, r.unreached[i])},
                    {"reached_by_discovery", false}});
  nlohmann::json j{{"started_us", static_cast<double>(r.started) / nm::kUs},
                   {"nrc_scanned", nrc},
                   {"nic_scanned", nic},
                   {"requests", r.requests},
                   {"responses", r.responses},
                   {"error_responses", r.error_responses},
                   {"non_responding", r.not_responding()},
                   {"unreached", r.unreached.size()},
                   {"non_responding_chips", dead},
                   {"skipped_reads", r.skipped},
                   {"absent_ports", r.absent_ports},
                   {"sim_time_us", static_cast<double>(r.elapsed) / nm::kUs},
                   {"paper_model_us", r.paper_model_us},
                   {"management_bits", r.management_bits()},
                   {"management_gbps", r.management_gbps()},
                   {"link_share_percent", r.link_share_percent()}};
  const nm::ChipStatus* hottest = nullptr;
  for (const auto& c : r.chips)
    if (c.environment_read && (!hottest || c.temperature_mc > hottest->temperature_mc))
      hottest = &c;
  if (hottest)
    j["hottest_chip"] = {{"chip", hottest->chip_id},
                         {"name", chip_name(s, hottest->chip_id)},
                         {"temperature_c", static_cast<double>(hottest->temperature_mc) / 1000.0}};
  return j;
}

nlohmann::json scan_diff_json(const Session& s, const nm::ScanDiff& d, unsigned top, bool changes) {
  const auto& info = nm::status_registers();
  nlohmann::json totals = nlohmann::json::object();
  for (unsigned i = 0; i < nm::kStatusRegisters; ++i)
    if (info[i].counter) totals[std::string(info[i].name)] = d.total_delta[i];
  nlohmann::json j{{"interval_s", d.interval_s},
                   {"counter_deltas", totals},
                   {"changed_registers", d.changes.size()},
                   {"stopped_answering", d.stopped_answering.size()},
                   {"answering_again", d.answering_again.size()}};
  if (changes) {
    nlohmann::json list = nlohmann::json::array();
    for (size_t i = 0; i < d.changes.size() && i < top; ++i) {
      const nm::RegisterChange& c = d.changes[i];
      nlohmann::json e{{"chip", c.chip_id},  {"name", chip_name(s, c.chip_id)},
                       {"port", c.port},     {"register", info[c.reg].name},
                       {"old", c.old_value}, {"new", c.new_value}};
      if (info[c.reg].counter) {
        e["delta"] = c.delta;
        e["rate_per_s"] = c.rate_per_s;
      }
      list.push_back(e);
    }
    j["changes"] = list;
  }
  return j;
}

}  // namespace galaxy::nmd
