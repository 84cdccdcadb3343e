// ONNX file -> validated ModelProto -> func.func @forward of hc graph ops.
#include "hc/Compiler/OnnxImport.h"

#include "hc/Compiler/GraphImporter.h"
#include "LibonnxGuards.h"
#include "OpsetSchemas.h"
#include "ExportChecks.h"
#include "TrainingInfo.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"

#include "llvm/Support/FormatVariadic.h"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cmath>
#include <fcntl.h>
#include <mutex>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;
using hc::import::Const;
using hc::import::GraphImporter;
using hc::import::ImportError;

namespace hc {

std::size_t ParamData::numElements() const {
  std::size_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<std::size_t>(d);
  return n;
}

void registerImportDialects(MLIRContext &context) {
  context.loadDialect<hc::graph::HCDialect, func::FuncDialect>();
}

namespace {

constexpr int64_t kMinOpset = 13, kMaxOpset = hc::import::kOwnSchemaMaxOpset;
// libonnx 1.12's schemas and checker: opsets up to 17, IR up to 8.
constexpr int64_t kLibOnnxMaxOpset = 17, kLibOnnxMaxIr = 8;
constexpr int64_t kMaxDim = int64_t(1) << 31;
constexpr int64_t kMaxElements = int64_t(1) << 40;

// Everything the imported module's parameters point into.
struct Storage {
  onnx::ModelProto model;
  std::vector<std::vector<float>> owned;  // values set by training_info
  std::vector<std::pair<void *, std::size_t>> mappings;
  ~Storage() {
    for (auto &[p, n] : mappings)
      munmap(p, n);
  }
};

std::string oneLine(std::string s) {
  for (char &c : s)
    if (c == '\n' || c == '\r')
      c = ' ';
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

std::string dirOf(const std::string &path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string nodeLabel(const std::string &file, const onnx::NodeProto &n,
                      int64_t opset) {
  std::string who = !n.name().empty() ? "node '" + n.name() + "'"
                    : n.output_size() ? "node producing '" + n.output(0) + "'"
                                      : "unnamed node";
  return file + ": " + who + " (" + n.op_type() + ", opset " +
         std::to_string(opset) + ")";
}

class Importer {
public:
  Importer(MLIRContext &context, const ImportOptions &options,
           ImportedModel &out)
      : context(context), options(options), out(out),
        storage(std::make_shared<Storage>()) {}

  void run();

private:
  [[noreturn]] void fileError(const std::string &what) {
    throw ImportError(options.path + ": " + what);
  }
  void load();
  void checkOpsets();
  void checkStructure();
  void checkInitializer(const onnx::TensorProto &t);
  void refuseMergedWeights();
  const float *initializerData(const onnx::TensorProto &t);
  const float *mapExternal(const onnx::TensorProto &t);
  std::map<std::string, const float *> external;
  void fixBatch();
  void runOnnxChecks();
  void buildFunction();
  RankedTensorType inputType(const onnx::ValueInfoProto &vi, OpBuilder &b);

  MLIRContext &context;
  const ImportOptions &options;
  ImportedModel &out;
  std::shared_ptr<Storage> storage;
  onnx::ModelProto &model() { return storage->model; }
  void applyTrainingInfo();
  void recordTrainingInfo();
  void warnLooksFrozen();
  void refuseUnnamedDynamoWeights();
  int64_t opset = 0;
  // Imported versions of the registered op domains (hc's, extensions').
  std::map<std::string, int64_t> domainVersions;
  std::set<std::string> initializerNames;
  std::set<std::string> trainingState;  // training_info's R, T, V, H
  std::set<std::string> exportConstants;  // torchExportConstants()
};

void Importer::load() {
  int fd = open(options.path.c_str(), O_RDONLY);
  if (fd < 0)
    fileError("cannot open file");
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    fileError("not a regular file");
  }
  if (st.st_size == 0) {
    close(fd);
    fileError("empty file, not an ONNX model");
  }
  std::string bytes(static_cast<std::size_t>(st.st_size), '\0');
  ssize_t got = 0;
  while (got < st.st_size) {
    ssize_t n = read(fd, bytes.data() + got, st.st_size - got);
    if (n <= 0)
      break;
    got += n;
  }
  close(fd);
  if (got != st.st_size)
    fileError("read failed");
  if (!model().ParseFromString(bytes))
    fileError("not an ONNX model (protobuf parse failed: truncated or "
              "foreign file)");
  if (!model().has_graph() || model().ir_version() <= 0)
    fileError("not an ONNX model (no graph or no IR version)");
}

void Importer::checkOpsets() {
  for (const auto &imp : model().opset_import()) {
    const std::string &domain = imp.domain();
    if (domain.empty() || domain == "ai.onnx") {
      opset = imp.version();
    } else if (const hc::import::OpDomain *d = hc::import::findOpDomain(domain)) {
      domainVersions[domain] = imp.version();
      if (imp.version() != d->version)
        fileError("domain '" + domain + "' version " + std::to_string(imp.version()) +
                  " is not known (hc defines version " + std::to_string(d->version) + ")");
    }  // other domains are judged at the nodes that use them
  }
  if (opset == 0)
    fileError("no ai.onnx opset import");
  if (model().ir_version() > hc::import::kMaxIrVersion)
    fileError("IR version " + std::to_string(model().ir_version()) +
              " is newer than supported (up to " +
              std::to_string(hc::import::kMaxIrVersion) + ")");
  if (opset > kMaxOpset)
    fileError("opset " + std::to_string(opset) +
              " of ai.onnx is newer than supported (" +
              std::to_string(kMinOpset) + ".." + std::to_string(kMaxOpset) +
              ")");
  if (opset < kMinOpset)
    fileError("opset " + std::to_string(opset) + " of ai.onnx is older than "
              "supported (" + std::to_string(kMinOpset) + ".." +
              std::to_string(kMaxOpset) + "); re-export with opset 13 or 17");
}

// Precise messages for what libonnx's checker reports vaguely or not at all.
void Importer::checkStructure() {
  const auto &g = model().graph();
  if (g.output_size() == 0)
    fileError("graph has no output (a training graph returns its loss)");
  std::map<std::string, std::string> producer;  // value -> who defines it
  for (const auto &t : g.initializer()) {
    initializerNames.insert(t.name());
    producer[t.name()] = "initializer";
    checkInitializer(t);
  }
  for (const auto &in : g.input())
    if (!producer.count(in.name()))
      producer[in.name()] = "graph input";
  std::set<std::string> laterOutputs;
  for (const auto &n : g.node())
    for (const auto &o : n.output())
      laterOutputs.insert(o);
  for (const auto &n : g.node()) {
    const std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
    if (const hc::import::OpDomain *d = hc::import::findOpDomain(domain)) {
      std::string bad;
      if (!domainVersions.count(domain)) {
        bad = "domain '" + domain + "' is used but the model does not import it "
              "(opset_import {domain: \"" + domain + "\", version: " +
              std::to_string(d->version) + "})";
      } else if (!d->handlers.count(n.op_type())) {
        std::string ops;
        for (const auto &[name, handler] : d->handlers)
          ops += (ops.empty() ? "" : ", ") + name;
        bad = "op '" + n.op_type() + "' is not in domain '" + domain + "' (it has " + ops + ")";
      } else {
        bad = d->validate(n);
      }
      if (!bad.empty())
        throw ImportError(nodeLabel(options.path, n, opset) + ": " + bad);
    } else if (domain != "" && domain != "ai.onnx.ml")
      throw ImportError(nodeLabel(options.path, n, opset) + ": unknown op domain '" +
                        n.domain() + "'");
    else if (opset > kLibOnnxMaxOpset) {
      // libonnx would answer with an older schema: hc's own table judges.
      if (!domain.empty())
        throw ImportError(nodeLabel(options.path, n, opset) + ": domain '" +
                          n.domain() + "' is not supported at opset " +
                          std::to_string(opset));
      std::string bad = hc::import::validateNode(n, opset);
      if (!bad.empty())
        throw ImportError(nodeLabel(options.path, n, opset) + ": " + bad);
    } else if (!onnx::OpSchemaRegistry::Schema(n.op_type(), static_cast<int>(opset),
                                        domain))
      throw ImportError(nodeLabel(options.path, n, opset) + ": unknown op type '" +
                        n.op_type() + "'");
    for (const auto &i : n.input()) {
      if (i.empty() || producer.count(i))
        continue;
      if (laterOutputs.count(i))
        throw ImportError(nodeLabel(options.path, n, opset) + ": input '" + i +
                          "' is produced by a later node (cycle or unsorted "
                          "graph)");
      throw ImportError(nodeLabel(options.path, n, opset) + ": input '" + i +
                        "' is undefined");
    }
    for (const auto &o : n.output()) {
      if (o.empty())
        continue;
      if (producer.count(o))
        throw ImportError(nodeLabel(options.path, n, opset) + ": output '" + o +
                          "' is already defined by " + producer[o]);
      producer[o] = "node '" + n.name() + "'";
    }
  }
  for (const auto &o : g.output())
    if (!producer.count(o.name()))
      fileError("graph output '" + o.name() + "' is never produced");
}

void Importer::checkInitializer(const onnx::TensorProto &t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > kMaxDim)
      fileError("initializer '" + t.name() + "' has an absurd dim " +
                std::to_string(d));
    // 2^40 elements times a 2^31 dim overflows int64: check the product
    // itself (fuzz.import found one that did).
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements)
      fileError("initializer '" + t.name() + "' is absurdly large");
  }
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    if (t.data_type() != onnx::TensorProto::FLOAT)
      fileError("initializer '" + t.name() +
                "': external data is supported for float tensors only");
    external[t.name()] = mapExternal(t);
    return;
  }
  std::size_t have = 0, item = 4;
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    have = t.has_raw_data() ? t.raw_data().size() : t.float_data_size() * 4u;
    break;
  case onnx::TensorProto::DOUBLE:
    item = 8;
    have = t.has_raw_data() ? t.raw_data().size() : t.double_data_size() * 8u;
    break;
  case onnx::TensorProto::INT64:
    item = 8;
    have = t.has_raw_data() ? t.raw_data().size() : t.int64_data_size() * 8u;
    break;
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::BOOL:
    item = t.data_type() == onnx::TensorProto::BOOL ? 1 : 4;
    have = t.has_raw_data() ? t.raw_data().size() : t.int32_data_size() * item;
    break;
  default:
  {
    // Types newer than libonnx 1.12 (IR 9's float8, IR 10's int4) have no
    // name there: say the number.
    std::string name = onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(t.data_type()));
    fileError("initializer '" + t.name() + "' has unsupported element type " +
              (name.empty() ? std::to_string(t.data_type()) : name) +
              " (float, double, int64, int32, bool)");
  }
  }
  if (have != static_cast<std::size_t>(n) * item)
    fileError("initializer '" + t.name() + "' holds " + std::to_string(have) +
              " bytes, its dims need " + std::to_string(n * item));
}

