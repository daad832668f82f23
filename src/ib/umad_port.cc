#include "ib/umad_port.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <infiniband/umad.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <span>
#include <vector>

#include "wire/big_endian.h"
#include "wire/ib_perf.h"
#include "wire/ib_sa.h"

namespace galaxy::ib {
namespace {

constexpr int kSmpClassVersion = 1;

// ibsim's libumad2sim holds one lock while it writes a request to ibsim, and its receiving
// thread needs the same lock to hand an answer over. ibsim blocks writing answers once the
// socket queue towards us holds net.unix.max_dgram_qlen (10 by default) of them, and reads no
// requests meanwhile. Both sides wait for ever when our write finds ibsim's queue full while
// ibsim waits on ours: at least 10 + 10 queued, one answer in ibsim's hands, one in the
// receiving thread's and the request being written, 23 in flight. 20 keeps clear of that.
constexpr uint32_t kUmad2simInFlight = 20;

// libumad2sim is preloaded (LD_PRELOAD) in the process: the "kernel" is ibsim.
bool through_umad2sim() {
  static const bool found = [] {
    bool any = false;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          if (info->dlpi_name && std::strstr(info->dlpi_name, "umad2sim")) {
            *static_cast<bool*>(data) = true;
            return 1;
          }
          return 0;
        },
        &any);
    return any;
  }();
  return found;
}

class UmadPort final : public SmpPort {
 public:
  UmadPort(int fd, int dr_agent, int lid_agent, LocalPort local, UmadOptions options)
      : fd_(fd),
        dr_agent_(dr_agent),
        lid_agent_(lid_agent),
        local_(std::move(local)),
        options_(std::move(options)),
        buf_(umad_size() + wire::kMadBytes) {}
  ~UmadPort() override {
    if (issm_fd_ >= 0) ::close(issm_fd_);  // IsSM clears when the device closes
    umad_close_port(fd_);
  }

  Status serve_sm(SmRequestHandler h) override {
    if (Status s = open_issm(); !s) return s;
    sm_handler_ = std::move(h);
    return {};
  }

  Status open_issm() {
    if (issm_fd_ < 0) {
      char path[256];
      if (int r = umad_get_issm_path(local_.ca.c_str(), static_cast<int>(local_.port), path,
                                     sizeof path);
          r < 0)
        return make_error(Code::kIoError, 7029,
                          fmt::format("umad: no issm device for {} port {}: {}", local_.ca,
                                      local_.port, std::strerror(-r)));
      issm_fd_ = ::open(path, O_RDWR);
      if (issm_fd_ < 0)
        return make_error(
            Code::kIoError, 7030,
            fmt::format("umad: opening {} (the IsSM capability): {}", path, std::strerror(errno)));
    }
    return {};
  }

  Status serve_class(wire::MgmtClass cls, uint8_t class_version, GmpRequestHandler h) override {
    const auto c = static_cast<uint8_t>(cls);
    int& agent = gmp_agents_[c];
    if (agent >= 0 && class_versions_[c] != class_version)
      return make_error(Code::kInvalidArgument, 7032,
                        fmt::format("umad: class {:#04x} is served at version {}, not {}", c,
                                    class_versions_[c], class_version));
    if (agent < 0) {
      // Requests too (Get, Set, GetTable, Delete; IBA 15.2.2), and RMPP for answers of more than
      // one MAD, as the kernel segments them (IBA 13.6).
      long methods[16 / sizeof(long)] = {};
      for (wire::MadMethod m :
           {wire::MadMethod::kGet, wire::MadMethod::kSet, wire::MadMethod::kGetTable,
            wire::MadMethod::kDelete, wire::MadMethod::kReport})
        methods[0] |= 1L << static_cast<int>(m);
      agent = umad_register(fd_, c, class_version, wire::kRmppVersion, methods);
      if (agent < 0)
        return make_error(
            Code::kIoError, 7033,
            fmt::format("umad: registering an agent of class {:#04x} on {} port {}: {}", c,
                        local_.ca, local_.port, std::strerror(-agent)));
      class_versions_[c] = class_version;
    }
    // ibsim hands a request to QP1 only to a client that holds the IsSM capability; such a
    // client that runs no SM answers other SMs' SMInfo as an SM NOT ACTIVE (answer_request),
    // which they ignore.
    if (through_umad2sim() && issm_fd_ < 0)
      if (Status s = open_issm(); !s) return s;
    class_handlers_[c] = std::move(h);
    return {};
  }

