#include "base/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>

namespace galaxy {
namespace {

TEST(ErrorTest, ToStringIsIdCodeAndMessage) {
  EXPECT_EQ(make_error(Code::kInvalidArgument, 4, "x = 'y' is not an integer").to_string(),
            "E0004 invalid argument: x = 'y' is not an integer");
  EXPECT_EQ(make_error(Code::kMalformed, 1203, "hop_num = 21 exceeds the maximum 20").to_string(),
            "E1203 malformed: hop_num = 21 exceeds the maximum 20");
  EXPECT_EQ(make_error(Code::kCrcMismatch, 65535, "m").to_string(), "E65535 crc mismatch: m");
}

TEST(ErrorTest, EveryCodeHasADistinctName) {
  std::set<std::string> names;
  for (int c = 0; c <= static_cast<int>(Code::kResourceExhausted); ++c) {
    std::string name = code_name(static_cast<Code>(c));
    EXPECT_NE(name, "unknown") << c;
    EXPECT_TRUE(names.insert(name).second) << name;
  }
  EXPECT_STREQ(code_name(Code::kOk), "ok");
  EXPECT_STREQ(code_name(Code::kIoError), "i/o error");
}

TEST(StatusTest, OkAndError) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_TRUE(static_cast<bool>(ok));
  EXPECT_EQ(ok.to_string(), "ok");
  EXPECT_TRUE(Status::ok_status().ok());

  Status bad = make_error(Code::kTimeout, 42, "no answer from chip 7");
  EXPECT_FALSE(bad.ok());
  EXPECT_FALSE(static_cast<bool>(bad));
  EXPECT_EQ(bad.error().code, Code::kTimeout);
  EXPECT_EQ(bad.error().id, 42);
  EXPECT_EQ(bad.to_string(), "E0042 timeout: no answer from chip 7");
}

TEST(ResultTest, ValueAndError) {
  Result<std::string> r = std::string("fattree");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value(), "fattree");
  EXPECT_EQ(*r, "fattree");
  EXPECT_EQ(r->size(), 7u);
  EXPECT_TRUE(r.status().ok());
  r.value() += "2";
  EXPECT_EQ(*r, "fattree2");

  Result<std::string> e = make_error(Code::kNotFound, 8, "unknown builder 'x'");
  ASSERT_FALSE(e.ok());
  EXPECT_FALSE(static_cast<bool>(e));
  EXPECT_EQ(e.error().code, Code::kNotFound);
  EXPECT_EQ(e.error().message, "unknown builder 'x'");
  EXPECT_EQ(e.status().to_string(), "E0008 not found: unknown builder 'x'");
}

TEST(ResultTest, MovesOutMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);
}

Result<int> half(int v) {
  if (v % 2 != 0) return make_error(Code::kInvalidArgument, 100, "odd");
  return v / 2;
}

Status check_positive(int v) {
  if (v <= 0) return make_error(Code::kOutOfRange, 101, "not positive");
  return {};
}

// Each GALAXY_TRY returns the first error unchanged; `reached` records how far execution got.
Result<int> quarter(int v, int& reached) {
  reached = 0;
  GALAXY_TRY(check_positive(v));
  reached = 1;
  auto h = half(v);
  GALAXY_TRY(h);
  reached = 2;
  auto q = half(*h);
  GALAXY_TRY(q);
  reached = 3;
  return *q;
}

Status quarter_status(int v) {
  int reached = 0;
  GALAXY_TRY(quarter(v, reached));
  return {};
}

TEST(GalaxyTryTest, PropagatesTheFirstErrorAndStops) {
  int reached = -1;
  auto r = quarter(8, reached);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 2);
  EXPECT_EQ(reached, 3);

  r = quarter(-4, reached);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, 101);
  EXPECT_EQ(reached, 0);

  r = quarter(6, reached);  // 6 / 2 = 3 is odd
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().id, 100);
  EXPECT_EQ(r.error().code, Code::kInvalidArgument);
  EXPECT_EQ(reached, 2);

  // From a Result into a function returning Status.
  EXPECT_TRUE(quarter_status(4).ok());
  Status s = quarter_status(3);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.to_string(), "E0100 invalid argument: odd");
}

}  // namespace
}  // namespace galaxy
