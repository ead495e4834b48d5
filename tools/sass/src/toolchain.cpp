#include "toolchain.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "text_util.h"

namespace fs = std::filesystem;

namespace fastattn::sass {

namespace {

bool executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// Where pip puts the wheels' binaries (nvidia/cu13/bin, older wheels nvidia/cuda_*/bin).
std::vector<fs::path> wheel_bin_dirs() {
  std::vector<fs::path> dirs;
  const auto r = run_command({"python3", "-c",
                              "import site,sysconfig;"
                              "print(sysconfig.get_paths()['purelib']);"
                              "print(site.getusersitepackages())"});
  if (r.exit_code != 0) return dirs;
  for (const auto line : split_lines(r.out)) {
    const fs::path base(std::string(trim(line)));
    if (base.empty()) continue;
    for (const char* sub : {"nvidia/cu13/bin", "nvidia/cu12/bin", "nvidia/cuda_cuobjdump/bin",
                            "nvidia/cuda_nvdisasm/bin"})
      dirs.push_back(base / sub);
  }
  return dirs;
}

std::optional<std::string> find_tool(const char* name, const char* env_var) {
  if (const char* env = std::getenv(env_var); env && *env) {
    if (executable(env)) return std::string(env);
    return std::nullopt;  // an explicit choice that is wrong should not be papered over
  }
  std::vector<fs::path> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::string p(path);
    std::size_t start = 0;
    while (start <= p.size()) {
      const auto colon = p.find(':', start);
      dirs.emplace_back(p.substr(start, colon == std::string::npos ? std::string::npos : colon - start));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  dirs.emplace_back("/usr/local/cuda/bin");
  for (const auto& d : dirs)
    if (!d.empty() && executable(d / name)) return (d / name).string();
  for (const auto& d : wheel_bin_dirs())
    if (executable(d / name)) return (d / name).string();
  return std::nullopt;
}

std::string slurp_fd(int fd) {
  std::string s;
  char buf[1 << 16];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) s.append(buf, static_cast<std::size_t>(n));
  return s;
}

}  // namespace

std::optional<std::string> find_cuobjdump() { return find_tool("cuobjdump", "FASTATTN_CUOBJDUMP"); }
std::optional<std::string> find_nvdisasm() { return find_tool("nvdisasm", "FASTATTN_NVDISASM"); }

CommandResult run_command(const std::vector<std::string>& argv, const std::string& workdir) {
  CommandResult res;
  // stderr goes to an unlinked temp file so a chatty tool cannot deadlock on a full pipe.
  char err_name[] = "/tmp/fastattn-sass-err-XXXXXX";
  const int err_fd = ::mkstemp(err_name);
  if (err_fd < 0) return res;
  ::unlink(err_name);
  int out_pipe[2];
  if (::pipe(out_pipe) != 0) {
    ::close(err_fd);
    return res;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_fd, 2);
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    if (!workdir.empty() && ::chdir(workdir.c_str()) != 0) ::_exit(126);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  res.out = slurp_fd(out_pipe[0]);
  ::close(out_pipe[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  res.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ::lseek(err_fd, 0, SEEK_SET);
  res.err = slurp_fd(err_fd);
  ::close(err_fd);
  return res;
}

}  // namespace fastattn::sass
