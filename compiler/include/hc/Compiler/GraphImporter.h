// The ONNX importer's handler interface: the state of one graph's
// translation, the helpers op handlers use, and the op domains besides
// ai.onnx (hc's own and those of compiler extensions, which include this
// header to write their handlers). Compiled with exceptions (libonnx throws);
// handlers report problems by throwing ImportError, which the driver turns
// into one line naming the node, its op type and opset.
#ifndef HC_COMPILER_IMPORT_GRAPHIMPORTER_H
#define HC_COMPILER_IMPORT_GRAPHIMPORTER_H

#include "hc/Graph/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace hc::import {

struct ImportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A tensor whose value the importer knows: exporter constants and the shape
// arithmetic computed from them (Shape/Gather/Concat/...), folded at import.
struct Const {
  std::vector<int64_t> shape;
  int32_t dtype = onnx::TensorProto::FLOAT;
  std::vector<double> data;
  int64_t numElements() const;
  bool isInteger() const;
};

struct Val {
  mlir::Value value;         // null while only the constant is known
  std::optional<Const> cst;  // set for known constants
};

class GraphImporter;
using OpHandler = std::function<void(GraphImporter &)>;

// ai.onnx op type -> handler (defined in OpHandlers.cpp).
const std::map<std::string, OpHandler> &opHandlers();

// An ONNX op domain besides ai.onnx: hc's own ("hc", HcDomain.cpp) and
// those compiler extensions register (hc/Compiler/Extension.h). The
// importer judges a node of such a domain by its table, never by libonnx
// alone: a model must import the domain at `version`, the op type must be
// a key of `handlers`, and `validate` names what else is wrong.
struct OpDomain {
  std::string name;
  int64_t version = 1;
  // Registers the ops' schemas with libonnx, for its checker; run once.
  std::function<void()> registerSchemas;
  // "" or the one-line reason node `n` is invalid (arity, attributes).
  std::function<std::string(const onnx::NodeProto &n)> validate;
  std::map<std::string, OpHandler> handlers;  // op type -> handler
};
// Adds a domain before any import; a second domain of the same name is a
// fatal error.
void registerOpDomain(OpDomain domain);
// The domain called `name`, nullptr if none is registered.
const OpDomain *findOpDomain(const std::string &name);
// Every registered domain, "hc" first.
const std::vector<OpDomain> &opDomains();

// The handler of node `n` (by domain and op type), nullptr if hc has none.
const OpHandler *findHandler(const onnx::NodeProto &n);

class GraphImporter {
public:
  GraphImporter(mlir::OpBuilder &builder, int64_t opset)
      : b(builder), opset(opset) {}

  mlir::OpBuilder &b;
  const int64_t opset;
  const onnx::NodeProto *node = nullptr;  // the node being translated
  mlir::Location loc = b.getUnknownLoc();
  std::string lastDiagnostic;             // filled by the driver's handler
  int64_t nextRandomOpId = 0;
  std::function<mlir::Value(const std::string &)> rngArgument;

  // --- values ---
  bool has(const std::string &name) const {
    return values.count(name) || sequences.count(name);
  }
  // Sequences (SplitToSequence): the names of their tensors, in order.
  std::map<std::string, std::vector<std::string>> sequences;
  void define(const std::string &name, mlir::Value v);
  void defineConst(const std::string &name, Const c);
  // The node's i-th input; optional inputs may be absent ("" or past the end).
  bool hasInput(int i) const;
  mlir::Value valueOf(const std::string &name);  // materializes constants
  mlir::Value input(int i);            // materializes constants
  const Const *inputConst(int i);      // nullptr if not a known constant
  const Const &requireConst(int i, const char *what);
  const Const *constOf(const std::string &name);  // nullptr if not known
  void output(int i, mlir::Value v) { define(node->output(i), v); }
  void outputConst(int i, Const c) { defineConst(node->output(i), std::move(c)); }
  bool outputUsed(int i) const;
  void setUsedNames(std::map<std::string, int> uses) { useCounts = std::move(uses); }

  mlir::Value materialize(const Const &c);
  mlir::Type elementType(int32_t onnxType);

  // --- attributes ---
  const onnx::AttributeProto *attr(const char *name) const;
  int64_t attrInt(const char *name, int64_t dflt) const;
  double attrFloat(const char *name, double dflt) const;
  std::vector<int64_t> attrInts(const char *name) const;
  std::string attrString(const char *name, const std::string &dflt) const;

  // --- building ---
  [[noreturn]] void fail(const std::string &message) const;
  mlir::RankedTensorType typeOf(mlir::Value v) const {
    return mlir::cast<mlir::RankedTensorType>(v.getType());
  }
  std::vector<int64_t> staticShape(mlir::Value v, const char *what) const;

  // Builds an op whose result types are inferred; a shape error becomes an
  // ImportError instead of MLIR's fatal "failed to infer" abort.
  template <typename OpT>
  mlir::Operation *buildInferred(mlir::ValueRange operands,
                                 llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    llvm::SmallVector<mlir::Type> types;
    mlir::DictionaryAttr dict = b.getDictionaryAttr(attrs);
    using Props = typename mlir::PropertiesSelector<OpT>::type;
    Props props;
    mlir::OpaqueProperties opaque(nullptr);
    if constexpr (!std::is_same_v<Props,
                                  mlir::EmptyProperties>) {
      if (mlir::failed(OpT::setPropertiesFromAttr(
              props, dict, [&] { return mlir::emitError(loc); })))
        fail(diagnostic("bad attributes"));
      opaque = mlir::OpaqueProperties(&props);
    }
    if (mlir::failed(OpT::inferReturnTypes(b.getContext(), loc, operands, dict,
                                           opaque, {}, types)))
      fail(diagnostic("shape error"));
    return checked(b.create<OpT>(loc, types, operands, attrs).getOperation());
  }
  template <typename OpT>
  mlir::Value build(mlir::ValueRange operands,
                    llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    return buildInferred<OpT>(operands, attrs)->getResult(0);
  }
  // Builds an op with a given result type and verifies it.
  template <typename OpT>
  mlir::Value buildTyped(mlir::Type type, mlir::ValueRange operands,
                         llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    return checked(b.create<OpT>(loc, mlir::TypeRange{type}, operands, attrs)
                       .getOperation())
        ->getResult(0);
  }
  mlir::Value reshape(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value v, llvm::ArrayRef<int64_t> perm);
  int64_t normalizeAxis(int64_t axis, int64_t rank) const;

private:
  std::string diagnostic(const char *fallback);
  mlir::Operation *checked(mlir::Operation *op);
  std::map<std::string, Val> values;
  std::map<std::string, int> useCounts;
  Val &lookup(const std::string &name);
};

} // namespace hc::import

#endif // HC_COMPILER_IMPORT_GRAPHIMPORTER_H
