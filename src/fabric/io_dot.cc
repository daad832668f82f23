// Graphviz dot: what write_dot() produces plus a practical subset of the language
// (docs/topologies.md, "Graphviz dot").
#include <fmt/format.h>

#include <cctype>
#include <charconv>
#include <map>
#include <optional>
#include <unordered_map>

#include "fabric/io.h"
#include "fabric/io_util.h"

namespace galaxy::fabric {

namespace {

using detail::file_error;

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

enum class Tok : uint8_t {
  kId,
  kLBrace,
  kRBrace,
  kLBracket,
  kRBracket,
  kEq,
  kSemi,
  kComma,
  kColon,
  kEdgeOp,
  kEnd
};

struct Token {
  Tok type;
  std::string text;
  size_t line;
  size_t column;
};

class Lexer {
 public:
  Lexer(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  Result<std::vector<Token>> run() {
    std::vector<Token> out;
    bool line_start = true;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '\n') {
        advance();
        line_start = true;
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r') {
        advance();
        continue;
      }
      // '#' lines are C-preprocessor output, which dot discards.
      if ((c == '#' && line_start) || (c == '/' && peek(1) == '/')) {
        while (pos_ < text_.size() && text_[pos_] != '\n') advance();
        continue;
      }
      line_start = false;
      if (c == '/' && peek(1) == '*') {
        size_t line = line_, column = column_;
        advance(2);
        while (pos_ < text_.size() && !(text_[pos_] == '*' && peek(1) == '/')) advance();
        if (pos_ >= text_.size())
          return file_error(Code::kMalformed, 3800, source_, line, column,
                            "comment '/*' is never closed");
        advance(2);
        continue;
      }
      Token t{Tok::kId, "", line_, column_};
      if (c == '"') {
        advance();
        while (pos_ < text_.size() && text_[pos_] != '"') {
          if (text_[pos_] == '\\' && (peek(1) == '"' || peek(1) == '\\')) advance();
          t.text += text_[pos_];
          advance();
        }
        if (pos_ >= text_.size())
          return file_error(Code::kMalformed, 3801, source_, t.line, t.column,
                            "quoted string is never closed");
        advance();
        out.push_back(std::move(t));
        continue;
      }
      if (c == '-' && (peek(1) == '-' || peek(1) == '>')) {
        t.type = Tok::kEdgeOp;
        t.text = std::string(text_.substr(pos_, 2));
        advance(2);
        out.push_back(std::move(t));
        continue;
      }
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
          static_cast<unsigned char>(c) >= 0x80) {
        while (pos_ < text_.size()) {
          char d = text_[pos_];
          if (!(std::isalnum(static_cast<unsigned char>(d)) || d == '_' || d == '.' ||
                static_cast<unsigned char>(d) >= 0x80 || (d == '-' && t.text.empty())))
            break;
          t.text += d;
          advance();
        }
        out.push_back(std::move(t));
        continue;
      }
      static constexpr std::pair<char, Tok> kPunct[] = {
          {'{', Tok::kLBrace}, {'}', Tok::kRBrace}, {'[', Tok::kLBracket}, {']', Tok::kRBracket},
          {'=', Tok::kEq},     {';', Tok::kSemi},   {',', Tok::kComma},    {':', Tok::kColon}};
      bool found = false;
      for (auto [ch, type] : kPunct)
        if (c == ch) {
          t.type = type;
          t.text = std::string(1, c);
          found = true;
        }
      if (!found)
        return file_error(Code::kMalformed, 3802, source_, line_, column_,
                          fmt::format("unexpected character '{}'", c));
      advance();
      out.push_back(std::move(t));
    }
    out.push_back(Token{Tok::kEnd, "end of file", line_, column_});
    return out;
  }

 private:
  char peek(size_t ahead) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  void advance(size_t n = 1) {
    for (size_t i = 0; i < n && pos_ < text_.size(); ++i, ++pos_) {
      if (text_[pos_] == '\n') {
        ++line_;
        column_ = 1;
      } else {
        ++column_;
      }
    }
  }

  std::string_view text_;
  std::string_view source_;
  size_t pos_ = 0;
  size_t line_ = 1;
  size_t column_ = 1;
};