// Float data of an initializer: in the protobuf, or memory-mapped from its
// external data file (which must lie inside the model's folder).
const float *Importer::initializerData(const onnx::TensorProto &t) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    return external.at(t.name());
  if (t.has_raw_data())
    return reinterpret_cast<const float *>(t.raw_data().data());
  return t.float_data().data();
}

const float *Importer::mapExternal(const onnx::TensorProto &t) {
  std::size_t need = 4;
  for (int64_t d : t.dims())
    need *= static_cast<std::size_t>(d);
  std::string location;
  long long offset = 0, length = -1;
  for (const auto &kv : t.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      offset = std::atoll(kv.value().c_str());
    else if (kv.key() == "length")
      length = std::atoll(kv.value().c_str());
  }
  std::string what = "initializer '" + t.name() + "' external data '" +
                     location + "'";
  if (location.empty())
    fileError("initializer '" + t.name() + "' external data has no location");
  if (location[0] == '/' || location == ".." ||
      location.rfind("../", 0) == 0 ||
      location.find("/../") != std::string::npos ||
      (location.size() >= 3 &&
       location.compare(location.size() - 3, 3, "/..") == 0))
    fileError(what + " points outside the model's folder");
  std::string path = dirOf(options.path) + "/" + location;
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0)
    fileError(what + " is missing");
  struct stat st;
  fstat(fd, &st);
  if (length < 0)
    length = static_cast<long long>(need);
  if (offset < 0 || static_cast<std::size_t>(length) != need ||
      offset + length > st.st_size) {
    close(fd);
    fileError(what + ": offset " + std::to_string(offset) + " + length " +
              std::to_string(length) + " does not fit the file's " +
              std::to_string(st.st_size) + " bytes or the dims' " +
              std::to_string(need));
  }
  void *p = mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ,
                 MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED)
    fileError(what + ": mmap failed");
  storage->mappings.emplace_back(p, static_cast<std::size_t>(st.st_size));
  return reinterpret_cast<const float *>(static_cast<const char *>(p) + offset);
}

