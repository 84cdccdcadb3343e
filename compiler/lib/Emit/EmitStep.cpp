// Planned schedule -> C++ source of a step library. The generated code is
// data only (tables of tensor views, entries and their attributes: one
// hcrt_step_program) that libhcrt's executor runs, so the same op in every
// DiT block costs a table row, not code, and compiling the .so stays fast
// for any depth.
#include "hc/Compiler/EmitStep.h"

#include "EmitPlacement.h"

#include "hc/Schedule/KernelRegistry.h"
#include "hc/Schedule/Placement.h"
#include "hc/Schedule/ScheduleOps.h"
#include "hc/abi/step_program.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

using namespace mlir;
namespace hs = hc::schedule;

namespace hc {
namespace {

// The ONNX node(s) an op came from: the importer's NameLoc per node; fusion
// and autodiff keep or fuse those locations.
std::string onnxNodesOf(Location loc) {
  if (auto n = dyn_cast<NameLoc>(loc))
    return "'" + n.getName().str() + "'";
  if (auto f = dyn_cast<FusedLoc>(loc)) {
    std::string all;
    for (Location l : f.getLocations()) {
      std::string one = onnxNodesOf(l);
      if (!one.empty() && all.find(one) == std::string::npos)
        all += (all.empty() ? "" : ", ") + one;
    }
    return all;
  }
  return "";
}

// `text` as a C string literal (ONNX node names are arbitrary bytes).
std::string cString(const std::string &text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\')
      out += std::string("\\") + static_cast<char>(c);
    else if (c < 0x20 || c >= 0x7f || c == '?')
    {
      char octal[8];
      std::snprintf(octal, sizeof octal, "\\%03o", static_cast<unsigned>(c));
      out += octal;
    }
    else
      out += static_cast<char>(c);
  }
  return out + "\"";
}

// Arena codes shared with the generated code.
// Arena codes shared with the generated code: hs::kArenaNames in order,
// then the host's inputs and the constants.
constexpr int kInput = hs::kNumArenas, kConst = hs::kNumArenas + 1;

int arenaCode(StringRef name) {
  for (int i = 0; i < hs::kNumArenas; ++i)
    if (name == hs::kArenaNames[i])
      return i;
  return -1;
}

struct Desc {
  int arena = 0, base = 0, dtype = 0;
  int64_t byteOffset = 0;
  SmallVector<int64_t> shape, strides;
};

// One entry of the plan, as the executor reads it (step_program.h's
// hcrt_entry; what `kernel`, `first` and `attrs` mean per kind is there).
// `cluster`: the stream running it.
struct Call {
  int kind;
  int kernel = -1, first = 0, nin = 0, nout = 0, attrs = -1, cluster = 0;
  int condition = HCRT_RUNS_ALWAYS;  // a kernel's hcrt_call_condition (only_if)
};

// The runtime's dtype (hc/abi/tensor.h) and the description's name.
std::pair<int, const char *> dtypeOf(Type t) {
  if (t.isF32())
    return {HCRT_F32, "float32"};
  if (t.isF64())
    return {HCRT_F64, "float64"};
  if (t.isInteger(64))
    return {HCRT_I64, "int64"};
  if (t.isInteger(32))
    return {HCRT_I32, "int32"};
  if (t.isBF16())
    return {HCRT_BF16, "bfloat16"};
  return {HCRT_I1, "bool"};
}

int64_t elemBytes(Type t) {
  return std::max<int64_t>(1, t.getIntOrFloatBitWidth() / 8);
}

// The description's "memory_plan": the tiers (hc-automem's hcs.memory, or
// one DRAM tier holding everything), each with its arenas' planned bytes,
// the budget, and what AutoMem decided: recomputed calls and copy volumes.
llvm::json::Object memoryPlan(func::FuncOp f, llvm::json::Object arenas,
                              double offloadBytes, double prefetchBytes) {
  auto memory = f->getAttrOfType<hs::MemoryPlanAttr>(hs::kMemoryAttr);
  if (!memory)
    return llvm::json::Object{{"tiers", llvm::json::Array{llvm::json::Object{
                                            {"name", "dram"},
                                            {"kind", "DRAM"},
                                            {"arena_bytes", std::move(arenas)}}}}};
  llvm::json::Array tiers;
  int64_t total = 0;  // resident: the arenas of memory tiers
  for (Attribute t : memory.getTiers()) {
    auto tier = cast<hs::MemoryTierAttr>(t);
    llvm::json::Object bytes;
    int64_t peak = 0;
    for (Attribute a : tier.getArenas()) {
      StringRef name = cast<StringAttr>(a).getValue();
      if (const llvm::json::Value *v = arenas.get(name)) {
        bytes[name] = *v;
        peak += *v->getAsInteger();
      }
    }
    if (!tier.isDisk())
      total += peak;
    tiers.push_back(llvm::json::Object{{"name", tier.getName()},
                                       {"kind", tier.getKind()},
                                       {"capacity", tier.getCapacity()},
                                       {"peak_bytes", peak},
                                       {"arena_bytes", std::move(bytes)}});
  }
  auto seconds = [](FloatAttr a) { return a ? a.getValueAsDouble() : 0.0; };
  return llvm::json::Object{
      {"offload_dir", memory.getOffloadDir()},
      {"recomputed_over_move", memory.getRecomputedOverMove()},
      {"segments", memory.getSegments()},
      {"copy_seconds_predicted", seconds(memory.getCopySeconds())},
      {"other_plan", memory.getOtherPlan()},
      {"tiers", std::move(tiers)},
      {"budget", memory.getBudget()},
      {"reserve", memory.getReserve()},
      {"planned_bytes", total + memory.getReserve()},
      {"recomputed_calls", memory.getRecomputedCalls()},
      {"recompute_seconds_predicted", seconds(memory.getRecomputeSeconds())},
      {"offload_bytes_per_step", offloadBytes},
      {"prefetch_bytes_per_step", prefetchBytes}};
}

class Emitter {
public:
  Emitter(func::FuncOp f, const EmitInfo &info) : f(f), info(info) {}
  bool run(std::string &cpp, std::string &description, std::string &error);

private:
  bool walk(std::string &error);
  void visitBuffer(hs::BufferOp buf);
  void visitCall(hs::CallOp call);
  void visitCopy(Operation *op);
  void placeEntries();
  bool describe(std::string &description, std::string &error);
  std::string writeCpp(const std::string &description);
  void writeProgram(llvm::raw_ostream &os, int64_t diskBytes);
  int descOf(Value v);
  int attrsOf(hs::CallOp call);
  void constantData(hs::ConstantOp c);
  double flopsOf(hs::CallOp call);

