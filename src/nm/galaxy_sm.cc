#include "nm/galaxy_sm.h"

#include <fmt/format.h>

#include <algorithm>

#include "chip/registers.h"

namespace galaxy::nm {

namespace {

// "GXSM" in the top 32 bits: a Galaxy server's GUID; the endpoint below it.
constexpr uint64_t kSmGuidBase = 0x4758534D00000000ull;

wire::SmState state_of(const wire::NmpSmInfo& i) {
  return static_cast<wire::SmState>(i.state);
}

}  // namespace

uint64_t default_sm_guid(wire::ChipId nic, uint8_t vp) {
  return kSmGuidBase | (uint64_t{nic} << 8) | vp;
}

GalaxySm::GalaxySm(Requester& requester, GalaxySmOptions options)
    : requester_(requester), options_(options) {
  if (options_.guid == 0)
    options_.guid =
        default_sm_guid(requester_.port().server_chip_id(), requester_.port().server_vp());
  requester_.set_sm_handler([this](const wire::MgmtPacket& p) { serve(p); });
}

GalaxySm::~GalaxySm() {
  requester_.set_sm_handler({});
}

wire::NmpSmInfo GalaxySm::sm_info() const {
  wire::NmpSmInfo i;
  i.guid = options_.guid;
  i.act_count = act_count_;
  i.priority = options_.priority;
  i.state = static_cast<uint8_t>(state_);
  if (state_ == wire::SmState::kMaster) {
    const auto s = standbys();
    if (!s.empty()) {
      i.successor_chip = s.front().chip;
      i.successor_vp = s.front().vp;
    }
  }
  return i;
}

std::vector<SmPeer> GalaxySm::standbys() const {
  const Picoseconds now = requester_.port().now();
  const Picoseconds fresh = options_.poll_interval * (options_.poll_retries + 1);
  std::vector<SmPeer> out;
  for (const SmPeer& p : standbys_)
    if (p.key_ok && state_of(p.info) == wire::SmState::kStandby && now - p.seen_at <= fresh)
      out.push_back(p);
  std::sort(out.begin(), out.end(), [](const SmPeer& a, const SmPeer& b) {
    return sm_outranks(a.info.priority, a.info.guid, b.info.priority, b.info.guid);
  });
  return out;
}

bool GalaxySm::is_self(wire::ChipId chip, uint8_t vp) const {
  return chip == requester_.port().server_chip_id() && vp == requester_.port().server_vp();
}

std::optional<SmPeer> GalaxySm::peer_at(const FabricMap& map, wire::ChipId chip, uint8_t vp) const {
  auto it = map.node_of.find(chip);
  if (it == map.node_of.end()) return std::nullopt;
  const MgmtTarget& t = map.target[it->second];
  SmPeer p;
  p.chip = chip;
  p.vp = vp;
  p.to = t.forward;
  p.back = t.backward;
  return p;
}

Result<GalaxySm::ChipsMaster> GalaxySm::chips_master(const FabricMap& map,
                                                     const std::function<bool(uint32_t)>& include) {
  for (uint32_t v = 0; v < map.num_nodes(); ++v) {
    if (v == map.server_node || map.target[v].type != wire::ChipType::kNrc) continue;
    if (include && !include(v)) continue;
    MgmtReply r = call(requester_, MgmtRequest::read2(map.target[v], chip::reg::kFaultEnable,
                                                      chip::reg::kFaultDest));
    if (!r.status.ok()) return r.status.error();
    ChipsMaster m;
    m.reporting = (r.response.data.value[0] & 1) != 0;
    m.chip = chip::reg::fault_dest_nic(r.response.data.value[1]);
    m.vp = chip::reg::fault_dest_vp(r.response.data.value[1]);
    return m;
  }
  return make_error(Code::kNotFound, 5470, "the map holds no managed NRC to read the master from");
}

Result<SmPeer> GalaxySm::ask(const SmPeer& peer, wire::NmpType type, wire::SmControl control,
                             bool once) {
  MgmtRequest q = MgmtRequest::sm_info(type, peer.chip, peer.vp, peer.to, peer.back,
                                       options_.sm_key, sm_info());
  if (type == wire::NmpType::kSmInfoSet) q.data.sm.control = static_cast<uint8_t>(control);
  MgmtReply r;
  if (once) {
    // A poll is one SMInfo Get answered within the answer timeout or missed (the misses are
    // counted by poll, not by the requester's retries).
    const RequesterOptions saved = requester_.options();
    RequesterOptions o = saved;
    o.timeout = std::min(options_.poll_interval, options_.answer_timeout);
    o.retries = 0;
    requester_.set_options(o);
    r = call(requester_, q);
    requester_.set_options(saved);
  } else {
    r = call(requester_, q);
  }
  if (!r.status.ok()) return r.status.error();
  if (r.response.nmp_type != wire::NmpType::kSmInfoResponse)
    return make_error(Code::kMalformed, 5471,
                      fmt::format("the server at NIC {} VP {} answered SMInfo with a {}", peer.chip,
                                  peer.vp, wire::nmp_type_name(r.response.nmp_type)));
  SmPeer out = peer;
  out.info = r.response.data.sm;
  out.key_ok = options_.sm_key == 0 || r.response.m_key == options_.sm_key;
  out.seen_at = requester_.port().now();
  return out;
}

std::optional<SmPeer> GalaxySm::live_master_at(const FabricMap& map, const ChipsMaster& named) {
  if (!named.reporting || is_self(named.chip, named.vp)) return std::nullopt;
  auto peer = peer_at(map, named.chip, named.vp);
  if (!peer) return std::nullopt;
  auto answer = ask(*peer, wire::NmpType::kSmInfoGet, wire::SmControl::kAcknowledge);
  if (!answer.ok()) return std::nullopt;
  const SmPeerView view{answer->info.guid, answer->info.priority, state_of(answer->info),
                        answer->key_ok};
  if (!sm_defer_to(std::span(&view, 1), options_.priority, options_.guid)) return std::nullopt;
  // A discovering SM that outranks this one is deferred to as well, but only a master is
  // polled: the chips name a master.
  if (view.state != wire::SmState::kMaster) return std::nullopt;
  return *answer;
}

void GalaxySm::demote_to(SmPeer master) {
  state_ = wire::SmState::kStandby;
  master_ = std::move(master);
  successor_.reset();
  standbys_.clear();
  missed_ = 0;
}

Result<wire::SmState> GalaxySm::elect(const FabricMap& map,
                                      const std::function<bool(uint32_t)>& include) {
  state_ = wire::SmState::kDiscovering;
  auto named = chips_master(map, include);
  if (!named.ok()) return named.error();
  if (auto m = live_master_at(map, *named)) {
    demote_to(std::move(*m));
    return state_;
  }
  // No master answers: this SM is to be master once the caller wrote the chips.
  master_.reset();
  return state_;
}

void GalaxySm::became_master() {
  state_ = wire::SmState::kMaster;
  master_.reset();
  successor_.reset();
  missed_ = 0;
  ++act_count_;
}

Result<SmPollOutcome> GalaxySm::poll(const FabricMap& map,
                                     const std::function<bool(uint32_t)>& include) {
  if (state_ != wire::SmState::kStandby || !master_)
    return make_error(Code::kInvalidArgument, 5472,
                      fmt::format("poll: this server is {}, not a standby with a master",
                                  wire::sm_state_name(static_cast<uint8_t>(state_))));
  ++counters_.polls;
  auto answer = ask(*master_, wire::NmpType::kSmInfoGet, wire::SmControl::kAcknowledge, true);
  if (answer.ok() && answer->key_ok && state_of(answer->info) == wire::SmState::kMaster) {
    missed_ = 0;
    master_ = *answer;
    successor_.reset();
    if (answer->info.successor_vp != wire::kNoSuccessorVp) {
      if (is_self(answer->info.successor_chip, answer->info.successor_vp)) {
        successor_ = SmPeer{};
        successor_->info = sm_info();
        successor_->chip = answer->info.successor_chip;
        successor_->vp = answer->info.successor_vp;
      } else {
        successor_ = peer_at(map, answer->info.successor_chip, answer->info.successor_vp);
      }
    }
    return SmPollOutcome::kMasterAnswered;
  }
  ++counters_.polls_missed;
  ++missed_;
  // Another master may have taken the fabric already: the chips say so.
  if (auto named = chips_master(map, include); named.ok()) {
    const bool other = named->reporting && !is_self(named->chip, named->vp) &&
                       !(named->chip == master_->chip && named->vp == master_->vp);
    if (other)
      if (auto m = live_master_at(map, *named)) {
        demote_to(std::move(*m));
        return SmPollOutcome::kNewMaster;
      }
  }
  // The master is lost after poll_retries misses; the successor it named goes first, the other
  // standbys wait as long again for it (IBA leaves the order to the election; this keeps it to
  // one master at a time when the master named one).
  const bool named_successor = successor_ && is_self(successor_->chip, successor_->vp);
  const unsigned due =
      !successor_ || named_successor ? options_.poll_retries : 2 * options_.poll_retries;
  if (missed_ < due) return SmPollOutcome::kMissed;
  ++counters_.takeovers;
  state_ = wire::SmState::kDiscovering;
  return SmPollOutcome::kTakeOver;
}

Result<SmCheckOutcome> GalaxySm::check(const FabricMap& map,
                                       const std::function<bool(uint32_t)>& include) {
  if (state_ != wire::SmState::kMaster)
    return make_error(Code::kInvalidArgument, 5473,
                      fmt::format("check: this server is {}, not master",
                                  wire::sm_state_name(static_cast<uint8_t>(state_))));
  ++act_count_;
  auto named = chips_master(map, include);
  if (!named.ok()) return named.error();
  if (!named->reporting || !is_self(named->chip, named->vp)) {
    if (auto m = live_master_at(map, *named)) {
      ++counters_.demotions;
      demote_to(std::move(*m));
      return SmCheckOutcome::kDemoted;
    }
    return SmCheckOutcome::kReclaim;
  }
  // A standby that outranks this master gets the fabric (IBA 14.4.1): HANDOVER, and this SM
  // stands by under it once it answered.
  const auto s = standbys();
  if (!s.empty() &&
      sm_outranks(s.front().info.priority, s.front().info.guid, options_.priority, options_.guid)) {
    auto handed = ask(s.front(), wire::NmpType::kSmInfoSet, wire::SmControl::kHandover);
    if (handed.ok() && handed->key_ok && state_of(handed->info) == wire::SmState::kMaster) {
      ++counters_.handovers_given;
      demote_to(std::move(*handed));
      return SmCheckOutcome::kHandedOver;
    }
  }
  return SmCheckOutcome::kMaster;
}

Status GalaxySm::acknowledge_handover() {
  if (!handover_from_) return {};
  SmPeer from = *handover_from_;
  handover_from_.reset();
  auto ack = ask(from, wire::NmpType::kSmInfoSet, wire::SmControl::kAcknowledge);
  if (!ack.ok()) return ack.error();
  return {};
}

void GalaxySm::serve(const wire::MgmtPacket& q) {
  SmPeer from;
  from.info = q.data.sm;
  from.chip = q.src_id;
  from.vp = q.src_vp;
  from.to = q.forward_route;     // the way back to it
  from.back = q.backward_route;  // the way it came
  from.key_ok = options_.sm_key == 0 || q.m_key == options_.sm_key;
  from.seen_at = requester_.port().now();
  if (q.nmp_type == wire::NmpType::kSmInfoSet) {
    const auto control = static_cast<wire::SmControl>(q.data.sm.control);
    const auto next = from.key_ok && q.data.sm.control != 0 ? sm_control_transition(state_, control)
                                                            : std::nullopt;
    if (!next) {
      ++counters_.refused_sets;
    } else {
      if (control == wire::SmControl::kHandover) {
        ++counters_.handovers_received;
        handover_from_ = from;
        master_.reset();
      }
      state_ = *next;
    }
  } else if (state_ == wire::SmState::kMaster && from.key_ok &&
             state_of(from.info) == wire::SmState::kStandby && !is_self(from.chip, from.vp)) {
    // A standby's poll: it is known, and may be named successor or handed the fabric.
    auto it = std::find_if(standbys_.begin(), standbys_.end(),
                           [&](const SmPeer& p) { return p.chip == from.chip && p.vp == from.vp; });
    if (it == standbys_.end())
      standbys_.push_back(from);
    else
      *it = from;
  }
  ++counters_.answered;
  // Back the way it came, with the asker's transaction id; the SM_Key only to one that showed
  // it (IBA 14.4.5).
  const MgmtRequest a =
      MgmtRequest::sm_info(wire::NmpType::kSmInfoResponse, from.chip, from.vp, from.to, from.back,
                           from.key_ok ? options_.sm_key : 0, sm_info());
  (void)requester_.port().send(a, q.transaction_id);
}

}  // namespace galaxy::nm
