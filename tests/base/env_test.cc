#include "base/env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <set>
#include <string>

namespace galaxy {
namespace {

// Sets a variable for one test and puts it back.
struct ScopedEnv {
  ScopedEnv(const char* n, const char* v) : name(n) {
    if (const char* old = ::secure_getenv(n)) saved = old;
    ::setenv(n, v, 1);
  }
  ~ScopedEnv() {
    if (saved)
      ::setenv(name, saved->c_str(), 1);
    else
      ::unsetenv(name);
  }
  const char* name;
  std::optional<std::string> saved;
};

TEST(Env, TheTableDescribesEachVariableOnceWithItsDefaultInRange) {
  std::set<std::string_view> names;
  for (const EnvVar& v : env_table()) {
    EXPECT_TRUE(names.insert(v.name).second) << v.name;
    EXPECT_FALSE(v.help.empty()) << v.name;
    if (v.type == EnvType::kInt) {
      EXPECT_LE(v.min, v.max) << v.name;
      if (!v.default_value.empty()) {
        const int64_t d = std::stoll(std::string(v.default_value));
        EXPECT_TRUE(d >= v.min && d <= v.max) << v.name;
      }
    }
    EXPECT_NE(describe_env().find(v.name), std::string::npos);
  }
  EXPECT_EQ(find_env("NOT_A_GALAXY_VARIABLE"), nullptr);
  EXPECT_FALSE(env_string("NOT_A_GALAXY_VARIABLE"));
}

TEST(Env, StringsFallBackToTheTablesDefaultWhenUnsetOrEmpty) {
  {
    ScopedEnv e("GLEX_FABRIC", "sim:line:n=2");
    EXPECT_EQ(env_string_or_default("GLEX_FABRIC"), "sim:line:n=2");
  }
  {
    ScopedEnv e("GLEX_FABRIC", "");
    EXPECT_EQ(env_string_or_default("GLEX_FABRIC"), "galaxy");
  }
  EXPECT_EQ(env_string_or_default("NOT_A_GALAXY_VARIABLE"), "");
}

TEST(Env, IntegersAreCheckedAgainstTheirRangeAndTheErrorNamesTheVariable) {
  {
    ScopedEnv e("GLEX_SPIN_US", "120");
    EXPECT_EQ(env_int_or_default("GLEX_SPIN_US").value(), 120);
  }
  EXPECT_EQ(env_int_or_default("GLEX_SPIN_US").value(), 50);  // the table's default
  for (const char* bad : {"fast", "12x", "-1", "1000001", " 5"}) {
    ScopedEnv e("GLEX_SPIN_US", bad);
    auto r = env_int("GLEX_SPIN_US");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().id, 16);
    EXPECT_NE(r.error().message.find("GLEX_SPIN_US"), std::string::npos);
    EXPECT_NE(r.error().message.find(bad), std::string::npos);
  }
  ScopedEnv empty("GLEX_NIC", "");
  EXPECT_FALSE(env_int("GLEX_NIC").value());  // empty is unset
  EXPECT_FALSE(env_string("GLEX_NIC"));
}

}  // namespace
}  // namespace galaxy