void Importer::fixBatch() {
  auto *g = model().mutable_graph();
  for (auto &in : *g->mutable_input()) {
    if (initializerNames.count(in.name()))
      continue;
    if (!in.type().has_tensor_type())
      fileError("input '" + in.name() + "' is not a tensor");
    // A missing shape is not a scalar: hc needs every input's rank.
    if (!in.type().tensor_type().has_shape())
      fileError("input '" + in.name() + "' has no shape (hc needs the rank "
                "and dims of every graph input)");
    auto *shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    for (int d = 0; d < shape->dim_size(); ++d) {
      auto *dim = shape->mutable_dim(d);
      bool dynamic = !dim->has_dim_value();
      if (d == 0 && dynamic) {
        if (options.batch <= 0)
          fileError("input '" + in.name() + "' has a dynamic batch axis ('" +
                    dim->dim_param() + "'): pass --batch N");
        dim->set_dim_value(options.batch);
      } else if (dynamic) {
        fileError("input '" + in.name() + "' has a dynamic dim on axis " +
                  std::to_string(d) + "; only the batch axis may be dynamic");
      } else if (dim->dim_value() <= 0 || dim->dim_value() > kMaxDim) {
        fileError("input '" + in.name() + "' has an absurd dim " +
                  std::to_string(dim->dim_value()) + " on axis " +
                  std::to_string(d));
      } else if (d == 0 && options.batch > 0 &&
                 dim->dim_value() != options.batch) {
        fileError("--batch " + std::to_string(options.batch) +
                  " but input '" + in.name() + "' has a fixed batch of " +
                  std::to_string(dim->dim_value()) +
                  "; re-export with a dynamic batch or drop --batch");
      }
    }
  }
}

