// SmpPort over libibumad (the kernel's ib_umad, or ibsim through LD_PRELOAD=libumad2sim.so):
// one agent per SMP class (directed-route 0x81, LID-routed 0x01), the kernel matching answers
// to requests and timing them out (an unanswered request comes back with status ETIMEDOUT).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ib/smp_port.h"

namespace galaxy::ib {

struct UmadOptions {
  std::string ca;     // "" = the first adapter with an active port
  unsigned port = 0;  // 0 = the first active port (a switch's port 0 is its only one)
  int timeout_ms = 200;
  int retries = 2;  // the kernel's resends before a request times out
};

Result<std::unique_ptr<SmpPort>> open_umad_port(const UmadOptions& options);

// "ib", "ib:", "ib:mlx5_0", "ib:mlx5_0:1": a fabric spec that names an InfiniBand port.
bool is_ib_fabric(std::string_view spec);

// "ib:", "ib:mlx5_0", "ib:mlx5_0:1" -> ca and port; an error naming the bad part otherwise.
Status parse_ib_fabric(const std::string& spec, UmadOptions& options);

}  // namespace galaxy::ib
