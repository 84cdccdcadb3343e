// Every gradient rule against central finite differences, in float64,
// through the autodiff pass and the reference evaluator, on odd sizes.
// Each case is a function body producing %y; the harness adds a random
// weighting input %r and the loss sum(%y * %r), marks float arguments as
// parameters, differentiates, and compares every gradient entry (or a
// sample of 24 per parameter) with (L(p + h) - L(p - h)) / 2h.
#include "hc/Compiler/Evaluator.h"
#include "hc/Graph/GraphOps.h"
#include "hc/Passes/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace {

struct Arg {
  std::string name, type;         // e.g. "x", "tensor<3x5xf64>"
  bool positive = false;          // draw from [0.5, 2] instead of [-1, 1]
  std::vector<double> intData;    // integer inputs (indices): their values
};

struct Case {
  std::string name;
  std::vector<Arg> args;
  std::string body;   // defines %y
  std::string yType;  // type of %y
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

std::vector<int64_t> dims(const std::string &type) {
  std::vector<int64_t> d;
  auto lt = type.find('<'), gt = type.rfind('x');
  if (gt == std::string::npos || gt < lt)
    return d;  // 0-d
  std::string s = type.substr(lt + 1, gt - lt - 1);
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t x = s.find('x', pos);
    d.push_back(std::stoll(s.substr(pos, x - pos)));
    if (x == std::string::npos)
      break;
    pos = x + 1;
  }
  return d;
}

std::string moduleText(const Case &c) {
  std::string sig, allAxes;
  for (const Arg &a : c.args) {
    bool isInt = a.type.find("i64") != std::string::npos;
    sig += "%" + a.name + ": " + a.type + " {" + (isInt ? "hc.input" : "hc.param") +
           " = \"" + a.name + "\"}, ";
  }
  sig += "%r: " + c.yType + " {hc.input = \"r\"}";
  size_t rank = dims(c.yType).size();
  for (size_t i = 0; i < rank; ++i)
    allAxes += (i ? ", " : "") + std::to_string(i);
  return "func.func @f(" + sig +
         ") -> tensor<f64> attributes {hc.result_names = [\"loss\"]} {\n" + c.body +
         "\n  %yr = hc.mul %y, %r : (" + c.yType + ", " + c.yType + ") -> " +
         c.yType + "\n  %l = hc.reduce_sum %yr {axes = array<i64" +
         (allAxes.empty() ? "" : ": " + allAxes) + ">, keepdims = false} : " + c.yType + " -> tensor<f64>\n" +
         "  return %l : tensor<f64>\n}\n";
}

class GradientCheck : public ::testing::TestWithParam<Case> {};

