// Tensors an exporter merged: torch.onnx.export in eval mode with constant
// folding (torch 1.13's default) stores one initializer for parameters that
// hold equal values (DiT's zero-initialised adaLN layers of every block), so
// the file trains a tied model and a state_dict loaded back lacks keys.
#ifndef HC_IMPORT_TIEDWEIGHTS_H
#define HC_IMPORT_TIEDWEIGHTS_H

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

} // namespace hc::import

#endif // HC_IMPORT_TIEDWEIGHTS_H
