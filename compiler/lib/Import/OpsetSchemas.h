// Internal to the ONNX importer: hc's own schemas of the ai.onnx operators
// it imports, as ONNX opsets 18..21 define them. Debian's libonnx 1.12 knows
// opsets <= 17 only (asked for an opset-18 schema it silently answers with
// an older one, and it has no Gelu), so for those opsets hc validates nodes
// itself: the op exists at that opset, input and output counts, attribute
// names, types, required ones and enumerated values.
#ifndef HC_COMPILER_IMPORT_OPSETSCHEMAS_H
#define HC_COMPILER_IMPORT_OPSETSCHEMAS_H

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <set>
#include <string>

namespace hc::import {

// Opsets of ai.onnx that hc's own schemas cover, and the newest IR version
// hc reads (IR 10: PyTorch 2.x's dynamo exporter).
constexpr int64_t kOwnSchemaMinOpset = 18, kOwnSchemaMaxOpset = 21;
constexpr int64_t kMaxIrVersion = 10;

// Empty when `n` is a valid node of ai.onnx at `opset` (18..21) as hc's
// importer reads it, else what is wrong (one line, without the node label).
std::string validateNode(const onnx::NodeProto &n, int64_t opset);

// The version of `op`'s definition in effect at `opset` (the newest
// since-version <= opset), 0 when the table does not know the op there.
int opVersion(const std::string &op, int64_t opset);

// torch.onnx.export(..., dynamo=True) optimizes by default: weights folded
// into initializers named after graph values (`val_26` = qkv.weight
// transposed) beside float constants stored the same way, so which tensors
// train cannot be told. The first float initializer of a PyTorch export at
// opset >= 18 with such a name (a lowercase op name and a counter: val_26,
// unsqueeze_1, scalar_tensor_default_1; parameters are module paths), or
// "" when there is none (optimize=False, or models/map_params.py's output).
std::string generatedInitializer(const onnx::ModelProto &model, int64_t opset);

// The initializers that PyTorch's dynamo exporter marks as not parameters:
// torch.export's input kind BUFFER or CONSTANT_TENSOR (a registered buffer,
// a tensor attribute), which it writes into the value's metadata_props
// (ONNX IR 10). PyTorch never trains them, so neither does hc.
std::set<std::string> torchExportConstants(const onnx::ModelProto &model);

} // namespace hc::import

#endif // HC_COMPILER_IMPORT_OPSETSCHEMAS_H
