// The forward pass a sampler calls, cut out of a DiT training graph.
//
// The exported objective is loss = mse(DiT(x_t, t, y)[:, :C], noise) (DDPM),
// or a flow objective's comparison with its `target` input (velocity and
// noise: out - target; score: out * sigma_t + target, models/transport.py).
// A sampler needs DiT(x_t, t, y) itself, every channel of it: with learned
// sigma the channels past C hold the variance interpolation that the
// sampler uses. So the cut is made at the tensor the loss compares with the
// `noise` or `target` input, through a per-sample scale (the score's
// sigma_t) and before a channel slice when there is one.
#include "StepNames.h"
#include "hc/Passes/Passes.h"
#include "hc/Passes/RandomDraws.h"

using namespace mlir;
using namespace hc::graph;

namespace hc {
#define GEN_PASS_DEF_EXTRACTSAMPLER
#include "hc/Passes/Passes.h.inc"

namespace {

BlockArgument inputNamed(func::FuncOp f, StringRef name) {
  for (BlockArgument a : f.getArguments())
    if (auto n = f.getArgAttrOfType<StringAttr>(a.getArgNumber(), kInputAttr))
      if (n.getValue() == name)
        return a;
  return nullptr;
}

// `v` is shaped [B, 1, ..., 1] (or fewer elements): one factor per sample.
bool isPerSampleFactor(Value v, RankedTensorType full) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  if (!t || t.getRank() > full.getRank())
    return false;
  for (int64_t d = 1; d < t.getRank(); ++d)
    if (t.getDimSize(d) != 1)
      return false;
  return true;
}

// `s` takes channels [0, k) of its input and everything of every other axis.
bool isLeadingChannelSlice(SliceOp s) {
  auto in = cast<RankedTensorType>(s.getInput().getType());
  if (in.getRank() < 2)
    return false;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (s.getStarts()[d] != 0 || s.getSteps()[d] != 1)
      return false;
    if (d != 1 && s.getSizes()[d] != in.getDimSize(d))
      return false;
  }
  return true;
}