  uint64_t malformed_requests() const override { return malformed_; }

  void serve(int timeout_ms) override {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (auto now = std::chrono::steady_clock::now(); now < until;
         now = std::chrono::steady_clock::now()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now);
      (void)receive(static_cast<int>(std::max<int64_t>(left.count(), 1)));
    }
  }

  const LocalPort& local() const override { return local_; }

  uint32_t max_in_flight() const override {
    return through_umad2sim() ? kUmad2simInFlight : UINT32_MAX;
  }

  Status send(const wire::Smp& smp, uint16_t dlid) override {
    auto bytes = wire::encode_smp(smp);
    if (!bytes) return bytes.error();
    // QP0, SL 0, no Q_Key (IBA 13.5.3: SMPs go to QP0).
    if (int r = post(*bytes, smp.directed ? dr_agent_ : lid_agent_, dlid, 0, 0); r < 0) {
      return make_error(Code::kIoError, 7000,
                        fmt::format("umad: sending an SMP on {} port {}: {}", local_.ca,
                                    local_.port, std::strerror(-r)));
    }
    return {};
  }

  Status send_gmp(const wire::Mad& mad, uint16_t dlid) override {
    const auto cls = static_cast<uint8_t>(mad.mgmt_class);
    int& agent = gmp_agents_[cls];
    if (agent < 0) {
      agent = umad_register(fd_, cls, mad.class_version, 0, nullptr);
      if (agent < 0)
        return make_error(
            Code::kIoError, 7026,
            fmt::format("umad: registering an agent of class {:#04x} on {} port {}: {}", cls,
                        local_.ca, local_.port, std::strerror(-agent)));
      class_versions_[cls] = mad.class_version;
    }
    auto bytes = wire::encode_mad(mad);
    if (!bytes) return bytes.error();
    // QP1 with the GSI's well-known Q_Key (IBA 13.5.3), SL 0.
    if (int r = post(*bytes, agent, dlid, 1, wire::kGsiQKey); r < 0) {
      return make_error(Code::kIoError, 7027,
                        fmt::format("umad: sending a class {:#04x} MAD on {} port {}: {}", cls,
                                    local_.ca, local_.port, std::strerror(-r)));
    }
    return {};
  }

  Result<SmpCompletion> receive(int timeout_ms) override {
    while (true) {
      int length = static_cast<int>(wire::kMadBytes);
      int r = umad_recv(fd_, buf_.data(), &length, timeout_ms);
      if (r == -ETIMEDOUT || r == -EAGAIN || r == -EINTR) {
        return make_error(Code::kTimeout, 7001, "umad: no SMP answer within the wait");
      }
      if (r < 0) {
        return make_error(Code::kIoError, 7002,
                          fmt::format("umad: receiving on {} port {}: {}", local_.ca, local_.port,
                                      std::strerror(-r)));
      }
      const auto* mad = static_cast<const uint8_t*>(umad_get_mad(buf_.data()));
      SmpCompletion c;
      // The transaction id's low 32 bits, wherever the answer came from (bytes 12-15).
      c.tid = static_cast<uint32_t>(wire::get_be(std::span<const uint8_t>(mad, 16), 12, 4));
      if (int st = umad_status(buf_.data()); st != 0) {
        // The request itself, handed back: unanswered after the kernel's retries (ETIMEDOUT),
        // or not deliverable.
        c.status = make_error(st == ETIMEDOUT ? Code::kTimeout : Code::kIoError, 7003,
                              fmt::format("umad: request {:#x} {}", c.tid,
                                          st == ETIMEDOUT ? "timed out" : std::strerror(st)));
        return c;
      }
      // A request (no R bit) that does not decode is nobody's answer: counted, not trusted.
      const bool request = (mad[3] & 0x80) == 0;
      if (const uint8_t cls = mad[1]; cls != 0x81 && cls != 0x01) {
        auto gmp = wire::decode_mad(std::span<const uint8_t>(mad, wire::kMadBytes));
        if (!gmp && request) {
          ++malformed_;
          continue;
        }
        if (!gmp) {
          c.status = gmp.error();
          return c;
        }
        if (!wire::is_response(gmp->method)) {
          answer_gmp(*gmp);
          continue;
        }
        c.gmp = std::move(*gmp);
        return c;
      }
      auto smp = wire::decode_smp(std::span<const uint8_t>(mad, wire::kMadBytes));
      if (!smp && request) {
        ++malformed_;
        continue;
      }
      if (!smp) {
        c.status = smp.error();
        return c;
      }
      // Requests from elsewhere (another SM's SMInfo): the SM's handler answers them.
      if (!wire::is_response(smp->method)) {
        answer_request(*smp);
        continue;
      }
      c.smp = std::move(*smp);
      return c;
    }
  }

 private:
  int fd_;
  int dr_agent_;
  int lid_agent_;
  // One MAD handed to the kernel through `agent` towards (dlid, qp, qkey), SL 0; umad_send's
  // result (negative errno on failure). A request waits the port's timeout and is resent; an
  // answer (`answer`) expects none. The first `length` bytes go.
  int post(const wire::MadBytes& mad, int agent, uint16_t dlid, int qp, uint32_t qkey,
           bool answer = false, unsigned length = wire::kMadBytes) {
    std::vector<uint8_t> out(umad_size() + wire::kMadBytes);
    std::memcpy(umad_get_mad(out.data()), mad.data(), mad.size());
    umad_set_addr(out.data(), dlid, qp, 0, static_cast<int>(qkey));
    return umad_send(fd_, agent, out.data(), static_cast<int>(std::min(length, wire::kMadBytes)),
                     answer ? 0 : options_.timeout_ms, answer ? 0 : options_.retries);
  }

  // A request to the SM, answered through the handler and turned round: a directed-route one
  // goes back along its return path (the hop pointer as it arrived, IBA 14.2.2), a LID-routed
  // one to the LID it came from.
  void answer_request(const wire::Smp& request) {
    std::optional<wire::Smp> answer;
    if (sm_handler_) {
      answer = sm_handler_(request);
    } else if (issm_fd_ >= 0 && request.method == wire::MadMethod::kGet &&
               request.attribute_id == static_cast<uint16_t>(wire::SmpAttr::kSmInfo)) {
      wire::SmInfo none;
      none.guid = local_.port_guid;
      none.sm_state = static_cast<uint8_t>(wire::SmState::kNotActive);
      answer.emplace();
      answer->method = wire::MadMethod::kGetResp;
      answer->data = wire::encode_sm_info(none);
    }
    if (!answer) return;
    answer->transaction_id = request.transaction_id;
    answer->directed = request.directed;
    answer->returning = request.directed;
    answer->hop_pointer = request.hop_pointer;
    answer->hop_count = request.hop_count;
    answer->initial_path = request.initial_path;
    answer->return_path = request.return_path;
    answer->dr_slid = request.dr_slid;
    answer->dr_dlid = request.dr_dlid;
    answer->attribute_id = request.attribute_id;
    answer->attribute_modifier = request.attribute_modifier;
    auto bytes = wire::encode_smp(*answer);
    if (!bytes) return;
    const uint16_t dlid =
        request.directed ? wire::kPermissiveLid : ntohs(umad_get_mad_addr(buf_.data())->lid);
    (void)post(*bytes, request.directed ? dr_agent_ : lid_agent_, dlid, 0, 0, /*answer=*/true);
  }

  // A request of a served class, answered through its handler and sent back to the port and QP
  // it came from, with the GSI's Q_Key.
  void answer_gmp(const wire::Mad& request) {
    const auto cls = static_cast<uint8_t>(request.mgmt_class);
    if (!class_handlers_[cls]) return;
    const ib_mad_addr_t* from = umad_get_mad_addr(buf_.data());
    const uint16_t dlid = ntohs(from->lid);
    const auto qp = static_cast<int>(ntohl(from->qpn));
    std::optional<GmpAnswer> answer =
        class_handlers_[cls](request, GmpSource{dlid, static_cast<uint32_t>(qp)});
    if (!answer) return;
    answer->mad.transaction_id = request.transaction_id;
    answer->mad.mgmt_class = request.mgmt_class;
    answer->mad.class_version = request.class_version;
    auto bytes = wire::encode_mad(answer->mad);
    if (!bytes) return;
    (void)post(*bytes, gmp_agents_[cls], dlid, qp, wire::kGsiQKey, /*answer=*/true, answer->length);
  }

  LocalPort local_;
  UmadOptions options_;
  std::vector<uint8_t> buf_;
  int issm_fd_ = -1;
  SmRequestHandler sm_handler_;
  std::array<GmpRequestHandler, 256> class_handlers_;
  std::array<uint8_t, 256> class_versions_{};
  uint64_t malformed_ = 0;
  std::array<int, 256> gmp_agents_ = [] {
    std::array<int, 256> a{};
    a.fill(-1);
    return a;
  }();
};

}  // namespace

