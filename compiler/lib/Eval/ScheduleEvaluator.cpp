#include "hc/Compiler/ScheduleEvaluator.h"

#include "EvalSupport.h"

#include "hc/Schedule/ScheduleOps.h"
#include "hc/abi/step_program.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
namespace hs = hc::schedule;

namespace hc {

using namespace hc::eval;

namespace {

// Storage is one double per slot of the planned layout, a slot being the
// smallest element size in the step (4 bytes for float32 steps, 1 where a
// step holds i1 masks): buffers that share bytes in the plan share slots
// here, and a plan that overlaps live buffers corrupts this evaluation as it
// would corrupt the real step.
int64_t elementBytes(MemRefType type) {
  return hs::byteSize(type) / std::max<int64_t>(1, type.getNumElements());
}

// Where a memref lives: a storage vector, the slot of element 0 and slot
// strides per dimension.
// bf16: a bf16 buffer (hc-bf16-storage): a value stored there is rounded
// to bf16 (as the runtime stores it; the bf16 GEMM that reads it rounds the
// same value to itself, so the evaluation does not change).
struct Mem {
  std::vector<double> *storage = nullptr;
  int64_t base = 0;
  Shape shape, strides;
  bool bf16 = false;
};

int64_t slotsPerElement(MemRefType type, int64_t slotBytes) {
  int64_t bytes = elementBytes(type);
  if (bytes <= 0 || bytes % slotBytes != 0)
    fail("element type of " + std::to_string(bytes) +
         " bytes is not supported by the schedule evaluator");
  return bytes / slotBytes;
}

Mem contiguous(std::vector<double> *storage, int64_t base, MemRefType type,
               int64_t slotBytes) {
  Shape shape(type.getShape().begin(), type.getShape().end());
  Shape strides = stridesOf(shape);
  for (int64_t &s : strides)
    s *= slotsPerElement(type, slotBytes);
  return Mem{storage, base, shape, strides, type.getElementType().isBF16()};
}

// Calls fn(storage slot) for each element in row-major order.
template <typename Fn> void forEachSlot(const Mem &m, Fn fn) {
  forEachBroadcast(m.shape, {m.strides},
                   [&](int64_t, const int64_t *off) { fn(m.base + off[0]); });
}

EvalTensor read(const Mem &m) {
  EvalTensor t{m.shape, {}};
  t.data.reserve(t.numElements());
  forEachSlot(m, [&](int64_t slot) { t.data.push_back(m.storage->at(slot)); });
  return t;
}

void write(const Mem &m, const EvalTensor &t) {
  if (t.shape != m.shape ||
      static_cast<int64_t>(t.data.size()) != t.numElements())
    fail("result shape does not match its buffer");
  size_t k = 0;
  forEachSlot(m, [&](int64_t slot) {
    const double v = t.data[k++];
    m.storage->at(slot) = m.bf16 ? bf16Round(v) : v;
  });
}

} // namespace

struct ScheduleEvaluator::Impl {
  func::FuncOp step;
  std::map<std::string, std::vector<double>> arenas;
  std::vector<std::vector<double>> inputStorage, constantStorage;
  llvm::DenseMap<Value, Mem> mems;
  std::map<std::string, Mem> named;
  std::vector<std::pair<std::string, Shape>> inputs;
  std::vector<Mem> inputMems;
  Mem loss;
  int64_t slotBytes = 4;

