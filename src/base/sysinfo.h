#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace galaxy {

// Peak resident set size of this process in MiB (VmHWM), 0 if unknown.
inline double peak_rss_mb() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  double kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) kb = std::atof(line + 6);
  std::fclose(f);
  return kb / 1024.0;
}

}  // namespace galaxy