  func::FuncOp f;
  const EmitInfo &info;
  llvm::DenseMap<Value, Desc> bases;  // buffers, inputs, constants
  llvm::DenseMap<Value, int> descIndex;
  std::vector<Desc> descs;
  std::vector<int> operands;
  std::vector<Call> calls;
  std::vector<std::string> kernels, attrRows;
  std::map<std::string, int> kernelIndex;
  std::string constants;
  int numConstants = 0;
  double flops = 0;
  // Hyperparameters (kernels.def's HCRT_HYPER slots): names in first-seen
  // order with their compiled values, and each slot bound to one of them.
  struct HyperBinding {
    int attrs;
    unsigned floatIndex;
    int hyper;
  };
  std::vector<std::pair<std::string, double>> hypers;
  std::vector<HyperBinding> hyperBindings;
  std::string hyperConflict;  // two calls compiled with different defaults
  // What walk() collects.
  DictionaryAttr arenaBytes;
  // monitors: what a step computes for the host to log (get_tensor).
  llvm::json::Array inputs, params, state, gradients, buckets, outputs, monitors;
  std::map<int64_t, llvm::json::Object> inputByIndex;
  std::string named;
  int lossDesc = -1;
  std::set<std::string> trainable;
  llvm::DenseMap<Value, Call> bucketOf;  // token -> its start call
  int numBuckets = 0;
  llvm::DenseMap<Value, int> copyTokens;  // tier copies' tokens -> ticket slot
  int numCopies = 0;
  double offloadBytes = 0, prefetchBytes = 0;
  // hc-automem's plan: is the "offload" arena a file (a disk tier)?
  std::string offloadDir;
  bool offloadOnDisk = false;
  int64_t keptPanelBytes = -1;  // hcs.kept_weights_bytes, -1: none
  // Per call, for --check-finite's messages and the profile: kernel and
  // ONNX node(s), flops and bytes moved.
  std::vector<std::pair<std::string, std::string>> callWhere;
  std::vector<double> callFlops, callBytes;
  // What placeEntries() finds: streams, the forward's last entry, the
  // update gate and the update phase.
  int numClusters = 1;
  std::size_t lossCall = 0, gateCall = 0, updateCall = 0;
  // describe()'s machine plan tables, written into the C++ by writeCpp().
  std::string touchTables;
};

int Emitter::descOf(Value v) {
  auto it = descIndex.find(v);
  if (it != descIndex.end())
    return it->second;
  auto type = cast<MemRefType>(v.getType());
  Value base = v;
  if (auto view = v.getDefiningOp<hs::ViewOp>())
    base = view.getSource();
  Desc d = bases.lookup(base);
  SmallVector<int64_t> strides;
  int64_t offset = 0;
  hs::stridesOf(type, strides, offset);
  d.byteOffset += offset * elemBytes(type.getElementType());
  d.shape.assign(type.getShape().begin(), type.getShape().end());
  d.strides = strides;
  d.dtype = dtypeOf(type.getElementType()).first;
  descs.push_back(d);
  return descIndex[v] = static_cast<int>(descs.size()) - 1;
}

int Emitter::attrsOf(hs::CallOp call) {
  // Layout from the kernel registry; the verifier has checked the call.
  const hs::KernelInfo *k = hs::KernelRegistry::active().lookup(call.getKernel());
  hs::PackedAttrs packed = hs::KernelRegistry::pack(*k, call.getAttrs());
  const std::vector<int64_t> &ints = packed.ints;
  const std::vector<double> &floats = packed.floats;
  std::string row = "{{";
  for (int64_t x : ints)
    row += std::to_string(x) + ", ";
  row += "}, " + std::to_string(ints.size()) + ", {";
  for (double x : floats)
    row += llvm::formatv("{0:e17}, ", x).str();
  row += "}, " + std::to_string(floats.size()) + "}";
  attrRows.push_back(row);
  const int index = static_cast<int>(attrRows.size()) - 1;
  for (const hs::HyperSlot &h : hs::KernelRegistry::hyperSlots(*k)) {
    const double value = floats[h.floatIndex];
    auto it = llvm::find_if(hypers, [&](const auto &p) { return p.first == h.key; });
    if (it == hypers.end()) {
      hypers.push_back({h.key, value});
      it = hypers.end() - 1;
    } else if (it->second != value && hyperConflict.empty()) {
      hyperConflict = llvm::formatv("hyperparameter '{0}' is {1} in one call and {2} "
                                    "in another (kernel {3}): a step has one value",
                                    h.key, it->second, value, k->name)
                          .str();
    }
    hyperBindings.push_back({index, h.floatIndex, static_cast<int>(it - hypers.begin())});
  }
  return index;
}

void Emitter::constantData(hs::ConstantOp c) {
  auto dense = cast<DenseElementsAttr>(c.getValue());
  Type elem = dense.getElementType();
  std::string name = "kConst" + std::to_string(numConstants);
  std::string values;
  int64_t n = cast<MemRefType>(c.getType()).getNumElements();
  auto append = [&](const std::string &s) { values += s + ","; };
  if (isa<FloatType>(elem)) {
    auto all = llvm::to_vector(dense.getValues<APFloat>());
    for (int64_t i = 0; i < n; ++i)
      append(llvm::formatv("{0:e9}f", all[dense.isSplat() ? 0 : i].convertToDouble()).str());
  } else if (elem.isInteger(1)) {
    auto all = llvm::to_vector(dense.getValues<bool>());
    for (int64_t i = 0; i < n; ++i)
      append(all[dense.isSplat() ? 0 : i] ? "1" : "0");
  } else {
    auto all = llvm::to_vector(dense.getValues<APInt>());
    for (int64_t i = 0; i < n; ++i)
      append(std::to_string(all[dense.isSplat() ? 0 : i].getSExtValue()) + "LL");
  }
  const char *ctype = isa<FloatType>(elem) ? (elem.isF64() ? "double" : "float")
                      : elem.isInteger(1)  ? "uint8_t"
                      : elem.isInteger(32) ? "int32_t"
                                           : "int64_t";
  constants += llvm::formatv("alignas(64) const {0} {1}[] = {{{2}};\n", ctype,
                             name, values)
                   .str();
  ++numConstants;
}

double Emitter::flopsOf(hs::CallOp call) {
  auto shapes = [](ValueRange vs) {
    SmallVector<ArrayRef<int64_t>> r;
    for (Value v : vs)
      r.push_back(cast<MemRefType>(v.getType()).getShape());
    return r;
  };
  const hs::KernelInfo *k = hs::KernelRegistry::active().lookup(call.getKernel());
  return hs::KernelRegistry::flops(*k, shapes(call.getIns()), shapes(call.getOuts()));
}

// The schedule becomes tables (walk, placeEntries), the library's JSON
// description (describe) and the C++ translation unit (writeCpp).
bool Emitter::run(std::string &cpp, std::string &description,
                  std::string &error) {
  arenaBytes = f->getAttrOfType<DictionaryAttr>("hcs.arena_bytes");
  if (!arenaBytes) {
    error = "the schedule has no buffer plan (hc-plan-buffers did not run)";
    return false;
  }
  if (auto kept = f->getAttrOfType<IntegerAttr>(hs::kKeptWeightsAttr))
    keptPanelBytes = kept.getInt();  // the constant weights' room, budgeted
  if (auto memory = f->getAttrOfType<hs::MemoryPlanAttr>(hs::kMemoryAttr)) {
    offloadDir = memory.getOffloadDir().str();
    offloadOnDisk = memory.offloadOnDisk();
  }
  if (!walk(error))
    return false;
  placeEntries();
  if (!describe(description, error))
    return false;
  cpp = writeCpp(description);
  return true;
}

// One table row per schedule op: descriptors for buffers, inputs and
// constants, an entry per call, collective and tier copy.
bool Emitter::walk(std::string &error) {
  for (Operation &op : f.getBody().front()) {
    if (auto buf = dyn_cast<hs::BufferOp>(op)) {
      visitBuffer(buf);
    } else if (auto in = dyn_cast<hs::InputOp>(op)) {
      Desc d;
      d.arena = kInput;
      d.base = static_cast<int>(in.getIndex());
      bases[in] = d;
      auto t = in.getType();
      inputByIndex[in.getIndex()] = llvm::json::Object{
          {"name", in.getName()}, {"dtype", dtypeOf(t.getElementType()).second},
          {"shape", llvm::json::Array(t.getShape())}};
    } else if (auto c = dyn_cast<hs::ConstantOp>(op)) {
      Desc d;
      d.arena = kConst;
      d.base = numConstants;
      bases[c] = d;
      constantData(c);
    } else if (auto call = dyn_cast<hs::CallOp>(op)) {
      visitCall(call);
    } else if (auto ar = dyn_cast<hs::AllReduceStartOp>(op)) {
      Call c{HCRT_ENTRY_ALLREDUCE_START, numBuckets++, static_cast<int>(operands.size()), 1, 0, -1,
             static_cast<int>(hs::clusterOf(ar))};
      operands.push_back(descOf(ar.getBucket()));
      calls.push_back(c);
      callWhere.push_back({"allreduce_start", ""});
      callFlops.push_back(0);
      callBytes.push_back(static_cast<double>(hs::byteSize(ar.getBucket().getType())));
      bucketOf[ar.getToken()] = c;
      auto t = ar.getBucket().getType();
      buckets.push_back(llvm::json::Object{
          {"offset", descs[operands.back()].byteOffset},
          {"bytes", hs::byteSize(t)}});
    } else if (isa<hs::OffloadOp, hs::PrefetchOp>(op)) {
      visitCopy(&op);
    } else if (auto wait = dyn_cast<hs::WaitOp>(op)) {
      if (auto copy = copyTokens.find(wait.getToken()); copy != copyTokens.end()) {
        calls.push_back(Call{HCRT_ENTRY_COPY_WAIT, -1, 0, 0, 0, copy->second,
                             static_cast<int>(hs::clusterOf(wait))});
        callWhere.push_back({"copy_wait", ""});
        callFlops.push_back(0);
        callBytes.push_back(0);
        continue;
      }
      auto start = bucketOf.find(wait.getToken());
      if (start == bucketOf.end()) {
        error = "hcs.wait on a token no hcs.allreduce_start made";
        return false;
      }
      Call c = start->second;
      c.kind = HCRT_ENTRY_ALLREDUCE_WAIT;
      c.cluster = static_cast<int>(hs::clusterOf(wait));
      calls.push_back(c);
      callWhere.push_back({"allreduce_wait", ""});
      callFlops.push_back(0);
      callBytes.push_back(0);
    } else if (auto cw = dyn_cast<hs::ClusterWaitOp>(op)) {
      // nin: what the wait orders (hcrt_wait_scope).
      Call c{HCRT_ENTRY_CLUSTER_WAIT, static_cast<int>(cw.getSource()), static_cast<int>(cw.getCount()),
             cw.getOnlyFor() ? hs::waitScopeOf(*cw.getOnlyFor()) : HCRT_WAIT_ORDERS_ALL, 0, -1,
             static_cast<int>(cw.getCluster())};
      calls.push_back(c);
      callWhere.push_back({"cluster_wait", ""});
      callFlops.push_back(0);
      callBytes.push_back(0);
    } else if (auto loss = dyn_cast<hs::LossOp>(op)) {
      lossDesc = descOf(loss.getValue());
    }
  }
  if (lossDesc < 0) {
    error = "the schedule marks no loss";
    return false;
  }
  return true;
}

void Emitter::visitBuffer(hs::BufferOp buf) {
  Desc d;
  d.arena = arenaCode(buf.getArena());
  d.byteOffset = buf.getOffset() ? static_cast<int64_t>(*buf.getOffset()) : 0;
  bases[buf] = d;
  if (auto name = buf.getName()) {
    auto t = buf.getType();
    llvm::json::Array shape(t.getShape());
    named += llvm::formatv("  {{\"{0}\", {1}, {2}, {3}},\n", *name, d.arena,
                           d.byteOffset, hs::byteSize(t))
                 .str();
    StringRef n = *name;
    if (buf.getArena() == "param")
      params.push_back(llvm::json::Object{{"name", n}, {"shape", std::move(shape)}});
    else if (buf.getArena() == "act")  // a sampler's output
      outputs.push_back(llvm::json::Object{{"name", n}, {"shape", std::move(shape)}});
    else if (buf.getArena() == "grad" && n.starts_with("grad:")) {
      gradients.push_back(n.drop_front(5));
      trainable.insert(n.drop_front(5).str());
    } else if (buf.getArena() == "grad")  // the gradient norm
      monitors.push_back(llvm::json::Object{
          {"name", n}, {"dtype", dtypeOf(t.getElementType()).second},
          {"shape", std::move(shape)}});
    else
      state.push_back(llvm::json::Object{
          {"name", n}, {"dtype", dtypeOf(t.getElementType()).second},
          {"shape", std::move(shape)}});
  }
}

void Emitter::visitCall(hs::CallOp call) {
  std::string k = call.getKernel().str();
  if (!kernelIndex.count(k)) {
    kernelIndex[k] = static_cast<int>(kernels.size());
    kernels.push_back(k);
  }
  Call c{HCRT_ENTRY_KERNEL, kernelIndex[k], static_cast<int>(operands.size())};
  c.cluster = static_cast<int>(hs::clusterOf(call));
  c.condition = hs::callConditionOf(call.getOnlyIf().value_or(""));
  // Optional operands keep their slot (NULL data) where segments say so.
  auto segments = call.getAttrs().getAs<DenseI32ArrayAttr>("operandSegmentSizes");
  unsigned next = 0;
  if (segments) {
    for (int32_t present : segments.asArrayRef()) {
      operands.push_back(present ? descOf(call.getIns()[next++]) : -1);
      ++c.nin;
    }
  } else {
    for (Value v : call.getIns()) {
      operands.push_back(descOf(v));
      ++c.nin;
    }
  }
  for (Value v : call.getOuts()) {
    operands.push_back(descOf(v));
    ++c.nout;
  }
  c.attrs = attrsOf(call);
  calls.push_back(c);
  callWhere.push_back({k, onnxNodesOf(call.getLoc())});
  callFlops.push_back(flopsOf(call));
  double bytes = 0;
  for (Value v : call->getOperands())
    if (auto m = dyn_cast<MemRefType>(v.getType()))
      bytes += static_cast<double>(hs::byteSize(m));
  callBytes.push_back(bytes);
  flops += callFlops.back();
}

// Started on the runtime's copy engine (kinds: hc/abi/step_program.h);
// `kernel` is the copy's kind, `attrs` its ticket slot, which its wait names.
// A piece of a copy hc-cftp cut runs in its cluster's stream, as its wait.
void Emitter::visitCopy(Operation *op) {
  bool offload = isa<hs::OffloadOp>(op);
  int kind = offloadOnDisk ? (offload ? HCRT_COPY_TO_DISK : HCRT_COPY_FROM_DISK)
                           : (offload ? HCRT_COPY_TO_SLOW : HCRT_COPY_FROM_SLOW);
  Call c{HCRT_ENTRY_COPY_START, kind, static_cast<int>(operands.size()), 1, 1, numCopies,
         static_cast<int>(hs::clusterOf(op))};
  operands.push_back(descOf(op->getOperand(0)));
  operands.push_back(descOf(op->getOperand(1)));
  calls.push_back(c);
  copyTokens[op->getResult(0)] = numCopies++;
  callWhere.push_back({offload ? "offload" : "prefetch", ""});
  callFlops.push_back(0);
  double bytes = static_cast<double>(
      hs::byteSize(cast<MemRefType>(op->getOperand(0).getType())));
  callBytes.push_back(2 * bytes);
  (offload ? offloadBytes : prefetchBytes) += bytes;
}

void Emitter::placeEntries() {
  for (const Call &c : calls)
    numClusters = std::max({numClusters, c.cluster + 1, c.kind == HCRT_ENTRY_CLUSTER_WAIT ? c.kernel + 1 : 1});
  // Calls up to the one writing the loss are the forward pass.
  lossCall = calls.size();
  for (std::size_t i = 0; i < calls.size() && lossCall == calls.size(); ++i)
    for (int k = 0; calls[i].kind == HCRT_ENTRY_KERNEL && k < calls[i].nout; ++k)
      if (operands[calls[i].first + calls[i].nin + k] == lossDesc)
        lossCall = i;
  // The update gate (step ABI 4, preemption) stands before the first call
  // that writes persistent training state: a parameter or the optimizer's
  // moments and counters. Before it, a step can still be dropped whole.
  gateCall = calls.size();
  for (std::size_t i = 0; i < calls.size() && gateCall == calls.size(); ++i)
    for (int k = 0; calls[i].kind == HCRT_ENTRY_KERNEL && k < calls[i].nout; ++k) {
      int d = operands[calls[i].first + calls[i].nin + k];
      if (d < 0)
        continue;
      int arena = descs[d].arena;
      for (const char *persistent : {"param", "m", "v", "state"})
        if (arena == arenaCode(persistent))
          gateCall = i;
    }
  // The update phase: every call after the last gradient all-reduce wait
  // (clipping, the optimizer, its counter). A micro-batch that is not the
  // last of its step (gradient accumulation) skips it and the all-reduces.
  updateCall = calls.size();
  for (std::size_t i = calls.size(); i-- > 0;)
    if (calls[i].kind == HCRT_ENTRY_ALLREDUCE_WAIT) {
      updateCall = i + 1;
      break;
    }
}

bool Emitter::describe(std::string &description, std::string &error) {
  // Model FLOPs, the usual MFU numerator: 3x the forward's matrix products
  // for a training step (recompute inside attention's backward is not
  // counted), 1x for a forward-only sampling library (one model call).
  // The forward's matrix products are the calls whose registry FLOP rule
  // is a forward one (linear, linear_gelu, matmul, attention).
  const double passes = outputs.empty() ? 3.0 : 1.0;
  double modelFlops = 0;
  for (std::size_t i = 0; i <= lossCall && i < calls.size(); ++i) {
    const hs::KernelInfo *k =
        hs::KernelRegistry::active().lookup(callWhere[i].first);
    if (k && (k->flops == hs::FlopRule::LINEAR ||
              k->flops == hs::FlopRule::MATMUL ||
              k->flops == hs::FlopRule::ATTENTION))
      modelFlops += passes * callFlops[i];
  }
  int64_t batch = info.batchPerRank;
  for (auto &[i, obj] : inputByIndex) {
    auto *shape = obj.getArray("shape");
    if (batch == 0 && shape && !shape->empty())
      batch = *(*shape)[0].getAsInteger();
    inputs.push_back(std::move(obj));
  }
  if (!hyperConflict.empty()) {
    error = hyperConflict;
    return false;
  }
  llvm::json::Object hyperparameters;
  for (const auto &[name, value] : hypers)
    hyperparameters[name] = value;
  llvm::json::Array frozen;
  for (llvm::json::Value &p : params) {
    auto *o = p.getAsObject();
    bool t = trainable.count(o->getString("name")->str()) > 0;
    o->insert({"trainable", t});
    if (!t)
      frozen.push_back(*o->getString("name"));
  }
  // The accumulator is allocated only with more than one micro-batch: not
  // part of the plan's resident bytes, reported beside them.
  llvm::json::Object arenas;
  int64_t accumulatorBytes = 0;
  for (NamedAttribute a : arenaBytes) {
    if (hs::isOnDemandArena(a.getName()))
      accumulatorBytes = cast<IntegerAttr>(a.getValue()).getInt();
    else
      arenas[a.getName().str()] = cast<IntegerAttr>(a.getValue()).getInt();
  }
  auto parse = [](const std::string &s) {
    auto v = llvm::json::parse(s.empty() ? "{}" : s);
    if (!v) {
      llvm::consumeError(v.takeError());
      return llvm::json::Value(llvm::json::Object{});
    }
    return *v;
  };
  llvm::json::Object desc{
      {"abi_version", HC_STEP_ABI_VERSION},
      {"model", info.model},
      {"batch_per_rank", batch},
      {"inputs", std::move(inputs)},
      {"parameters", std::move(params)},
      {"frozen", std::move(frozen)},
      {"state", std::move(state)},
      {"gradients", std::move(gradients)},
      {"monitors", std::move(monitors)},
      {"optimizer", parse(info.optimizerJson)},
      {"hyperparameters", std::move(hyperparameters)},
      {"precision", info.precision},
      {"compile_options", parse(info.optionsJson)},
      {"flops_per_step", flops},
      {"cftp_clusters", numClusters},
      {"model_flops_per_step", modelFlops},
      {"memory_plan", memoryPlan(f, std::move(arenas), offloadBytes, prefetchBytes)},
      {"accumulator_bytes", accumulatorBytes},
      {"buckets", std::move(buckets)},
      {"init_file", info.initFile},
      {"init_hash", info.initHash},
      {"dit_config", parse(info.ditConfigJson)},
      {"random_ops", parse(info.randomDrawsJson)}};
  if (!emitMachinePlan(f, arenaCode, desc, touchTables, error))
    return false;
  if (!outputs.empty()) {
    // A forward-only sampling library: no gradients, no optimizer.
    desc["library"] = "sampler";
    desc["outputs"] = std::move(outputs);
    desc["optimizer"] = nullptr;
  }
  description = llvm::formatv("{0:2}", llvm::json::Value(std::move(desc))).str();
  return true;
}

std::string Emitter::writeCpp(const std::string &description) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "// Generated by hc-compile from " << info.model
     << ". Do not edit: regenerate.\n"
     << "#include \"hc/abi/step_program.h\"\n\n#include <cstddef>\n#include <cstdint>\n"
     << "#include <iterator>\n\n";
  // The kernels it calls, libhcrt's and extensions' alike: the library sees
  // the ABI root only, never the runtime's own headers.
  for (const std::string &k : kernels)
    os << "extern \"C\" void hcrt_op_" << k
         << "(const hcrt_tensor *, int32_t, hcrt_tensor *, int32_t, const hcrt_attrs *, "
            "hc_threads);\n";
  os << "\nnamespace {\n\n"
     << "const char kDescription[] = R\"hcjson(" << description << ")hcjson\";\n\n"
     << "constexpr int kNumArenas = " << hs::kNumArenas
     << ", kInputArena = " << kInput << ", kConstArena = " << kConst << ";\n"
     << "const int64_t kArenaBytes[kNumArenas] = {";
  int64_t diskBytes = 0;
  for (const char *a : hs::kArenaNames) {
    auto v = arenaBytes.getAs<IntegerAttr>(a);
    bool onDisk = offloadOnDisk && StringRef(a) == "offload";
    if (onDisk && v)
      diskBytes = v.getInt();
    os << (v && !onDisk ? v.getInt() : 0) << ", ";
  }
  os << "};\nconst char *const kArenaContents[kNumArenas] = {";
  for (const char *c : hs::kArenaContents)
    os << cString(c) << ", ";
  os << "};\n\n" << touchTables << "\n" << constants
     << "const void *const kConstants[] = {";
  for (int i = 0; i < numConstants; ++i)
    os << "kConst" << i << ", ";
  os << (numConstants ? "" : "nullptr") << "};\n\nconst hcrt_kernel_fn kKernels[] = {";
  for (const std::string &k : kernels)
    os << "hcrt_op_" << k << ", ";
  os << "};\n\nconst char *const kKernelNames[] = {";
  for (const std::string &k : kernels)
    os << "\"" << k << "\", ";
  os << "};\n\nconst hcrt_desc kDescs[] = {\n";
  for (const Desc &d : descs) {
    os << "  {" << d.arena << ", " << d.base << ", " << d.dtype << ", "
       << d.shape.size() << ", " << d.byteOffset << ", {";
    for (int64_t x : d.shape)
      os << x << ",";
    os << "}, {";
    for (int64_t x : d.strides)
      os << x << ",";
    os << "}},\n";
  }
  os << "};\n\nconst int32_t kOperands[] = {";
  for (int x : operands)
    os << x << ",";
  os << "};\n\nconst hcrt_attrs kAttrs[] = {\n";
  for (const std::string &r : attrRows)
    os << "  " << r << ",\n";
  os << (attrRows.empty() ? "  {}\n" : "") << "};\n\n"
     << "// Hyperparameters: their names and compiled values, and which packed\n"
     << "// float of which kAttrs row each one sets.\n"
     << "constexpr int32_t kNumHypers = " << hypers.size() << ";\n"
     << "const char *const kHyperNames[] = {";
  for (const auto &h : hypers)
    os << cString(h.first) << ", ";
  os << (hypers.empty() ? "nullptr" : "") << "};\nconst double kHyperDefaults[] = {";
  for (const auto &h : hypers)
    os << llvm::formatv("{0:e17}", h.second).str() << ", ";
  os << (hypers.empty() ? "0" : "") << "};\n"
     << "const hcrt_hyper_binding kHyperBindings[] = {";
  for (const HyperBinding &b : hyperBindings)
    os << "{" << b.attrs << ", " << b.floatIndex << ", " << b.hyper << "}, ";
  os << (hyperBindings.empty() ? "{-1, 0, 0}" : "") << "};\n"
     << "constexpr size_t kNumHyperBindings = " << hyperBindings.size() << ";\n\n"
     << "const hcrt_entry kCalls[] = {\n";
  static const char *const kEntryKinds[] = {
      "HCRT_ENTRY_KERNEL",     "HCRT_ENTRY_ALLREDUCE_START", "HCRT_ENTRY_ALLREDUCE_WAIT",
      "HCRT_ENTRY_CLUSTER_WAIT", "HCRT_ENTRY_COPY_START",    "HCRT_ENTRY_COPY_WAIT"};
  for (const Call &c : calls)
    os << "  {" << kEntryKinds[c.kind] << ", " << c.kernel << ", " << c.first << ", " << c.nin
       << ", " << c.nout << ", " << c.attrs << ", " << c.cluster << "},\n";
  os << "};\n\n// Where each call is, for --check-finite.\nconst char *const kCallWhere[] = {\n";
  {
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const auto &[kernel, nodes] = callWhere[i];
      const hs::KernelInfo *info = hs::KernelRegistry::active().lookup(kernel);
      std::string phase = info && info->effect == hs::KernelEffect::Optimizer
                              ? "optimizer"
                              : i <= lossCall ? "forward" : "backward";
      std::string label =
          calls[i].kind == HCRT_ENTRY_CLUSTER_WAIT
              ? "cluster " + std::to_string(calls[i].cluster) + " waits for " +
                    std::to_string(calls[i].first) + " entries of cluster " +
                    std::to_string(calls[i].kernel)
          : calls[i].kind >= HCRT_ENTRY_COPY_START
              ? std::string(calls[i].kind == HCRT_ENTRY_COPY_WAIT ? "wait for a tier copy"
                            : calls[i].kernel == HCRT_COPY_TO_SLOW ||
                                    calls[i].kernel == HCRT_COPY_TO_DISK
                                ? "offload of an activation"
                                : "prefetch of an activation")
          : calls[i].kind != HCRT_ENTRY_KERNEL
              ? std::string("gradient all-reduce ") +
                    (calls[i].kind == HCRT_ENTRY_ALLREDUCE_START ? "start" : "wait") + ", bucket " +
                    std::to_string(calls[i].kernel)
              : "kernel " + kernel + " (" + phase + ")" +
                    (nodes.empty() ? "" : " of ONNX node " + nodes) +
                    (calls[i].condition == HCRT_RUNS_IF_REDUCED
                         ? ", only if the step reduces gradients per bucket"
                     : calls[i].condition == HCRT_RUNS_IF_LOCAL
                         ? ", only if the step does not reduce gradients per bucket"
                         : "");
      os << "  " << cString(label) << ",\n";
    }
  }
  os << "};\n\n// Per call, for the profile: kernel, flops and bytes per run.\n"
     << "const char *const kCallKernel[] = {";
  for (std::size_t i = 0; i < callWhere.size(); ++i) {
    // The profile tells cross-attention (q, k, v: 3 inputs after the
    // backward's dOut, out and lse) from self-attention (one packed qkv).
    const std::string &k = callWhere[i].first;
    const bool cross = calls[i].kind == HCRT_ENTRY_KERNEL && ((k == "attention" && calls[i].nin == 3) ||
                                              (k == "attention_grad" && calls[i].nin == 6));
    os << cString(cross ? "cross_" + k : k) << ", ";
  }
  os << "};\nconst double kCallFlops[] = {";
  for (double f : callFlops)
    os << llvm::formatv("{0:e}", f).str() << ", ";
  os << "};\nconst double kCallBytes[] = {";
  for (double b : callBytes)
    os << llvm::formatv("{0:e}", b).str() << ", ";
  os << "};\n// Per call: when it runs (hcrt_call_condition).\nconst int8_t kCallCondition[] = {";
  for (const Call &c : calls)
    os << c.condition << ", ";
  os << "};\n\nconst hcrt_named kNamed[] = {\n" << named << "};\n\n";
  writeProgram(os, diskBytes);
  os.flush();
  return s;
}

