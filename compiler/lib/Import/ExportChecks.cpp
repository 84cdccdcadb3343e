// What an export's initializers show: see ExportChecks.h.
#include "ExportChecks.h"

#include <cmath>

#include <set>
#include <vector>

namespace hc::import {
namespace {

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

// "/dit/blocks.1/adaLN_modulation/adaLN_modulation.1/Gemm" -> the dotted
// module path "dit.blocks.1.adaLN_modulation.1": a scope named after its
// parent plus ".k" is the parent's child k (Sequential, ModuleList).
std::vector<std::string> modulePath(const std::string &nodeName) {
  std::vector<std::string> scopes = split(nodeName, '/');
  std::vector<std::string> path;
  // The last component is the op; the first is empty (a leading '/').
  for (size_t i = 1; i + 1 < scopes.size(); ++i) {
    const std::string &s = scopes[i];
    if (s.empty())
      return {};
    const std::string parent = i > 1 ? scopes[i - 1] : std::string();
    std::string rest = !parent.empty() && s.rfind(parent + ".", 0) == 0
                           ? s.substr(parent.size() + 1)
                           : s;
    for (const std::string &part : split(rest, '.'))
      path.push_back(part);
  }
  return path;
}

} // namespace

std::string mergedInitializer(const onnx::ModelProto &model) {
  const onnx::GraphProto &g = model.graph();
  std::set<std::string> names;
  std::set<std::string> floats;
  for (const auto &t : g.initializer()) {
    names.insert(t.name());
    if (t.data_type() == onnx::TensorProto::FLOAT)
      floats.insert(t.name());
  }
  // torch 1.13's deduplication: the dropped parameter becomes an Identity of
  // the kept one, under its own name ("dit.blocks.1...weight" =
  // Identity(dit.blocks.0...weight)).
  for (const auto &n : g.node())
    if (n.op_type() == "Identity" && n.input_size() == 1 && n.output_size() == 1 &&
        floats.count(n.input(0)) && !names.count(n.output(0))) {
      std::vector<std::string> in = split(n.input(0), '.'), out = split(n.output(0), '.');
      if (in.size() >= 3 && out.size() == in.size() && in.back() == out.back())
        return n.input(0) + "|" + n.name() + "|" + n.output(0);
    }
  for (const auto &t : g.initializer()) {
    if (t.data_type() != onnx::TensorProto::FLOAT)
      continue;
    std::vector<std::string> own = split(t.name(), '.');
    if (own.size() < 3)
      continue;  // not a submodule's parameter
    const std::string leaf = own.back();
    own.pop_back();
    for (const auto &n : g.node()) {
      bool uses = false;
      for (const auto &in : n.input())
        uses |= in == t.name();
      if (!uses || n.name().empty() || n.name()[0] != '/')
        continue;
      std::vector<std::string> path = modulePath(n.name());
      if (path.size() < own.size())
        continue;
      // The node's module, as many trailing components as the parameter's.
      std::vector<std::string> tail(path.end() - static_cast<long>(own.size()), path.end());
      if (tail == own)
        continue;
      std::string theirs;
      for (const std::string &c : tail)
        theirs += c + ".";
      theirs += leaf;
      // Another module of the same shape of path (only indices differ)
      // whose own parameter is absent: the exporter merged the two.
      bool sameShape = true;
      for (size_t k = 0; k < own.size(); ++k) {
        const bool digits = !own[k].empty() &&
                            own[k].find_first_not_of("0123456789") == std::string::npos;
        sameShape &= digits ? !tail[k].empty() && tail[k].find_first_not_of("0123456789") ==
                                                      std::string::npos
                            : tail[k] == own[k];
      }
      if (sameShape && !names.count(theirs))
        return t.name() + "|" + n.name() + "|" + theirs;
    }
  }
  return "";
}

std::string mergedInitializerError(const onnx::ModelProto &model) {
  const std::string m = mergedInitializer(model);
  if (m.empty())
    return "";
  const size_t a = m.find('|'), b = m.find('|', a + 1);
  return "initializer '" + m.substr(0, a) + "' is also used by node '" +
         m.substr(a + 1, b - a - 1) + "', whose module's own '" + m.substr(b + 1) +
         "' is not in the file: the exporter merged parameters that held equal "
         "values (an eval-mode export with constant folding), so training would tie "
         "them; export with torch.onnx.export(..., training=torch.onnx.TrainingMode."
         "TRAINING, do_constant_folding=False) (models/export_dit.py does), or pass "
         "--allow-shared-params if the model ties them on purpose";
}

bool isSinCosTable(const ParamData &p) {
  if (p.shape.size() < 2 || p.shape.size() > 3 ||
      (p.shape.size() == 3 && p.shape[0] != 1))
    return false;
  const int64_t T = p.shape[p.shape.size() - 2], D = p.shape.back();
  if (T < 2 || D < 4 || D % 2)
    return false;
  // [M] positions -> `half` sin then `half` cos channels at column `at`.
  auto matches1d = [&](int64_t width, int64_t at, auto position) {
    const int64_t half = width / 2;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < half; ++k) {
        double angle = position(t) / std::pow(10000.0, double(k) / half);
        const float *row = p.data + t * D + at;
        if (std::abs(row[k] - std::sin(angle)) > 1e-5 ||
            std::abs(row[half + k] - std::cos(angle)) > 1e-5)
          return false;
      }
    return true;
  };
  const int64_t g = static_cast<int64_t>(std::llround(std::sqrt(double(T))));
  if (g * g == T && D % 4 == 0 &&
      matches1d(D / 2, 0, [&](int64_t t) { return double(t % g); }) &&
      matches1d(D / 2, D / 2, [&](int64_t t) { return double(t / g); }))
    return true;
  return matches1d(D, 0, [](int64_t t) { return double(t); });
}

} // namespace hc::import
