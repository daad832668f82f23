// Name-keyed registries that describe themselves (SST / opa-fm / UCX transports): routing
// engines, topology builders, engines and traffic loads register {name, factory, documented
// parameters, statistics}; `--help` and the GUI list them from here. No if-chains of strings.
#pragma once

#include <fmt/format.h>

#include <map>
#include <string>
#include <vector>

#include "base/status.h"

namespace galaxy {

struct ParamDoc {
  std::string name;
  std::string type;           // "int", "double", "string", "dims" ...
  std::string default_value;  // "" = required
  std::string doc;
};

template <class Factory>
struct RegistryEntry {
  std::string name;
  std::string summary;
  std::vector<ParamDoc> params;
  std::vector<std::string> statistics;  // names of the statistics an instance reports
  Factory factory;
};

template <class Factory>
class Registry {
 public:
  using Entry = RegistryEntry<Factory>;

  explicit Registry(std::string kind) : kind_(std::move(kind)) {}

  void add(Entry e) { entries_[e.name] = std::move(e); }

  Result<const Entry*> find(const std::string& name) const {
    auto it = entries_.find(name);
    if (it == entries_.end()) {
      std::string names;
      for (const auto& [n, e] : entries_) names += (names.empty() ? "" : ", ") + n;
      return make_error(Code::kNotFound, 8,
                        fmt::format("unknown {} '{}' (known: {})", kind_, name, names));
    }
    return &it->second;
  }

  std::vector<const Entry*> list() const {
    std::vector<const Entry*> out;
    for (const auto& [n, e] : entries_) out.push_back(&e);
    return out;
  }

  // Human-readable description for --help.
  std::string describe() const {
    std::string out;
    for (const auto& [n, e] : entries_) {
      out += fmt::format("  {:<12} {}\n", n, e.summary);
      for (const auto& p : e.params)
        out += fmt::format(
            "      {}={:<10} {}{}\n", p.name, "<" + p.type + ">", p.doc,
            p.default_value.empty() ? " (required)" : " (default " + p.default_value + ")");
    }
    return out;
  }

  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
  std::map<std::string, Entry> entries_;
};

}  // namespace galaxy
