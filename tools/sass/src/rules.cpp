#include "rules.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "text_util.h"

namespace fastattn::sass {

namespace {

int parse_limit(const std::string& s, int line) {
  std::size_t used = 0;
  int v = -1;
  try {
    v = std::stoi(s, &used);
  } catch (const std::exception&) {
  }
  if (used != s.size() || v < 0)
    throw RuleError("rules line " + std::to_string(line) + ": '" + s + "' is not a count");
  return v;
}

std::regex compile(const std::string& pattern, int line) {
  try {
    return std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw RuleError("rules line " + std::to_string(line) + ": bad regex '" + pattern + "'");
  }
}

Rule parse_line(std::vector<std::string> w, int line, std::string text) {
  auto fail = [&](const std::string& why) {
    throw RuleError("rules line " + std::to_string(line) + ": " + why + ": " + text);
  };
  Rule r;
  r.line = line;
  r.text = std::move(text);
  if (!w.empty() && starts_with(w.back(), "except=")) {
    r.except_pattern = w.back().substr(7);
    r.except = compile(r.except_pattern, line);
    w.pop_back();
  }
  if (w.size() < 3) fail("expected <arch> <kernel-regex> <check>");
  if (w[0] != "*") {
    std::stringstream ss(w[0]);
    for (std::string a; std::getline(ss, a, ',');) r.archs.push_back(a);
  }
  r.kernel_pattern = w[1];
  r.kernel = compile(w[1], line);
  const std::string& check = w[2];
  const std::size_t nargs = w.size() - 3;
  if (check == "no-local" && nargs == 0) {
    r.kind = CheckKind::NoLocal;
  } else if (check == "require" && nargs == 1) {
    r.kind = CheckKind::Require;
    r.opcode = w[3];
  } else if (check == "max" && nargs == 2) {
    r.kind = CheckKind::MaxCount;
    r.opcode = w[3];
    r.limit = parse_limit(w[4], line);
  } else if (check == "max-regs" && nargs == 1) {
    r.kind = CheckKind::MaxRegs;
    r.limit = parse_limit(w[3], line);
  } else if ((check == "require-operand" || check == "forbid-operand") && nargs == 1) {
    r.kind = check == "require-operand" ? CheckKind::RequireOperand : CheckKind::ForbidOperand;
    r.operand_pattern = w[3];
    r.operand = compile(w[3], line);
  } else if (check == "pipelined-hgmma" && nargs == 0) {
    r.kind = CheckKind::PipelinedHgmma;
  } else {
    fail("unknown check or wrong argument count");
  }
  return r;
}

}  // namespace

bool Rule::applies_to(const std::string& arch, const std::string& demangled) const {
  if (!archs.empty() && std::find(archs.begin(), archs.end(), arch) == archs.end()) return false;
  if (!std::regex_search(demangled, kernel)) return false;
  return except_pattern.empty() || !std::regex_search(demangled, except);
}

std::vector<Rule> parse_rules(const std::string& text) {
  std::vector<Rule> rules;
  int line_no = 0;
  for (const auto raw : split_lines(text)) {
    ++line_no;
    std::string line(raw);
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    auto words = split_words(line);
    if (words.empty()) continue;
    rules.push_back(parse_line(std::move(words), line_no, std::string(trim(line))));
  }
  return rules;
}

std::vector<Rule> load_rules(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw RuleError("cannot read rules file " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_rules(ss.str());
}

}  // namespace fastattn::sass
