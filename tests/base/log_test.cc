// The logger: levels, ids on the lines, rate limiting per id with a count of what was left out.
#include "base/log.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace galaxy::log {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    set_sink([this](std::string_view line) { lines_.emplace_back(line); });
  }
  void TearDown() override {
    set_sink({});
    ASSERT_TRUE(configure(Options{}).ok());
  }
  std::vector<std::string> lines_;
};

TEST_F(LogTest, LinesCarryProgramLevelAndId) {
  Options o;
  o.program = "galaxy-test";
  ASSERT_TRUE(configure(o).ok());
  set_sink([this](std::string_view line) { lines_.emplace_back(line); });
  warn(4823, "dropped: {} bytes", 18);
  info("started");
  ASSERT_EQ(lines_.size(), 2u);
  EXPECT_EQ(lines_[0].rfind("galaxy-test[", 0), 0u) << lines_[0];
  EXPECT_NE(lines_[0].find(" WARN E4823 dropped: 18 bytes"), std::string::npos) << lines_[0];
  EXPECT_NE(lines_[1].find(" INFO started"), std::string::npos) << lines_[1];
}

TEST_F(LogTest, LevelsBelowTheSetOneAreNotWritten) {
  Options o;
  o.level = Level::kWarn;
  ASSERT_TRUE(configure(o).ok());
  set_sink([this](std::string_view line) { lines_.emplace_back(line); });
  info("not shown");
  line(Level::kDebug, 7, "not shown");
  error(9, "shown");
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_NE(lines_[0].find("ERROR E9 shown"), std::string::npos);
}

TEST_F(LogTest, AStormOfOneIdIsCutToTheBurstThenCounted) {
  Options o;
  o.burst = 3;
  o.window_s = 0.2;
  ASSERT_TRUE(configure(o).ok());
  set_sink([this](std::string_view line) { lines_.emplace_back(line); });
  for (int i = 0; i < 50; ++i) warn(4800, "drop {}", i);
  warn(4801, "another id is not held back");
  ASSERT_EQ(lines_.size(), 4u);
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  warn(4800, "after the window");
  ASSERT_EQ(lines_.size(), 6u);
  EXPECT_NE(lines_[4].find("E4800 47 more lines like the last were suppressed"), std::string::npos)
      << lines_[4];
  EXPECT_NE(lines_[5].find("after the window"), std::string::npos);
}

TEST_F(LogTest, BadLevelsAndFilesAreRefusedWithTheirNames) {
  auto l = parse_level("loud");
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.error().message.find("'loud'"), std::string::npos);
  Options o;
  o.file = "/nonexistent-dir/x.log";
  Status st = configure(o);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("/nonexistent-dir/x.log"), std::string::npos);
}

}  // namespace
}  // namespace galaxy::log