// Tells libonnx the schemas of every registered op domain, once: its
// checker and shape inference then know hc's and extensions' ops.
void registerDomainSchemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const hc::import::OpDomain &d : hc::import::opDomains()) {
      onnx::OpSchemaRegistry::DomainToVersionRange::Instance().AddDomainToVersion(
          d.name, 1, static_cast<int>(d.version));
      d.registerSchemas();
    }
  });
}

void Importer::runOnnxChecks() {
  // Opsets 18..21: libonnx 1.12 has no schemas for them (it would check
  // and infer with older definitions), so checkStructure validated every
  // node against hc's own table and the handlers infer shapes; an op whose
  // shapes do not fit fails there, naming the node.
  if (opset > kLibOnnxMaxOpset)
    return;
  registerDomainSchemas();
  try {
    if (model().ir_version() <= kLibOnnxMaxIr) {
      // The file form lets the checker resolve external data next to it.
      onnx::checker::check_model(options.path);
    } else {
      // IR 9 and 10 add float8/int4 types and function overloads, none of
      // which hc imports (element types and functions are refused where
      // used): the rest is IR 8, which the checker knows.
      onnx::ModelProto copy = model();
      copy.set_ir_version(kLibOnnxMaxIr);
      onnx::checker::check_model(copy);
    }
  } catch (const std::exception &e) {
    fileError("ONNX checker: " + oneLine(e.what()));
  }
  std::string unsafe;
  if (!hc::import::checkBeforeLibonnxInference(model(), unsafe))
    fileError(unsafe);
  try {
    onnx::ShapeInferenceOptions strict(/*check_type=*/true, /*error_mode=*/1,
                                       /*data_prop=*/false);
    onnx::shape_inference::InferShapes(model(),
                                       onnx::OpSchemaRegistry::Instance(),
                                       strict);
  } catch (const std::exception &e) {
    fileError("ONNX shape inference: " + oneLine(e.what()));
  }
}

