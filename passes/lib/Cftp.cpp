// hc-cftp: communication-free tensor parallelism inside a rank. The planned
// @step is cut into one stream of calls per cluster of the rank's core
// budget: each hcs.call either runs whole on one cluster or is replaced by
// one sub-call per cluster on hcs.view slices of its operands (the rule per
// kernel is kernels.def's split column, CftpRules.cpp applies it), and
// hcs.cluster_wait orders a stream after another only where bytes cross
// clusters (CftpAccess.h). hc-automem's tier copies are cut by rows too,
// each cluster starting and waiting for its own piece. Which of
// the two each call gets is decided by a list-scheduling cost model fed by
// measured kernel rates (MachineRates, CostModel.h; bench/cftp-rates-*.txt).
// A weight gradient may instead be cut by rows into per-cluster partial
// sums (planPartial, off by default), folded into the gradient where the step next reads it.
#include "hc/Passes/Passes.h"
#include "hc/Schedule/Placement.h"

#include "BufferLiveness.h"
#include "CftpAccess.h"
#include "CftpRules.h"
#include "CostModel.h"
#include "VerifyMemory.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"


using namespace mlir;
namespace hs = hc::schedule;

namespace hc {
#define GEN_PASS_DEF_CFTP
#include "hc/Passes/Passes.h.inc"

namespace {

// The kernels' rates per thread, the wait's and the copies' costs: one
// MachineRates (CostModel.h, shared with hc-automem; bench/cftp_rates.py
// measures them).
using Rates = MachineRates;

using Shapes = SmallVector<ArrayRef<int64_t>>;

// One piece of work for one cluster's stream.
struct Sub {
  int k = 0;
  SmallVector<cftp::Place> ins, outs;
  SmallVector<cftp::Access> acc;
  double dur = 0;
  double notBefore = 0;  // a copy's wait: when the copy engine is done
  SmallVector<std::pair<int, int64_t>> waits;  // (cluster, count)
  double finish = 0;
};

struct Done {
  int64_t idx;  // position in its cluster's stream
  double finish;
  SmallVector<cftp::Access> acc;
};

// A weight gradient computed as K partial sums over the clusters' rows:
// cluster 0's into the gradient itself, cluster k's into its buffer of the
// "partial" arena, summed into the gradient (folded) before anything else
// reads it.
struct Partial {
  Value grad;
  cftp::Place place;
  SmallVector<Value> parts;  // clusters 1..K-1
  SmallVector<cftp::Place> partPlaces;
  bool early = false;  // folded (only_if "reduced") before its bucket's reduction
};

class Planner {
public:
  Planner(func::FuncOp f, int clusters, std::vector<int> threads, Rates rates,
          bool partialGrads, int64_t partialRoom)
      : f(f), K(clusters), threads(std::move(threads)), rates(std::move(rates)),
        clock(K, 0.0), count(K, 0), seen(K, std::vector<int64_t>(K, 0)),
        log(K), laneFree(K, 0.0), partialGrads(partialGrads),
        partialRoom(partialRoom) {}
  LogicalResult run();

private:
  double duration(hs::CallOp call, const Sub &s, int nthreads) const;
  void evaluate(Sub &s) const;
  void emitWaits(Operation *op, Sub &s, StringRef scope);
  void commit(Operation *op, hs::CallOp call, std::vector<Sub> &subs,
              const cftp::Part *part);
  bool planPartial(const Sub &whole, std::vector<Sub> &subs, int64_t &bytes) const;
  void commitPartial(hs::CallOp call, std::vector<Sub> &subs, int64_t bytes);
  void fold(Operation *before, Partial &p, StringRef onlyIf);
  void foldBefore(Operation *op, const SmallVector<cftp::Access> &acc);
  Value sliceOf(OpBuilder &b, Value v, const cftp::Place &p, Location loc);
  bool cutCopy(Operation *copy);
  void cutWait(hs::WaitOp wait);
  void place(Operation *op, int k, double dur, double notBefore);
  double startCopy(int lane, double start, int64_t bytes, bool piece);

