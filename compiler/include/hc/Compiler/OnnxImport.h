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

// The module attribute on which the importer records a model's own
// training algorithm (ONNX training_info): {optimizer, lr, beta1, ...}. It
// decides the optimizer; flags that would change it are refused.
inline constexpr const char *kTrainingInfoAttr = "hc.training_info";

struct ImportOptions {
  std::string path;   // the .onnx file
  int64_t batch = 0;  // per-rank batch fixing a dynamic batch axis; 0: none
  // Parameters the user freezes (hc-compile --freeze): the importer's
  // "looks frozen" warnings skip them.
  std::vector<std::string> userFrozen;
  // hc-compile --allow-shared-params: a model that ties parameters on
  // purpose (else an initializer used by two modules of which one lacks its
  // own parameter is refused: an exporter merged equal tensors).
  bool allowSharedParams = false;
};

// An initializer's values, viewed in place (in the protobuf or a memory-mapped
// external data file owned by ImportedModel::storage).
struct ParamData {
  std::vector<int64_t> shape;
  const float *data = nullptr;
  std::size_t numElements() const;
};

// A model's own training algorithm (ModelProto.training_info), recognised as
// Gradient(xs, y = loss) + ONNX Adam over xs + T <- T + 1, every update bound
// back. The importer records the optimizer on the module (hc.training_info)
// and freezes every parameter outside xs.
struct TrainingInfo {
  std::vector<std::string> trainable;  // Gradient's xs, in order
  std::string loss;                    // Gradient's y
  double r = 0, alpha = 0.9, beta = 0.999, epsilon = 1e-6,
         normCoefficient = 0, normCoefficientPost = 0;
  int64_t initialT = 0;  // after the initialization binding
  // Initial values other than the step's defaults (zero moments, the
  // parameter initializers): "adam.V:NAME"/"adam.H:NAME" moments and
  // parameters set by the initialization graph, by name.
  std::map<std::string, std::vector<float>> initialMoments, initialParams;
};

struct ImportedModel {
  mlir::OwningOpRef<mlir::ModuleOp> module;  // one func.func @forward
  std::map<std::string, ParamData> params;   // by initializer name
  std::vector<std::string> frozen;           // from metadata "hc.frozen"
  std::map<std::string, std::string> metadata;  // ONNX metadata_props
  bool hasTraining = false;                  // training_info present
  TrainingInfo training;
  std::vector<std::string> warnings;
  std::shared_ptr<void> storage;             // keeps `params` data alive
};

// Imports `options.path`. On failure returns false with a one-line `error`;
// `unsupported` tells a valid model asking for what hc does not implement
// (exit 3) from bad input (exit 2).
bool importOnnx(mlir::MLIRContext &context, const ImportOptions &options,
                ImportedModel &out, std::string &error,
                bool *unsupported = nullptr);

// Registers the dialects the imported IR uses.
void registerImportDialects(mlir::MLIRContext &context);

} // namespace hc

#endif // HC_COMPILER_ONNXIMPORT_H
