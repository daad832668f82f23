// The providers libglex is linked with (provider.h). One entry per back end; adding one is a
// line here and a library in src/glex/CMakeLists.txt.
#include "base/env.h"
#include "glex/live_device.h"
#include "glex/provider.h"
#include "glex/sim_client.h"

namespace galaxy::glex {

namespace {

Result<std::unique_ptr<glex_device>> open_live(const std::string& spec, const std::string& host,
                                               int32_t nic) {
  return open_live_device(spec, host, nic);
}

Result<std::unique_ptr<glex_device>> open_sim(const std::string& spec, const std::string&,
                                              int32_t nic) {
  return open_sim_client(spec, nic);
}

Registry<ProviderOpen> make() {
  Registry<ProviderOpen> r("glex provider");
  r.add({"live",
         "a live fabric by name: the NIC in this process over the host's shared segment "
         "(galaxy fabricd)",
         {{"host", "string", "$GLEX_HOST", "the fabric host this process runs on"},
          {"nic", "int", "$GLEX_NIC", "the NIC (chip id) to open"}},
         {},
         &open_live});
  r.add({"sim",
         "a simulated fabric (sim:<topology>) served by `galaxy simd` over its Unix socket",
         {{"nic", "int", "$GLEX_NIC, else by $GLEX_RANK", "the simulated NIC (chip id) to open"}},
         {},
         &open_sim});
  return r;
}

}  // namespace

Result<std::optional<int64_t>> env_nic() {
  return env_int("GLEX_NIC");
}

Result<int64_t> env_rank() {
  for (const char* name : {"GLEX_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK"}) {
    auto r = env_int(name);
    if (!r.ok()) return r.error();
    if (*r) return **r;
  }
  return int64_t{0};
}

const Registry<ProviderOpen>& providers() {
  static const Registry<ProviderOpen> r = make();
  return r;
}

const RegistryEntry<ProviderOpen>& provider_for(const std::string& spec) {
  const size_t colon = spec.find(':');
  if (colon != std::string::npos)
    if (auto e = providers().find(spec.substr(0, colon)); e.ok()) return **e;
  return *providers().find(kDefaultProvider).value();
}

}  // namespace galaxy::glex
