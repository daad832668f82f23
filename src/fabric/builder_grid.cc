// Meshes and tori of routers with 1 to 3 dimensions ("torus:8x8x8,nics=2"). Port layout: the
// router's NICs first, then -x, +x, -y, +y, -z, +z (docs/topologies.md, "mesh" and "torus").
#include <fmt/format.h>

#include <array>

#include "fabric/builder_util.h"
#include "fabric/builders.h"

namespace galaxy::fabric {

namespace {

constexpr int64_t kMaxRouters = int64_t{1} << 20;

Result<Topology> build_grid(const Spec& spec, bool wrap) {
  GALAXY_TRY(spec.check_known({"nics"}));
  if (spec.positional.size() != 1)
    return make_error(Code::kInvalidArgument, 3400,
                      fmt::format("{}: expected one size like 8x8x8, got {} positional values",
                                  spec.name, spec.positional.size()));
  const std::string& text = spec.positional.front();
  std::array<uint32_t, 3> size{1, 1, 1};
  uint32_t dims = 0;
  int64_t routers = 1;
  for (size_t start = 0;;) {
    size_t x = text.find('x', start);
    std::string part = text.substr(start, x == std::string::npos ? std::string::npos : x - start);
    if (dims == 3)
      return make_error(Code::kInvalidArgument, 3401,
                        fmt::format("{}: size '{}' has more than 3 dimensions", spec.name, text));
    auto n = parse_int(fmt::format("{} size {}", spec.name, "xyz"[dims]), part, 1, kMaxRouters);
    GALAXY_TRY(n);
    size[dims++] = static_cast<uint32_t>(*n);
    routers *= *n;
    if (routers > kMaxRouters)
      return make_error(
          Code::kOutOfRange, 3402,
          fmt::format("{}: size '{}' has more than {} routers", spec.name, text, kMaxRouters));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  auto nics_r = spec.get_int("nics", 1, 1, kMaxPorts - 2 * dims);
  GALAXY_TRY(nics_r);
  const uint32_t nics = static_cast<uint32_t>(*nics_r);
  const uint32_t ports = nics + 2 * dims;
  const uint32_t n = static_cast<uint32_t>(routers);
  detail::TopologyWriter w(n * (1 + nics), n * (ports + nics));

  std::vector<uint32_t> router(n);
  for (uint32_t r = 0; r < n; ++r) {
    std::array<uint32_t, 3> c{r % size[0], r / size[0] % size[1], r / size[0] / size[1]};
    std::string coords = fmt::format("{}", c[0]);
    for (uint32_t d = 1; d < dims; ++d) coords += fmt::format(".{}", c[d]);
    router[r] = w.node(NodeKind::kNrc, ports, "r" + coords,
                       Location{-1, -1, static_cast<int32_t>(r), -1, "router"}, 1);
    for (uint32_t k = 0; k < nics; ++k) {
      uint32_t nic = w.node(NodeKind::kNic, 1, fmt::format("nic{:05}", r * nics + k),
                            Location{-1, -1, static_cast<int32_t>(r), -1, "nic"}, 0);
      w.link(router[r], k, nic, 0);
    }
  }
  uint32_t stride = 1;
  for (uint32_t d = 0; d < dims; ++d) {
    uint32_t minus = nics + 2 * d;
    uint32_t plus = minus + 1;
    for (uint32_t r = 0; r < n; ++r) {
      uint32_t c = r / stride % size[d];
      if (c + 1 < size[d])
        w.link(router[r], plus, router[r + stride], minus);
      else if (wrap && size[d] > 2)  // size 2: the wrap link would double the one above
        w.link(router[r], plus, router[r - c * stride], minus);
    }
    stride *= size[d];
  }
  return w.finish();
}

}  // namespace

Result<Topology> build_mesh(const Spec& spec) {
  return build_grid(spec, false);
}
Result<Topology> build_torus(const Spec& spec) {
  return build_grid(spec, true);
}

}  // namespace galaxy::fabric