RankedTensorType Importer::inputType(const onnx::ValueInfoProto &vi,
                                     OpBuilder &b) {
  const auto &tt = vi.type().tensor_type();
  std::vector<int64_t> shape;
  int64_t n = 1;
  for (const auto &d : tt.shape().dim()) {
    shape.push_back(d.dim_value());
    if (__builtin_mul_overflow(n, d.dim_value(), &n))
      n = kMaxElements + 1;
    if (n > kMaxElements)
      fileError("input '" + vi.name() + "' is absurdly large");
  }
  GraphImporter probe(b, opset);
  try {
    return RankedTensorType::get(shape, probe.elementType(tt.elem_type()));
  } catch (const ImportError &e) {
    fileError("input '" + vi.name() + "': " + e.what());
  }
}

void Importer::buildFunction() {
  const auto &g = model().graph();
  OpBuilder b(&context);
  auto fileLoc = FileLineColLoc::get(&context, options.path, 0, 0);
  out.module = ModuleOp::create(fileLoc);
  b.setInsertionPointToEnd(out.module->getBody());

  // Arguments: data inputs first, then float initializers (parameters).
  std::vector<Type> argTypes;
  std::vector<DictionaryAttr> argAttrs;
  std::vector<std::string> argNames;
  for (const auto &in : g.input()) {
    if (initializerNames.count(in.name()))
      continue;
    argTypes.push_back(inputType(in, b));
    argAttrs.push_back(b.getDictionaryAttr(
        b.getNamedAttr(hc::graph::kInputAttr, b.getStringAttr(in.name()))));
    argNames.push_back(in.name());
  }
  GraphImporter gi(b, opset);
  std::vector<const onnx::TensorProto *> constInits;
  for (const auto &t : g.initializer()) {
    if (trainingState.count(t.name()))
      continue;
    if (t.data_type() != onnx::TensorProto::FLOAT || exportConstants.count(t.name())) {
      constInits.push_back(&t);
      continue;
    }
    std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
    argTypes.push_back(RankedTensorType::get(shape, b.getF32Type()));
    SmallVector<NamedAttribute> attrs{
        b.getNamedAttr(hc::graph::kParamAttr, b.getStringAttr(t.name()))};
    // The exporter records PyTorch's requires_grad=False set (hc.frozen).
    if (std::find(out.frozen.begin(), out.frozen.end(), t.name()) !=
        out.frozen.end())
      attrs.push_back(b.getNamedAttr("hc.frozen", b.getUnitAttr()));
    argAttrs.push_back(b.getDictionaryAttr(attrs));
    argNames.push_back(t.name());
    out.params[t.name()] = ParamData{shape, initializerData(t)};
    auto init = out.training.initialParams.find(t.name());
    if (init != out.training.initialParams.end())
      out.params[t.name()].data =
          storage->owned.emplace_back(init->second).data();
  }

  auto func = b.create<func::FuncOp>(fileLoc, "forward",
                                     b.getFunctionType(argTypes, {}));
  func.setAllArgAttrs(argAttrs);
  Block *body = func.addEntryBlock();
  b.setInsertionPointToStart(body);
  for (size_t i = 0; i < argNames.size(); ++i)
    gi.define(argNames[i], body->getArgument(i));
  for (const auto *t : constInits) {
    Const c;
    c.dtype = t->data_type();
    c.shape.assign(t->dims().begin(), t->dims().end());
    c.data.resize(c.numElements());
    const std::string &raw = t->raw_data();
    for (int64_t i = 0; i < c.numElements(); ++i) {
      switch (t->data_type()) {
      case onnx::TensorProto::INT64:
        c.data[i] = t->has_raw_data()
                        ? reinterpret_cast<const int64_t *>(raw.data())[i]
                        : t->int64_data(i);
        break;
      case onnx::TensorProto::INT32:
        c.data[i] = t->has_raw_data()
                        ? reinterpret_cast<const int32_t *>(raw.data())[i]
                        : t->int32_data(i);
        break;
      case onnx::TensorProto::FLOAT:
        c.data[i] = t->has_raw_data()
                        ? reinterpret_cast<const float *>(raw.data())[i]
                        : t->float_data(i);
        break;
      case onnx::TensorProto::DOUBLE:
        c.data[i] = t->has_raw_data()
                        ? reinterpret_cast<const double *>(raw.data())[i]
                        : t->double_data(i);
        break;
      case onnx::TensorProto::BOOL:
        c.data[i] = t->has_raw_data() ? raw[i] != 0 : t->int32_data(i) != 0;
        break;
      default:
        break;
      }
    }
    gi.defineConst(t->name(), std::move(c));
  }

  // Random ops' seed/step/sample offset become extra data inputs on demand.
  std::map<std::string, Value> rngArgs;
  gi.rngArgument = [&](const std::string &name) -> Value {
    auto it = rngArgs.find(name);
    if (it != rngArgs.end())
      return it->second;
    unsigned index = func.getNumArguments();
    auto type = RankedTensorType::get({}, b.getI64Type());
    func.insertArgument(index, type,
                        b.getDictionaryAttr(b.getNamedAttr(
                            hc::graph::kInputAttr, b.getStringAttr(name))),
                        fileLoc);
    return rngArgs[name] = func.getArgument(index);
  };

  std::map<std::string, int> uses;
  for (const auto &n : g.node())
    for (const auto &i : n.input())
      ++uses[i];
  for (const auto &o : g.output())
    ++uses[o.name()];
  gi.setUsedNames(uses);

  ScopedDiagnosticHandler capture(&context, [&](Diagnostic &d) {
    gi.lastDiagnostic = d.str();
    return success();
  });
  for (const auto &n : g.node()) {
    gi.node = &n;
    gi.loc = NameLoc::get(b.getStringAttr(n.name().empty() ? n.op_type()
                                                           : n.name()),
                          fileLoc);
    try {
      const hc::import::OpHandler *h = hc::import::findHandler(n);
      if (!h)
        gi.fail("op is not supported by hc's importer");
      (*h)(gi);
      for (int i = 0; i < n.output_size(); ++i)
        if (!n.output(i).empty() && gi.outputUsed(i) && !gi.has(n.output(i)))
          gi.fail("output '" + n.output(i) + "' is used but not supported");
    } catch (const ImportError &e) {
      throw ImportError(nodeLabel(options.path, n, opset) + ": " + e.what());
    }
  }

  // Results: the loss (the single scalar float output) first, then the rest.
  gi.node = nullptr;
  std::vector<Value> results;
  std::vector<Attribute> names;
  std::vector<std::pair<std::string, Value>> outputs;
  for (const auto &o : g.output())
    outputs.emplace_back(o.name(), gi.valueOf(o.name()));
  std::vector<int> scalarFloat;
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto t = cast<RankedTensorType>(outputs[i].second.getType());
    if (t.getRank() == 0 && isa<FloatType>(t.getElementType()))
      scalarFloat.push_back(static_cast<int>(i));
  }
  if (scalarFloat.size() != 1) {
    if (scalarFloat.size() > 1)
      fileError("several scalar float outputs; the loss must be the only one");
    auto t = cast<RankedTensorType>(outputs[0].second.getType());
    if (!isa<FloatType>(t.getElementType()))
      fileError("output '" + outputs[0].first + "' has element type " +
                llvm::formatv("{0}", t.getElementType()).str() +
                ": the loss must be a float scalar");
    fileError("output '" + outputs[0].first + "' is not a scalar (rank " +
              std::to_string(t.getRank()) + "): the loss must be a scalar");
  }
  results.push_back(outputs[scalarFloat[0]].second);
  names.push_back(b.getStringAttr(outputs[scalarFloat[0]].first));
  for (size_t i = 0; i < outputs.size(); ++i)
    if (static_cast<int>(i) != scalarFloat[0]) {
      results.push_back(outputs[i].second);
      names.push_back(b.getStringAttr(outputs[i].first));
    }
  b.create<func::ReturnOp>(fileLoc, results);
  std::vector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  func.setFunctionType(b.getFunctionType(func.getArgumentTypes(), resultTypes));
  func->setAttr(hc::graph::kResultNamesAttr, b.getArrayAttr(names));

  if (failed(mlir::verify(*out.module)))
    fileError("imported IR does not verify: " + oneLine(gi.lastDiagnostic));
}

