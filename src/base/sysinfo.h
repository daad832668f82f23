#pragma once

#include <unistd.h>

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

// The machine's online cores, at least 1: what thread counts default to, and what runnable_tasks
// is compared with (both count the whole machine, as /proc/loadavg does).
inline unsigned online_cores() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<unsigned>(n) : 1u;
}

// The tasks running or ready to run on the machine, from a /proc/loadavg line ("0.52 0.58 0.59
// 3/412 12345": the 3); -1 if the line does not have that form.
inline int runnable_of_loadavg(const char* line) {
  for (int field = 0; field < 3; ++field) {
    while (*line == ' ') ++line;
    if (*line == '\0') return -1;
    while (*line != ' ' && *line != '\0') ++line;
  }
  while (*line == ' ') ++line;
  if (*line < '0' || *line > '9') return -1;
  int n = 0;
  for (; *line >= '0' && *line <= '9'; ++line) {
    if (n > 100000000) return -1;
    n = n * 10 + (*line - '0');
  }
  return *line == '/' ? n : -1;
}

// The machine's runnable tasks now (the caller included), -1 if unknown.
inline int runnable_tasks() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return -1;
  char line[128];
  const bool got = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  return got ? runnable_of_loadavg(line) : -1;
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
