#include "base/sysinfo.h"

#include <gtest/gtest.h>

namespace galaxy {
namespace {

// The fabric daemon polls before sleeping only while the machine's runnable tasks fit its cores
// (engine/live/daemon.cc); they come from the fourth field of /proc/loadavg.
TEST(SysInfo, RunnableTasksComeFromTheFourthFieldOfLoadavg) {
  EXPECT_EQ(runnable_of_loadavg("0.52 0.58 0.59 3/412 12345\n"), 3);
  EXPECT_EQ(runnable_of_loadavg("12.00 8.10 4.05 117/2048 99"), 117);
  EXPECT_EQ(runnable_of_loadavg("  0.00  0.00  0.00   1/90 7"), 1);
  // Anything else is unknown, never a guess.
  EXPECT_EQ(runnable_of_loadavg(""), -1);
  EXPECT_EQ(runnable_of_loadavg("0.52 0.58 0.59"), -1);
  EXPECT_EQ(runnable_of_loadavg("0.52 0.58 0.59 x/412 1"), -1);
  EXPECT_EQ(runnable_of_loadavg("0.52 0.58 0.59 3 412"), -1);
  EXPECT_EQ(runnable_of_loadavg("0.52 0.58 0.59 99999999999999/4 1"), -1);
  // This machine's: at least the test itself runs.
  EXPECT_GE(runnable_tasks(), 1);
}

}  // namespace
}  // namespace galaxy