TEST_P(GradientCheck, MatchesCentralDifferences) {
  const Case &c = GetParam();
  mlir::MLIRContext context;
  context.loadDialect<hc::graph::HCDialect, mlir::func::FuncDialect>();
  std::string text = moduleText(c);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  ASSERT_TRUE(module) << text;
  auto primal = module->clone();  // loss only, for the differences

  mlir::PassManager pm(&context);
  pm.addPass(hc::createAutodiff());
  ASSERT_TRUE(mlir::succeeded(pm.run(*module))) << text;
  auto fn = *module->getOps<mlir::func::FuncOp>().begin();
  auto lossFn = *primal.getOps<mlir::func::FuncOp>().begin();

  std::mt19937_64 rng(12345);
  std::vector<hc::EvalTensor> args;
  std::vector<Arg> all = c.args;
  all.push_back(Arg{"r", c.yType});
  for (const Arg &a : all) {
    hc::EvalTensor t{dims(a.type), {}};
    if (!a.intData.empty()) {
      t.data = a.intData;
    } else {
      std::uniform_real_distribution<double> u(a.positive ? 0.5 : -1.0,
                                               a.positive ? 2.0 : 1.0);
      for (int64_t i = 0; i < t.numElements(); ++i)
        t.data.push_back(u(rng));
    }
    args.push_back(std::move(t));
  }
  std::vector<hc::EvalTensor> out;
  std::string error;
  ASSERT_TRUE(hc::evaluate(fn, args, out, error)) << error;

  auto loss = [&](const std::vector<hc::EvalTensor> &at) {
    std::vector<hc::EvalTensor> r;
    std::string e;
    EXPECT_TRUE(hc::evaluate(lossFn, at, r, e)) << e;
    return r.at(0).data.at(0);
  };
  size_t gradIndex = 1, checked = 0;
  for (size_t k = 0; k < c.args.size(); ++k) {
    if (!c.args[k].intData.empty())
      continue;  // integer inputs have no gradient
    ASSERT_LT(gradIndex, out.size()) << "no gradient for " << c.args[k].name;
    const hc::EvalTensor &g = out[gradIndex++];
    ASSERT_EQ(g.shape, args[k].shape);
    int64_t n = args[k].numElements(), stride = std::max<int64_t>(1, n / 24);
    for (int64_t i = 0; i < n; i += stride) {
      const double h = 1e-6;
      auto plus = args, minus = args;
      plus[k].data[i] += h;
      minus[k].data[i] -= h;
      double fd = (loss(plus) - loss(minus)) / (2 * h);
      EXPECT_NEAR(g.data[i], fd, 1e-7 + 1e-6 * std::abs(fd))
          << c.name << ": d loss / d " << c.args[k].name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0u);
}

const std::string T35 = "tensor<3x5xf64>";
std::string un(const std::string &op, const std::string &t = T35) {
  return "  %y = hc." + op + " %x : " + t;
}

std::vector<Case> cases() {
  Arg x{"x", T35}, xp{"x", T35, true};
  auto bin = [](const std::string &op, const std::string &ta, const std::string &tb,
                const std::string &ty, bool positiveB = false) {
    return Case{op, {Arg{"a", ta}, Arg{"b", tb, positiveB}},
                "  %y = hc." + op + " %a, %b : (" + ta + ", " + tb + ") -> " + ty, ty};
  };
  std::vector<Case> v = {
      bin("add", T35, "tensor<5xf64>", T35),
      bin("sub", "tensor<3x1xf64>", T35, T35),
      bin("mul", T35, "tensor<1x5xf64>", T35),
      bin("div", T35, "tensor<3x1xf64>", T35, true),
      bin("max", T35, T35, T35),
      bin("min", T35, "tensor<5xf64>", T35),
      Case{"pow_const", {xp},
           "  %c = hc.constant dense<3.0> : tensor<f64>\n"
           "  %y = hc.pow %x, %c : (tensor<3x5xf64>, tensor<f64>) -> tensor<3x5xf64>", T35},
      Case{"pow_both", {xp, Arg{"e", "tensor<5xf64>"}},
           "  %y = hc.pow %x, %e : (tensor<3x5xf64>, tensor<5xf64>) -> tensor<3x5xf64>", T35},
      Case{"where", {Arg{"a", T35}, Arg{"b", T35}, Arg{"c", T35}},
           "  %m = hc.less %a, %b : (tensor<3x5xf64>, tensor<3x5xf64>) -> tensor<3x5xi1>\n"
           "  %y = hc.where %m, %b, %c : (tensor<3x5xi1>, tensor<3x5xf64>, tensor<3x5xf64>) -> tensor<3x5xf64>", T35},
      Case{"neg", {x}, un("neg"), T35},
      Case{"sqrt", {xp}, un("sqrt"), T35},
      Case{"exp", {x}, un("exp"), T35},
      Case{"log", {xp}, un("log"), T35},
      Case{"tanh", {x}, un("tanh"), T35},
      Case{"sigmoid", {x}, un("sigmoid"), T35},
      Case{"sin", {x}, un("sin"), T35},
      Case{"cos", {x}, un("cos"), T35},
      Case{"erf", {x}, un("erf"), T35},
      Case{"reciprocal", {xp}, un("reciprocal"), T35},
      Case{"silu", {x}, un("silu"), T35},
      Case{"gelu_tanh", {x}, un("gelu"), T35},
      Case{"gelu_erf", {x}, "  %y = hc.gelu %x {approximate = \"none\"} : tensor<3x5xf64>", T35},
      Case{"cast", {x}, "  %q = hc.cast %x : tensor<3x5xf64> -> tensor<3x5xf32>\n"
                        "  %y = hc.cast %q : tensor<3x5xf32> -> tensor<3x5xf64>", T35},
      Case{"reduce_mean", {Arg{"x", "tensor<3x5x7xf64>"}},
           "  %y = hc.reduce_mean %x {axes = array<i64: 0, 2>, keepdims = false} : tensor<3x5x7xf64> -> tensor<5xf64>",
           "tensor<5xf64>"},
      Case{"reduce_sum", {Arg{"x", "tensor<3x5x7xf64>"}},
           "  %y = hc.reduce_sum %x {axes = array<i64: 1>} : tensor<3x5x7xf64> -> tensor<3x1x7xf64>",
           "tensor<3x1x7xf64>"},
      Case{"softmax", {Arg{"x", "tensor<3x5x7xf64>"}},
           "  %y = hc.softmax %x {axis = 1 : i64} : tensor<3x5x7xf64>", "tensor<3x5x7xf64>"},
      Case{"layer_norm", {Arg{"x", "tensor<3x5x7xf64>"}},
           "  %y = hc.layer_norm %x {axis = 2 : i64, epsilon = 1.0e-6 : f64} : (tensor<3x5x7xf64>) -> tensor<3x5x7xf64>",
           "tensor<3x5x7xf64>"},
      Case{"layer_norm_affine", {Arg{"x", "tensor<3x5x7xf64>"}, Arg{"w", "tensor<5x7xf64>"}, Arg{"b", "tensor<5x7xf64>"}},
           "  %y = hc.layer_norm %x scale %w shift %b {axis = 1 : i64, epsilon = 1.0e-5 : f64} : (tensor<3x5x7xf64>, tensor<5x7xf64>, tensor<5x7xf64>) -> tensor<3x5x7xf64>",
           "tensor<3x5x7xf64>"},
      Case{"modulate", {Arg{"x", "tensor<3x5x7xf64>"}, Arg{"sh", "tensor<3x7xf64>"}, Arg{"sc", "tensor<3x7xf64>"}},
           "  %y = hc.modulate %x, %sh, %sc : (tensor<3x5x7xf64>, tensor<3x7xf64>, tensor<3x7xf64>) -> tensor<3x5x7xf64>",
           "tensor<3x5x7xf64>"},
      Case{"modulated_layer_norm", {Arg{"x", "tensor<3x5x7xf64>"}, Arg{"sh", "tensor<3x7xf64>"}, Arg{"sc", "tensor<3x7xf64>"}},
           "  %y = hc.modulated_layer_norm %x, %sh, %sc {epsilon = 1.0e-6 : f64} : (tensor<3x5x7xf64>, tensor<3x7xf64>, tensor<3x7xf64>) -> tensor<3x5x7xf64>",
           "tensor<3x5x7xf64>"},
      Case{"gated_residual", {Arg{"x", "tensor<3x5x7xf64>"}, Arg{"g", "tensor<3x7xf64>"}, Arg{"h", "tensor<3x5x7xf64>"}},
           "  %y = hc.gated_residual %x, %g, %h : (tensor<3x5x7xf64>, tensor<3x7xf64>, tensor<3x5x7xf64>) -> tensor<3x5x7xf64>",
           "tensor<3x5x7xf64>"},
      Case{"linear_bias", {Arg{"x", "tensor<2x3x7xf64>"}, Arg{"w", "tensor<5x7xf64>"}, Arg{"b", "tensor<5xf64>"}},
           "  %y = hc.linear %x, %w, %b : (tensor<2x3x7xf64>, tensor<5x7xf64>, tensor<5xf64>) -> tensor<2x3x5xf64>",
           "tensor<2x3x5xf64>"},
      Case{"linear", {Arg{"x", "tensor<3x7xf64>"}, Arg{"w", "tensor<5x7xf64>"}},
           "  %y = hc.linear %x, %w : (tensor<3x7xf64>, tensor<5x7xf64>) -> tensor<3x5xf64>", T35},
      Case{"matmul_batched", {Arg{"a", "tensor<2x3x4xf64>"}, Arg{"b", "tensor<4x5xf64>"}},
           "  %y = hc.matmul %a, %b : (tensor<2x3x4xf64>, tensor<4x5xf64>) -> tensor<2x3x5xf64>",
           "tensor<2x3x5xf64>"},
      Case{"attention", {Arg{"qkv", "tensor<2x5x18xf64>"}},
           "  %y, %lse = hc.attention %qkv {num_heads = 2 : i64, scale = 0.57 : f64} : (tensor<2x5x18xf64>) -> (tensor<2x5x6xf64>, tensor<2x2x5xf64>)",
           "tensor<2x5x6xf64>"},
      // Cross-attention: 5 queries over 3 keys, k and v the halves of one kv.
      Case{"cross_attention", {Arg{"q", "tensor<2x5x6xf64>"}, Arg{"kv", "tensor<2x3x12xf64>"}},
           "  %h:2 = hc.split %kv {axis = 2 : i64, sizes = array<i64: 6, 6>} : tensor<2x3x12xf64> -> tensor<2x3x6xf64>, tensor<2x3x6xf64>\n"
           "  %y, %lse = hc.attention %q, %h#0, %h#1 {num_heads = 2 : i64, scale = 0.57 : f64} : (tensor<2x5x6xf64>, tensor<2x3x6xf64>, tensor<2x3x6xf64>) -> (tensor<2x5x6xf64>, tensor<2x2x5xf64>)",
           "tensor<2x5x6xf64>"},
      Case{"reshape", {x}, "  %y = hc.reshape %x : tensor<3x5xf64> -> tensor<5x3xf64>", "tensor<5x3xf64>"},
      Case{"broadcast", {Arg{"x", "tensor<3x1xf64>"}},
           "  %y = hc.broadcast %x : tensor<3x1xf64> -> tensor<2x3x5xf64>", "tensor<2x3x5xf64>"},
      Case{"transpose", {Arg{"x", "tensor<2x3x5xf64>"}},
           "  %y = hc.transpose %x {perm = array<i64: 2, 0, 1>} : tensor<2x3x5xf64> -> tensor<5x2x3xf64>",
           "tensor<5x2x3xf64>"},
      Case{"slice", {Arg{"x", "tensor<7x5xf64>"}},
           "  %y = hc.slice %x {starts = array<i64: 1, 1>, sizes = array<i64: 3, 2>, steps = array<i64: 2, 3>} : tensor<7x5xf64> -> tensor<3x2xf64>",
           "tensor<3x2xf64>"},
      Case{"concat", {Arg{"a", "tensor<3x2xf64>"}, Arg{"b", "tensor<3x3xf64>"}},
           "  %y = hc.concat %a, %b {axis = 1 : i64} : (tensor<3x2xf64>, tensor<3x3xf64>) -> tensor<3x5xf64>", T35},
      Case{"split", {Arg{"x", "tensor<3x7xf64>"}},
           "  %s:2 = hc.split %x {axis = 1 : i64, sizes = array<i64: 2, 5>} : tensor<3x7xf64> -> tensor<3x2xf64>, tensor<3x5xf64>\n"
           "  %y = hc.mul %s#1, %s#1 : (tensor<3x5xf64>, tensor<3x5xf64>) -> tensor<3x5xf64>", T35},
      Case{"gather", {Arg{"t", "tensor<7x3xf64>"}, Arg{"i", "tensor<4xi64>", false, {2, 0, 2, 6}}},
           "  %y = hc.gather %t[%i] {axis = 0 : i64} : (tensor<7x3xf64>, tensor<4xi64>) -> tensor<4x3xf64>",
           "tensor<4x3xf64>"},
      Case{"mse_loss", {Arg{"p", T35}, Arg{"t", T35}},
           "  %y = hc.mse_loss %p, %t : (tensor<3x5xf64>, tensor<3x5xf64>) -> tensor<f64>", "tensor<f64>"},
  };
  return v;
}

INSTANTIATE_TEST_SUITE_P(Rules, GradientCheck, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

} // namespace