// The program the executor runs (step_program.h) over the tables above, and
// the step ABI's entry points: the executor's, with this library's tables.
void Emitter::writeProgram(llvm::raw_ostream &os, int64_t diskBytes) {
  os << "const hcrt_step_program kProgram = {\n"
     << "    kDescription, kNumArenas, kInputArena, kConstArena, " << arenaCode("accum")
     << ", kArenaBytes, kArenaContents,\n"
     << "    kTouch, std::size(kTouch), kTouchNuma, std::size(kTouchNuma), kRanksPerNode,\n"
     << "    kConstants, kKernels, kKernelNames, kDescs, std::size(kDescs), kOperands,\n"
     << "    kAttrs, std::size(kAttrs), kNumHypers, kHyperNames, kHyperDefaults,\n"
     << "    kHyperBindings, " << hyperBindings.size() << ",\n"
     << "    kCalls, std::size(kCalls), kCallWhere, kCallKernel, kCallFlops, kCallBytes,\n"
     << "    kCallCondition, kNamed, std::size(kNamed),\n"
     << "    /*loss_desc*/ " << lossDesc << ", /*loss_call*/ " << lossCall
     << ", /*gate_call*/ " << gateCall << ", /*update_call*/ " << updateCall << ",\n"
     << "    /*num_buckets*/ " << numBuckets << ", /*num_copies*/ " << numCopies
     << ", /*disk_bytes*/ " << diskBytes << ", " << cString(offloadDir)
     << ", /*num_clusters*/ " << numClusters << ",\n    /*kept_panel_arena*/ "
     << arenaCode("param") << ", /*kept_panel_bytes*/ " << keptPanelBytes << "};\n\n"
     << "// The executor is libhcrt's (runtime/src/exec/step_executor.cpp).\n"
     << "hc_step *create(const hc_step_env *env, char *error, size_t size) {\n"
     << "  return hcrt_step_create(&kProgram, env, error, size);\n}\n\n"
     << "const hc_step_api kApi = {HC_STEP_ABI_VERSION, kDescription, create, "
        "hcrt_step_destroy,\n    hcrt_step_set_tensor, hcrt_step_get_tensor, hcrt_step_run, "
        "hcrt_step_last_error,\n    hcrt_step_profile, hcrt_step_set_hyperparameter, "
        "hcrt_step_get_hyperparameter,\n    hcrt_step_evaluate};\n\n"
     << "} // namespace\n\n"
     << "extern \"C\" __attribute__((visibility(\"default\"))) const hc_step_api *\n"
     << "hc_step_get_api(void) {\n  return &kApi;\n}\n";
}

} // namespace

bool emitStepCpp(ModuleOp schedule, const EmitInfo &info, std::string &cpp,
                 std::string &description, std::string &error) {
  func::FuncOp step = schedule.lookupSymbol<func::FuncOp>("step");
  if (!step) {
    error = "no schedule-level @step function";
    return false;
  }
  return Emitter(step, info).run(cpp, description, error);
}

} // namespace hc