LogicalResult extract(func::FuncOp f) {
  BlockArgument xt = inputNamed(f, "x_t"), noise = inputNamed(f, "noise");
  StringRef refName = "noise";
  if (!noise && (noise = inputNamed(f, "target")))
    refName = "target";
  if (!xt || !noise)
    return f.emitError("--sampler: the graph has no '")
           << (xt ? "noise' input (DDPM) or 'target" : "x_t")
           << "' input, so it is not a DiT training objective whose model output "
              "can be found";
  // The one op that compares the model's output with the noise.
  SmallVector<Operation *> users;
  for (Operation &op : f.getBody().front())
    if (llvm::is_contained(op.getOperands(), noise))
      users.push_back(&op);
  if (users.size() > 1)
    return users[1]->emitError("--sampler: the '")
           << refName << "' input feeds more than one op ('"
           << users[0]->getName() << "' and '" << users[1]->getName()
           << "'); cannot tell which one is the loss";
  Operation *compare = users.empty() ? nullptr : users[0];
  if (!compare)
    return f.emitError("--sampler: the '")
           << refName << "' input is unused, so no loss compares a model output with it";
  if (compare->getNumOperands() != 2)
    return compare->emitError("--sampler: '")
           << compare->getName()
           << "' reads the " << refName
           << " but is not a two-operand comparison (mse_loss, sub or add)";
  Value other = compare->getOperand(0) == noise ? compare->getOperand(1)
                                                : compare->getOperand(0);
  if (other == noise)
    return compare->emitError("--sampler: the loss compares the ")
           << refName << " with itself";
  auto want = cast<RankedTensorType>(xt.getType());
  // A score model's loss scales its output by sigma_t first.
  if (auto mul = other.getDefiningOp<MulOp>()) {
    Value a = mul->getOperand(0), b = mul->getOperand(1);
    if (a.getType() == other.getType() && isPerSampleFactor(b, want))
      other = a;
    else if (b.getType() == other.getType() && isPerSampleFactor(a, want))
      other = b;
  }
  Value output = other;
  if (auto slice = other.getDefiningOp<SliceOp>())
    if (isLeadingChannelSlice(slice))
      output = slice.getInput();

  // Shaped like x_t except for the channel count (C, or 2C with sigma).
  auto got = dyn_cast<RankedTensorType>(output.getType());
  bool shaped = got && got.getRank() == want.getRank() && want.getRank() >= 2 &&
                got.getElementType() == want.getElementType();
  for (int64_t d = 0; shaped && d < want.getRank(); ++d)
    shaped = d == 1 ? got.getDimSize(1) % want.getDimSize(1) == 0
                    : got.getDimSize(d) == want.getDimSize(d);
  if (!shaped) {
    Operation *at = output.getDefiningOp() ? output.getDefiningOp() : compare;
    return at->emitError("--sampler: the tensor the loss compares with the ")
           << refName << " is "
           << output.getType() << ", not a model output shaped like x_t "
           << xt.getType() << " (up to a multiple of its channels)";
  }

  // Return the output alone, then drop what only the loss used.
  auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
  ret->setOperands(output);
  Builder b(f.getContext());
  f.setFunctionType(b.getFunctionType(f.getArgumentTypes(), {output.getType()}));
  f->setAttr(kResultNamesAttr, b.getStrArrayAttr({"prediction"}));
  SmallVector<Operation *> ops;
  for (Operation &op : f.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty())
      op->erase();
  if (!noise.use_empty())
    return f.emitError("--sampler: the model itself reads the '") << refName << "' input";
  // A graph-level dropout (a TRAINING-mode export's label dropout: rand <
  // p ? null : y) chooses between an input and a constant or learned null
  // form: the sampler runs the model as evaluation does, on the input's
  // branch (its unconditional half feeds the null class itself). Any other
  // draw would make the sampler random.
  SmallVector<RandomUniformOp> draws(f.getOps<RandomUniformOp>());
  for (RandomUniformOp r : draws)
    for (DrawnChoice &c : choicesOf(r))
      if (c.lhsInputs.empty() != c.rhsInputs.empty())
        c.where.getResult().replaceAllUsesWith(c.lhsInputs.empty() ? c.where.getRhs()
                                                                   : c.where.getLhs());
  ops.clear();
  for (Operation &op : f.getBody().front().without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops))
    if (op->use_empty())
      op->erase();
  for (Operation &op : f.getBody().front())
    if (isa<RandomUniformOp>(op))
      return op.emitError("--sampler: the model draws random numbers other than a dropout "
                          "between an input and a constant or learned null form; a "
                          "sampler must be deterministic: export without them");
  // Inputs only the loss read go too: the noise, and an objective's extra
  // inputs (the VLB's x_start). x_t, t and y are the sampler's interface.
  for (int i = static_cast<int>(f.getNumArguments()) - 1; i >= 0; --i) {
    auto name = f.getArgAttrOfType<StringAttr>(i, kInputAttr);
    if (name && f.getArgument(i).use_empty() &&
        !llvm::is_contained({"x_t", "t", "y"}, name.getValue()))
      f.eraseArgument(i);
  }
  return success();
}

struct ExtractSamplerPass : impl::ExtractSamplerBase<ExtractSamplerPass> {
  void runOnOperation() override {
    func::FuncOp fn = trainingFunction(getOperation(), "--sampler: ");
    if (!fn)
      return signalPassFailure();
    if (resultNames(fn).empty() || resultNames(fn).front() != "loss") {
      fn.emitError("--sampler: the function's first result is not the loss "
                   "(already a sampler, or a step with gradients?)");
      return signalPassFailure();
    }
    if (failed(extract(fn)))
      signalPassFailure();
  }
};

} // namespace
} // namespace hc