void Importer::run() {
  load();
  checkOpsets();
  checkStructure();
  fixBatch();
  runOnnxChecks();  // after fixBatch: shape inference needs the batch
  for (const auto &p : model().metadata_props())
    out.metadata[p.key()] = p.value();
  for (const auto &p : model().metadata_props())
    if (p.key() == "hc.frozen") {
      std::string s = p.value(), item;
      for (size_t i = 0; i <= s.size(); ++i) {
        if (i == s.size() || s[i] == ',') {
          if (!item.empty())
            out.frozen.push_back(item);
          item.clear();
        } else {
          item += s[i];
        }
      }
    }
  if (model().training_info_size() > 0)
    applyTrainingInfo();
  refuseUnnamedDynamoWeights();
  refuseMergedWeights();
  exportConstants = hc::import::torchExportConstants(model());
  bool folded = false;
  for (const auto &t : model().graph().initializer())
    folded |= t.name().rfind("onnx::", 0) == 0;
  if (folded)
    out.warnings.push_back(
        options.path +
        ": initializers named 'onnx::...' found: the model was exported with "
        "constant folding, so some parameter names were lost (export with "
        "do_constant_folding=False to keep state_dict names)");
  buildFunction();
  if (out.hasTraining)
    recordTrainingInfo();
  warnLooksFrozen();
  out.storage = storage;
}

