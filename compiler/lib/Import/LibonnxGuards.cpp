// Checks that keep libonnx 1.12's shape inference from crashing on hostile
// input: it trusts attribute values and ranks its checker never looks at.
#include "LibonnxGuards.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <vector>

namespace hc::import {

// libonnx 1.12's shape inference divides by a window op's strides and
// dilations without checking them (a Conv with strides [83, 0] dies of
// SIGFPE inside InferShapes: found by fuzz.import), and its checker does not
// look at attribute values. So the window attributes are checked first.
bool checkBeforeLibonnxInference(const onnx::ModelProto &model, std::string &error) {
  static const char *windowOps[] = {"Conv", "ConvTranspose", "ConvInteger",
                                    "QLinearConv", "MaxPool", "AveragePool",
                                    "LpPool", "MaxUnpool", "MaxRoiPool",
                                    "DeformConv", "Col2Im"};
  // Ranks known before inference: graph inputs, initializers, value_info.
  // libonnx's inference indexes the weight's and the attributes' dims by
  // the data input's rank unchecked (a Conv of a rank-3 x with a rank-4 w
  // read past both: SEGV, found by fuzz.import).
  std::map<std::string, int> rankOf;
  const auto &g = model.graph();
  for (const auto *list : {&g.input(), &g.value_info(), &g.output()})
    for (const auto &v : *list)
      if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
        rankOf[v.name()] = v.type().tensor_type().shape().dim_size();
  for (const auto &t : g.initializer())
    rankOf[t.name()] = t.dims_size();
  auto fail = [&](const std::string &what) {
    error = what;
    return false;
  };
  auto nodeName = [](const onnx::NodeProto &n) {
    return "node '" + (n.name().empty() ? n.op_type() : n.name()) + "' (" + n.op_type() + ")";
  };
  for (const auto &n : g.node()) {
    if (n.op_type() == "Conv" || n.op_type() == "ConvTranspose") {
      auto x = n.input_size() > 0 ? rankOf.find(n.input(0)) : rankOf.end();
      auto w = n.input_size() > 1 ? rankOf.find(n.input(1)) : rankOf.end();
      if (x != rankOf.end() && x->second < 3)
        return fail(nodeName(n) + ": input X has rank " + std::to_string(x->second) +
                  ", a convolution needs [N, C, spatial...]");
      if (x != rankOf.end() && w != rankOf.end() && x->second != w->second)
        return fail(nodeName(n) + ": input X has rank " + std::to_string(x->second) +
                  " but weight W rank " + std::to_string(w->second));
      const int spatial = x != rankOf.end() ? x->second - 2 : w != rankOf.end() ? w->second - 2 : -1;
      for (const auto &a : n.attribute()) {
        const bool twice = a.name() == "pads";
        if (spatial < 0 || (a.name() != "kernel_shape" && a.name() != "strides" &&
                            a.name() != "dilations" && !twice && a.name() != "output_padding"))
          continue;
        if (a.ints_size() != (twice ? 2 : 1) * spatial)
          return fail(nodeName(n) + ": attribute " + a.name() + " has " +
                    std::to_string(a.ints_size()) + " values, the input's " +
                    std::to_string(spatial) + " spatial dims need " +
                    std::to_string((twice ? 2 : 1) * spatial));
      }
    }
  }
  for (const auto &n : g.node()) {
    if (std::find_if(std::begin(windowOps), std::end(windowOps), [&](const char *op) {
          return n.op_type() == op;
        }) == std::end(windowOps))
      continue;
    for (const auto &a : n.attribute()) {
      const std::string &k = a.name();
      const bool positive = k == "strides" || k == "dilations" || k == "kernel_shape";
      if (!positive && k != "pads" && k != "group" && k != "output_padding")
        continue;
      std::vector<int64_t> values(a.ints().begin(), a.ints().end());
      if (k == "group")
        values = {a.i()};
      for (int64_t v : values)
        if (positive || k == "group" ? v < 1 : v < 0) {
          std::string list;
          for (int64_t x : values)
            list += (list.empty() ? "" : ", ") + std::to_string(x);
          return fail(nodeName(n) + ": attribute " + k + " must be " +
                      (positive || k == "group" ? "positive" : "non-negative") +
                      ", got [" + list + "]");
        }
    }
  }
  return true;
}

} // namespace hc::import
