// The generated C++ -> the step library, by the system C++ compiler.
#include "hc/Compiler/EmitStep.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
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
  std::vector<char *> argv;
  for (const auto &a : args)
    argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, logPath.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
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

} // namespace

bool compileStepLibrary(const std::string &cppPath, const std::string &soPath,
                        const std::string &target, std::string &error) {
  const char *cxx = std::getenv("HC_CXX");
  const std::string log = cppPath + ".log";
  std::vector<std::string> args = {
      cxx && *cxx ? cxx : "c++", "-std=c++17", "-O2", "-shared", "-fPIC",
      "-fvisibility=hidden", "-march=" + target,
      "-I" HC_RUNTIME_INCLUDE_DIR, asOperand(cppPath), "-o", asOperand(soPath),
      "-L" HC_RUNTIME_LIB_DIR, "-lhcrt", "-Wl,-rpath," HC_RUNTIME_LIB_DIR};
  int rc = runLogged(args, log, error);
  if (rc != 0) {
    std::remove(soPath.c_str());
    if (rc < 0)
      std::remove(log.c_str());
    else
      error = "internal error: the generated C++ failed to compile (an hc bug); "
              "source kept at " + cppPath + ", compiler output in " + log;
    return false;
  }
  std::remove(log.c_str());
  return true;
}

} // namespace hc
