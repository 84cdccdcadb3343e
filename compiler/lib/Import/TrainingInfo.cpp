// ModelProto.training_info -> hc's training step configuration. First every
// rule of the format is checked (bad input, exit 2), then the algorithm must
// be the one hc compiles (else "not supported", exit 3):
//   grads = Gradient(xs..., zs...; xs, zs, y = the loss)
//   X_new..., V_new..., H_new... = Adam(R, T, xs..., grads..., V..., H...)
//   T_new = Add(T, 1)
//   update_binding: each X, V, H and T <- its new value
// Gradient becomes hc-autodiff over xs (every other parameter is frozen),
// Adam hc-optimizer's ONNX Adam, and the bindings the step's persistent
// state. The initialization graph may hold Constant nodes only.
#include "TrainingInfo.h"

#include <onnx/defs/schema.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace hc::import {
namespace {

constexpr const char *kDomain = "ai.onnx.preview.training";
// hc's state keys of Adam's moments (passes/lib/StepNames.h).
const std::string kAdamV = "adam.V:", kAdamH = "adam.H:";

class Reader {
public:
  Reader(const onnx::ModelProto &model, const std::string &path, TrainingInfo &out,
         std::set<std::string> &stateNames)
      : model(model), path(path), out(out), stateNames(stateNames) {}
  void run();

private:
  [[noreturn]] void bad(const std::string &what) const {
    throw ImportError(path + ": training_info: " + what);
  }
  [[noreturn]] void unsupported(const std::string &what) const {
    throw UnsupportedError(path + ": training_info: " + what +
                           " is not supported (hc compiles Gradient + Adam + "
                           "T <- T + 1 with every update bound back)");
  }
  std::string label(const onnx::NodeProto &n, const char *graph) const {
    std::string who = !n.name().empty() ? "'" + n.name() + "'"
                      : n.output_size() ? "producing '" + n.output(0) + "'"
                                        : "(unnamed)";
    return std::string(graph) + " node " + who + " (" + n.op_type() + ")";
  }
  void checkOpsets();
  void checkGraph(const onnx::GraphProto &g, const char *which,
                  std::set<std::string> defined);
  void checkBindings();
  void checkArity(const onnx::NodeProto &n);
  void recognise();
  void initialValues();
  const onnx::TensorProto *initializer(const std::string &name) const;
  std::vector<double> values(const onnx::TensorProto &t, const std::string &what) const;
  const onnx::TensorProto *constantOf(const std::string &name) const;

  const onnx::ModelProto &model;
  const std::string &path;
  TrainingInfo &out;
  std::set<std::string> &stateNames;
  const onnx::TrainingInfoProto *ti = nullptr;
  int64_t opset = 0, trainingOpset = 0;
  std::map<std::string, const onnx::NodeProto *> producer;  // algorithm values
  std::map<std::string, std::string> update;                // key -> value
  // Initialization results by binding key (Constant values).
  std::map<std::string, const onnx::TensorProto *> initValue;
  std::string rName, tName;
  std::vector<std::pair<std::string, std::string>> moments;  // V, H per x
};

const onnx::TensorProto *Reader::initializer(const std::string &name) const {
  for (const auto *g : {&model.graph(), &ti->algorithm()})
    for (const auto &t : g->initializer())
      if (t.name() == name)
        return &t;
  return nullptr;
}

std::vector<double> Reader::values(const onnx::TensorProto &t,
                                   const std::string &what) const {
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    unsupported(what + " in external data");
  int64_t n = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || d > (int64_t(1) << 31))
      bad(what + " has an absurd dim " + std::to_string(d));
    n *= d;
  }
  std::vector<double> v;
  const std::string &raw = t.raw_data();
  auto take = [&](std::size_t item, auto fromRaw, int have, auto field) {
    if ((t.has_raw_data() ? raw.size() / item : static_cast<std::size_t>(have)) !=
            static_cast<std::size_t>(n) ||
        (t.has_raw_data() && raw.size() % item))
      bad(what + " holds a different number of values than its dims need");
    for (int64_t i = 0; i < n; ++i)
      v.push_back(t.has_raw_data() ? fromRaw(raw.data() + i * item) : field(i));
  };
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    take(4, [](const char *p) { float x; std::memcpy(&x, p, 4); return double(x); },
         t.float_data_size(), [&](int i) { return double(t.float_data(i)); });
    break;
  case onnx::TensorProto::DOUBLE:
    take(8, [](const char *p) { double x; std::memcpy(&x, p, 8); return x; },
         t.double_data_size(), [&](int i) { return t.double_data(i); });
    break;
  case onnx::TensorProto::INT64:
    take(8, [](const char *p) { int64_t x; std::memcpy(&x, p, 8); return double(x); },
         t.int64_data_size(), [&](int i) { return double(t.int64_data(i)); });
    break;
  default:
    bad(what + " has element type " +
        onnx::TensorProto::DataType_Name(
            static_cast<onnx::TensorProto::DataType>(t.data_type())) +
        " (float, double or int64 expected)");
  }
  return v;
}

