// fastattn-sass: SASS auditor for fastattn builds. See docs/sass/README.md.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "control_code.h"
#include "diff.h"
#include "gates.h"
#include "loader.h"
#include "report.h"
#include "rules.h"
#include "summary.h"
#include "toolchain.h"

using namespace fastattn::sass;

namespace {

constexpr int kExitUsage = 2;

const char* kUsage =
    "usage:\n"
    "  fastattn-sass report  BINARY [--kernel REGEX] [--annotate] [--all-opcodes]\n"
    "  fastattn-sass diff    OLD NEW [--kernel REGEX] [--pin OP,OP,...] [--all-opcodes] [--rename FROM=TO]...\n"
    "  fastattn-sass gate    --rules FILE BINARY... [--verbose]\n"
    "  fastattn-sass summary [--label NAME] BINARY... (markdown on stdout)\n"
    "  fastattn-sass decode  HIGH_WORD_HEX              (control code of one instruction)\n"
    "  fastattn-sass where                              (which cuobjdump/nvdisasm are used)\n"
    "BINARY: .so, .a, .o, executable or .cubin containing sm_70+ SASS.\n";

struct Args {
  std::vector<std::string> positional;
  std::string kernel = ".*";
  std::string rules;
  std::vector<std::string> labels;
  std::vector<std::string> pinned;
  std::vector<std::pair<std::string, std::string>> renames;
  bool annotate = false, all_opcodes = false, verbose = false;
};

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');)
    if (!t.empty()) out.push_back(t);
  return out;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(s + " needs a value");
      return argv[++i];
    };
    if (s == "--kernel") a.kernel = value();
    else if (s == "--rules") a.rules = value();
    else if (s == "--label") a.labels.push_back(value());
    else if (s == "--pin") a.pinned = split_commas(value());
    else if (s == "--rename") {
      const std::string v = value();
      const auto eq = v.find('=');
      if (eq == std::string::npos || eq == 0) throw std::invalid_argument("--rename takes FROM=TO (mangled substrings)");
      a.renames.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    } else if (s == "--annotate") a.annotate = true;
    else if (s == "--all-opcodes") a.all_opcodes = true;
    else if (s == "--verbose") a.verbose = true;
    else if (s.rfind("--", 0) == 0) throw std::invalid_argument("unknown option " + s);
    else a.positional.push_back(s);
  }
  return a;
}

std::vector<Kernel> load_filtered(const std::string& path, const std::string& pattern) {
  const std::regex re(pattern);
  std::vector<Kernel> out;
  for (auto& k : load_kernels(path))
    if (std::regex_search(k.demangled, re)) out.push_back(std::move(k));
  return out;
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int cmd_report(const Args& a) {
  if (a.positional.size() != 1) throw std::invalid_argument("report takes one BINARY");
  const auto kernels = load_filtered(a.positional[0], a.kernel);
  if (kernels.empty()) std::cout << "no kernels in " << a.positional[0] << "\n";
  for (const auto& k : kernels) print_report(std::cout, k, {a.annotate, a.all_opcodes});
  return 0;
}

int cmd_diff(const Args& a) {
  if (a.positional.size() != 2) throw std::invalid_argument("diff takes OLD and NEW");
  const auto changed = print_diff(std::cout, load_filtered(a.positional[0], a.kernel),
                                  load_filtered(a.positional[1], a.kernel),
                                  {a.pinned, a.all_opcodes, a.renames});
  std::cout << changed << " kernel(s) changed\n";
  return 0;
}

int cmd_gate(const Args& a) {
  if (a.rules.empty() || a.positional.empty())
    throw std::invalid_argument("gate needs --rules FILE and at least one BINARY");
  const auto rules = load_rules(a.rules);
  std::vector<Kernel> kernels;
  for (const auto& p : a.positional) {
    auto ks = load_kernels(p);
    std::cout << "sass gates: " << p << ": " << ks.size() << " kernels\n";
    for (auto& k : ks) kernels.push_back(std::move(k));
  }
  const auto results = evaluate_gates(rules, kernels);
  return print_gate_results(std::cout, results, kernels.size(), a.verbose) == 0 ? 0 : 1;
}

int cmd_summary(const Args& a) {
  if (a.positional.empty()) throw std::invalid_argument("summary needs at least one BINARY");
  std::vector<SummaryInput> inputs;
  for (std::size_t i = 0; i < a.positional.size(); ++i) {
    const auto& p = a.positional[i];
    inputs.push_back({i < a.labels.size() ? a.labels[i] : base_name(p), load_filtered(p, a.kernel)});
  }
  print_summary(std::cout, inputs);
  return 0;
}

int cmd_decode(const Args& a) {
  if (a.positional.size() != 1) throw std::invalid_argument("decode takes one hex word");
  const auto cc = decode_control(std::strtoull(a.positional[0].c_str(), nullptr, 16));
  std::cout << format_control(cc) << " reuse=" << format_reuse(cc.reuse) << "\n";
  return 0;
}

int cmd_where() {
  const auto c = find_cuobjdump(), n = find_nvdisasm();
  std::cout << "cuobjdump " << (c ? *c : "NOT FOUND") << "\nnvdisasm  " << (n ? *n : "NOT FOUND")
            << "\n";
  return c ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  const std::string cmd = argv[1];
  try {
    const Args a = parse_args(argc, argv);
    if (cmd == "report") return cmd_report(a);
    if (cmd == "diff") return cmd_diff(a);
    if (cmd == "gate") return cmd_gate(a);
    if (cmd == "summary") return cmd_summary(a);
    if (cmd == "decode") return cmd_decode(a);
    if (cmd == "where") return cmd_where();
    std::cerr << kUsage;
    return kExitUsage;
  } catch (const std::invalid_argument& e) {
    std::cerr << "fastattn-sass: " << e.what() << "\n" << kUsage;
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "fastattn-sass: error: " << e.what() << "\n";
    return kExitUsage;
  }
}
