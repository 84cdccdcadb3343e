// What an export's initializers show about how it was made.
//
// Tensors an exporter merged: torch.onnx.export in eval mode with constant
// folding (torch 1.13's default) stores one initializer for parameters that
// hold equal values (DiT's zero-initialised adaLN layers of every block), so
// the file trains a tied model and a state_dict loaded back lacks keys.
#ifndef HC_IMPORT_EXPORTCHECKS_H
#define HC_IMPORT_EXPORTCHECKS_H

#include "hc/Compiler/OnnxImport.h"

#include "onnx/onnx_pb.h"

#include <string>

namespace hc::import {

// TorchScript exports name nodes by module scope ("/dit/blocks.1/
// adaLN_modulation/adaLN_modulation.1/Gemm"). The first float initializer
// named as a module's parameter ("blocks.0.adaLN_modulation.1.weight") that
// a node of another module of the same shape of path uses, while that
// module's own parameter ("blocks.1.adaLN_modulation.1.weight") is not in the
// file, is reported as "INITIALIZER|NODE|MISSING"; so is torch 1.13's own
// deduplication, an Identity node that gives the kept initializer the
// dropped parameter's name. "" when there is none (or the nodes carry no
// scopes, as dynamo's do not).
std::string mergedInitializer(const onnx::ModelProto &model);
// The one-line refusal of such a file, naming the tensors and the export
// flags that avoid the merge; "" when there is none.
std::string mergedInitializerError(const onnx::ModelProto &model);

// A fixed sin-cos position table as DiT/MAE build it ([T, D] or [1, T, D]):
// 2-D over a sqrt(T) x sqrt(T) grid (columns in the first half of the
// channels, rows in the second, each half sin then cos) or 1-D over T.
bool isSinCosTable(const ParamData &p);

} // namespace hc::import

#endif // HC_IMPORT_EXPORTCHECKS_H
