#include "hc/Compiler/Evaluator.h"

#include "EvalSupport.h"

#include "hc/Graph/GraphOps.h"
#include "hc/abi/random.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <functional>

using namespace mlir;
using namespace hc::graph;

namespace hc {

int64_t EvalTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

using namespace hc::eval;

namespace {

EvalTensor constantValue(ConstantOp op) {
  auto attr = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!attr)
    fail("only dense constants are supported");
  EvalTensor r{shapeOf(op.getResult()), {}};
  Type elem = attr.getElementType();
  if (isa<FloatType>(elem)) {
    for (const APFloat &v : attr.getValues<APFloat>())
      r.data.push_back(v.convertToDouble());
  } else if (elem.isInteger(1)) {
    for (bool v : attr.getValues<bool>())
      r.data.push_back(v);
  } else {
    for (const APInt &v : attr.getValues<APInt>())
      r.data.push_back(static_cast<double>(v.getSExtValue()));
  }
  if (static_cast<int64_t>(r.data.size()) != r.numElements())  // splat
    r.data.assign(r.numElements(), r.data.at(0));
  return r;
}

EvalTensor reduce(const EvalTensor &x, ArrayRef<int64_t> axes, bool mean,
                  const Shape &outShape) {
  Shape kept = x.shape;
  for (int64_t a : axes)
    kept[a] = 1;
  EvalTensor r{outShape, std::vector<double>(product(kept), 0.0)};
  Shape st = broadcastStrides(kept, x.shape);
  forEachBroadcast(x.shape, {st}, [&](int64_t flat, const int64_t *off) {
    r.data[off[0]] += x.data[flat];
  });
  if (mean) {
    double count = static_cast<double>(x.numElements()) /
                   std::max<int64_t>(1, r.numElements());
    for (double &v : r.data)
      v /= count;
  }
  return r;
}

EvalTensor softmax(const EvalTensor &x, int64_t axis) {
  int64_t outer = product(x.shape, 0, axis), n = x.shape[axis],
          inner = product(x.shape, axis + 1);
  EvalTensor r = x;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double m = -INFINITY, sum = 0;
      auto at = [&](int64_t k) -> double & {
        return r.data[(o * n + k) * inner + i];
      };
      for (int64_t k = 0; k < n; ++k)
        m = std::max(m, at(k));
      for (int64_t k = 0; k < n; ++k)
        sum += (at(k) = std::exp(at(k) - m));
      for (int64_t k = 0; k < n; ++k)
        at(k) /= sum;
    }
  return r;
}

EvalTensor matmul(const EvalTensor &a0, const EvalTensor &b0, const Shape &out) {
  EvalTensor a = a0, b = b0;
  bool vecA = a.shape.size() == 1, vecB = b.shape.size() == 1;
  if (vecA)
    a.shape.insert(a.shape.begin(), 1);
  if (vecB)
    b.shape.push_back(1);
  int64_t M = a.shape[a.shape.size() - 2], K = a.shape.back(), N = b.shape.back();
  Shape batchA(a.shape.begin(), a.shape.end() - 2),
      batchB(b.shape.begin(), b.shape.end() - 2);
  auto batch = broadcastShapes(batchA, batchB);
  Shape bs(batch->begin(), batch->end());
  EvalTensor r{out, std::vector<double>(product(bs) * M * N, 0.0)};
  Shape sa = broadcastStrides(batchA, bs), sb = broadcastStrides(batchB, bs);
  int64_t flatBatch = 0;
  forEachBroadcast(bs, {sa, sb}, [&](int64_t, const int64_t *off) {
    const double *pa = &a.data[off[0] * M * K];
    const double *pb = &b.data[off[1] * K * N];
    double *pr = &r.data[flatBatch++ * M * N];
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t j = 0; j < N; ++j)
          pr[i * N + j] += pa[i * K + k] * pb[k * N + j];
  });
  return r;
}