void Reader::checkOpsets() {
  for (const auto &imp : model.opset_import()) {
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      opset = imp.version();
    else if (imp.domain() == kDomain)
      trainingOpset = imp.version();
  }
  if (trainingOpset == 0)
    bad(std::string("the model has no opset import for ") + kDomain +
        " (Gradient and Adam live there; add it, version 1)");
  if (trainingOpset != 1)
    bad(std::string("opset ") + std::to_string(trainingOpset) + " of " + kDomain +
        " is unknown (only version 1 exists)");
}

// Every node input defined before use, every op known, outputs unique.
void Reader::checkGraph(const onnx::GraphProto &g, const char *which,
                        std::set<std::string> defined) {
  for (const auto &t : g.initializer())
    if (!defined.insert(t.name()).second)
      bad(std::string(which) + " initializer '" + t.name() +
          "' redefines a name of the inference graph");
  for (const auto &in : g.input())
    if (!defined.count(in.name()))
      unsupported(std::string(which) + " input '" + in.name() + "' (data fed to the " +
                  which + " graph)");
  for (const auto &n : g.node()) {
    std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
    if (domain != "" && domain != kDomain)
      bad(label(n, which) + ": unknown op domain '" + n.domain() + "'");
    int version = static_cast<int>(domain.empty() ? opset : trainingOpset);
    if (!onnx::OpSchemaRegistry::Schema(n.op_type(), version, domain))
      bad(label(n, which) + ": unknown " + (domain.empty() ? "op" : "training op") +
          " '" + n.op_type() + "' in domain '" + (domain.empty() ? "ai.onnx" : domain) +
          "'");
    for (const auto &i : n.input())
      if (!i.empty() && !defined.count(i))
        bad(label(n, which) + ": input '" + i + "' is undefined");
    if (domain == kDomain)
      checkArity(n);
    for (const auto &o : n.output()) {
      if (o.empty())
        continue;
      if (!defined.insert(o).second)
        bad(label(n, which) + ": output '" + o + "' is already defined");
      if (std::strcmp(which, "algorithm") == 0)
        producer[o] = &n;
    }
  }
  for (const auto &o : g.output())
    if (!defined.count(o.name()))
      bad(std::string(which) + " output '" + o.name() + "' is never produced");
}

