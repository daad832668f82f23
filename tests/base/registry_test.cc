#include "base/registry.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace galaxy {
namespace {

using Builder = std::function<int(int)>;

Registry<Builder> make_registry() {
  Registry<Builder> r("topology builder");
  r.add({"line", "a chain of NRCs", {{"n", "int", "4", "number of NRCs"}}, {}, [](int x) {
           return x + 1;
         }});
  r.add({"fattree",
         "k-ary fat tree",
         {{"k", "int", "", "switch radix"}, {"levels", "int", "3", "tree levels"}},
         {"links"},
         [](int x) { return x * 2; }});
  return r;
}

TEST(RegistryTest, FindsEntriesByName) {
  auto r = make_registry();
  EXPECT_EQ(r.kind(), "topology builder");
  auto e = r.find("fattree");
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ((*e)->name, "fattree");
  EXPECT_EQ((*e)->factory(5), 10);
  EXPECT_EQ((*e)->statistics, (std::vector<std::string>{"links"}));
  EXPECT_EQ(r.find("line").value()->factory(5), 6);
}

TEST(RegistryTest, UnknownNameListsTheKnownOnes) {
  auto r = make_registry();
  auto e = r.find("torus");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, Code::kNotFound);
  EXPECT_EQ(e.error().message, "unknown topology builder 'torus' (known: fattree, line)");
  EXPECT_FALSE(r.find("").ok());
  EXPECT_FALSE(r.find("Line").ok());

  Registry<Builder> empty("routing engine");
  auto none = empty.find("updn");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("unknown routing engine 'updn'"), std::string::npos);
}

TEST(RegistryTest, ListIsSortedAndAddReplaces) {
  auto r = make_registry();
  auto l = r.list();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0]->name, "fattree");
  EXPECT_EQ(l[1]->name, "line");
  r.add({"line", "replaced", {}, {}, [](int) { return 0; }});
  ASSERT_EQ(r.list().size(), 2u);
  EXPECT_EQ(r.find("line").value()->summary, "replaced");
}

TEST(RegistryTest, DescribeListsEntriesAndParameters) {
  auto r = make_registry();
  EXPECT_EQ(r.describe(),
            "  fattree      k-ary fat tree\n"
            "      k=<int>      switch radix (required)\n"
            "      levels=<int>      tree levels (default 3)\n"
            "  line         a chain of NRCs\n"
            "      n=<int>      number of NRCs (default 4)\n");
}

}  // namespace
}  // namespace galaxy