// -> softmax(q k^T scale) v for q [B, N, D], k and v [B, L, D] (the
// packed qkv unpacked first), and each row's log-sum-exp of its scores in
// `lse` ([B, heads, N]). bf16: q, k, v and the unnormalized probabilities
// rounded to bf16 where they enter a product (the bf16 kernel's rule).
EvalTensor attention(const std::vector<EvalTensor> &in, int64_t heads, double scale,
                     const Shape &out, EvalTensor &lse, bool bf16) {
  const std::array<EvalTensor, 3> qkv = attentionInputs(in, bf16);
  const EvalTensor &q = qkv[0], &k = qkv[1], &v = qkv[2];
  const int64_t B = q.shape[0], N = q.shape[1], L = k.shape[1], D = q.shape[2],
                Dh = D / heads;
  EvalTensor r{out, std::vector<double>(B * N * D, 0.0)};
  lse = EvalTensor{{B, heads, N}, std::vector<double>(B * heads * N, 0.0)};
  std::vector<double> p(L);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < N; ++i) {
        const double *qi = &q.data[(b * N + i) * D + h * Dh];
        double m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < L; ++j) {
          const double *kj = &k.data[(b * L + j) * D + h * Dh];
          double s = 0;
          for (int64_t d = 0; d < Dh; ++d)
            s += qi[d] * kj[d];
          p[j] = s * scale;
          m = std::max(m, p[j]);
        }
        for (int64_t j = 0; j < L; ++j) {
          sum += (p[j] = std::exp(p[j] - m));
          if (bf16)
            p[j] = bf16Round(p[j]);
        }
        for (int64_t d = 0; d < Dh; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < L; ++j)
            acc += p[j] * v.data[(b * L + j) * D + h * Dh + d];
          r.data[(b * N + i) * D + h * Dh + d] = acc / sum;
        }
        lse.data[(b * heads + h) * N + i] = m + std::log(sum);
      }
  return r;
}

EvalTensor transpose(const EvalTensor &x, ArrayRef<int64_t> perm,
                     const Shape &out) {
  Shape in = stridesOf(x.shape), st(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    st[i] = in[perm[i]];
  EvalTensor r{out, std::vector<double>(x.data.size())};
  forEachBroadcast(out, {st}, [&](int64_t flat, const int64_t *off) {
    r.data[flat] = x.data[off[0]];
  });
  return r;
}

EvalTensor slice(const EvalTensor &x, ArrayRef<int64_t> starts,
                 ArrayRef<int64_t> steps, const Shape &out) {
  Shape in = stridesOf(x.shape), st(out.size());
  int64_t base = 0;
  for (size_t d = 0; d < out.size(); ++d) {
    st[d] = in[d] * steps[d];
    base += starts[d] * in[d];
  }
  EvalTensor r{out, std::vector<double>(product(out))};
  forEachBroadcast(out, {st}, [&](int64_t flat, const int64_t *off) {
    r.data[flat] = x.data[base + off[0]];
  });
  return r;
}

EvalTensor layerNorm(const EvalTensor &x, const EvalTensor *w,
                     const EvalTensor *b, double eps, int64_t axis) {
  int64_t rows = product(x.shape, 0, axis), n = product(x.shape, axis);
  EvalTensor r = x;
  for (int64_t i = 0; i < rows; ++i) {
    double *v = &r.data[i * n], mean = 0, var = 0;
    for (int64_t k = 0; k < n; ++k)
      mean += v[k];
    mean /= n;
    for (int64_t k = 0; k < n; ++k)
      var += (v[k] - mean) * (v[k] - mean);
    var /= n;
    double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t k = 0; k < n; ++k)
      v[k] = (v[k] - mean) * inv * (w ? w->data[k] : 1.0) + (b ? b->data[k] : 0.0);
  }
  return r;
}

// adaLN modulate of x [B, N, D] by shift, scale [B, D]: x (1 + scale) + shift.
EvalTensor modulate(EvalTensor r, const EvalTensor &sh, const EvalTensor &sc) {
  int64_t B = r.shape[0], N = r.shape[1], D = r.shape[2];
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d) {
        double &v = r.data[(b * N + n) * D + d];
        v = v * (1.0 + sc.data[b * D + d]) + sh.data[b * D + d];
      }
  return r;
}

class Interpreter {
public:
  explicit Interpreter(Env &env) : env(env) {}
  Env &env;

  const EvalTensor &get(Value v) {
    auto it = env.find(v);
    if (it == env.end())
      fail("value used before definition");
    return it->second;
  }

  void run(Operation *op);
  void runOp(Operation *op);
};

