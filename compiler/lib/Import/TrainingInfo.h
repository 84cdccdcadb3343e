// ModelProto.training_info: validated here (onnx 1.12's checker ignores it)
// and recognised as the one algorithm hc compiles, Gradient + Adam + T ← T+1.
#ifndef HC_COMPILER_IMPORT_TRAININGINFO_H
#define HC_COMPILER_IMPORT_TRAININGINFO_H

#include "hc/Compiler/GraphImporter.h"

#include "hc/Compiler/OnnxImport.h"

#include <onnx/onnx_pb.h>

#include <set>

namespace hc::import {

// A valid training_info that asks for something hc does not implement
// (exit 3, where ImportError is bad input, exit 2).
struct UnsupportedError : ImportError {
  using ImportError::ImportError;
};

// Reads model.training_info (at most one) into `out`; `stateNames` gets the
// initializers that are optimizer state or hyper-parameters (R, T, V, H),
// which are not parameters of the step. Throws ImportError/UnsupportedError
// with a message starting with `path`.
void readTrainingInfo(const onnx::ModelProto &model, const std::string &path,
                      TrainingInfo &out, std::set<std::string> &stateNames);

} // namespace hc::import

#endif // HC_COMPILER_IMPORT_TRAININGINFO_H