  func::FuncOp f;
  int K;
  std::vector<int> threads;  // per cluster
  Rates rates;
  cftp::Places places;
  std::vector<double> clock;
  std::vector<int64_t> count;
  std::vector<std::vector<int64_t>> seen;  // seen[k][j]: k waited for j's count
  std::vector<std::vector<Done>> log;
  llvm::DenseMap<Value, double> copyDone;  // a tier copy's token -> its end
  std::vector<double> laneFree;            // each copy lane's queue drains
  // A tier copy cut by clusters: its token -> each cluster's piece's token.
  llvm::DenseMap<Value, SmallVector<Value>> pieces;
  SmallVector<Operation *> cutCopies;      // erased once their waits are cut
  bool diskTier = false;                   // the offload arena is a file
  bool partialGrads;
  int64_t partialRoom;       // bytes the partials may take (see runOnOperation)
  // The "partial" arena: one region per cluster 1..K-1, packed in order of
  // the cuts. While planning, region k starts at k * kRegionStride (apart
  // from every other: the access model sees no false conflicts); placed
  // once the regions' sizes are known (placePartials).
  static constexpr int64_t kRegionStride = int64_t(1) << 44;
  std::vector<int64_t> regionBytes = std::vector<int64_t>(K, 0);
  SmallVector<std::pair<hs::BufferOp, int>> partialBuffers;
  void placePartials();
  std::vector<Partial> partials;  // not yet folded for a local step
  int64_t nSplit = 0, nWhole = 0, nWaits = 0, nCopies = 0, nPartial = 0, nFolds = 0;
  double unsplit = 0;  // the same calls whole on every thread (--cftp off)
};

double Planner::duration(hs::CallOp call, const Sub &s, int n) const {
  Shapes ins, outs;
  double bytes = 0;
  auto add = [&](const cftp::Place &p, Shapes &shapes) {
    shapes.push_back(p.shape);
    double e = static_cast<double>(p.elemBytes);
    for (int64_t d : p.shape)
      e *= static_cast<double>(d);
    bytes += e;
  };
  for (const cftp::Place &p : s.ins)
    add(p, ins);
  for (const cftp::Place &p : s.outs)
    add(p, outs);
  return kernelSeconds(call.getKernel(), ins, outs, bytes, rates.kernel, n, call.getAttrs());
}

// The waits `s` needs before it runs on cluster s.k, and when it finishes.
void Planner::evaluate(Sub &s) const {
  s.waits.clear();
  double start = clock[s.k];
  for (int j = 0; j < K; ++j) {
    if (j == s.k)
      continue;
    for (auto it = log[j].rbegin(); it != log[j].rend(); ++it) {
      if (it->idx + 1 <= seen[s.k][j])
        break;
      bool hit = false;
      for (const cftp::Access &a : s.acc)
        for (const cftp::Access &b : it->acc)
          hit = hit || cftp::conflicts(a, b);
      if (hit) {
        s.waits.push_back({j, it->idx + 1});
        start = std::max(start, it->finish + rates.sync);
        break;
      }
    }
  }
  s.finish = std::max(start + s.dur, s.notBefore);
}

Value Planner::sliceOf(OpBuilder &b, Value v, const cftp::Place &p,
                       Location loc) {
  Value root = v;
  if (auto view = v.getDefiningOp<hs::ViewOp>())
    root = view.getSource();
  auto type = cast<MemRefType>(v.getType());
  auto sliced = MemRefType::get(
      p.shape, type.getElementType(),
      StridedLayoutAttr::get(b.getContext(), p.offset, p.strides));
  return b.create<hs::ViewOp>(loc, sliced, root);
}

// The waits `s` needs, before `op` (evaluated again: earlier pieces of the
// same op may be in the log now). Scoped ones (`scope`: the op does nothing
// in some steps) order `op` alone, so they do not count as seen.
void Planner::emitWaits(Operation *op, Sub &s, StringRef scope) {
  OpBuilder b(op);
  evaluate(s);
  for (auto [j, need] : s.waits) {
    b.create<hs::ClusterWaitOp>(op->getLoc(), b.getI64IntegerAttr(s.k),
                                b.getI64IntegerAttr(j), b.getI64IntegerAttr(need),
                                scope.empty() ? StringAttr() : b.getStringAttr(scope));
    if (scope.empty())
      seen[s.k][j] = need;
    ++nWaits;
  }
}

void Planner::commit(Operation *op, hs::CallOp call, std::vector<Sub> &subs,
                     const cftp::Part *part) {
  OpBuilder b(op);
  // An op that does nothing in some steps (an all-reduce start with one
  // rank, grad_accumulate with one micro-batch) gets waits scoped to it,
  // which the runtime skips then: they order nothing after it, so they do
  // not count as seen. Each bucket's pair otherwise joined the streams
  // (S/2 fp32 on 2 clusters: 0.46 of 0.79 s/step of waits, on one rank).
  const StringRef scope = hs::waitScopeFor(op);
  for (Sub &s : subs) {
    emitWaits(op, s, scope);
    if (!part) {
      op->setAttr("cluster", b.getI64IntegerAttr(s.k));
    } else {
      SmallVector<Value> ins, outs;
      for (auto [i, v] : llvm::enumerate(call.getIns()))
        ins.push_back(part->inAxis[i] < 0 ? v : sliceOf(b, v, s.ins[i], op->getLoc()));
      for (auto [i, v] : llvm::enumerate(call.getOuts()))
        outs.push_back(sliceOf(b, v, s.outs[i], op->getLoc()));
      auto sub = b.create<hs::CallOp>(op->getLoc(), call.getKernelAttr(), ins,
                                      outs, call.getAttrs());
      // The whole call's marks (a recomputation's hcs.recompute) go with
      // every piece.
      sub->setDiscardableAttrs(op->getDiscardableAttrDictionary());
      sub->setAttr("cluster", b.getI64IntegerAttr(s.k));
      sub->setAttr("split", b.getStringAttr(part->how));
    }
    log[s.k].push_back({count[s.k]++, s.finish, s.acc});
    clock[s.k] = s.finish;
  }
  if (part) {
    ++nSplit;
    op->erase();
  } else {
    ++nWhole;
  }
}

// The copy engine has one FIFO lane per cluster stream (copy_engine.h): a
// copy started at `start` on lane k ends when those queued before it on
// that lane and its own bytes are done. The pieces of a cut copy run on
// all lanes at once and share the disk: each moves at 1 / K of its rate.
double Planner::startCopy(int lane, double start, int64_t bytes, bool piece) {
  const double rate = diskTier ? rates.diskBytes / (piece ? K : 1) : rates.copyBytes;
  double &free = laneFree[static_cast<size_t>(lane)];
  free = std::max(free, start) + static_cast<double>(bytes) / rate;
  return free;
}

// `op` (just created, a copy's piece or its wait) goes to cluster k's stream,
// after the waits its bytes need.
void Planner::place(Operation *op, int k, double dur, double notBefore) {
  Sub s;
  s.k = k;
  s.dur = dur;
  s.notBefore = notBefore;
  places.accessesOf(op, s.acc);
  emitWaits(op, s, hs::waitScopeFor(op));
  op->setAttr("cluster", OpBuilder(op).getI64IntegerAttr(k));
  log[k].push_back({count[k]++, s.finish, s.acc});
  clock[k] = s.finish;
}

// A weight gradient (a features-rule call: dW [out, in] = dY^T X, and db
// beside it) cut by the rows of dY and X instead, the rows each cluster
// produced itself: cluster k sums its rows into a whole-sized output of
// its own, so no stream waits for another's dY. The fold (`fold`) adds
// the partials later, where a stream joins anyway. `bytes`: one
// cluster's partial outputs.
bool Planner::planPartial(const Sub &whole, std::vector<Sub> &subs,
                          int64_t &bytes) const {
  if (whole.ins.size() != 2 || whole.outs.empty())
    return false;
  const cftp::Place &dy = whole.ins[0], &x = whole.ins[1];
  if (dy.shape.size() < 2 || dy.shape.size() != x.shape.size() || dy.shape[0] != x.shape[0] ||
      dy.shape[0] < K)
    return false;
  const int grad = static_cast<int>(llvm::find(hs::kArenaNames, StringRef("grad")) -
                                    std::begin(hs::kArenaNames));
  const int partial = static_cast<int>(llvm::find(hs::kArenaNames, StringRef("partial")) -
                                       std::begin(hs::kArenaNames));
  SmallVector<int64_t> at;  // each output's place in one cluster's partials
  bytes = 0;
  for (const cftp::Place &o : whole.outs) {
    if (o.root != grad)
      return false;
    int64_t n = o.elemBytes;
    for (int64_t d : o.shape)
      n *= d;
    at.push_back(bytes);
    bytes += (n + 63) / 64 * 64;  // each on a cache line of its own
  }
  int64_t used = 0;
  for (int64_t r : regionBytes)
    used += r;
  if ((K - 1) * bytes > partialRoom - used)
    return false;
  const int64_t rows = dy.shape[0];
  subs.assign(K, Sub());
  for (int k = 0; k < K; ++k) {
    Sub &s = subs[k];
    s.k = k;
    const int64_t lo = rows * k / K, hi = rows * (k + 1) / K;
    for (cftp::Place p : whole.ins) {
      p.offset += lo * p.strides[0];
      p.shape[0] = hi - lo;
      s.ins.push_back(p);
      places.add(p, false, s.acc);
    }
    for (auto [o, out] : llvm::enumerate(whole.outs)) {
      cftp::Place p = out;
      if (k > 0) {
        p.root = partial;
        p.base = k * kRegionStride + regionBytes[k] + at[o];
        p.offset = 0;
        int64_t stride = 1;
        for (size_t d = p.shape.size(); d-- > 0;) {
          p.strides[d] = stride;
          stride *= p.shape[d];
        }
      }
      s.outs.push_back(p);
      places.add(p, true, s.acc);
    }
  }
  return true;
}

void Planner::commitPartial(hs::CallOp call, std::vector<Sub> &subs, int64_t bytes) {
  OpBuilder b(call);
  const Location loc = call.getLoc();
  std::vector<Partial> made(call.getOuts().size());
  for (Sub &s : subs) {
    emitWaits(call, s, {});
    SmallVector<Value> ins, outs;
    for (auto [i, v] : llvm::enumerate(call.getIns()))
      ins.push_back(sliceOf(b, v, s.ins[i], loc));
    for (auto [o, v] : llvm::enumerate(call.getOuts())) {
      if (s.k == 0) {
        outs.push_back(v);
        made[o].grad = v;
        made[o].place = s.outs[o];
        continue;
      }
      auto type = cast<MemRefType>(v.getType());
      auto part = b.create<hs::BufferOp>(
          loc, MemRefType::get(type.getShape(), type.getElementType()), b.getStringAttr("partial"),
          b.getI64IntegerAttr(s.outs[o].base), StringAttr());
      partialBuffers.push_back({part, s.k});
      outs.push_back(part);
      made[o].parts.push_back(part);
      made[o].partPlaces.push_back(s.outs[o]);
    }
    auto sub = b.create<hs::CallOp>(loc, call.getKernelAttr(), ins, outs, call.getAttrs());
    sub->setDiscardableAttrs(call->getDiscardableAttrDictionary());
    sub->setAttr("cluster", b.getI64IntegerAttr(s.k));
    sub->setAttr("split", b.getStringAttr("partial"));
    log[s.k].push_back({count[s.k]++, s.finish, s.acc});
    clock[s.k] = s.finish;
  }
  for (int k = 1; k < K; ++k)
    regionBytes[k] += bytes;
  for (Partial &p : made)
    partials.push_back(std::move(p));
  ++nPartial;
  call->erase();
}

// Adds the partials of `p` into its gradient before `before`: each cluster
// its rows of it (dim 0), `only_if` as given.
void Planner::fold(Operation *before, Partial &p, StringRef onlyIf) {
  OpBuilder b(before);
  const Location loc = before->getLoc();
  const int64_t rows = p.place.shape.empty() ? 1 : p.place.shape[0];
  auto rowsOf = [&](cftp::Place q, int64_t lo, int64_t hi) {
    if (!q.shape.empty()) {
      q.offset += lo * q.strides[0];
      q.shape[0] = hi - lo;
    }
    return q;
  };
  for (int j = 0; j < K; ++j) {
    const int64_t lo = rows * j / K, hi = rows * (j + 1) / K;
    if (hi == lo)
      continue;
    const cftp::Place g = rowsOf(p.place, lo, hi);
    Value gv = sliceOf(b, p.grad, g, loc);
    for (int k = 1; k < K; ++k) {
      const cftp::Place q = rowsOf(p.partPlaces[k - 1], lo, hi);
      Value qv = sliceOf(b, p.parts[k - 1], q, loc);
      auto add = b.create<hs::CallOp>(loc, b.getStringAttr("add"), ValueRange{gv, qv},
                                      ValueRange{gv}, b.getDictionaryAttr({}),
                                      onlyIf.empty() ? StringAttr() : b.getStringAttr(onlyIf));
      add->setAttr("split", b.getStringAttr("fold"));
      Sub s;
      s.ins = {g, q};
      s.outs = {g};
      place(add, j, duration(add, s, threads[j]), 0);
      ++nFolds;
    }
  }
}

// Before `op`, the folds its accesses `acc` need. An op that runs only
// when the step reduces its gradients per bucket (grad_accumulate, an
// all-reduce start) gets the fold if reduced; any other op reading or
// writing a gradient with partials gets the fold if local (or always, if
// none came before). An all-reduce's wait follows its start's fold.
void Planner::foldBefore(Operation *op, const SmallVector<cftp::Access> &acc) {
  if (partials.empty() || isa<hs::WaitOp>(op))
    return;
  const bool reducing = !hs::waitScopeFor(op).empty();
  for (size_t i = 0; i < partials.size();) {
    Partial &p = partials[i];
    SmallVector<cftp::Access> gradAcc;
    places.add(p.place, true, gradAcc);
    bool touches = false;
    for (const cftp::Access &a : acc)
      for (const cftp::Access &g : gradAcc)
        touches = touches || cftp::conflicts(a, g);
    if (!touches || (reducing && p.early)) {
      ++i;
      continue;
    }
    if (reducing) {
      fold(op, p, "reduced");
      p.early = true;
      ++i;
      continue;
    }
    fold(op, p, p.early ? "local" : "");
    partials.erase(partials.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

// A tier copy of a batch-major buffer, cut as the calls around it are: one
// piece per cluster, its rows (axis 0, [E k / K, E (k+1) / K)), started
// and waited for in that cluster's stream, so no stream waits for another
// to reach a copy's wait before it reuses its own rows. A disk tier's
// pieces must start on its 4 KiB blocks (direct I/O writes whole blocks);
// a buffer that cannot be cut so is copied whole by cluster 0, as before.
bool Planner::cutCopy(Operation *copy) {
  Value source = copy->getOperand(0), target = copy->getOperand(1);
  auto type = cast<MemRefType>(source.getType());
  if (type.getRank() == 0 || type.getDimSize(0) < K)
    return false;
  const int64_t rows = type.getDimSize(0), rowBytes = hs::byteSize(type) / rows;
  const int64_t elems = type.getNumElements() / rows;
  if (diskTier) {
    auto slow = (isa<hs::OffloadOp>(copy) ? target : source).getDefiningOp<hs::BufferOp>();
    int64_t at = slow && slow.getOffset() ? static_cast<int64_t>(*slow.getOffset()) : -1;
    for (int k = 0; k < K; ++k)
      if (at < 0 || (at + rows * k / K * rowBytes) % 4096 != 0)
        return false;
  }
  SmallVector<int64_t> strides;
  int64_t offset = 0;
  if (!hs::stridesOf(type, strides, offset))
    return false;
  OpBuilder b(copy);
  SmallVector<Value> tokens;
  for (int k = 0; k < K; ++k) {
    const int64_t lo = rows * k / K, hi = rows * (k + 1) / K;
    SmallVector<int64_t> shape(type.getShape());
    shape[0] = hi - lo;
    auto pieceType = MemRefType::get(
        shape, type.getElementType(),
        StridedLayoutAttr::get(b.getContext(), lo * elems, strides));
    Value from = b.create<hs::ViewOp>(copy->getLoc(), pieceType, source);
    Value to = b.create<hs::ViewOp>(copy->getLoc(), pieceType, target);
    Operation *piece = b.clone(*copy);
    piece->setOperand(0, from);
    piece->setOperand(1, to);
    place(piece, k, rates.kernel.call, 0);
    copyDone[piece->getResult(0)] =
        startCopy(k, log[k].back().finish, hs::byteSize(pieceType), true);
    tokens.push_back(piece->getResult(0));
    ++nCopies;
  }
  pieces[copy->getResult(0)] = std::move(tokens);
  cutCopies.push_back(copy);
  return true;
}

// The wait of a cut copy: each cluster waits for its own piece.
void Planner::cutWait(hs::WaitOp wait) {
  OpBuilder b(wait);
  for (auto [k, token] : llvm::enumerate(pieces.lookup(wait.getToken()))) {
    auto w = b.create<hs::WaitOp>(wait.getLoc(), token);
    place(w, static_cast<int>(k), rates.kernel.call, copyDone.lookup(token));
  }
  wait.erase();
}

// The "partial" arena's regions, page-aligned one after another (cluster
// k's buffers move from k * kRegionStride to its region's start), its
// size, and its pages' owners: region k is cluster k's, on the home node
// the placement gives that cluster's other slices.
void Planner::placePartials() {
  Builder b(f.getContext());
  auto placement = f->getAttrOfType<hs::PlacementAttr>(hs::kPlacementAttr);
  const int64_t page = placement ? placement.getPageBytes() : 4096;
  std::vector<int64_t> base(K, 0);
  int64_t end = 0;
  for (int k = 1; k < K; ++k) {
    base[k] = (end + page - 1) / page * page;
    end = base[k] + regionBytes[k];
  }
  for (auto [buf, k] : partialBuffers)
    buf.setOffsetAttr(b.getI64IntegerAttr(static_cast<int64_t>(*buf.getOffset()) -
                                          k * kRegionStride + base[k]));
  NamedAttrList sizes(f->getAttrOfType<DictionaryAttr>("hcs.arena_bytes"));
  sizes.set("partial", b.getI64IntegerAttr(end));
  f->setAttr("hcs.arena_bytes", sizes.getDictionary(f.getContext()));
  if (!placement)
    return;
  SmallVector<Attribute> slices(placement.getSlices().begin(), placement.getSlices().end());
  for (int k = 1; k < K; ++k) {
    const int64_t to = k + 1 < K ? base[k + 1] : end;
    if (to <= base[k])
      continue;
    DenseI32ArrayAttr numa;
    for (Attribute a : placement.getSlices())
      if (auto s = cast<hs::SliceAttr>(a); !numa && s.getOwner() == k)
        numa = s.getNuma();
    if (!numa)
      numa = cast<hs::SliceAttr>(placement.getSlices()[0]).getNuma();
    slices.push_back(hs::SliceAttr::get(f.getContext(), "partial", base[k], to - base[k], k, numa));
  }
  f->setAttr(hs::kPlacementAttr,
             hs::PlacementAttr::get(f.getContext(), page, b.getArrayAttr(slices)));
}

LogicalResult Planner::run() {
  if (auto memory = f->getAttrOfType<hs::MemoryPlanAttr>(hs::kMemoryAttr))
    diskTier = !memory.getOffloadDir().empty();
  Value loss;
  std::vector<Operation *> work;
  for (Operation &op : f.getBody().front()) {
    if (auto l = dyn_cast<hs::LossOp>(op))
      loss = l.getValue();
    // Every op the access model gives bytes is a stream entry (hcs.loss
    // only marks a buffer).
    if (isa<hs::AccessOpInterface>(op) && !isa<hs::LossOp>(op))
      work.push_back(&op);
    if (isa<hs::ClusterWaitOp>(op))
      return op.emitError("hc-cftp: the schedule is already split");
  }
  auto rootOf = [](Value v) -> Value {
    if (auto view = v.getDefiningOp<hs::ViewOp>())
      return view.getSource();
    return v;
  };
  const int all = [&] {
    int n = 0;
    for (int t : threads)
      n += t;
    return n;
  }();
  for (Operation *op : work) {
    if (isa<hs::OffloadOp, hs::PrefetchOp>(op) && cutCopy(op))
      continue;
    if (auto wait = dyn_cast<hs::WaitOp>(op); wait && pieces.count(wait.getToken())) {
      cutWait(wait);
      continue;
    }
    auto call = dyn_cast<hs::CallOp>(op);
    // Communication, tier copies that cannot be cut (cutCopy) and the loss
    // stay with cluster 0 (the host's thread, which owns the collectives).
    bool pinned = !call;
    Sub whole;
    if (call) {
      for (Value v : call.getOuts())
        pinned = pinned || (loss && rootOf(v) == rootOf(loss));
      for (Value v : call.getIns()) {
        whole.ins.emplace_back();
        if (!places.placeOf(v, whole.ins.back()))
          return op->emitError("hc-cftp: an operand that is no planned buffer, input, constant or view of one");
      }
      for (Value v : call.getOuts()) {
        whole.outs.emplace_back();
        if (!places.placeOf(v, whole.outs.back()))
          return op->emitError("hc-cftp: an output that is no planned buffer or view of one");
      }
    }
    places.accessesOf(op, whole.acc);
    foldBefore(op, whole.acc);
    StringRef kernel = call ? call.getKernel() : StringRef();
    if (call)
      unsplit += duration(call, whole, all);

    // Candidates: whole on cluster c, and (when its rule allows) cut.
    std::vector<Sub> best;
    double bestFinish = 0;
    const cftp::Part *bestPart = nullptr;
    for (int c = 0; c < (pinned ? 1 : K); ++c) {
      Sub s = whole;
      s.k = c;
      s.dur = call ? duration(call, s, threads[c]) : rates.kernel.call;
      // A tier copy's wait ends when the copy engine has moved its bytes.
      if (auto wait = dyn_cast<hs::WaitOp>(op))
        s.notBefore = copyDone.lookup(wait.getToken());
      evaluate(s);
      if (best.empty() || s.finish < bestFinish) {
        best.assign(1, s);
        bestFinish = s.finish;
      }
    }
    cftp::Part part;
    if (call && !pinned) {
      Shapes ins, outs;
      for (const cftp::Place &p : whole.ins)
        ins.push_back(p.shape);
      for (const cftp::Place &p : whole.outs)
        outs.push_back(p.shape);
      const cftp::SplitRule &rule = cftp::splitRuleOf(kernel);
      if (cftp::planSplit(rule, ins, outs, call.getAttrs(), K, part)) {
        std::vector<Sub> subs(K);
        double finish = 0;
        for (int k = 0; k < K; ++k) {
          Sub &s = subs[k];
          s.k = k;
          int64_t lo = part.extent * k / K, hi = part.extent * (k + 1) / K;
          auto cut = [&](cftp::Place p, int axis) {
            if (axis >= 0) {
              p.offset += lo * p.strides[axis];
              p.shape[axis] = hi - lo;
            }
            return p;
          };
          for (size_t i = 0; i < whole.ins.size(); ++i) {
            s.ins.push_back(cut(whole.ins[i], part.inAxis[i]));
            places.add(s.ins.back(), false, s.acc);
          }
          for (size_t i = 0; i < whole.outs.size(); ++i) {
            s.outs.push_back(cut(whole.outs[i], part.outAxis[i]));
            places.add(s.outs.back(), true, s.acc);
          }
          s.dur = duration(call, s, threads[k]);
          evaluate(s);
          finish = std::max(finish, s.finish);
        }
        // Ties go to the cut: the clusters stay balanced for what follows.
        if (finish <= bestFinish) {
          best = std::move(subs);
          bestPart = &part;
        }
      }
    }
    // A weight gradient as partial sums when the alternatives join the
    // streams: the model prices a join at `sync` only, but a join also
    // exposes the clusters' run-time imbalance (S/2 fp32 on a Zen 3, 2
    // clusters: 0.4-0.7 s/step of waits over ~100 joins; bench/README).
    if (call && !pinned && partialGrads &&
        cftp::splitRuleOf(kernel).rule == cftp::Rule::Features) {
      std::vector<Sub> subs;
      int64_t bytes = 0;
      if (planPartial(whole, subs, bytes)) {
        double finish = 0;
        size_t waits = 0, bestWaits = 0;
        for (Sub &s : subs) {
          s.dur = duration(call, s, threads[s.k]);
          evaluate(s);
          finish = std::max(finish, s.finish);
          waits += s.waits.size();
        }
        for (const Sub &s : best)
          bestWaits += s.waits.size();
        if (waits < bestWaits || finish <= bestFinish) {
          commitPartial(call, subs, bytes);
          continue;
        }
      }
    }
    commit(op, call, best, bestPart);
    if (isa<hs::OffloadOp, hs::PrefetchOp>(op)) {
      // Started where it stands, on its stream's lane; the lane runs it
      // meanwhile.
      copyDone[op->getResult(0)] = startCopy(
          best.front().k, best.front().finish,
          hs::byteSize(cast<MemRefType>(op->getOperand(0).getType())), false);
      ++nCopies;
    }
  }
  for (Operation *copy : cutCopies)
    copy->erase();
  // Gradients the step itself never reads again: folded at its end (the
  // host reads them).
  Operation *end = f.getBody().front().getTerminator();
  for (Partial &p : partials)
    fold(end, p, p.early ? "local" : "");
  partials.clear();
  double predicted = 0;
  for (double c : clock)
    predicted = std::max(predicted, c);
  Builder b(f.getContext());
  SmallVector<NamedAttribute> attrs{
      b.getNamedAttr("clusters", b.getI64IntegerAttr(K)),
      b.getNamedAttr("threads", b.getDenseI32ArrayAttr(SmallVector<int32_t>(
                                    threads.begin(), threads.end()))),
      b.getNamedAttr("split", b.getI64IntegerAttr(nSplit)),
      b.getNamedAttr("whole", b.getI64IntegerAttr(nWhole)),
      b.getNamedAttr("waits", b.getI64IntegerAttr(nWaits)),
      b.getNamedAttr("predicted_seconds", b.getF64FloatAttr(predicted)),
      b.getNamedAttr("unsplit_seconds", b.getF64FloatAttr(unsplit)),
      b.getNamedAttr("rates", b.getStringAttr(rates.source))};
  if (nCopies > 0)  // hc-automem's tier copies, ordered like any access
    attrs.push_back(b.getNamedAttr("copies", b.getI64IntegerAttr(nCopies)));
  if (nPartial > 0) {
    attrs.push_back(b.getNamedAttr("partial", b.getI64IntegerAttr(nPartial)));
    attrs.push_back(b.getNamedAttr("folds", b.getI64IntegerAttr(nFolds)));
    placePartials();
  }
  f->setAttr("hcs.cftp", b.getDictionaryAttr(attrs));
  return success();
}

struct CftpPass : impl::CftpBase<CftpPass> {
  using CftpBase::CftpBase;
  void runOnOperation() override {
    Rates r;
    std::string error;
    if (!parseRates(rates, r, error)) {
      getOperation().emitError(error);
      return signalPassFailure();
    }
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (f.getName() != "step" || !f->getAttr(hs::kCoreBudgetAttr))
        continue;
      hs::PlanBudget budget;
      if (!hs::readBudget(f->getAttr(hs::kCoreBudgetAttr), budget, error) ||
          budget.ranks.empty()) {
        f.emitError("hc-cftp: ") << (error.empty() ? "no ranks in the core budget" : error);
        return signalPassFailure();
      }
      // Every rank of the node runs the same library: the fewest clusters
      // and compute cores any of them has.
      int K = 1 << 30, cores = 1 << 30;
      for (const hs::PlanRank &rank : budget.ranks) {
        K = std::min<int>(K, static_cast<int>(rank.clusters.size()));
        cores = std::min<int>(cores, static_cast<int>(rank.compute.size()));
      }
      K = std::min(K, cores);
      if (K <= 1)
        continue;
      for (auto in : f.getBody().front().getOps<hs::InputOp>()) {
        auto shape = in.getType().getShape();
        if (shape.empty())
          continue;  // a scalar input (seeds)
        if (shape[0] % K != 0 && !strictBatch) {
          Builder b(f.getContext());
          f->setAttr("hcs.cftp",
                     b.getDictionaryAttr({b.getNamedAttr("clusters", b.getI64IntegerAttr(K)),
                                          b.getNamedAttr("skipped", b.getStringAttr(
                                              "the per-rank batch " + std::to_string(shape[0]) +
                                              " is not a multiple of the clusters"))}));
          K = 1;
          break;
        }
        if (shape[0] % K != 0) {
          f.emitError("--clusters ")
              << K << " does not divide the per-rank batch " << shape[0]
              << " (CFTP cuts the batch across the clusters; use a multiple "
                 "of it, or --cftp off)";
          return signalPassFailure();
        }
        break;
      }
      if (K <= 1)
        continue;
      std::vector<int> threads;
      for (int k = 0; k < K; ++k)
        threads.push_back(cores * (k + 1) / K - cores * k / K);
      // The partials' bytes: at most one more copy of the gradients (all
      // of them at K = 2; a share at more clusters, where K - 1 copies
      // would grow the step's memory by several times its parameters), and
      // never more than the memory budget leaves.
      int64_t room = partialLimit;
      if (room < 0) {
        room = 0;
        if (auto sizes = f->getAttrOfType<DictionaryAttr>("hcs.arena_bytes"))
          if (auto grad = sizes.getAs<IntegerAttr>("grad"))
            room = grad.getInt();
      }
      if (auto memory = f->getAttrOfType<hs::MemoryPlanAttr>(hs::kMemoryAttr);
          memory && memory.getBudget() > 0)
        room = std::min<int64_t>(
            room, std::max<int64_t>(0, memory.getBudget() - memory.getReserve() -
                                           arenaBytesInMemory(f)));
      // Streams ordered by data alone: no reuse of storage to wait on
      // (hc-plan-stream-buffers packs the arenas again afterwards).
      layOutApart(f);
      if (failed(Planner(f, K, threads, r, partialGrads, room).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
} // namespace hc