// An eval-mode export with constant folding merged parameters that held
// equal values (ExportChecks.h): the file would train a tied model.
void Importer::refuseMergedWeights() {
  if (options.allowSharedParams)
    return;
  const std::string m = hc::import::mergedInitializerError(model());
  if (!m.empty())
    fileError(m);
}

// An optimized dynamo export (unnamed folded weights) is refused, naming
// the ways out (OpsetSchemas.cpp, generatedInitializer).
void Importer::refuseUnnamedDynamoWeights() {
  if (out.hasTraining)
    return;
  std::string n = hc::import::generatedInitializer(model(), opset);
  if (!n.empty())
    fileError("float initializer '" + n +
              "' has a graph value's name, not a parameter's: the dynamo "
              "exporter's default optimize=True folded weights and "
              "constants into unnamed initializers, so which tensors train "
              "cannot be told; export with torch.onnx.export(..., "
              "dynamo=True, optimize=False), or give it its parameters "
              "with models/map_params.py MODEL.onnx --state-dict SD -o "
              "OUT.onnx");
}

// ONNX does not record requires_grad: a plain export's fixed tensors look
// trainable. Name the ones hc will train that look frozen (issue 26).
void Importer::warnLooksFrozen() {
  auto f = *out.module->getOps<func::FuncOp>().begin();
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    auto name = f.getArgAttrOfType<StringAttr>(i, hc::graph::kParamAttr);
    if (!name || f.getArgAttr(i, "hc.frozen"))
      continue;
    std::string n = name.str();
    if (llvm::is_contained(options.userFrozen, n))
      continue;  // --freeze names it: frozen, as the warning would advise
    auto it = out.params.find(n);
    if (it != out.params.end() && it->second.data && hc::import::isSinCosTable(it->second))
      out.warnings.push_back(
          options.path + ": parameter '" + n +
          "' is a fixed sin-cos position table, which DiT does not train, "
          "but nothing marks it frozen (ONNX has no requires_grad): it is "
          "trained unless --freeze names it");
    else if (f.getArgument(i).use_empty())
      out.warnings.push_back(
          options.path + ": parameter '" + n +
          "' does not reach the loss (its gradient is zero): it is trained, "
          "weight decay included, unless --freeze names it");
  }
}