bool is_ib_fabric(std::string_view spec) {
  return spec == "ib" || spec.starts_with("ib:");
}

Status parse_ib_fabric(const std::string& spec, UmadOptions& options) {
  if (!is_ib_fabric(spec)) {
    return make_error(Code::kInvalidArgument, 7010,
                      fmt::format("fabric '{}': an InfiniBand fabric is ib:[<adapter>[:<port>]]",
                                  spec.substr(0, 64)));
  }
  std::string rest = spec.size() > 3 ? spec.substr(3) : "";
  auto colon = rest.find(':');
  options.ca = rest.substr(0, colon);
  options.port = 0;
  if (colon != std::string::npos) {
    const std::string p = rest.substr(colon + 1);
    unsigned v = 0;
    bool ok = !p.empty() && p.size() <= 3;
    for (char ch : p) ok = ok && ch >= '0' && ch <= '9' && (v = v * 10 + unsigned(ch - '0')) < 255;
    if (!ok) {
      return make_error(Code::kInvalidArgument, 7011,
                        fmt::format("fabric '{}': port '{}' is not a port number 0-254",
                                    spec.substr(0, 64), p.substr(0, 16)));
    }
    options.port = v;
  }
  if (options.ca.size() >= UMAD_CA_NAME_LEN) {
    return make_error(Code::kInvalidArgument, 7012,
                      fmt::format("fabric '{}': adapter name longer than {} characters",
                                  spec.substr(0, 64), UMAD_CA_NAME_LEN - 1));
  }
  return {};
}

