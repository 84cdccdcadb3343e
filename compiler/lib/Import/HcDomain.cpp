// hc's ONNX domain: its schemas for libonnx and the importer's own check.
#include "HcDomain.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include <mutex>

namespace hc::import {

void registerHcDomainSchemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    onnx::OpSchemaRegistry::DomainToVersionRange::Instance().AddDomainToVersion(
        kHcDomain, 1, static_cast<int>(kHcDomainVersion));
    onnx::OpSchema s;
    s.SetName("StopGradient")
        .SetDomain(kHcDomain)
        .SinceVersion(1)
        .SetDoc("Identity in the forward pass; no gradient flows back through "
                "it (hc's autodiff gives its input no adjoint from here).")
        .Input(0, "input", "any float tensor", "T")
        .Output(0, "output", "the input, unchanged", "T")
        .TypeConstraint("T", {"tensor(float)", "tensor(double)", "tensor(float16)",
                              "tensor(bfloat16)"},
                        "float tensors")
        .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
    onnx::RegisterSchema(std::move(s));
  });
}

std::string validateHcNode(const onnx::NodeProto &n, int64_t version) {
  if (version <= 0)
    return "domain 'hc' is used but the model does not import it "
           "(opset_import {domain: \"hc\", version: 1})";
  if (n.op_type() != "StopGradient")
    return "op '" + n.op_type() + "' is not in domain 'hc' (it has StopGradient)";
  if (n.input_size() != 1 || n.input(0).empty() || n.output_size() != 1)
    return "StopGradient takes one input and gives one output";
  if (n.attribute_size() > 0)
    return "StopGradient has no attributes, got '" + n.attribute(0).name() + "'";
  return "";
}

} // namespace hc::import
