// hc's ONNX domain: its schemas for libonnx, its check and its handler.
#include "HcDomain.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

namespace hc::import {

namespace {

void registerSchemas() {
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
}

std::string validate(const onnx::NodeProto &n) {
  if (n.input_size() != 1 || n.input(0).empty() || n.output_size() != 1)
    return "StopGradient takes one input and gives one output";
  if (n.attribute_size() > 0)
    return "StopGradient has no attributes, got '" + n.attribute(0).name() + "'";
  return "";
}

// hc::StopGradient: an op that autodiff does not look through. A known
// constant has no gradient to stop and stays a constant.
void stopGradientOp(GraphImporter &gi) {
  if (const Const *c = gi.inputConst(0)) {
    gi.outputConst(0, *c);
    return;
  }
  mlir::Value x = gi.input(0);
  if (!mlir::isa<mlir::FloatType>(gi.typeOf(x).getElementType()))
    gi.fail("StopGradient of a non-float tensor");
  gi.output(0, gi.buildTyped<hc::graph::StopGradientOp>(x.getType(), x));
}

} // namespace

OpDomain hcOpDomain() {
  return OpDomain{kHcDomain, kHcDomainVersion, registerSchemas, validate,
                  {{"StopGradient", stopGradientOp}}};
}

} // namespace hc::import
