// Schedule level -> one C++ translation unit implementing the step ABI
// (abi/include/hc/abi/step_abi.h), and its build into a .so.
#ifndef HC_COMPILER_EMITSTEP_H
#define HC_COMPILER_EMITSTEP_H

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace hc {

struct EmitInfo {
  std::string model;          // source file, for the description
  int64_t batchPerRank = 0;
  std::string ditConfigJson;  // ONNX metadata "hc.dit_config" (or "{}")
  std::string randomDrawsJson = "[]";  // ImportedModel::randomDraws
  std::string optimizerJson;  // {"name": ..., hyper-parameters}
  std::string precision = "fp32";  // hc-compile --precision (fp32 | bf16)
  std::string optionsJson;    // hc-compile's options as compiled (or "{}")
  std::string initFile;       // file name of the initial parameters
  std::string initHash;       // hashHex(hashFile(init file)): hc-run checks
                              // that the pair on disk belongs together
};

// Generates the C++ source and the JSON description of a planned schedule.
bool emitStepCpp(mlir::ModuleOp schedule, const EmitInfo &info,
                 std::string &cpp, std::string &description, std::string &error);

// Compiles `cppPath` into the shared library `soPath` with the system C++
// compiler ($HC_CXX, one program name, default c++) against libhcrt
// (-O2, -march=`target`), started with an argument vector, never a shell,
// so no file name is ever interpreted. On failure `soPath` is removed, the
// source kept, and `error` names it and the compiler's log.
// Whether the C++ compiler accepts -march=`target`; false + one line.
bool checkTarget(const std::string &target, std::string &error);

bool compileStepLibrary(const std::string &cppPath, const std::string &soPath,
                        const std::string &target, std::string &error);

// A shared library (absolute path) every step library links and finds at
// load time (rpath): a compiler extension's kernel bodies (Extension.h).
void addKernelLibrary(const std::string &path);

} // namespace hc

#endif // HC_COMPILER_EMITSTEP_H
