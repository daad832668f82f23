// libglex's back ends (docs/glex.md, "Providers"): glex_open_device picks one by the fabric
// spec's scheme — the text before the first ':' — from this self-describing registry; a spec
// with no registered scheme names a live fabric. The registry is what libglex.so is built from:
// each provider is a library of its own (the live engine's device; the client of a simulation
// server), and the in-process simulator is not part of it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/env.h"
#include "base/registry.h"
#include "glex/device.h"

namespace galaxy::glex {

using ProviderOpen = Result<std::unique_ptr<glex_device>> (*)(const std::string& spec,
                                                              const std::string& host, int32_t nic);

// Keyed by scheme ("sim", "live"); the default provider is "live".
const Registry<ProviderOpen>& providers();
inline constexpr const char* kDefaultProvider = "live";

// The provider for `spec`: its scheme's, or the default.
const RegistryEntry<ProviderOpen>& provider_for(const std::string& spec);

// What every provider reads from the environment to choose a NIC when the caller gives none:
// $GLEX_NIC (std::nullopt when unset), and the process's rank ($GLEX_RANK, else a launcher's
// $PMIX_RANK or $OMPI_COMM_WORLD_RANK, else 0). A bad value is an error naming the variable.
Result<std::optional<int64_t>> env_nic();
Result<int64_t> env_rank();

}  // namespace galaxy::glex
