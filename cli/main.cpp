// fastattn: command-line front of the library. `fastattn --help` lists the commands.
#include <cstdio>
#include <string>
#include <vector>

#include "fastattn/fastattn.h"
#include "options.h"
#include "profile.h"
#include "run.h"

namespace {

const char* kHelp = R"(fastattn %s: fused attention kernels (Hopper, Ampere, CPU)

usage: fastattn <command> [flags]

commands
  run     time forward (and backward) on random inputs and check them against the reference;
          with no flags, runs the default problem on the GPU when one is usable, else the CPU
  profile cycle breakdown of the Hopper forward's K-loop (probed kernel, sm_90a builds), with a
          timeline PNG and JSON; `fastattn profile --help` lists its flags
  info    what this build contains and which devices it sees
  help    this text; `fastattn run --help` lists the flags of run

examples
  fastattn run
  fastattn run --batch 2 --seqlen 4096 --heads 16 --kv-heads 4 --dim 128 --causal --dtype bf16
  fastattn run --device cpu --seqlen 512 --window 128,0 --softcap 30 --backward
  fastattn profile --batch 4 --seqlen 4096 --heads 64 --kv-heads 8 --no-causal --dtype fp16 --out prof
)";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const std::string cmd = args.empty() ? "help" : args.front();
  if (!args.empty()) args.erase(args.begin());
  auto wants_help = [&] {
    for (const auto& a : args)
      if (a == "--help" || a == "-h") return true;
    return false;
  };

  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::printf(kHelp, fastattn::version());
    return 0;
  }
  if (cmd == "--version" || cmd == "version") {
    std::printf("fastattn %s\n", fastattn::version());
    return 0;
  }
  if (cmd == "run") {
    if (wants_help()) {
      std::fputs(fastattn::cli::run_help(), stdout);
      return 0;
    }
    return fastattn::cli::run_command(args);
  }
  if (cmd == "profile") {
    if (wants_help()) {
      std::fputs(fastattn::cli::profile_help(), stdout);
      return 0;
    }
    return fastattn::cli::profile_command(args);
  }
  if (cmd == "info") return fastattn::cli::info_command();
  std::fprintf(stderr, "fastattn: unknown command '%s' (commands: run, profile, info, help)\n", cmd.c_str());
  return 2;
}
