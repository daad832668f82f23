#include "base/spec.h"

#include <gtest/gtest.h>

#include <string>

namespace galaxy {
namespace {

// The error has `code` and its message contains every one of `parts`.
template <class T>
void expect_error(const Result<T>& r, Code code, std::initializer_list<std::string> parts) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, code) << r.error().to_string();
  for (const auto& p : parts)
    EXPECT_NE(r.error().message.find(p), std::string::npos)
        << "'" << p << "' not in: " << r.error().message;
}

TEST(SpecTest, ParsesNameAndParameters) {
  auto s = Spec::parse("fattree:k=24,levels=3");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->name, "fattree");
  EXPECT_TRUE(s->positional.empty());
  EXPECT_EQ(s->params.size(), 2u);
  EXPECT_TRUE(s->has("k"));
  EXPECT_FALSE(s->has("K"));
  EXPECT_EQ(s->get_int("k", 0, 1, 1000).value(), 24);
  EXPECT_EQ(s->get_int("levels", 0, 1, 10).value(), 3);
  EXPECT_EQ(s->get_string("levels", "x"), "3");
}

TEST(SpecTest, ParsesPositionalItems) {
  auto s = Spec::parse("torus:8x8x8");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->name, "torus");
  ASSERT_EQ(s->positional.size(), 1u);
  EXPECT_EQ(s->positional[0], "8x8x8");
  EXPECT_TRUE(s->params.empty());

  auto mixed = Spec::parse("torus:4x4,nics=2,,3");  // empty items are skipped
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->positional, (std::vector<std::string>{"4x4", "3"}));
  EXPECT_EQ(mixed->get_string("nics", ""), "2");
}

TEST(SpecTest, ParsesABareName) {
  for (const char* text : {"th2", "th2:"}) {
    auto s = Spec::parse(text);
    ASSERT_TRUE(s.ok()) << text;
    EXPECT_EQ(s->name, "th2");
    EXPECT_TRUE(s->positional.empty());
    EXPECT_TRUE(s->params.empty());
  }
  // The value keeps everything after the first '='.
  auto s = Spec::parse("load:expr=a=b");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->get_string("expr", ""), "a=b");
}

TEST(SpecTest, RejectsEmptyNameEmptyKeyAndDuplicateKey) {
  expect_error(Spec::parse(""), Code::kInvalidArgument, {"no name"});
  expect_error(Spec::parse(":k=2"), Code::kInvalidArgument, {"':k=2'", "no name"});
  expect_error(Spec::parse("line:=3"), Code::kInvalidArgument, {"empty key", "'=3'"});
  auto dup = Spec::parse("fattree:k=24,k=48");
  expect_error(dup, Code::kInvalidArgument, {"'k'", "twice"});
  EXPECT_EQ(dup.error().id, 3);
}

TEST(SpecTest, GetIntChecksRangeAndSyntaxNamingTheKey) {
  auto s = Spec::parse("fattree:k=24,levels=x3,neg=-5,big=99999999999999999999,empty=");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->get_int("absent", 7, 0, 1).value(), 7);  // fallback is not range-checked
  EXPECT_EQ(s->get_int("neg", 0, -10, 10).value(), -5);
  expect_error(s->get_int("k", 0, 1, 16), Code::kOutOfRange, {"k = 24", "[1, 16]"});
  expect_error(s->get_int("neg", 0, 0, 10), Code::kOutOfRange, {"neg = -5"});
  expect_error(s->get_int("levels", 0, 1, 10), Code::kInvalidArgument,
               {"levels = 'x3'", "not an integer"});
  auto big = s->get_int("big", 0, 0, INT64_MAX);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.error().message.find("big = "), std::string::npos) << big.error().message;
  expect_error(s->get_int("empty", 0, 0, 10), Code::kInvalidArgument, {"empty = ''"});
  auto trailing = Spec::parse("line:n=3x");
  expect_error(trailing->get_int("n", 0, 0, 10), Code::kInvalidArgument, {"n = '3x'"});
  EXPECT_EQ(trailing->get_int("n", 0, 0, 10).error().id, 4);

  EXPECT_EQ(parse_int("hops", "12", 0, 20).value(), 12);
  expect_error(parse_int("hops", "21", 0, 20), Code::kOutOfRange, {"hops = 21", "[0, 20]"});
}

TEST(SpecTest, GetDouble) {
  auto s = Spec::parse("load:rate=0.25,bad=1.5x,empty=");
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->get_double("rate", 1.0).value(), 0.25);
  EXPECT_DOUBLE_EQ(s->get_double("absent", 1.5).value(), 1.5);
  expect_error(s->get_double("bad", 0), Code::kInvalidArgument, {"bad = '1.5x'"});
  expect_error(s->get_double("empty", 0), Code::kInvalidArgument, {"empty = ''"});
}

TEST(SpecTest, CheckKnownListsTheKnownKeys) {
  auto s = Spec::parse("fattree:k=24,levles=3");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(Spec::parse("fattree:k=24,levels=3")->check_known({"k", "levels"}).ok());
  Status st = s->check_known({"k", "levels", "nics"});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Code::kInvalidArgument);
  EXPECT_EQ(st.error().message, "fattree: unknown parameter 'levles' (known: k, levels, nics)");
  Status none = s->check_known({});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("(known: none)"), std::string::npos) << none.error().message;
  // Positional items are not parameters.
  EXPECT_TRUE(Spec::parse("torus:8x8x8")->check_known({}).ok());
}

}  // namespace
}  // namespace galaxy