using Attrs = std::vector<std::pair<std::string, Token>>;  // name -> value token

struct DotNode {
  std::string id;
  std::map<std::string, Token> attrs;
  size_t line = 0;  // first mention
};

struct DotEdgeEnd {
  std::string node;
  std::optional<Token> port;  // from "n0:3"
  size_t line = 0;
  size_t column = 0;
};

struct DotEdge {
  DotEdgeEnd tail, head;
  Attrs attrs;
  size_t line;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, std::string_view source)
      : tokens_(std::move(tokens)), source_(source) {}

  Status parse() {
    if (at_id("strict")) ++pos_;
    if (!at_id("graph") && !at_id("digraph")) return expected("'graph' or 'digraph'");
    ++pos_;
    if (cur().type == Tok::kId) ++pos_;
    if (cur().type != Tok::kLBrace) return expected("'{'");
    ++pos_;
    GALAXY_TRY(statements());
    if (cur().type != Tok::kRBrace) return expected("'}'");
    ++pos_;
    if (cur().type != Tok::kEnd) return expected("end of file after the graph's '}'");
    return {};
  }

  std::vector<DotNode> nodes;
  std::unordered_map<std::string, uint32_t> index;
  std::vector<DotEdge> edges;

 private:
  const Token& cur() const { return tokens_[pos_]; }
  bool at_id(const char* word) const { return cur().type == Tok::kId && cur().text == word; }
  Error expected(const std::string& what) const {
    return file_error(Code::kMalformed, 3803, source_, cur().line, cur().column,
                      fmt::format("expected {}, found '{}'", what, cur().text));
  }

  Status statements() {
    while (cur().type != Tok::kRBrace && cur().type != Tok::kEnd) {
      GALAXY_TRY(statement());
      while (cur().type == Tok::kSemi || cur().type == Tok::kComma) ++pos_;
    }
    return {};
  }

  Status statement() {
    if (at_id("subgraph") || cur().type == Tok::kLBrace) {
      if (at_id("subgraph")) {
        ++pos_;
        if (cur().type == Tok::kId) ++pos_;
      }
      if (cur().type != Tok::kLBrace) return expected("'{' after 'subgraph'");
      // Bounded so that hostile input cannot exhaust the stack.
      if (++depth_ > kMaxDepth)
        return file_error(Code::kMalformed, 3811, source_, cur().line, cur().column,
                          fmt::format("subgraphs nested deeper than {}", kMaxDepth));
      ++pos_;
      GALAXY_TRY(statements());
      --depth_;
      if (cur().type != Tok::kRBrace) return expected("'}' closing the subgraph");
      ++pos_;
      return {};
    }
    if (cur().type != Tok::kId) return expected("a statement");
    if (at_id("graph") || at_id("edge") || at_id("node")) {
      bool node_defaults = at_id("node");
      ++pos_;
      Attrs attrs;
      GALAXY_TRY(attr_lists(attrs));
      if (node_defaults)
        for (auto& [k, v] : attrs) node_defaults_[k] = v;
      return {};
    }
    Token first = cur();
    ++pos_;
    if (cur().type == Tok::kEq) {  // graph attribute "rankdir=LR"
      ++pos_;
      if (cur().type != Tok::kId) return expected("a value after '='");
      ++pos_;
      return {};
    }
    DotEdgeEnd end{first.text, std::nullopt, first.line, first.column};
    GALAXY_TRY(port_suffix(end));
    if (cur().type != Tok::kEdgeOp) {
      Attrs attrs;
      GALAXY_TRY(attr_lists(attrs));
      DotNode& node = mention(end);
      for (auto& [k, v] : attrs) node.attrs.insert_or_assign(k, v);
      return {};
    }
    std::vector<DotEdgeEnd> chain{end};
    while (cur().type == Tok::kEdgeOp) {
      ++pos_;
      if (cur().type != Tok::kId) return expected("a node name after the edge operator");
      DotEdgeEnd next{cur().text, std::nullopt, cur().line, cur().column};
      ++pos_;
      GALAXY_TRY(port_suffix(next));
      chain.push_back(next);
    }
    Attrs attrs;
    GALAXY_TRY(attr_lists(attrs));
    for (auto& e : chain) mention(e);
    for (size_t i = 0; i + 1 < chain.size(); ++i)
      edges.push_back(DotEdge{chain[i], chain[i + 1], attrs, first.line});
    return {};
  }

  // "n0:3" (a dot port); a compass point after it ("n0:3:n") is accepted and ignored.
  Status port_suffix(DotEdgeEnd& end) {
    if (cur().type != Tok::kColon) return {};
    ++pos_;
    if (cur().type != Tok::kId) return expected("a port after ':'");
    end.port = cur();
    ++pos_;
    if (cur().type == Tok::kColon) {
      ++pos_;
      if (cur().type != Tok::kId) return expected("a compass point after ':'");
      ++pos_;
    }
    return {};
  }

  Status attr_lists(Attrs& attrs) {
    while (cur().type == Tok::kLBracket) {
      ++pos_;
      while (cur().type != Tok::kRBracket) {
        if (cur().type != Tok::kId) return expected("an attribute name or ']'");
        std::string name = cur().text;
        ++pos_;
        if (cur().type != Tok::kEq) return expected(fmt::format("'=' after attribute '{}'", name));
        ++pos_;
        if (cur().type != Tok::kId) return expected(fmt::format("a value for '{}'", name));
        attrs.emplace_back(name, cur());
        ++pos_;
        while (cur().type == Tok::kComma || cur().type == Tok::kSemi) ++pos_;
      }
      ++pos_;
    }
    return {};
  }

  DotNode& mention(const DotEdgeEnd& end) {
    auto [it, inserted] = index.try_emplace(end.node, static_cast<uint32_t>(nodes.size()));
    if (inserted) nodes.push_back(DotNode{end.node, node_defaults_, end.line});
    return nodes[it->second];
  }

  std::vector<Token> tokens_;
  std::string_view source_;
  size_t pos_ = 0;
  std::map<std::string, Token> node_defaults_;
  static constexpr int kMaxDepth = 64;
  int depth_ = 0;
};