// The model's training_info decides the trainable set: Gradient's xs.
void Importer::applyTrainingInfo() {
  hc::import::readTrainingInfo(model(), options.path, out.training, trainingState);
  out.hasTraining = true;
  out.frozen.clear();
  std::set<std::string> xs(out.training.trainable.begin(),
                           out.training.trainable.end());
  for (const auto &t : model().graph().initializer())
    if (t.data_type() == onnx::TensorProto::FLOAT && !xs.count(t.name()) &&
        !trainingState.count(t.name()))
      out.frozen.push_back(t.name());
}

// Gradient's y must be the loss; the optimizer goes on the module for the
// pipeline (hc.training_info).
void Importer::recordTrainingInfo() {
  auto f = *out.module->getOps<func::FuncOp>().begin();
  auto names = f->getAttrOfType<ArrayAttr>(hc::graph::kResultNamesAttr);
  std::string loss = cast<StringAttr>(names[0]).str();
  if (out.training.loss != loss)
    throw hc::import::UnsupportedError(
        options.path + ": training_info: Gradient of '" + out.training.loss +
        "' rather than the loss '" + loss + "' is not supported");
  const TrainingInfo &t = out.training;
  Builder b(&context);
  out.module->getOperation()->setAttr(
      kTrainingInfoAttr,
      b.getDictionaryAttr({
          b.getNamedAttr("optimizer", b.getStringAttr("adam")),
          b.getNamedAttr("lr", b.getF64FloatAttr(t.r)),
          b.getNamedAttr("beta1", b.getF64FloatAttr(t.alpha)),
          b.getNamedAttr("beta2", b.getF64FloatAttr(t.beta)),
          b.getNamedAttr("eps", b.getF64FloatAttr(t.epsilon)),
          b.getNamedAttr("weight_decay", b.getF64FloatAttr(t.normCoefficient)),
          b.getNamedAttr("weight_decay_post",
                         b.getF64FloatAttr(t.normCoefficientPost)),
      }));
}

} // namespace

bool importOnnx(MLIRContext &context, const ImportOptions &options,
                ImportedModel &out, std::string &error, bool *unsupported) {
  registerImportDialects(context);
  if (unsupported)
    *unsupported = false;
  try {
    Importer(context, options, out).run();
    return true;
  } catch (const hc::import::UnsupportedError &e) {
    error = oneLine(e.what());
    if (unsupported)
      *unsupported = true;
  } catch (const ImportError &e) {
    error = oneLine(e.what());
  } catch (const std::exception &e) {
    error = options.path + ": " + oneLine(e.what());
  }
  out = ImportedModel();
  return false;
}

} // namespace hc