  void layout();
  void call(hs::CallOp c);
  const Mem &memOf(Value v) const {
    auto it = mems.find(v);
    if (it == mems.end())
      fail("a buffer is used before it is defined");
    return it->second;
  }
};

void ScheduleEvaluator::Impl::layout() {
  slotBytes = 4;
  step.walk([&](Operation *op) {
    for (Value r : op->getResults())
      if (auto t = dyn_cast<MemRefType>(r.getType()))
        slotBytes = std::min(slotBytes, std::max<int64_t>(1, elementBytes(t)));
  });
  // Arena sizes first: storage must not move once buffers point into it.
  std::map<std::string, int64_t> bytes;
  step.walk([&](hs::BufferOp b) {
    if (!b.getOffset())
      fail("buffer without a planned offset (run hc-plan-buffers first)");
    int64_t &end = bytes[b.getArena().str()];
    end = std::max<int64_t>(end, *b.getOffset() + hs::byteSize(b.getType()));
  });
  for (auto &[arena, size] : bytes)
    arenas[arena].assign((size + slotBytes - 1) / slotBytes, 0.0);
  int64_t numConstants = 0, numInputs = 0;
  step.walk([&](Operation *op) {
    numConstants += isa<hs::ConstantOp>(op);
    numInputs += isa<hs::InputOp>(op);
  });
  constantStorage.reserve(numConstants);
  inputStorage.resize(numInputs);
  inputs.resize(numInputs);
  inputMems.resize(numInputs);

  for (Operation &op : step.getBody().front()) {
    llvm::TypeSwitch<Operation *>(&op)
        .Case<hs::BufferOp>([&](hs::BufferOp b) {
          if (*b.getOffset() % slotBytes)
            fail("buffer offset " + std::to_string(*b.getOffset()) +
                 " is not a multiple of " + std::to_string(slotBytes) + " bytes");
          Mem m = contiguous(&arenas[b.getArena().str()],
                             *b.getOffset() / slotBytes, b.getType(), slotBytes);
          mems[b.getResult()] = m;
          if (auto name = b.getName())
            named[name->str()] = m;
        })
        .Case<hs::InputOp>([&](hs::InputOp in) {
          int64_t k = in.getIndex();
          if (k < 0 || k >= numInputs)
            fail("input index out of range");
          MemRefType type = in.getType();
          inputStorage[k].assign(type.getNumElements() * slotsPerElement(type, slotBytes),
                                 0.0);
          inputMems[k] = mems[in.getResult()] =
              contiguous(&inputStorage[k], 0, type, slotBytes);
          inputs[k] = {in.getName().str(),
                       Shape(type.getShape().begin(), type.getShape().end())};
        })
        .Case<hs::ConstantOp>([&](hs::ConstantOp c) {
          auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
          if (!attr)
            fail("only dense constants are supported");
          MemRefType type = c.getType();
          int64_t per = slotsPerElement(type, slotBytes);
          std::vector<double> values;
          if (isa<FloatType>(attr.getElementType()))
            for (const APFloat &v : attr.getValues<APFloat>())
              values.push_back(v.convertToDouble());
          else
            for (const APInt &v : attr.getValues<APInt>())
              values.push_back(static_cast<double>(v.getSExtValue()));
          if (attr.isSplat())
            values.assign(type.getNumElements(), values.at(0));
          std::vector<double> &s = constantStorage.emplace_back(values.size() * per);
          for (size_t i = 0; i < values.size(); ++i)
            s[i * per] = values[i];
          mems[c.getResult()] = contiguous(&s, 0, type, slotBytes);
        })
        .Case<hs::ViewOp>([&](hs::ViewOp v) {
          const Mem &src = memOf(v.getSource());
          SmallVector<int64_t> strides;
          int64_t offset;
          if (!hs::stridesOf(v.getType(), strides, offset))
            fail("view without static strides");
          int64_t per = slotsPerElement(v.getType(), slotBytes);
          Mem m{src.storage, src.base + offset * per,
                Shape(v.getType().getShape().begin(), v.getType().getShape().end()),
                {}, v.getType().getElementType().isBF16()};
          for (int64_t s : strides)
            m.strides.push_back(s * per);
          mems[v.getResult()] = m;
        })
        .Case<hs::LossOp>([&](hs::LossOp l) { loss = memOf(l.getValue()); })
        .Default([](Operation *) {});
  }
}

// Builds the graph op the kernel implements on stand-in values, evaluates it
// in float64 and stores its results into the call's output buffers.
void ScheduleEvaluator::Impl::call(hs::CallOp c) {
  std::vector<EvalTensor> ins;
  for (Value v : c.getIns())
    ins.push_back(read(memOf(v)));
  std::string kernel = c.getKernel().str();
  if (kernel == "copy") {
    if (ins.size() != 1 || c.getOuts().size() != 1)
      fail("copy takes one input and one output");
    write(memOf(c.getOuts()[0]), ins[0]);
    return;
  }
  MLIRContext *ctx = c.getContext();
  auto name = RegisteredOperationName::lookup("hc." + kernel, ctx);
  if (!name)
    fail("kernel '" + kernel + "' names no hc graph op");
  auto tensorOf = [](Value v) {
    auto m = cast<MemRefType>(v.getType());
    return RankedTensorType::get(m.getShape(), m.getElementType());
  };
  Block standIns;
  Env env;
  OperationState state(c.getLoc(), *name);
  for (auto [v, t] : llvm::zip(c.getIns(), ins)) {
    Value arg = standIns.addArgument(tensorOf(v), c.getLoc());
    env[arg] = std::move(t);
    state.operands.push_back(arg);
  }
  for (Value out : c.getOuts())
    state.types.push_back(tensorOf(out));
  Operation *op = Operation::create(state);
  op->setAttrs(c.getAttrs());  // inherent attributes go to properties
  std::vector<EvalTensor> results;
  try {
    evalOp(op, env);
    for (Value r : op->getResults()) {
      results.push_back(env.lookup(r));
      if (results.back().shape != shapeOf(r))
        fail("the evaluator gave a result of the wrong shape");
    }
  } catch (const EvalError &e) {
    op->destroy();
    fail(kernel + ": " + e.message);
  }
  op->destroy();
  // Every result is computed before any is stored: in-place kernels (the
  // optimizer) read and write the same buffers.
  for (auto [out, r] : llvm::zip(c.getOuts(), results))
    write(memOf(out), r);
}

ScheduleEvaluator::ScheduleEvaluator() : impl(std::make_unique<Impl>()) {}
ScheduleEvaluator::~ScheduleEvaluator() = default;

bool ScheduleEvaluator::init(func::FuncOp step, std::string &error) {
  impl = std::make_unique<Impl>();
  impl->step = step;
  try {
    impl->layout();
  } catch (const EvalError &e) {
    error = step.getName().str() + ": " + e.message;
    return false;
  }
  if (!impl->loss.storage) {
    error = "the schedule has no hcs.loss";
    return false;
  }
  return true;
}

std::vector<std::string> ScheduleEvaluator::tensorNames() const {
  std::vector<std::string> names;
  for (const auto &entry : impl->named)
    names.push_back(entry.first);
  return names;
}

bool ScheduleEvaluator::setTensor(const std::string &name, const EvalTensor &value,
                                  std::string &error) {
  auto it = impl->named.find(name);
  if (it == impl->named.end() || it->second.shape != value.shape) {
    error = "no buffer '" + name + "' of that shape in the schedule";
    return false;
  }
  write(it->second, value);
  return true;
}

bool ScheduleEvaluator::getTensor(const std::string &name, EvalTensor &value,
                                  std::string &error) const {
  auto it = impl->named.find(name);
  if (it == impl->named.end()) {
    error = "no buffer '" + name + "' in the schedule";
    return false;
  }
  value = read(it->second);
  return true;
}

bool ScheduleEvaluator::run(const std::vector<EvalTensor> &inputs, double &loss,
                            std::string &error) {
  Impl &s = *impl;
  if (inputs.size() != s.inputs.size()) {
    error = "expected " + std::to_string(s.inputs.size()) + " inputs";
    return false;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const char *arena : {"act", "offload", "grad", "partial"})
    if (s.arenas.count(arena))
      std::fill(s.arenas[arena].begin(), s.arenas[arena].end(), nan);
  try {
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (inputs[k].shape != s.inputs[k].second)
        fail("input '" + s.inputs[k].first + "' has the wrong shape");
      write(s.inputMems[k], inputs[k]);
    }
    for (Operation &op : s.step.getBody().front()) {
      // One rank, one micro-batch: a call only for a step that reduces its
      // gradients per bucket does not run (hcrt_call_condition).
      if (auto c = dyn_cast<hs::CallOp>(op);
          c && hs::callConditionOf(c.getOnlyIf().value_or("")) != HCRT_RUNS_IF_REDUCED)
        s.call(c);
      // Tier copies (hc-automem) are synchronous here: a copy of the slots.
      if (isa<hs::OffloadOp, hs::PrefetchOp>(op))
        write(s.memOf(op.getOperand(1)), read(s.memOf(op.getOperand(0))));
    }
    // One rank: hcs.allreduce_start / hcs.wait average over one copy.
    loss = read(s.loss).data.at(0);
  } catch (const EvalError &e) {
    error = e.message;
    return false;
  } catch (const std::out_of_range &) {
    error = "a view reaches outside its storage";
    return false;
  }
  return true;
}

} // namespace hc