Result<int64_t> int_attr(const Token& value, const std::string& what, int64_t min, int64_t max,
                         std::string_view source) {
  int64_t v = 0;
  const std::string& s = value.text;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size())
    return file_error(Code::kMalformed, 3804, source, value.line, value.column,
                      fmt::format("{} = '{}' is not an integer", what, s));
  if (v < min || v > max)
    return file_error(Code::kOutOfRange, 3805, source, value.line, value.column,
                      fmt::format("{} = {} is outside [{}, {}]", what, v, min, max));
  return v;
}

Status add_node(Topology& t, const DotNode& n, std::string_view source) {
  auto find = [&](const char* key) -> const Token* {
    auto it = n.attrs.find(key);
    return it == n.attrs.end() ? nullptr : &it->second;
  };
  const Token* kind_tok = find("kind");
  if (kind_tok == nullptr)
    return file_error(Code::kMalformed, 3806, source, n.line, 0,
                      fmt::format("node {} has no kind attribute (kind=nic or kind=nrc)", n.id));
  if (kind_tok->text != "nic" && kind_tok->text != "nrc")
    return file_error(Code::kMalformed, 3807, source, kind_tok->line, kind_tok->column,
                      fmt::format("node {}: kind = '{}' is not nic or nrc", n.id, kind_tok->text));
  NodeKind kind = kind_tok->text == "nic" ? NodeKind::kNic : NodeKind::kNrc;
  int64_t ports = 1;
  if (const Token* tok = find("ports")) {
    auto v = int_attr(*tok, fmt::format("node {}: ports", n.id), 1, kMaxTopologyPorts, source);
    GALAXY_TRY(v);
    ports = *v;
  } else if (kind == NodeKind::kNrc) {
    return file_error(Code::kMalformed, 3808, source, n.line, 0,
                      fmt::format("node {} (an nrc) has no ports attribute", n.id));
  }
  Location loc;
  const std::pair<const char*, int32_t*> fields[] = {{"cabinet", &loc.cabinet},
                                                     {"chassis", &loc.chassis},
                                                     {"switch_index", &loc.switch_index},
                                                     {"nrc_index", &loc.nrc_index}};
  for (auto [key, field] : fields)
    if (const Token* tok = find(key)) {
      auto v = int_attr(*tok, fmt::format("node {}: {}", n.id, key), -1, INT32_MAX, source);
      GALAXY_TRY(v);
      *field = static_cast<int32_t>(*v);
    }
  if (const Token* tok = find("role")) loc.role = tok->text;
  int64_t level = 0;
  if (const Token* tok = find("level")) {
    auto v = int_attr(*tok, fmt::format("node {}: level", n.id), 0, 255, source);
    GALAXY_TRY(v);
    level = *v;
  }
  const Token* label = find("label");
  auto id = t.add_node(kind, static_cast<uint32_t>(ports), label ? label->text : n.id,
                       std::move(loc), static_cast<uint8_t>(level));
  if (!id.ok()) return detail::at_line(id.error(), source, n.line);
  return {};
}

