// The throwaway op as a compiler extension: its ONNX domain ("hc.throwaway",
// op Axpb), its registry entry (throwaway_kernel.def) and its kernel
// library. Everything else hc-compile does with it comes from the tables
// these fill and from the op's own interfaces (ThrowawayOps.cpp).
#include "ThrowawayExtension.h"
#include "ThrowawayOps.h"

#include "hc/Compiler/Extension.h"

#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

using namespace mlir;

namespace hc::throwaway {

namespace {

constexpr const char *kDomain = "hc.throwaway";

void registerSchemas() {
  onnx::OpSchema s;
  s.SetName("Axpb")
      .SetDomain(kDomain)
      .SinceVersion(1)
      .SetDoc("y = alpha * x + beta (x when mode is \"off\")")
      .Attr("alpha", "scale", onnx::AttributeProto::FLOAT)
      .Attr("beta", "offset", onnx::AttributeProto::FLOAT)
      .Attr("mode", "\"on\" (default) or \"off\"", onnx::AttributeProto::STRING,
            std::string("on"))
      .Input(0, "x", "a float32 tensor", "T")
      .Output(0, "y", "alpha * x + beta", "T")
      .TypeConstraint("T", {"tensor(float)"}, "float32")
      .TypeAndShapeInferenceFunction(onnx::propagateShapeAndTypeFromFirstInput);
  onnx::RegisterSchema(std::move(s));
}

std::string validate(const onnx::NodeProto &n) {
  if (n.input_size() != 1 || n.input(0).empty() || n.output_size() != 1)
    return "Axpb takes one input and gives one output";
  bool alpha = false, beta = false;
  for (const auto &a : n.attribute()) {
    bool isFloat = a.type() == onnx::AttributeProto::FLOAT;
    if (a.name() == "alpha" && isFloat)
      alpha = true;
    else if (a.name() == "beta" && isFloat)
      beta = true;
    else if (a.name() == "mode" && a.type() == onnx::AttributeProto::STRING) {
      if (a.s() != "on" && a.s() != "off")
        return "Axpb's mode is \"on\" or \"off\", got \"" + a.s() + "\"";
    } else
      return "Axpb has no attribute '" + a.name() + "' of that type";
  }
  if (!alpha || !beta)
    return "Axpb needs the float attributes alpha and beta";
  return "";
}

void axpbOp(import::GraphImporter &gi) {
  Value x = gi.input(0);
  if (!gi.typeOf(x).getElementType().isF32())
    gi.fail("Axpb takes a float32 tensor");
  SmallVector<NamedAttribute> attrs = {
      gi.b.getNamedAttr("alpha", gi.b.getF64FloatAttr(gi.attrFloat("alpha", 0))),
      gi.b.getNamedAttr("beta", gi.b.getF64FloatAttr(gi.attrFloat("beta", 0)))};
  std::string mode = gi.attrString("mode", "on");
  if (mode != "on")
    attrs.push_back(gi.b.getNamedAttr("mode", gi.b.getStringAttr(mode)));
  gi.output(0, gi.buildTyped<AxpbOp>(x.getType(), x, attrs));
}

} // namespace

void registerThrowawayExtension() {
  CompilerExtension e;
  e.name = "throwaway";
  e.registerDialects = [](DialectRegistry &r) { r.insert<ThrowawayDialect>(); };
  e.domains.push_back(import::OpDomain{kDomain, 1, registerSchemas, validate,
                                       {{"Axpb", axpbOp}}});
  e.kernels = {
#include "hc/Schedule/KernelInfoMacros.h"
#include "throwaway_kernel.def"
#include "hc/Schedule/KernelInfoMacrosEnd.h"
  };
  e.kernelLibraries.push_back(HC_THROWAWAY_KERNEL_LIBRARY);
  registerExtension(std::move(e));
}

} // namespace hc::throwaway