Result<std::unique_ptr<SmpPort>> open_umad_port(const UmadOptions& options) {
  if (umad_init() < 0) {
    return make_error(Code::kIoError, 7020,
                      "umad: the user MAD interface is not available (no ib_umad, or run under "
                      "ibsim with LD_PRELOAD=libumad2sim.so)");
  }
  const char* ca = options.ca.empty() ? nullptr : options.ca.c_str();
  umad_port_t info{};
  if (int r = umad_get_port(ca, static_cast<int>(options.port), &info); r < 0) {
    return make_error(Code::kNotFound, 7021,
                      fmt::format("umad: no InfiniBand port {} on adapter '{}': {}", options.port,
                                  options.ca.empty() ? "(first)" : options.ca, std::strerror(-r)));
  }
  LocalPort local;
  local.ca = info.ca_name;
  local.port = static_cast<unsigned>(info.portnum);
  local.port_guid = be64toh(info.port_guid);
  local.lid = static_cast<uint16_t>(info.base_lid);
  local.sm_lid = static_cast<uint16_t>(info.sm_lid);
  local.state = info.state;
  umad_release_port(&info);

  int fd = umad_open_port(local.ca.c_str(), static_cast<int>(local.port));
  if (fd < 0) {
    return make_error(Code::kIoError, 7022,
                      fmt::format("umad: opening {} port {}: {} (an SM needs access to "
                                  "/dev/infiniband/umad*)",
                                  local.ca, local.port, std::strerror(-fd)));
  }
  // Get and Set requests are delivered too: those addressed to the SM (another SM's SMInfo)
  // rather than to the SMA, which the adapter answers itself; and the Traps sent to the SM.
  long methods[16 / sizeof(long)] = {};
  methods[0] = 1L << static_cast<int>(wire::MadMethod::kGet) |
               1L << static_cast<int>(wire::MadMethod::kSet) |
               1L << static_cast<int>(wire::MadMethod::kTrap);
  int dr = umad_register(fd, 0x81, kSmpClassVersion, 0, methods);
  int lr = dr < 0 ? dr : umad_register(fd, 0x01, kSmpClassVersion, 0, methods);
  if (dr < 0 || lr < 0) {
    umad_close_port(fd);
    return make_error(Code::kIoError, 7023,
                      fmt::format("umad: registering the SMP agents on {} port {}: {}", local.ca,
                                  local.port, std::strerror(-(dr < 0 ? dr : lr))));
  }
  return std::unique_ptr<SmpPort>(std::make_unique<UmadPort>(fd, dr, lr, local, options));
}

}  // namespace galaxy::ib
