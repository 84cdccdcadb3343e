// Graph-level training step -> schedule level (buffers, views, kernel calls).
#include "StepNames.h"
#include "hc/Passes/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

using namespace mlir;
using namespace hc::graph;
namespace hs = hc::schedule;

namespace hc {
#define GEN_PASS_DEF_LOWERTOSCHEDULE
#include "hc/Passes/Passes.h.inc"

namespace {

// A value at the schedule level: a strided window on a contiguous base.
struct Mem {
  Value base;
  SmallVector<int64_t> shape, strides;
  int64_t offset = 0;
  bool contiguous() const {
    if (offset != 0)
      return false;
    int64_t expected = 1;
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (shape[d] != 1 && strides[d] != expected)
        return false;
      expected *= shape[d];
    }
    return cast<MemRefType>(base.getType()).getNumElements() == expected;
  }
};

// NumPy's no-copy reshape: `m` viewed with shape `to`, where each run of
// m's dims (size-1 dims dropped) that merges into or splits from a run of
// `to`'s is evenly strided; nullopt where one is not (the caller copies).
// The patch embedding's NHWC -> NCHW -> flatten -> transpose is then views
// only: its two [B, C, H W] copies forward and two backward were 2.4-2.7 ms
// each per cluster on S/2.
std::optional<Mem> reshapeView(const Mem &m, ArrayRef<int64_t> to) {
  SmallVector<int64_t> from, fromStrides;
  for (size_t d = 0; d < m.shape.size(); ++d)
    if (m.shape[d] != 1)
      from.push_back(m.shape[d]), fromStrides.push_back(m.strides[d]);
  for (int64_t s : llvm::concat<const int64_t>(m.shape, to))
    if (s <= 0)
      return std::nullopt;  // empty or dynamic: the copy path's business
  Mem out = m;
  out.shape.assign(to.begin(), to.end());
  out.strides.assign(to.size(), 0);
  size_t oi = 0, ni = 0;
  while (ni < to.size() && oi < from.size()) {
    if (to[ni] == 1) {
      ++ni;
      continue;
    }
    size_t nj = ni + 1, oj = oi + 1;
    int64_t np = to[ni], op = from[oi];
    while (np != op) {
      if (np < op) {
        if (nj == to.size())
          return std::nullopt;
        np *= to[nj++];
      } else {
        if (oj == from.size())
          return std::nullopt;
        op *= from[oj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (fromStrides[k] != from[k + 1] * fromStrides[k + 1])
        return std::nullopt;
    out.strides[nj - 1] = fromStrides[oj - 1];
    for (size_t k = nj - 1; k > ni; --k)
      out.strides[k - 1] = out.strides[k] * to[k];
    ni = nj, oi = oj;
  }
  for (size_t k = ni; k < to.size(); ++k)
    if (to[k] != 1)
      return std::nullopt;
  if (oi != from.size())
    return std::nullopt;
  // size-1 dims: the stride they would have row-major beside their neighbour
  for (size_t k = to.size(); k-- > 0;)
    if (to[k] == 1)
      out.strides[k] = k + 1 < to.size() ? out.strides[k + 1] * to[k + 1] : 1;
  return out;
}

SmallVector<int64_t> rowMajor(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    s[d] = s[d + 1] * shape[d + 1];
  return s;
}

MemRefType memrefOf(Type tensor) {
  auto t = cast<RankedTensorType>(tensor);
  return MemRefType::get(t.getShape(), t.getElementType());
}

int64_t bytesOf(Type tensor) {
  return hs::byteSize(memrefOf(tensor));
}

int64_t align64(int64_t n) { return (n + 63) / 64 * 64; }

class Lowering {
public:
  Lowering(func::FuncOp graph, int64_t bucketBytes)
      : graph(graph), b(graph.getContext()), bucketBytes(bucketBytes) {}

  LogicalResult run();

private:
  Mem memOf(Value v) {
    auto it = mems.find(v);
    assert(it != mems.end() && "value lowered before its use");
    return it->second;
  }
  Mem whole(Value base) {
    auto t = cast<MemRefType>(base.getType());
    Mem m{base, SmallVector<int64_t>(t.getShape()), rowMajor(t.getShape()), 0};
    return m;
  }
  // The memref for a Mem: the base itself, or a view of it.
  Value materialize(const Mem &m) {
    if (m.contiguous() && cast<MemRefType>(m.base.getType()).getShape() ==
                              ArrayRef<int64_t>(m.shape))
      return m.base;
    auto elem = cast<MemRefType>(m.base.getType()).getElementType();
    auto layout = StridedLayoutAttr::get(b.getContext(), m.offset, m.strides);
    bool identity = m.offset == 0 && m.strides == rowMajor(m.shape);
    auto type = identity ? MemRefType::get(m.shape, elem)
                         : MemRefType::get(m.shape, elem, layout);
    return b.create<hs::ViewOp>(loc, type, m.base);
  }
  Value buffer(StringRef arena, Type tensorType, std::optional<int64_t> offset,
               StringRef name = "") {
    auto op = b.create<hs::BufferOp>(
        loc, memrefOf(tensorType), b.getStringAttr(arena),
        offset ? b.getI64IntegerAttr(*offset) : IntegerAttr(),
        name.empty() ? StringAttr() : b.getStringAttr(name));
    return op;
  }
  // A contiguous copy of a strided value.
  Mem contiguous(const Mem &m, Type tensorType) {
    if (m.contiguous())
      return m;
    Value out = buffer("act", tensorType, std::nullopt);
    call("copy", {materialize(m)}, {out}, b.getDictionaryAttr({}));
    return whole(out);
  }
  Operation *call(StringRef kernel, ValueRange ins, ValueRange outs,
                  DictionaryAttr attrs) {
    return b.create<hs::CallOp>(loc, b.getStringAttr(kernel), ins, outs, attrs);
  }
  void lowerOp(Operation *op);
  LogicalResult layoutPersistent();

  func::FuncOp graph;
  OpBuilder b;
  Location loc = b.getUnknownLoc();
  int64_t bucketBytes;
  llvm::DenseMap<Value, Mem> mems;
  // Results that live in persistent arenas: value -> buffer to write.
  llvm::DenseMap<Value, Value> persistentOut;
  // Trainable parameters in arena order, with byte offsets and sizes.
  struct Slot {
    std::string name;
    Type type;
    int64_t offset;
    Value gradValue;
  };
  std::vector<Slot> trainable;
  int64_t trainableBytes = 0;
  llvm::StringMap<int64_t> paramOffset;
  int64_t paramBytes = 0;
  func::FuncOp step;
  Operation *pendingOptimizer = nullptr;
  // The first call of the update phase (the gradient norm before the
  // optimizer): bucket waits and gradient copies go before it.
  Operation *firstUpdateCall = nullptr;
};

LogicalResult Lowering::layoutPersistent() {
  auto ret = cast<func::ReturnOp>(graph.getBody().front().getTerminator());
  SmallVector<std::string> names = resultNames(graph);
  llvm::StringMap<BlockArgument> params;
  for (BlockArgument a : graph.getArguments())
    if (auto n = graph.getArgAttrOfType<StringAttr>(a.getArgNumber(), kParamAttr))
      params[n.getValue()] = a;
  // Trainable = has a gradient; order = position of the gradient's producer.
  llvm::DenseMap<Operation *, unsigned> position;
  unsigned i = 0;
  for (Operation &op : graph.getBody().front())
    position[&op] = i++;
  for (auto [k, name] : llvm::enumerate(names))
    if (StringRef(name).starts_with("grad:")) {
      std::string p = name.substr(5);
      if (!params.count(p))
        return graph.emitError("gradient '") << name << "' has no parameter";
      trainable.push_back(Slot{p, params[p].getType(), 0, ret.getOperand(k)});
    }
  auto pos = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def ? position[def] : 0u;
  };
  // Ties (gradients of one op) keep argument order: sort on (position, index).
  std::vector<std::pair<unsigned, size_t>> keys;
  for (size_t k = 0; k < trainable.size(); ++k)
    keys.emplace_back(pos(trainable[k].gradValue), k);
  std::sort(keys.begin(), keys.end());
  std::vector<Slot> sorted;
  for (auto &[p, k] : keys)
    sorted.push_back(trainable[k]);
  trainable = std::move(sorted);
  for (Slot &s : trainable) {
    s.offset = paramBytes;
    paramOffset[s.name] = paramBytes;
    paramBytes += align64(bytesOf(s.type));
  }
  trainableBytes = paramBytes;
  for (auto &[name, arg] : params)
    if (!paramOffset.count(name)) {
      paramOffset[name] = paramBytes;
      paramBytes += align64(bytesOf(arg.getType()));
    }
  return success();
}

void Lowering::lowerOp(Operation *op) {
  loc = op->getLoc();
  auto setView = [&](Value result, Mem m) { mems[result] = m; };
  if (auto c = dyn_cast<ConstantOp>(op)) {
    Value v = b.create<hs::ConstantOp>(loc, memrefOf(c.getType()), c.getValue());
    mems[c.getResult()] = whole(v);
    return;
  }
  if (auto r = dyn_cast<ReshapeOp>(op)) {
    const Mem &in = memOf(r.getInput());
    auto shape = r.getType().getShape();
    if (!in.contiguous())
      if (std::optional<Mem> view = reshapeView(in, shape)) {
        setView(r.getResult(), *view);
        return;
      }
    Mem m = contiguous(in, r.getInput().getType());
    setView(r.getResult(), Mem{m.base, SmallVector<int64_t>(shape),
                               rowMajor(shape), 0});
    return;
  }
  if (auto sg = dyn_cast<StopGradientOp>(op)) {  // a graph not differentiated
    setView(sg.getResult(), memOf(sg.getInput()));
    return;
  }
  if (auto t = dyn_cast<TransposeOp>(op)) {
    Mem m = memOf(t.getInput()), out = m;
    for (auto [i, p] : llvm::enumerate(t.getPerm())) {
      out.shape[i] = m.shape[p];
      out.strides[i] = m.strides[p];
    }
    setView(t.getResult(), out);
    return;
  }
  auto sliceOf = [&](const Mem &m, ArrayRef<int64_t> starts,
                     ArrayRef<int64_t> sizes, ArrayRef<int64_t> steps) {
    Mem out = m;
    for (size_t d = 0; d < starts.size(); ++d) {
      out.offset += starts[d] * m.strides[d];
      out.strides[d] = m.strides[d] * steps[d];
      out.shape[d] = sizes[d];
    }
    return out;
  };
  if (auto s = dyn_cast<SliceOp>(op)) {
    setView(s.getResult(), sliceOf(memOf(s.getInput()), s.getStarts(),
                                   s.getSizes(), s.getSteps()));
    return;
  }
  if (auto s = dyn_cast<SplitOp>(op)) {
    Mem m = memOf(s.getInput());
    int64_t start = 0, axis = s.getAxis();
    for (auto [i, size] : llvm::enumerate(s.getSizes())) {
      SmallVector<int64_t> starts(m.shape.size(), 0), sizes(m.shape),
          steps(m.shape.size(), 1);
      starts[axis] = start;
      sizes[axis] = size;
      setView(s.getResult(i), sliceOf(m, starts, sizes, steps));
      start += size;
    }
    return;
  }
  if (auto bc = dyn_cast<BroadcastOp>(op)) {
    Mem m = memOf(bc.getInput()), out = m;
    auto shape = bc.getType().getShape();
    size_t lead = shape.size() - m.shape.size();
    out.shape.assign(shape.begin(), shape.end());
    out.strides.assign(shape.size(), 0);
    for (size_t d = 0; d < m.shape.size(); ++d)
      out.strides[lead + d] = m.shape[d] == 1 ? 0 : m.strides[d];
    setView(bc.getResult(), out);
    return;
  }
  DictionaryAttr attrs = op->getAttrDictionary();
  if (isa<AdamWOp, AdamOp, SgdOp>(op)) {
    // One call over the flat trainable region of the arenas; the scalar
    // operands (AdamW's step, Adam's R and T) come first.
    auto flat = RankedTensorType::get({trainableBytes / 4}, b.getF32Type());
    SmallVector<Value> ins, outs;
    bool adam = !isa<SgdOp>(op);
    unsigned scalars = isa<AdamOp>(op) ? 2 : adam ? 1 : 0;
    for (unsigned k = 0; k < scalars; ++k)
      ins.push_back(materialize(memOf(op->getOperand(k))));
    Value p = buffer("param", flat, 0), g = buffer("grad", flat, 0);
    ins.append({p, g});
    outs.push_back(p);
    if (adam) {
      Value m = buffer("m", flat, 0), v = buffer("v", flat, 0);
      ins.append({m, v});
      outs.append({m, v});
    }
    // Clipping by global norm first (torch.nn.utils.clip_grad_norm_): the
    // norm of the all-reduced gradients, then the scale, in place. Its
    // max_grad_norm is a step hyperparameter, 0 (off) as compiled; the norm
    // is kept as "grad_norm" for the host to log.
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    Value norm = buffer("grad", scalar, trainableBytes, "grad_norm");
    firstUpdateCall = call("grad_norm", {g}, {norm}, b.getDictionaryAttr({}));
    call("grad_clip", {norm, g}, {g},
         b.getDictionaryAttr(b.getNamedAttr("max_grad_norm", b.getF64FloatAttr(0.0))));
    pendingOptimizer = call(op->getName().stripDialect(), ins, outs, attrs);
    return;
  }
  SmallVector<Value> ins, outs;
  for (Value v : op->getOperands())
    ins.push_back(materialize(memOf(v)));
  for (Value r : op->getResults()) {
    Value out = persistentOut.lookup(r);
    if (!out)
      out = buffer("act", r.getType(), std::nullopt);
    outs.push_back(out);
    mems[r] = whole(out);
  }
  call(op->getName().stripDialect(), ins, outs, attrs);
}

LogicalResult Lowering::run() {
  if (failed(layoutPersistent()))
    return failure();
  MLIRContext *ctx = graph.getContext();
  b.setInsertionPoint(graph);
  step = b.create<func::FuncOp>(graph.getLoc(), "step", b.getFunctionType({}, {}));
  Block *body = step.addEntryBlock();
  b.setInsertionPointToStart(body);
  loc = graph.getLoc();

  // Arguments: inputs, parameters, optimizer state.
  int64_t inputIndex = 0;
  llvm::StringMap<Value> stateArg;
  for (BlockArgument a : graph.getArguments()) {
    unsigned n = a.getArgNumber();
    if (auto name = graph.getArgAttrOfType<StringAttr>(n, kInputAttr)) {
      Value v = b.create<hs::InputOp>(loc, memrefOf(a.getType()),
                                      b.getI64IntegerAttr(inputIndex++), name);
      mems[a] = whole(v);
    } else if (auto name = graph.getArgAttrOfType<StringAttr>(n, kParamAttr)) {
      mems[a] = whole(buffer("param", a.getType(), paramOffset[name.getValue()],
                             name.getValue()));
    } else if (auto key = graph.getArgAttrOfType<StringAttr>(n, kStateAttr)) {
      StringRef k = key.getValue();
      Value v;
      if (k.consume_front(kAdamWFirst) || k.consume_front(kAdamFirst))
        v = buffer("m", a.getType(), paramOffset[k], key.getValue());
      else if (k.consume_front(kAdamWSecond) || k.consume_front(kAdamSecond))
        v = buffer("v", a.getType(), paramOffset[k], key.getValue());
      else
        v = buffer("state", a.getType(), 0, key.getValue());
      mems[a] = whole(v);
      stateArg[key.getValue()] = v;
    } else {
      return graph.emitError("argument #") << n << " has no hc.input/param/state name";
    }
  }
  // Results that persist: gradients into the grad arena, the step counter
  // back into its state buffer (parameters/moments are updated in place).
  auto ret = cast<func::ReturnOp>(graph.getBody().front().getTerminator());
  SmallVector<std::string> names = resultNames(graph);
  llvm::StringMap<Value> gradSlot;
  for (const Slot &s : trainable) {
    OpBuilder::InsertionGuard guard(b);
    Value buf = buffer("grad", s.type, s.offset, "grad:" + s.name);
    gradSlot[s.name] = buf;
    // A gradient computed by a kernel is written straight into its slot.
    if (s.gradValue.getDefiningOp() &&
        !isa<ConstantOp, ReshapeOp, TransposeOp, SliceOp, SplitOp, BroadcastOp>(
            s.gradValue.getDefiningOp()) &&
        !persistentOut.count(s.gradValue))
      persistentOut[s.gradValue] = buf;
  }
  for (auto [k, name] : llvm::enumerate(names))
    for (const char *counter : {kAdamWStep, kAdamStep})
      if (name == std::string("state:") + counter)
        persistentOut[ret.getOperand(k)] = stateArg[counter];

  for (Operation &op : graph.getBody().front().without_terminator())
    lowerOp(&op);
  loc = graph.getLoc();
  // Gradients that are views or constants are copied into their slots,
  // before the optimizer reads them.
  if (firstUpdateCall)
    b.setInsertionPoint(firstUpdateCall);
  for (const Slot &s : trainable) {
    Value slot = gradSlot[s.name];
    Mem m = memOf(s.gradValue);
    if (m.base != slot)
      call("copy", {materialize(m)}, {slot}, b.getDictionaryAttr({}));
  }
  b.setInsertionPointToEnd(body);
  if (names.size() == 1 && names[0] == "prediction") {
    // A sampler (hc-extract-sampler): the output goes to a named buffer the
    // host reads after step(); nothing runs after it, so it stays intact.
    // Its first element stands in as the step's "loss".
    Value out = buffer("act", ret.getOperand(0).getType(), std::nullopt, "prediction");
    call("copy", {materialize(memOf(ret.getOperand(0)))}, {out}, b.getDictionaryAttr({}));
    b.create<hs::LossOp>(loc, out);
  } else {
    b.create<hs::LossOp>(loc, materialize(memOf(ret.getOperand(0))));
  }

  // Gradient buckets: arena slices in production order; start each one's
  // all-reduce after the last write of its gradients, wait before the
  // optimizer.
  llvm::DenseMap<Value, Operation *> lastWrite;
  for (Operation &op : *body)
    if (auto c = dyn_cast<hs::CallOp>(op))
      for (Value out : c.getOuts())
        lastWrite[out] = &op;
  SmallVector<Value> tokens;
  size_t first = 0;
  int64_t bucketId = 0;
  while (first < trainable.size()) {
    size_t last = first;
    int64_t start = trainable[first].offset;
    while (last + 1 < trainable.size() &&
           trainable[last + 1].offset - start < bucketBytes)
      ++last;
    int64_t end = last + 1 < trainable.size() ? trainable[last + 1].offset
                                              : trainableBytes;
    Operation *after = nullptr;
    for (size_t i = first; i <= last; ++i) {
      Operation *w = lastWrite.lookup(gradSlot[trainable[i].name]);
      if (w && (!after || after->isBeforeInBlock(w)))
        after = w;
    }
    OpBuilder::InsertionGuard guard(b);
    if (after)
      b.setInsertionPointAfter(after);
    else
      b.setInsertionPointToStart(body);
    auto type = RankedTensorType::get({(end - start) / 4}, b.getF32Type());
    Value slice = b.create<hs::BufferOp>(loc, memrefOf(type), b.getStringAttr("grad"),
                                         b.getI64IntegerAttr(start), StringAttr());
    // Gradient accumulation (hc-run --accumulate): the bucket joins its
    // accumulator before its all-reduce starts, so the last micro-batch's
    // sum overlaps the rest of its backward. One micro-batch as compiled.
    if (pendingOptimizer) {
      Value acc = b.create<hs::BufferOp>(loc, memrefOf(type), b.getStringAttr("accum"),
                                         b.getI64IntegerAttr(start), StringAttr());
      call("grad_accumulate", {slice, acc}, {slice, acc},
           b.getDictionaryAttr({b.getNamedAttr("micro_batch", b.getF64FloatAttr(0)),
                                b.getNamedAttr("micro_batches", b.getF64FloatAttr(1))}));
    }
    tokens.push_back(b.create<hs::AllReduceStartOp>(
        loc, hs::TokenType::get(ctx), slice, b.getI64IntegerAttr(bucketId++)));
    first = last + 1;
  }
  if (firstUpdateCall) {
    b.setInsertionPoint(firstUpdateCall);
    for (Value t : tokens)
      b.create<hs::WaitOp>(loc, t);
    // The step counter increment must follow the optimizer that reads it.
  } else {
    b.setInsertionPointToEnd(body);
    for (Value t : tokens)
      b.create<hs::WaitOp>(loc, t);
  }
  b.setInsertionPointToEnd(body);
  b.create<func::ReturnOp>(loc);

  step->setAttr("hcs.param_bytes", b.getI64IntegerAttr(paramBytes));
  step->setAttr("hcs.trainable_bytes", b.getI64IntegerAttr(trainableBytes));
  step->setAttr("hcs.buckets", b.getI64IntegerAttr(bucketId));
  graph.erase();
  return success();
}

struct LowerToSchedulePass : impl::LowerToScheduleBase<LowerToSchedulePass> {
  using LowerToScheduleBase::LowerToScheduleBase;
  void runOnOperation() override {
    func::FuncOp fn = trainingFunction(getOperation(), "");
    if (!fn)
      return signalPassFailure();
    if (failed(Lowering(fn, bucketBytes).run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace hc
