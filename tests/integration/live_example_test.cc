// The complete example of docs/glex.md (examples/glex_example.c) runs as two processes, on one
// host and across two hosts.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "live_fixture.h"

namespace galaxy::live::testing {
namespace {

pid_t run_example(const LiveFabricUnderTest& f, int host, int rank, const std::string& dir) {
  const std::string exe =
      (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "glex_example").string();
  pid_t pid = fork();
  if (pid == 0) {
    setenv("GLEX_FABRIC", f.name().c_str(), 1);
    setenv("GLEX_HOST", f.host_name(host), 1);
    setenv("GLEX_RANK", std::to_string(rank).c_str(), 1);
    setenv("GLEX_SIZE", "2", 1);
    setenv("GLEX_RENDEZVOUS", dir.c_str(), 1);
    execl(exe.c_str(), exe.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

TEST(LiveExample, RunsOnOneHostAndAcrossHosts) {
  LiveFabricUnderTest f(2);
  ASSERT_TRUE(f.bring_up().ok());
  for (int rank1_host : {0, 1}) {
    char tmpl[] = "/tmp/galaxy-example-XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    pid_t a = run_example(f, 0, 0, dir);
    pid_t b = run_example(f, rank1_host, 1, dir);
    EXPECT_EQ(wait_exit(a, 30), 0) << "rank 0, rank 1 on host " << rank1_host;
    EXPECT_EQ(wait_exit(b, 30), 0) << "rank 1 on host " << rank1_host;
    std::filesystem::remove_all(dir);
  }
}

// Launched by Open MPI's mpirun, the example bootstraps through PMIx (PMIX_RANK set).
TEST(LiveExample, RunsUnderMpirunThroughPmix) {
  if (system("command -v mpirun >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "mpirun not installed (Debian: openmpi-bin)";
  LiveFabricUnderTest f(1);
  ASSERT_TRUE(f.bring_up().ok());
  const std::string exe =
      (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "glex_example").string();
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    const std::string env = "GLEX_FABRIC=" + f.name();
    // Under the sanitizer build: leaks inside the PMIx library are not ours to report.
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
    execlp("mpirun", "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2", "-x",
           env.c_str(), "-x", "ASAN_OPTIONS", exe.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  EXPECT_EQ(wait_exit(pid, 60), 0);
}

}  // namespace
}  // namespace galaxy::live::testing