// precision = "bf16" (hc-bf16-gemms): a GEMM's two operands (0 and 1) are
// read rounded to bf16, the rest of the op in float64 as always. Attention
// rounds inside its products (attention(), attentionGrad()), and so does
// linear_grad_weight_bias (its bias sum reads dY unrounded).
void Interpreter::run(Operation *op) {
  if (!bf16Precision(op) || op->getNumOperands() < 2 ||
      isa<AttentionOp, AttentionGradOp, LinearGradWeightBiasOp>(op)) {
    runOp(op);
    return;
  }
  std::vector<std::pair<Value, EvalTensor>> saved;
  for (unsigned i = 0; i < 2; ++i) {
    Value v = op->getOperand(i);
    if (!v || (i == 1 && v == op->getOperand(0)))
      continue;
    EvalTensor t = get(v);
    saved.emplace_back(v, t);
    for (double &x : t.data)
      x = bf16Round(x);
    env[v] = std::move(t);
  }
  struct Restore {
    Env &env;
    std::vector<std::pair<Value, EvalTensor>> &saved;
    ~Restore() {
      for (auto &[v, t] : saved)
        env[v] = std::move(t);
    }
  } restore{env, saved};
  runOp(op);
}

#define UNARY(OP, EXPR)                                                        \
  .Case<OP>([&](OP o) {                                                        \
    set(elementwise({&get(o.getInput())}, out(), [](const double *v) {         \
      double x = v[0];                                                         \
      return EXPR;                                                             \
    }));                                                                       \
  })
#define BINARY(OP, EXPR)                                                       \
  .Case<OP>([&](OP o) {                                                        \
    set(elementwise({&get(o.getLhs()), &get(o.getRhs())}, out(),               \
                    [](const double *v) {                                      \
                      double a = v[0], b = v[1];                               \
                      return EXPR;                                             \
                    }));                                                       \
  })

