#include "loader.h"

#include <stdlib.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <set>

#include "sass_text.h"
#include "toolchain.h"

namespace fs = std::filesystem;

namespace fastattn::sass {

namespace {

constexpr std::uint16_t kElfMachineCuda = 190;

// Removes the scratch folder on every exit path.
struct TempDir {
  fs::path path;
  TempDir() {
    char name[] = "/tmp/fastattn-sass-XXXXXX";
    if (!::mkdtemp(name)) throw ToolError("cannot create a temporary folder");
    path = name;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string run_or_throw(const std::string& tool, std::vector<std::string> args,
                         const std::string& workdir = "") {
  args.insert(args.begin(), tool);
  const auto r = run_command(args, workdir);
  if (r.exit_code != 0) {
    std::string cmd;
    for (const auto& a : args) cmd += a + " ";
    throw ToolError("`" + cmd + "` failed (exit " + std::to_string(r.exit_code) + "): " + r.err);
  }
  return r.out;
}

// One cubin = one architecture; its three cuobjdump views are joined by kernel name.
void load_cubin(const std::string& tool, const std::string& cubin, std::vector<Kernel>& out) {
  const auto sass = parse_sass_listing(run_or_throw(tool, {"-sass", cubin}));
  const auto res = parse_resource_usage(run_or_throw(tool, {"-res-usage", cubin}));
  const auto spills = parse_spill_offsets(run_or_throw(tool, {"-elf", cubin}));
  static const std::set<std::uint32_t> kNone;
  for (auto code : sass) {
    const auto r = res.find(code.name);
    const auto s = spills.find(code.name);
    out.push_back(make_kernel(std::move(code), r == res.end() ? Resources{} : r->second,
                              s == spills.end() ? kNone : s->second));
  }
}

}  // namespace

bool is_cubin(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::array<unsigned char, 20> h{};
  if (!f.read(reinterpret_cast<char*>(h.data()), h.size())) return false;
  const bool elf = h[0] == 0x7f && h[1] == 'E' && h[2] == 'L' && h[3] == 'F';
  const auto machine = static_cast<std::uint16_t>(h[18] | (h[19] << 8));
  return elf && machine == kElfMachineCuda;
}

std::vector<Kernel> load_kernels(const std::string& path) {
  const auto tool = find_cuobjdump();
  if (!tool)
    throw ToolError("cuobjdump not found: run tools/sass/install-disasm.sh or set FASTATTN_CUOBJDUMP");
  if (!fs::exists(path)) throw ToolError("no such file: " + path);

  std::vector<Kernel> kernels;
  if (is_cubin(path)) {
    load_cubin(*tool, path, kernels);
  } else {
    TempDir tmp;
    const auto r = run_command({*tool, "-xelf", "all", fs::absolute(path).string()}, tmp.path);
    if (r.exit_code != 0 && r.err.find("does not contain device code") == std::string::npos &&
        r.out.find("does not contain device code") == std::string::npos)
      throw ToolError("cuobjdump -xelf failed on " + path + ": " + r.err);
    std::vector<std::string> cubins;
    for (const auto& e : fs::directory_iterator(tmp.path))
      if (e.path().extension() == ".cubin") cubins.push_back(e.path().string());
    std::sort(cubins.begin(), cubins.end());
    for (const auto& c : cubins) load_cubin(*tool, c, kernels);
  }

  std::stable_sort(kernels.begin(), kernels.end(), [](const Kernel& a, const Kernel& b) {
    return std::tie(a.demangled, a.arch) < std::tie(b.demangled, b.arch);
  });
  // A template kernel instantiated in two translation units is the same kernel twice.
  kernels.erase(std::unique(kernels.begin(), kernels.end(),
                            [](const Kernel& a, const Kernel& b) { return a.key() == b.key(); }),
                kernels.end());
  return kernels;
}

}  // namespace fastattn::sass
