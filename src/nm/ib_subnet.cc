#include "nm/ib_subnet.h"

#include <fmt/format.h>

#include <charconv>

namespace galaxy::nm {
namespace {

// The whole of `text` as an unsigned number in `base`.
bool parse_whole(std::string_view text, int base, uint64_t& value) {
  if (text.empty()) return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  return ec == std::errc{} && end == text.data() + text.size();
}

}  // namespace

uint16_t IbSubnet::held_lid(IbEndpoint e) const {
  if (e.node >= nodes.size()) return 0;
  const IbNode& n = nodes[e.node];
  const uint32_t p = n.is_switch() ? 0 : e.port;
  if (p >= n.ports.size() || !n.ports[p].known) return 0;
  return n.ports[p].info.lid();
}

Result<IbEndpoint> IbSubnet::find(const std::string& text) const {
  auto first_entered = [&](uint32_t n) -> IbEndpoint {
    if (nodes[n].is_switch()) return {n, 0};
    for (uint32_t p = 1; p < nodes[n].ports.size(); ++p)
      if (nodes[n].ports[p].entered) return {n, static_cast<uint8_t>(p)};
    return {n, 1};
  };
  std::string_view t = text;
  uint64_t v = 0;
  // A LID.
  const bool lid_prefix = t.starts_with("lid:");
  if (parse_whole(lid_prefix ? t.substr(4) : t, 10, v)) {
    if (v >= 1 && v <= wire::kMaxUnicastLid)
      for (uint32_t n = 0; n < nodes.size(); ++n) {
        if (nodes[n].is_switch()) {
          if (held_lid({n, 0}) == v) return IbEndpoint{n, 0};
          continue;
        }
        for (uint32_t p = 1; p < nodes[n].ports.size(); ++p)
          if (nodes[n].ports[p].entered && held_lid({n, static_cast<uint8_t>(p)}) == v)
            return IbEndpoint{n, static_cast<uint8_t>(p)};
      }
    return make_error(Code::kNotFound, 7140,
                      fmt::format("'{}': no port holds LID {}", excerpt(text), v));
  }
  // A GUID, bare or as ibnetdiscover names nodes.
  std::string_view hex = t;
  if (hex.starts_with("S-") || hex.starts_with("H-")) hex.remove_prefix(2);
  if (hex.starts_with("0x") || hex.starts_with("0X")) hex.remove_prefix(2);
  if (hex.size() != t.size() && parse_whole(hex, 16, v)) {
    if (auto it = by_guid.find(v); it != by_guid.end()) return first_entered(it->second);
    for (uint32_t n = 0; n < nodes.size(); ++n)
      for (uint32_t p = 0; p < nodes[n].ports.size(); ++p)
        if (nodes[n].ports[p].guid == v && (p == 0 || !nodes[n].is_switch()))
          return IbEndpoint{n, static_cast<uint8_t>(p)};
    return make_error(Code::kNotFound, 7141,
                      fmt::format("'{}': no node or port has GUID {:#018x}", excerpt(text), v));
  }
  // A node description.
  IbEndpoint found;
  uint32_t matches = 0;
  for (uint32_t n = 0; n < nodes.size(); ++n)
    if (nodes[n].description == text && matches++ == 0) found = first_entered(n);
  if (matches == 1) return found;
  if (matches > 1)
    return make_error(Code::kInvalidArgument, 7142,
                      fmt::format("'{}': {} nodes have this description; name one by GUID or LID",
                                  excerpt(text), matches));
  return make_error(Code::kNotFound, 7143,
                    fmt::format("'{}': no node has this description, GUID or LID", excerpt(text)));
}

}  // namespace galaxy::nm
