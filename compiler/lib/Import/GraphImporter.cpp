#include "hc/Compiler/GraphImporter.h"

using namespace mlir;

namespace hc::import {

int64_t Const::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

bool Const::isInteger() const {
  return dtype == onnx::TensorProto::INT64 || dtype == onnx::TensorProto::INT32 ||
         dtype == onnx::TensorProto::BOOL;
}

void GraphImporter::fail(const std::string &message) const {
  throw ImportError(message);
}

Val &GraphImporter::lookup(const std::string &name) {
  auto it = values.find(name);
  if (it == values.end() && sequences.count(name))
    fail("input '" + name + "' is a sequence where a tensor is expected");
  if (it == values.end())
    fail("input '" + name + "' is undefined");
  return it->second;
}

void GraphImporter::define(const std::string &name, Value v) {
  values[name] = Val{v, std::nullopt};
}

void GraphImporter::defineConst(const std::string &name, Const c) {
  values[name] = Val{Value(), std::move(c)};
}

bool GraphImporter::hasInput(int i) const {
  return i < node->input_size() && !node->input(i).empty();
}

Value GraphImporter::valueOf(const std::string &name) {
  Val &v = lookup(name);
  if (!v.value)
    v.value = materialize(*v.cst);
  return v.value;
}

Value GraphImporter::input(int i) {
  if (!hasInput(i))
    fail("required input #" + std::to_string(i) + " is missing");
  return valueOf(node->input(i));
}

const Const *GraphImporter::inputConst(int i) {
  if (!hasInput(i))
    return nullptr;
  Val &v = lookup(node->input(i));
  return v.cst ? &*v.cst : nullptr;
}

const Const *GraphImporter::constOf(const std::string &name) {
  Val &v = lookup(name);
  return v.cst ? &*v.cst : nullptr;
}

const Const &GraphImporter::requireConst(int i, const char *what) {
  const Const *c = inputConst(i);
  if (!c)
    fail(std::string(what) + " (input '" +
         (hasInput(i) ? node->input(i) : std::string("<missing>")) +
         "') must be a constant after folding the exporter's shape arithmetic");
  return *c;
}

bool GraphImporter::outputUsed(int i) const {
  if (i >= node->output_size() || node->output(i).empty())
    return false;
  auto it = useCounts.find(node->output(i));
  return it != useCounts.end() && it->second > 0;
}

Type GraphImporter::elementType(int32_t t) {
  switch (t) {
  case onnx::TensorProto::FLOAT:
    return b.getF32Type();
  case onnx::TensorProto::DOUBLE:
    return b.getF64Type();
  case onnx::TensorProto::INT64:
    return b.getI64Type();
  case onnx::TensorProto::INT32:
    return b.getI32Type();
  case onnx::TensorProto::BOOL:
    return b.getI1Type();
  default:
    fail("element type " +
         onnx::TensorProto::DataType_Name(
             static_cast<onnx::TensorProto::DataType>(t)) +
         " is not supported (float, double, int64, int32, bool)");
  }
}

Value GraphImporter::materialize(const Const &c) {
  auto type = RankedTensorType::get(c.shape, elementType(c.dtype));
  DenseElementsAttr attr;
  Type elem = type.getElementType();
  if (elem.isF32()) {
    std::vector<float> v(c.data.begin(), c.data.end());
    attr = DenseElementsAttr::get(type, llvm::ArrayRef<float>(v));
  } else if (elem.isF64()) {
    attr = DenseElementsAttr::get(type, llvm::ArrayRef<double>(c.data));
  } else if (elem.isInteger(1)) {
    std::vector<bool> bits(c.data.size());
    for (size_t i = 0; i < bits.size(); ++i)
      bits[i] = c.data[i] != 0;
    llvm::SmallVector<bool> v(bits.begin(), bits.end());
    attr = DenseElementsAttr::get(type, llvm::ArrayRef<bool>(v));
  } else {
    unsigned width = elem.getIntOrFloatBitWidth();
    llvm::SmallVector<llvm::APInt> v;
    for (double d : c.data)
      v.emplace_back(width, static_cast<int64_t>(d), /*isSigned=*/true);
    attr = DenseElementsAttr::get(type, v);
  }
  return checked(b.create<hc::graph::ConstantOp>(loc, attr).getOperation())
      ->getResult(0);
}

const onnx::AttributeProto *GraphImporter::attr(const char *name) const {
  for (const auto &a : node->attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t GraphImporter::attrInt(const char *name, int64_t dflt) const {
  const auto *a = attr(name);
  return a ? a->i() : dflt;
}

double GraphImporter::attrFloat(const char *name, double dflt) const {
  const auto *a = attr(name);
  return a ? a->f() : dflt;
}

std::vector<int64_t> GraphImporter::attrInts(const char *name) const {
  const auto *a = attr(name);
  if (!a)
    return {};
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::string GraphImporter::attrString(const char *name,
                                      const std::string &dflt) const {
  const auto *a = attr(name);
  return a ? a->s() : dflt;
}

std::vector<int64_t> GraphImporter::staticShape(Value v,
                                                const char *what) const {
  auto type = typeOf(v);
  if (!type.hasStaticShape())
    fail(std::string(what) + " has a dynamic shape; pass --batch to fix it");
  return std::vector<int64_t>(type.getShape().begin(), type.getShape().end());
}

int64_t GraphImporter::normalizeAxis(int64_t axis, int64_t rank) const {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    fail("axis " + std::to_string(axis) + " out of range for rank " +
         std::to_string(rank));
  return a;
}

Value GraphImporter::reshape(Value v, llvm::ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, typeOf(v).getElementType());
  if (type == v.getType())
    return v;
  return buildTyped<hc::graph::ReshapeOp>(type, v);
}

Value GraphImporter::transpose(Value v, llvm::ArrayRef<int64_t> perm) {
  return build<hc::graph::TransposeOp>(
      v, {b.getNamedAttr("perm", b.getDenseI64ArrayAttr(perm))});
}

std::string GraphImporter::diagnostic(const char *fallback) {
  std::string d = lastDiagnostic.empty() ? fallback : lastDiagnostic;
  lastDiagnostic.clear();
  return d;
}

Operation *GraphImporter::checked(Operation *op) {
  if (failed(mlir::verify(op)))
    fail(diagnostic("invalid operation"));
  return op;
}

} // namespace hc::import
