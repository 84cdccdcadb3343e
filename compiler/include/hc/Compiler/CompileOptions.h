// hc-compile's options, declared once: one table (CompileOptions.cpp) of
// every flag, from which parsing, --help and the step description's record
// of the options ("compile_options") are generated.
#ifndef HC_COMPILER_COMPILEOPTIONS_H
#define HC_COMPILER_COMPILEOPTIONS_H

#include "hc/Compiler/Pipeline.h"

#include <cstdint>
#include <string>

namespace hc {

struct CompileOptions {
  PipelineOptions pipeline;
  std::string output;            // -o
  std::string emit;              // --emit: empty (the library), hc, train, schedule, cpp
  std::string target = "native";  // --target: -march of the generated code
  int64_t batch = 0;             // --batch; 0: the model's static batch
  bool help = false;             // -h, --help
};

// All: hc-compile's flags. Pipeline: those that configure the graph
// pipeline, for a tool that runs it without making a library (hc-eval).
enum class FlagScope { All, Pipeline };

// Parses the flag at argv[i] (advancing i past a separate value; a "--flag=
// value" form is accepted too). Returns 1 if consumed, 0 if argv[i] is no
// flag of the table, -1 with a one-line `error` naming the flag.
int parseCompileFlag(int argc, char **argv, int &i, CompileOptions &options,
                     std::string &error, FlagScope scope = FlagScope::All);

// The "options:" section of --help, one entry per row of the table.
std::string compileFlagsHelp(FlagScope scope = FlagScope::All);

// The description's record: every recorded option with the value the
// library was compiled with, as a JSON object {"--flag": "value", ...}.
std::string compileOptionsJson(const CompileOptions &options);

// Whether `text` names a flag of the table ("--flag " or "--flag:"): how
// the pipeline tells a pass's refusal of a user's value from its own bug.
bool namesCompileFlag(const std::string &text);

} // namespace hc

#endif // HC_COMPILER_COMPILEOPTIONS_H
