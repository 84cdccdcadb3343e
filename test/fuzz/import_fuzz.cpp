// libFuzzer target for the ONNX importer (hc::importOnnx): any byte string
// must give either a module or a one-line error, never a sanitizer report, a
// signal, a leak, a hang or a memory blow-up. It calls the importer's API,
// not hc-compile's exit(2) paths, so a run goes on past rejected inputs.
//
// The importer reads a path (external data resolves against its folder), so
// each input is written to a private folder first.
#include "hc/Compiler/OnnxImport.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

namespace {
std::string gPath;

bool writeInput(const uint8_t *data, std::size_t size) {
  std::FILE *f = std::fopen(gPath.c_str(), "wb");
  if (!f)
    return false;
  bool ok = std::fwrite(data, 1, size, f) == size;
  return std::fclose(f) == 0 && ok;
}
} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  char dir[] = "/tmp/hc-import-fuzz-XXXXXX";
  if (!mkdtemp(dir)) {
    std::perror("mkdtemp");
    std::abort();
  }
  gPath = std::string(dir) + "/model.onnx";
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, std::size_t size) {
  if (!writeInput(data, size))
    std::abort(); // the fuzzer's own folder, not the input: a real failure
  // A fresh context per input: constants of fuzzed graphs would otherwise
  // pile up in one context's uniquing tables for the whole run.
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  hc::ImportedModel model;
  hc::ImportOptions options;
  options.path = gPath;
  options.batch = 2;
  std::string error;
  bool unsupported = false;
  if (hc::importOnnx(context, options, model, error, &unsupported)) {
    // What the importer accepts must be valid IR.
    if (mlir::failed(mlir::verify(*model.module))) {
      std::fprintf(stderr, "import_fuzz: accepted input gives invalid IR\n");
      std::abort();
    }
  } else if (error.empty() || error.find('\n') != std::string::npos) {
    std::fprintf(stderr, "import_fuzz: rejection without a one-line error: '%s'\n",
                 error.c_str());
    std::abort();
  }
  return 0;
}
