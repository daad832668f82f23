#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace galaxy {

// A "Key:" line of /proc/self/status in MiB (its value is in kB), 0 if unknown.
inline double proc_status_mb(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  double kb = 0;
  const size_t n = std::strlen(key);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, key, n) == 0) kb = std::atof(line + n);
  std::fclose(f);
  return kb / 1024.0;
}

// Peak resident set size of this process in MiB (VmHWM), 0 if unknown.
inline double peak_rss_mb() {
  return proc_status_mb("VmHWM:");
}

// Resident set size of this process now, in MiB (VmRSS), 0 if unknown.
inline double rss_mb() {
  return proc_status_mb("VmRSS:");
}

}  // namespace galaxy
