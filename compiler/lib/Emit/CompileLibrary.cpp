// The generated C++ -> the step library, by the system C++ compiler.
#include "hc/Compiler/EmitStep.h"
#include "hc/base/settings.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <fcntl.h>
#include <unistd.h>
#include <spawn.h>
#include <sys/wait.h>
#include <vector>

extern char **environ;

namespace hc {
namespace {

// A path the compiler driver reads as a file, never as a flag.
std::string asOperand(const std::string &path) {
  return !path.empty() && path[0] == '-' ? "./" + path : path;
}

// Runs argv[0] (looked up in PATH) with stdout and stderr into `logPath`;
// returns its exit status, or -1 with `error` set when it could not start.
int runLogged(const std::vector<std::string> &args, const std::string &logPath,
              std::string &error) {
  // Nothing to read from us: a compiler that prompts would hang the build.
  std::vector<char *> argv;
  for (const auto &a : args)
    argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, logPath.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    error = "cannot run the C++ compiler '" + args[0] + "': " + std::strerror(rc) +
            " (set HC_CXX to a compiler program)";
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      error = "lost the C++ compiler process: " + std::string(std::strerror(errno));
      return -1;
    }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string compilerName() {
  const char *cxx = hc::rt::setting(hc::rt::Setting::Cxx);
  return cxx && *cxx ? cxx : "c++";
}

std::string readSmall(const std::string &path) {
  std::string text;
  if (std::FILE *f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() < (1 << 20))
      text.append(buf, n);
    std::fclose(f);
  }
  return text;
}

// The first line of `log` that mentions `what`, trimmed, or "".
std::string lineWith(const std::string &log, const std::string &what) {
  std::size_t at = log.find(what);
  if (at == std::string::npos)
    return "";
  std::size_t b = log.rfind('\n', at), e = log.find('\n', at);
  b = b == std::string::npos ? 0 : b + 1;
  return log.substr(b, e == std::string::npos ? std::string::npos : e - b);
}

} // namespace

bool checkTarget(const std::string &target, std::string &error) {
  char log[] = "/tmp/hc-compile-target-XXXXXX";
  int fd = mkstemp(log);
  if (fd < 0) {
    error = std::string("cannot create a temporary file: ") + std::strerror(errno);
    return false;
  }
  ::close(fd);
  std::vector<std::string> args = {compilerName(), "-march=" + target, "-x", "c++",
                                   "-fsyntax-only", "/dev/null"};
  int rc = runLogged(args, log, error);
  std::string text = readSmall(log);
  std::remove(log);
  if (rc < 0)
    return false;
  if (rc != 0) {
    std::string line = text.substr(0, text.find('\n'));
    error = "--target " + target + ": the C++ compiler (" + args[0] +
            ") does not accept -march=" + target + (line.empty() ? "" : ": " + line);
    return false;
  }
  return true;
}

static std::vector<std::string> &kernelLibraries() {
  static std::vector<std::string> libs;
  return libs;
}

void addKernelLibrary(const std::string &path) { kernelLibraries().push_back(path); }

bool compileStepLibrary(const std::string &cppPath, const std::string &soPath,
                        const std::string &target, std::string &error) {
  const std::string log = cppPath + ".log";
  std::vector<std::string> args = {
      compilerName(), "-std=c++17", "-O2", "-shared", "-fPIC",
      "-fvisibility=hidden", "-march=" + target,
      "-I" HC_ABI_INCLUDE_DIR, asOperand(cppPath), "-o", asOperand(soPath),
      "-L" HC_RUNTIME_LIB_DIR, "-lhcrt", "-Wl,-rpath," HC_RUNTIME_LIB_DIR};
  for (const std::string &lib : kernelLibraries()) {
    args.push_back(asOperand(lib));
    args.push_back("-Wl,-rpath," + lib.substr(0, lib.find_last_of('/')));
  }
  int rc = runLogged(args, log, error);
  if (rc != 0) {
    std::remove(soPath.c_str());
    if (rc < 0) {
      std::remove(log.c_str());
      return false;
    }
    // A full disk or a file size limit is the machine's, not hc's.
    const std::string text = readSmall(log);
    std::string full;
    for (const char *why : {"No space left on device", "File too large",
                            "Disk quota exceeded"})
      if (full.empty())
        full = lineWith(text, why);
    if (full.empty() && rc == 128 + SIGXFSZ)
      full = "killed by SIGXFSZ (file size limit)";
    if (!full.empty()) {
      std::remove(log.c_str());
      std::remove(cppPath.c_str());
      error = soPath + ": cannot write the step library: " + full;
      return false;
    }
    error = "internal error: the generated C++ failed to compile (an hc bug); "
            "source kept at " + cppPath + ", compiler output in " + log;
    return false;
  }
  std::remove(log.c_str());
  return true;
}

} // namespace hc