// The port of one end of an edge: "n0:3", or the tail/head attribute.
Result<uint8_t> edge_port(const DotEdge& e, bool tail, const Topology& t, uint32_t node,
                          std::string_view source) {
  const DotEdgeEnd& end = tail ? e.tail : e.head;
  const Token* tok = end.port ? &*end.port : nullptr;
  for (const auto& [k, v] : e.attrs)
    if (k == (tail ? "taillabel" : "headlabel") || k == (tail ? "tailport" : "headport")) tok = &v;
  if (tok == nullptr)
    return file_error(
        Code::kMalformed, 3809, source, e.line, 0,
        fmt::format("edge {} -- {} gives no port for {} (use {} or {}:<port>)", e.tail.node,
                    e.head.node, end.node, tail ? "taillabel" : "headlabel", end.node));
  auto v = int_attr(*tok, fmt::format("port of {}", end.node), 0, 255, source);
  GALAXY_TRY(v);
  if (*v >= t.num_ports(node))
    return file_error(
        Code::kOutOfRange, 3810, source, tok->line, 0,
        fmt::format("port {} of node {} exceeds its {} ports", *v, end.node, t.num_ports(node)));
  return static_cast<uint8_t>(*v);
}

}  // namespace

std::string write_dot(const Topology& t) {
  std::string out = "graph fabric {\n";
  for (uint32_t v = 0; v < t.num_nodes(); ++v) {
    const Location& loc = t.location(v);
    out += fmt::format("  n{} [label={}, kind={}, ports={}, level={}", v, quote(t.name(v)),
                       node_kind_name(t.kind(v)), t.num_ports(v), t.level(v));
    const std::pair<const char*, int32_t> fields[] = {{"cabinet", loc.cabinet},
                                                      {"chassis", loc.chassis},
                                                      {"switch_index", loc.switch_index},
                                                      {"nrc_index", loc.nrc_index}};
    for (auto [key, value] : fields)
      if (value != -1) out += fmt::format(", {}={}", key, value);
    if (!loc.role.empty()) out += fmt::format(", role={}", quote(loc.role));
    out += "];\n";
  }
  for (uint32_t v = 0; v < t.num_nodes(); ++v)
    for (uint32_t p = 0; p < t.num_ports(v); ++p) {
      auto q = t.peer({v, static_cast<uint8_t>(p)});
      if (!q || q->node < v || (q->node == v && q->port < p)) continue;
      out += fmt::format("  n{} -- n{} [taillabel={}, headlabel={}];\n", v, q->node, p, q->port);
    }
  out += "}\n";
  return out;
}

Result<Topology> read_dot(std::string_view text, std::string_view source) {
  auto tokens = Lexer(text, source).run();
  GALAXY_TRY(tokens);
  Parser parser(std::move(tokens).value(), source);
  GALAXY_TRY(parser.parse());
  Topology t;
  for (const DotNode& n : parser.nodes) GALAXY_TRY(add_node(t, n, source));
  for (const DotEdge& e : parser.edges) {
    uint32_t a = parser.index.at(e.tail.node);
    uint32_t b = parser.index.at(e.head.node);
    auto pa = edge_port(e, true, t, a, source);
    GALAXY_TRY(pa);
    auto pb = edge_port(e, false, t, b, source);
    GALAXY_TRY(pb);
    Status s = t.connect({a, *pa}, {b, *pb});
    if (!s.ok()) return detail::at_line(s.error(), source, e.line);
  }
  return t;
}

}  // namespace galaxy::fabric
