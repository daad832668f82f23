#include "base/env.h"

#include <fmt/format.h>

#include <array>
#include <charconv>
#include <cstdlib>

namespace galaxy {

namespace {

constexpr int64_t kMaxChip = 65535;

constexpr std::array kTable = {
    EnvVar{"GALAXY_TIMING", EnvType::kString, "config/th2-timing.json", 0, 0,
           "the simulator's calibration file"},
    EnvVar{"GALAXY_NMD_TOKEN", EnvType::kString, "", 0, 0,
           "bearer token of the management daemon (server and clients)"},
    EnvVar{"PATH", EnvType::kString, "/usr/local/bin:/usr/bin:/bin", 0, 0,
           "where the peers' programs of `galaxy bench` are looked for"},
    EnvVar{"GLEX_FABRIC", EnvType::kString, "galaxy", 0, 0,
           "the fabric glex_open_device opens: a live fabric's name, or sim:<topology>"},
    EnvVar{"GLEX_HOST", EnvType::kString, "", 0, 0,
           "the live fabric host this process runs on (default: the only one here)"},
    EnvVar{"GLEX_NIC", EnvType::kInt, "", 0, kMaxChip, "the NIC (chip id) to open"},
    EnvVar{"GLEX_RANK", EnvType::kInt, "0", 0, 999999,
           "this process's rank: the NIC by rank, and glex_bootstrap"},
    EnvVar{"GLEX_SIZE", EnvType::kInt, "", 1, 1000000, "the job's size for glex_bootstrap"},
    EnvVar{"GLEX_RENDEZVOUS", EnvType::kString, "", 0, 0,
           "a directory the job shares, for glex_bootstrap without PMIx"},
    EnvVar{"GLEX_BOOTSTRAP_TIMEOUT_MS", EnvType::kInt, "30000", 1, 86400000,
           "how long glex_bootstrap waits for every rank"},
    EnvVar{"GLEX_SPIN_US", EnvType::kInt, "50", 0, 1000000,
           "how long a live wait polls before it sleeps"},
    EnvVar{"GLEX_COPY_ENGINES", EnvType::kInt, "2", 1, 2,
           "copy engines of a live NIC for same-host RDMA (1: the caller only)"},
    EnvVar{"GLEX_SIM_SOCKET", EnvType::kString, "", 0, 0,
           "the Unix socket of the simulation server (default: one per user and fabric in /tmp)"},
    EnvVar{"PMIX_RANK", EnvType::kInt, "", 0, 999999, "set by a PMIx launcher: its rank"},
    EnvVar{"OMPI_COMM_WORLD_RANK", EnvType::kInt, "", 0, 999999, "set by Open MPI's mpirun"},
};

}  // namespace

std::span<const EnvVar> env_table() {
  return kTable;
}

const EnvVar* find_env(std::string_view name) {
  for (const EnvVar& v : kTable)
    if (v.name == name) return &v;
  return nullptr;
}

std::optional<std::string> env_string(std::string_view name) {
  const EnvVar* v = find_env(name);
  if (!v) return std::nullopt;
  const char* s = std::getenv(std::string(v->name).c_str());
  if (!s || !*s) return std::nullopt;
  return std::string(s);
}

std::string env_string_or_default(std::string_view name) {
  if (auto s = env_string(name)) return *s;
  const EnvVar* v = find_env(name);
  return v ? std::string(v->default_value) : std::string();
}

Result<std::optional<int64_t>> env_int(std::string_view name) {
  const EnvVar* v = find_env(name);
  auto s = env_string(name);
  if (!v || !s) return std::optional<int64_t>{};
  int64_t x = 0;
  auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), x);
  if (ec != std::errc() || p != s->data() + s->size() || x < v->min || x > v->max)
    return make_error(Code::kInvalidArgument, 16,
                      fmt::format("{} = '{}': expected an integer in [{}, {}] ({})", v->name, *s,
                                  v->min, v->max, v->help));
  return std::optional<int64_t>{x};
}

Result<int64_t> env_int_or_default(std::string_view name) {
  auto x = env_int(name);
  if (!x.ok()) return x.error();
  if (*x) return **x;
  const EnvVar* v = find_env(name);
  int64_t d = 0;
  if (v)
    std::from_chars(v->default_value.data(), v->default_value.data() + v->default_value.size(), d);
  return d;
}

std::string describe_env() {
  std::string out;
  for (const EnvVar& v : kTable) {
    std::string range = v.type == EnvType::kInt ? fmt::format(" [{}, {}]", v.min, v.max) : "";
    std::string def = v.default_value.empty() ? "" : fmt::format(" (default {})", v.default_value);
    out += fmt::format("  {:<26} {}{}{}\n", v.name, v.help, range, def);
  }
  return out;
}

}  // namespace galaxy
