// ONNX protobuf -> hc graph dialect. The one entry point hc-compile and the
// test tools use. Errors are one line naming the file, or the node, its op
// type and opset, and what is wrong.
#ifndef HC_COMPILER_ONNXIMPORT_H
#define HC_COMPILER_ONNXIMPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hc {

struct ImportOptions {
  std::string path;   // the .onnx file
  int64_t batch = 0;  // per-rank batch fixing a dynamic batch axis; 0: none
};

// An initializer's values, viewed in place (in the protobuf or a memory-mapped
// external data file owned by ImportedModel::storage).
struct ParamData {
  std::vector<int64_t> shape;
  const float *data = nullptr;
  std::size_t numElements() const;
};

struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;  // one func.func @forward
  std::map<std::string, ParamData> params;   // by initializer name
  std::vector<std::string> frozen;           // from metadata "hc.frozen"
  std::map<std::string, std::string> metadata;  // ONNX metadata_props
  std::vector<std::string> warnings;
  std::shared_ptr<void> storage;             // keeps `params` data alive
};

// Imports `options.path`. On failure returns false with a one-line `error`.
bool importOnnx(mlir::MLIRContext &context, const ImportOptions &options,
                ImportedModel &out, std::string &error);

// Registers the dialects the imported IR uses.
void registerImportDialects(mlir::MLIRContext &context);

} // namespace hc

#endif // HC_COMPILER_ONNXIMPORT_H
