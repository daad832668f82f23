#include "engine/live/directory.h"

#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include "wire/big_endian.h"
#include "wire/crc16.h"

namespace galaxy::live {

std::string_view directory_status_name(DirectoryStatus s) {
  switch (s) {
    case DirectoryStatus::kOpen:
      return "open";
    case DirectoryStatus::kNotOpen:
      return "not open";
    case DirectoryStatus::kNotHere:
      return "not a NIC of this host";
  }
  return "unknown";
}

namespace {

using wire::get_be;
using wire::put_be;

void put_head(std::span<uint8_t> b, DirectoryType t, uint8_t vp, uint32_t node, uint64_t tag) {
  put_be(b, 0, 4, kDirectoryMagic);
  b[4] = kDirectoryVersion;
  b[5] = static_cast<uint8_t>(t);
  b[6] = vp;
  put_be(b, 8, 4, node);
  put_be(b, 12, 8, tag);
}

void put_crc(std::span<uint8_t> b) {
  put_be(b, b.size() - 2, 2, wire::crc16(b.first(b.size() - 2)));
}

Status check(std::span<const uint8_t> b, DirectoryType type, size_t size) {
  const char* what = type == DirectoryType::kQuery ? "query" : "answer";
  if (b.size() != size)
    return make_error(Code::kMalformed, 4870,
                      fmt::format("VP directory {}: {} bytes, expected {}", what, b.size(), size));
  if (get_be(b, 0, 4) != kDirectoryMagic)
    return make_error(Code::kMalformed, 4871,
                      fmt::format("VP directory {}: magic 0x{:08x}, expected 0x{:08x} (\"GVD1\")",
                                  what, get_be(b, 0, 4), kDirectoryMagic));
  if (b[4] != kDirectoryVersion)
    return make_error(Code::kUnsupported, 4872,
                      fmt::format("VP directory {}: version {}, this build speaks {}", what, b[4],
                                  kDirectoryVersion));
  if (b[5] != static_cast<uint8_t>(type))
    return make_error(Code::kMalformed, 4873,
                      fmt::format("VP directory {}: type {}, expected {}", what, b[5],
                                  static_cast<unsigned>(type)));
  const uint16_t want = wire::crc16(b.first(size - 2));
  if (get_be(b, size - 2, 2) != want)
    return make_error(Code::kMalformed, 4874,
                      fmt::format("VP directory {}: CRC 0x{:04x}, computed 0x{:04x}", what,
                                  get_be(b, size - 2, 2), want));
  return {};
}

Status reserved_zero(std::span<const uint8_t> b, size_t at, unsigned n, const char* what) {
  if (get_be(b, at, n) != 0)
    return make_error(Code::kMalformed, 4875,
                      fmt::format("VP directory {}: reserved bytes {}-{} are 0x{:x}, not 0", what,
                                  at, at + n - 1, get_be(b, at, n)));
  return {};
}

}  // namespace

std::array<uint8_t, kDirectoryQueryBytes> encode_directory_query(const DirectoryQuery& q) {
  std::array<uint8_t, kDirectoryQueryBytes> b{};
  put_head(b, DirectoryType::kQuery, q.vp, q.node, q.tag);
  put_crc(b);
  return b;
}

std::array<uint8_t, kDirectoryAnswerBytes> encode_directory_answer(const DirectoryAnswer& a) {
  std::array<uint8_t, kDirectoryAnswerBytes> b{};
  put_head(b, DirectoryType::kAnswer, a.vp, a.node, a.tag);
  b[7] = static_cast<uint8_t>(a.status);
  put_be(b, 20, 4, a.generation);
  put_be(b, 24, 2, a.port);
  put_crc(b);
  return b;
}

bool is_directory_datagram(std::span<const uint8_t> bytes) {
  return bytes.size() >= 4 && get_be(bytes, 0, 4) == kDirectoryMagic;
}

Result<DirectoryQuery> decode_directory_query(std::span<const uint8_t> b) {
  GALAXY_TRY(check(b, DirectoryType::kQuery, kDirectoryQueryBytes));
  GALAXY_TRY(reserved_zero(b, 7, 1, "query"));
  GALAXY_TRY(reserved_zero(b, 20, 2, "query"));
  return DirectoryQuery{
      .node = static_cast<uint32_t>(get_be(b, 8, 4)), .vp = b[6], .tag = get_be(b, 12, 8)};
}

Result<DirectoryAnswer> decode_directory_answer(std::span<const uint8_t> b) {
  GALAXY_TRY(check(b, DirectoryType::kAnswer, kDirectoryAnswerBytes));
  GALAXY_TRY(reserved_zero(b, 26, 4, "answer"));
  if (b[7] >= kDirectoryStatusCount)
    return make_error(Code::kMalformed, 4876,
                      fmt::format("VP directory answer: status {} is none of the {} statuses", b[7],
                                  kDirectoryStatusCount));
  return DirectoryAnswer{.node = static_cast<uint32_t>(get_be(b, 8, 4)),
                         .vp = b[6],
                         .status = static_cast<DirectoryStatus>(b[7]),
                         .tag = get_be(b, 12, 8),
                         .generation = static_cast<uint32_t>(get_be(b, 20, 4)),
                         .port = static_cast<uint16_t>(get_be(b, 24, 2))};
}

Result<DirectoryAnswer> ask_directory(uint32_t ip, uint16_t port, uint32_t node, uint8_t vp,
                                      int timeout_ms) {
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return make_error(Code::kIoError, 4880,
                      fmt::format("VP directory: socket: {}", std::strerror(errno)));
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = ip;
  to.sin_port = htons(port);
  const DirectoryQuery q{.node = node, .vp = vp, .tag = std::random_device{}() | 1};
  const auto bytes = encode_directory_query(q);
  using Clock = std::chrono::steady_clock;
  const auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  const int every_ms = std::max(1, timeout_ms / 4);
  Result<DirectoryAnswer> out =
      make_error(Code::kTimeout, 4879,
                 fmt::format("VP directory: no answer about NIC {} VP {} from port {} within {} ms",
                             node, vp, port, timeout_ms));
  while (Clock::now() < end) {
    if (sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to),
               sizeof to) < 0) {
      out = make_error(Code::kIoError, 4881,
                       fmt::format("VP directory: sendto port {}: {}", port, std::strerror(errno)));
      break;
    }
    const auto resend = std::min(end, Clock::now() + std::chrono::milliseconds(every_ms));
    bool answered = false;
    while (!answered && Clock::now() < resend) {
      pollfd p{fd, POLLIN, 0};
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(resend - Clock::now()).count();
      if (poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 1))) <= 0) continue;
      std::array<uint8_t, 64> in{};
      const ssize_t n = recv(fd, in.data(), in.size(), 0);
      if (n <= 0) continue;
      auto a = decode_directory_answer(std::span<const uint8_t>(in.data(), static_cast<size_t>(n)));
      if (a.ok() && a->tag == q.tag && a->node == node && a->vp == vp) {
        out = *a;
        answered = true;
      }
    }
    if (answered) break;
  }
  close(fd);
  return out;
}

}  // namespace galaxy::live
