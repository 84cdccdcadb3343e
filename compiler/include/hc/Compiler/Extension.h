// Compiler extensions: ops, kernels and kernel bodies that live outside
// hc's own tables, added the way MLIR's test dialect joins mlir-opt. A tool
// of its own registers the extension and then runs hc-compile's main
// (hc/Compiler/CompileMain.h); every stage reads the same tables it would
// read for a builtin op:
//   - import:   the extension's ONNX op domains (GraphImporter.h's OpDomain);
//   - autodiff: its ops' GradientOpInterface;
//   - CFTP, AutoMem, bf16, the profile, emission: its kernels.def-format
//     registry entries (split, effect, FLOP rule, attribute layout);
//   - the step library: links its kernel libraries (hcrt_op_<name> bodies).
// test/extension/ carries a throwaway op through all of them.
#ifndef HC_COMPILER_EXTENSION_H
#define HC_COMPILER_EXTENSION_H

#include "hc/Compiler/GraphImporter.h"
#include "hc/Schedule/KernelRegistry.h"

#include "mlir/IR/DialectRegistry.h"

#include <functional>
#include <string>
#include <vector>

namespace hc {

struct CompilerExtension {
  std::string name;
  std::function<void(mlir::DialectRegistry &)> registerDialects;
  std::vector<import::OpDomain> domains;
  std::vector<schedule::KernelInfo> kernels;
  std::vector<std::string> kernelLibraries;  // absolute paths of shared libraries
};

// Registers `e` before anything is compiled (fatal if a table was read).
void registerExtension(CompilerExtension e);

// The dialects of every registered extension.
void appendExtensionDialects(mlir::DialectRegistry &registry);

} // namespace hc

#endif // HC_COMPILER_EXTENSION_H