void Interpreter::runOp(Operation *op) {
  auto out = [&] { return shapeOf(op->getResult(0)); };
  auto set = [&](EvalTensor t) { env[op->getResult(0)] = std::move(t); };
  bool isInt = op->getNumResults() == 1 &&
               cast<RankedTensorType>(op->getResult(0).getType())
                   .getElementType()
                   .isInteger();
  llvm::TypeSwitch<Operation *>(op)
      .Case<ConstantOp>([&](ConstantOp o) { set(constantValue(o)); })
      BINARY(AddOp, a + b)
      BINARY(SubOp, a - b)
      BINARY(MulOp, a * b)
      BINARY(PowOp, std::pow(a, b))
      BINARY(MaxOp, std::max(a, b))
      BINARY(MinOp, std::min(a, b))
      BINARY(LessOp, double(a < b))
      BINARY(EqualOp, double(a == b))
      .Case<DivOp>([&](DivOp o) {
        set(elementwise({&get(o.getLhs()), &get(o.getRhs())}, out(),
                        [&](const double *v) {
                          if (isInt && v[1] == 0)
                            fail("integer division by zero");
                          return isInt ? std::trunc(v[0] / v[1]) : v[0] / v[1];
                        }));
      })
      .Case<WhereOp>([&](WhereOp o) {
        set(elementwise({&get(o.getCond()), &get(o.getLhs()), &get(o.getRhs())},
                        out(), [](const double *v) { return v[0] ? v[1] : v[2]; }));
      })
      UNARY(NegOp, -x)
      UNARY(SqrtOp, std::sqrt(x))
      UNARY(ExpOp, std::exp(x))
      UNARY(LogOp, std::log(x))
      UNARY(TanhOp, std::tanh(x))
      UNARY(SigmoidOp, 1.0 / (1.0 + std::exp(-x)))
      UNARY(SinOp, std::sin(x))
      UNARY(CosOp, std::cos(x))
      UNARY(ErfOp, std::erf(x))
      UNARY(ReciprocalOp, 1.0 / x)
      UNARY(SiluOp, x / (1.0 + std::exp(-x)))
      .Case<GeluOp>([&](GeluOp o) {
        bool tanhApprox = o.getApproximate() == "tanh";
        set(elementwise({&get(o.getInput())}, out(), [&](const double *v) {
          double x = v[0];
          if (tanhApprox)
            return 0.5 * x *
                   (1.0 + std::tanh(std::sqrt(2.0 / M_PI) *
                                    (x + 0.044715 * x * x * x)));
          return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
        }));
      })
      .Case<CastOp>([&](CastOp o) {
        Type to = o.getResult().getType().getElementType();
        set(elementwise({&get(o.getInput())}, out(), [&](const double *v) {
          if (to.isInteger(1))
            return double(v[0] != 0);
          return to.isInteger() ? std::trunc(v[0]) : v[0];
        }));
      })
      .Case<ReduceMeanOp>([&](ReduceMeanOp o) {
        set(reduce(get(o.getInput()), o.getAxes(), true, out()));
      })
      .Case<ReduceSumOp>([&](ReduceSumOp o) {
        set(reduce(get(o.getInput()), o.getAxes(), false, out()));
      })
      .Case<SoftmaxOp>([&](SoftmaxOp o) {
        set(softmax(get(o.getInput()), o.getAxis()));
      })
      .Case<LayerNormOp>([&](LayerNormOp o) {
        set(layerNorm(get(o.getInput()),
                      o.getWeight() ? &get(o.getWeight()) : nullptr,
                      o.getBias() ? &get(o.getBias()) : nullptr,
                      o.getEpsilon().convertToDouble(), o.getAxis()));
      })
      .Case<ModulateOp>([&](ModulateOp o) {
        set(modulate(get(o.getInput()), get(o.getShift()), get(o.getScale())));
      })
      .Case<ModulatedLayerNormOp>([&](ModulatedLayerNormOp o) {
        set(modulate(layerNorm(get(o.getInput()), nullptr, nullptr,
                               o.getEpsilon().convertToDouble(), 2),
                     get(o.getShift()), get(o.getScale())));
      })
      .Case<GatedResidualOp>([&](GatedResidualOp o) {
        const EvalTensor &x = get(o.getInput()), &g = get(o.getGate()),
                         &h = get(o.getBranch());
        int64_t B = x.shape[0], N = x.shape[1], D = x.shape[2];
        EvalTensor r = x;
        for (int64_t b = 0; b < B; ++b)
          for (int64_t n = 0; n < N; ++n)
            for (int64_t d = 0; d < D; ++d) {
              const int64_t i = (b * N + n) * D + d;
              r.data[i] += g.data[b * D + d] * h.data[i];
            }
        set(std::move(r));
      })
      .Case<LinearOp>([&](LinearOp o) {
        set(linearD(get(o.getInput()), get(o.getWeight()),
                    o.getBias() ? &get(o.getBias()) : nullptr, out()));
      })
      .Case<MatmulOp>([&](MatmulOp o) {
        set(matmul(get(o.getLhs()), get(o.getRhs()), out()));
      })
      .Case<AttentionOp>([&](AttentionOp o) {
        EvalTensor lse;
        std::vector<EvalTensor> in;
        for (Value v : o.getInputs())
          in.push_back(get(v));
        set(attention(in, o.getNumHeads(), o.getScale().convertToDouble(), out(), lse,
                      bf16Precision(o)));
        env[o.getLse()] = std::move(lse);
      })
      .Case<StopGradientOp>([&](StopGradientOp o) { set(get(o.getInput())); })
      .Case<ReshapeOp>([&](ReshapeOp o) {
        EvalTensor r = get(o.getInput());
        r.shape = out();
        set(std::move(r));
      })
      .Case<BroadcastOp>([&](BroadcastOp o) {
        set(elementwise({&get(o.getInput())}, out(),
                        [](const double *v) { return v[0]; }));
      })
      .Case<TransposeOp>([&](TransposeOp o) {
        set(transpose(get(o.getInput()), o.getPerm(), out()));
      })
      .Case<SliceOp>([&](SliceOp o) {
        set(slice(get(o.getInput()), o.getStarts(), o.getSteps(), out()));
      })
      .Case<ConcatOp>([&](ConcatOp o) {
        Shape shape = out();
        int64_t axis = o.getAxis(), outer = product(shape, 0, axis);
        EvalTensor r{shape, {}};
        for (int64_t i = 0; i < outer; ++i)
          for (Value v : o.getInputs()) {
            const EvalTensor &t = get(v);
            int64_t chunk = product(t.shape, axis);
            r.data.insert(r.data.end(), t.data.begin() + i * chunk,
                          t.data.begin() + (i + 1) * chunk);
          }
        set(std::move(r));
      })
      .Case<SplitOp>([&](SplitOp o) {
        // Every piece before any goes into env: an insertion may rehash env
        // and move x.
        const EvalTensor &x = get(o.getInput());
        int64_t axis = o.getAxis(), start = 0;
        Shape steps(x.shape.size(), 1);
        std::vector<EvalTensor> pieces;
        for (auto [i, size] : llvm::enumerate(o.getSizes())) {
          Shape starts(x.shape.size(), 0);
          starts[axis] = start;
          pieces.push_back(slice(x, starts, steps, shapeOf(o.getResult(i))));
          start += size;
        }
        for (auto [i, piece] : llvm::enumerate(pieces))
          env[o.getResult(i)] = std::move(piece);
      })
      .Case<GatherOp>([&](GatherOp o) {
        const EvalTensor &x = get(o.getInput()), &idx = get(o.getIndices());
        int64_t axis = o.getAxis(), dim = x.shape[axis],
                outer = product(x.shape, 0, axis),
                inner = product(x.shape, axis + 1);
        EvalTensor r{out(), {}};
        for (int64_t i = 0; i < outer; ++i)
          for (double v : idx.data) {
            int64_t k = static_cast<int64_t>(v);
            if (k < -dim || k >= dim)
              fail("gather index " + std::to_string(k) + " out of range [0, " +
                   std::to_string(dim) + ")");
            if (k < 0)
              k += dim;
            for (int64_t j = 0; j < inner; ++j)
              r.data.push_back(x.data[(i * dim + k) * inner + j]);
          }
        set(std::move(r));
      })
      .Case<MseLossOp>([&](MseLossOp o) {
        const EvalTensor &p = get(o.getPrediction()), &t = get(o.getTarget());
        double acc = 0;
        for (size_t i = 0; i < p.data.size(); ++i)
          acc += (p.data[i] - t.data[i]) * (p.data[i] - t.data[i]);
        set(EvalTensor{{}, {acc / static_cast<double>(p.data.size())}});
      })
      .Case<RandomUniformOp>([&](RandomUniformOp o) {
        auto seed = static_cast<uint64_t>(get(o.getSeed()).data[0]);
        auto step = static_cast<uint64_t>(get(o.getStep()).data[0]);
        auto offset = static_cast<uint64_t>(get(o.getSampleOffset()).data[0]);
        double low = o.getLow().convertToDouble(),
               high = o.getHigh().convertToDouble();
        Shape shape = out();
        int64_t perSample = product(shape, 1);
        EvalTensor r{shape, std::vector<double>(product(shape))};
        for (int64_t i = 0; i < static_cast<int64_t>(r.data.size()); ++i)
          r.data[i] = low + (high - low) * rt::uniform01(
                                               seed, step, offset + i / perSample,
                                               o.getOpId(), i % perSample);
        set(std::move(r));
      })
      .Default([&](Operation *other) {
        if (evalBackwardOp(other, env))
          return;
        fail("the evaluator does not support '" +
             other->getName().getStringRef().str() + "'");
      });
}

#undef UNARY
#undef BINARY

} // namespace

void eval::evalOp(Operation *op, Env &env) { Interpreter(env).run(op); }

bool evaluate(func::FuncOp fn, const std::vector<EvalTensor> &args,
              std::vector<EvalTensor> &results, std::string &error) {
  if (args.size() != fn.getNumArguments()) {
    error = "expected " + std::to_string(fn.getNumArguments()) +
            " arguments, got " + std::to_string(args.size());
    return false;
  }
  Env env;
  Interpreter interp(env);
  for (auto [i, arg] : llvm::enumerate(fn.getArguments())) {
    if (args[i].shape != shapeOf(arg) ||
        static_cast<int64_t>(args[i].data.size()) != args[i].numElements()) {
      error = "argument #" + std::to_string(i) + " has the wrong shape";
      return false;
    }
    interp.env[arg] = args[i];
  }
  try {
    for (Operation &op : fn.getBody().front()) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        results.clear();
        for (Value v : ret.getOperands())
          results.push_back(interp.get(v));
        return true;
      }
      interp.run(&op);
    }
    error = "function has no return";
  } catch (const EvalError &e) {
    error = e.message;
  }
  return false;
}

} // namespace hc
