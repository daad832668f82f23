// The fabric tests' way to build a topology from a builder spec: a spec that does not build fails
// the test and yields an empty topology.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "fabric/builders.h"

namespace galaxy::fabric::testing {

inline Topology build(const std::string& spec) {
  auto t = build_topology(spec);
  EXPECT_TRUE(t.ok()) << spec << ": " << t.status().to_string();
  return t.ok() ? std::move(t).value() : Topology();
}

}  // namespace galaxy::fabric::testing