void Reader::checkArity(const onnx::NodeProto &n) {
  auto attr = [&](const char *name) -> const onnx::AttributeProto * {
    for (const auto &a : n.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  };
  if (n.op_type() == "Adam") {
    int in = n.input_size(), outs = n.output_size();
    if (in < 6 || (in - 2) % 4)
      bad(label(n, "algorithm") + ": Adam takes R, T and then N each of X, G, V, H "
          "(2 + 4N inputs), got " + std::to_string(in));
    if (outs != 3 * ((in - 2) / 4))
      bad(label(n, "algorithm") + ": Adam over " + std::to_string((in - 2) / 4) +
          " tensors has " + std::to_string(3 * ((in - 2) / 4)) +
          " outputs (X_new, V_new, H_new each), got " + std::to_string(outs));
    for (const auto &a : n.attribute())
      if (a.type() != onnx::AttributeProto::FLOAT)
        bad(label(n, "algorithm") + ": attribute '" + a.name() + "' must be a float");
  } else if (n.op_type() == "Gradient") {
    const auto *xs = attr("xs"), *y = attr("y"), *zs = attr("zs");
    if (!xs || !y)
      bad(label(n, "algorithm") + ": Gradient needs the attributes xs and y");
    if (n.output_size() != xs->strings_size())
      bad(label(n, "algorithm") + ": Gradient has " + std::to_string(n.output_size()) +
          " outputs for " + std::to_string(xs->strings_size()) + " xs");
    std::vector<std::string> expect(xs->strings().begin(), xs->strings().end());
    if (zs)
      expect.insert(expect.end(), zs->strings().begin(), zs->strings().end());
    if (std::vector<std::string>(n.input().begin(), n.input().end()) != expect)
      bad(label(n, "algorithm") + ": Gradient's inputs must be xs followed by zs");
  }
}

void Reader::checkBindings() {
  std::set<std::string> algorithmValues, initValues;
  for (const auto &o : ti->algorithm().output())
    algorithmValues.insert(o.name());
  for (const auto &o : model.graph().output())
    algorithmValues.insert(o.name());
  for (const auto &o : ti->initialization().output())
    initValues.insert(o.name());
  for (const auto &b : ti->update_binding()) {
    if (!initializer(b.key()))
      bad("update_binding key '" + b.key() +
          "' is not an initializer of the graph or the algorithm");
    if (!algorithmValues.count(b.value()))
      bad("update_binding value '" + b.value() + "' (for '" + b.key() +
          "') is not an output of the algorithm or the graph");
    if (!update.emplace(b.key(), b.value()).second)
      bad("update_binding key '" + b.key() + "' is bound twice");
  }
  std::set<std::string> seen;
  for (const auto &b : ti->initialization_binding()) {
    if (!initializer(b.key()))
      bad("initialization_binding key '" + b.key() +
          "' is not an initializer of the graph or the algorithm");
    if (!initValues.count(b.value()))
      bad("initialization_binding value '" + b.value() + "' (for '" + b.key() +
          "') is not an output of the initialization graph");
    if (!seen.insert(b.key()).second)
      bad("initialization_binding key '" + b.key() + "' is bound twice");
  }
}

// A Constant node's value, or nullptr.
const onnx::TensorProto *Reader::constantOf(const std::string &name) const {
  auto it = producer.find(name);
  if (it == producer.end() || it->second->op_type() != "Constant")
    return nullptr;
  for (const auto &a : it->second->attribute())
    if (a.name() == "value" && a.has_t())
      return &a.t();
  return nullptr;
}

void Reader::recognise() {
  const onnx::NodeProto *grad = nullptr, *adam = nullptr;
  for (const auto &n : ti->algorithm().node()) {
    const onnx::NodeProto *&slot = n.op_type() == "Gradient" ? grad : adam;
    if (n.op_type() == "Gradient" || n.op_type() == "Adam") {
      if (slot)
        unsupported("a second " + n.op_type() + " node");
      slot = &n;
    } else if (n.op_type() != "Add" && n.op_type() != "Constant") {
      unsupported(label(n, "algorithm"));
    }
  }
  if (!grad || !adam)
    unsupported(std::string("an algorithm without ") + (grad ? "Adam" : "Gradient"));
  std::string y;
  std::vector<std::string> xs;
  for (const auto &a : grad->attribute()) {
    if (a.name() == "y")
      y = a.s();
    if (a.name() == "xs")
      xs.assign(a.strings().begin(), a.strings().end());
  }
  out.loss = y;
  std::map<std::string, std::string> gradOf;  // x -> its gradient's name
  for (size_t i = 0; i < xs.size(); ++i) {
    const auto *t = initializer(xs[i]);
    bool param = false;
    for (const auto &p : model.graph().initializer())
      param |= p.name() == xs[i] && p.data_type() == onnx::TensorProto::FLOAT;
    if (!t || !param)
      unsupported("Gradient with respect to '" + xs[i] +
                  "', which is not a float initializer of the graph");
    if (grad->output(static_cast<int>(i)).empty())
      unsupported("a Gradient output left empty (for '" + xs[i] + "')");
    if (!gradOf.emplace(xs[i], grad->output(static_cast<int>(i))).second)
      bad("Gradient names '" + xs[i] + "' twice in xs");
  }

  int n = (adam->input_size() - 2) / 4;
  const std::string &r = adam->input(0), &t = adam->input(1);
  const auto *rInit = initializer(r), *tInit = initializer(t);
  if (!rInit || update.count(r))
    unsupported("a learning rate R ('" + r + "') that is not a constant initializer");
  if (!tInit)
    unsupported("an update count T ('" + t + "') that is not an initializer");
  if (tInit->data_type() != onnx::TensorProto::INT64 || tInit->dims_size() != 0)
    bad("Adam's T '" + t + "' must be a scalar int64 initializer");
  if ((rInit->data_type() != onnx::TensorProto::FLOAT &&
       rInit->data_type() != onnx::TensorProto::DOUBLE) ||
      rInit->dims_size() != 0)
    bad("Adam's R '" + r + "' must be a scalar float or double initializer");
  out.r = values(*rInit, "R '" + r + "'").at(0);
  for (const auto &a : adam->attribute()) {
    double v = a.f();
    if (a.name() == "alpha") out.alpha = v;
    else if (a.name() == "beta") out.beta = v;
    else if (a.name() == "epsilon") out.epsilon = v;
    else if (a.name() == "norm_coefficient") out.normCoefficient = v;
    else if (a.name() == "norm_coefficient_post") out.normCoefficientPost = v;
    else bad(label(*adam, "algorithm") + ": unknown attribute '" + a.name() + "'");
  }
  if (!(out.alpha >= 0 && out.alpha < 1 && out.beta >= 0 && out.beta <= 1 &&
        out.epsilon >= 0))
    bad(label(*adam, "algorithm") + ": needs 0 <= alpha < 1, 0 <= beta <= 1, epsilon >= 0");
  stateNames = {r, t};
  rName = r;
  tName = t;

  std::set<std::string> covered;
  auto bound = [&](const std::string &key, const std::string &value, const char *what) {
    auto it = update.find(key);
    if (it == update.end() || it->second != value)
      unsupported(std::string(what) + " of '" + key + "' not bound back to it by update_binding");
  };
  for (int i = 0; i < n; ++i) {
    const std::string &x = adam->input(2 + i), &g = adam->input(2 + n + i),
                      &v = adam->input(2 + 2 * n + i), &h = adam->input(2 + 3 * n + i);
    auto it = gradOf.find(x);
    if (it == gradOf.end() || it->second != g)
      unsupported("Adam's X #" + std::to_string(i) + " '" + x + "' with G '" + g +
                  "' other than its Gradient output");
    if (!covered.insert(x).second)
      bad("Adam names '" + x + "' twice");
    const auto *xInit = initializer(x);
    for (const std::string &m : {v, h}) {
      const auto *mInit = initializer(m);
      if (!mInit)
        unsupported("a moment '" + m + "' that is not an initializer");
      if (mInit->data_type() != onnx::TensorProto::FLOAT ||
          !std::equal(mInit->dims().begin(), mInit->dims().end(), xInit->dims().begin(),
                      xInit->dims().end()))
        bad("Adam's moment '" + m + "' must be a float tensor shaped as '" + x + "'");
      for (const auto &p : model.graph().initializer())
        if (p.name() == m)
          unsupported("a moment '" + m + "' among the graph's initializers");
      stateNames.insert(m);
    }
    bound(x, adam->output(i), "the X_new");
    bound(v, adam->output(n + i), "the V_new");
    bound(h, adam->output(2 * n + i), "the H_new");
    out.trainable.push_back(x);
    moments.push_back({v, h});
  }
  if (covered.size() != xs.size())
    unsupported("a Gradient output that Adam does not use");

  // T <- Add(T, 1).
  auto tb = update.find(t);
  if (tb == update.end())
    unsupported("an update count T '" + t + "' that update_binding does not advance");
  auto pit = producer.find(tb->second);
  const onnx::NodeProto *add = pit == producer.end() ? nullptr : pit->second;
  bool isIncrement = add && add->op_type() == "Add" && add->input_size() == 2 &&
                     (add->input(0) == t || add->input(1) == t);
  if (isIncrement) {
    const std::string &one = add->input(0) == t ? add->input(1) : add->input(0);
    const onnx::TensorProto *c = constantOf(one);
    if (!c)
      c = initializer(one);
    isIncrement = c && !update.count(one) && c->data_type() == onnx::TensorProto::INT64 &&
                  values(*c, "'" + one + "'") == std::vector<double>{1.0};
  }
  if (!isIncrement)
    unsupported("updating T '" + t + "' other than by T + 1");
  if (update.size() != 3 * static_cast<size_t>(n) + 1)
    unsupported("an update_binding beyond the parameters, their moments and T");
}

// Initializer values, then the initialization graph's Constant outputs bound
// over them.
void Reader::initialValues() {
  std::map<std::string, const onnx::TensorProto *> constants;
  for (const auto &n : ti->initialization().node()) {
    if (n.op_type() != "Constant" || n.output_size() != 1)
      unsupported(label(n, "initialization") + " (hc evaluates Constant nodes only)");
    for (const auto &a : n.attribute())
      if (a.name() == "value" && a.has_t())
        constants[n.output(0)] = &a.t();
    if (!constants.count(n.output(0)))
      unsupported(label(n, "initialization") + " without a 'value' tensor");
  }
  for (const auto &b : ti->initialization_binding()) {
    const onnx::TensorProto *c = constants.at(b.value()), *target = initializer(b.key());
    if (c->data_type() != target->data_type() ||
        !std::equal(c->dims().begin(), c->dims().end(), target->dims().begin(),
                    target->dims().end()))
      bad("initialization_binding gives '" + b.key() + "' a value of another type or shape");
    initValue[b.key()] = c;
  }
  auto valueOf = [&](const std::string &name) {
    auto it = initValue.find(name);
    const onnx::TensorProto *t = it != initValue.end() ? it->second : initializer(name);
    return values(*t, "'" + name + "'");
  };
  out.r = valueOf(rName).at(0);
  out.initialT = static_cast<int64_t>(valueOf(tName).at(0));
  auto floats = [](const std::vector<double> &v) {
    return std::vector<float>(v.begin(), v.end());
  };
  for (size_t i = 0; i < out.trainable.size(); ++i) {
    const std::string &x = out.trainable[i];
    for (auto [prefix, m] : {std::pair{kAdamV, moments[i].first},
                             std::pair{kAdamH, moments[i].second}}) {
      std::vector<double> v = valueOf(m);
      if (std::any_of(v.begin(), v.end(), [](double e) { return e != 0; }))
        out.initialMoments[prefix + x] = floats(v);
    }
  }
  for (const auto &[key, c] : initValue)
    if (!stateNames.count(key)) {
      if (c->data_type() != onnx::TensorProto::FLOAT)
        unsupported("initializing the non-float initializer '" + key + "'");
      out.initialParams[key] = floats(values(*c, "'" + key + "'"));
    }
}

void Reader::run() {
  ti = &model.training_info(0);
  if (model.training_info_size() > 1)
    unsupported(std::to_string(model.training_info_size()) + " TrainingInfoProtos");
  checkOpsets();
  std::set<std::string> defined;
  for (const auto &t : model.graph().initializer())
    defined.insert(t.name());
  for (const auto &in : model.graph().input())
    defined.insert(in.name());
  for (const auto &n : model.graph().node())
    for (const auto &o : n.output())
      defined.insert(o);
  checkGraph(ti->algorithm(), "algorithm", defined);
  checkGraph(ti->initialization(), "initialization", {});
  checkBindings();
  recognise();
  initialValues();
}

} // namespace

void readTrainingInfo(const onnx::ModelProto &model, const std::string &path,
                      TrainingInfo &out, std::set<std::string> &stateNames) {
  Reader(model, path, out, stateNames).run();
}

} // namespace hc::import
