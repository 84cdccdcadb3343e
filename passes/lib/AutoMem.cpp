// hc-automem: memory tiers and a budget in the plan (the paper's AutoMem,
// made a compile-time planner). While the planned peak breaks a limit - the
// fast tier's capacity, or the whole resident set's budget - it takes the
// activation live across the peak that is cheapest to do without there, by
// the cost model (CostModel.h), and either
//   - recomputes it: a clone of its producing call, just before its first
//     use after the gap, on inputs that are live there anyway (activation
//     checkpointing chosen by cost; a clone runs the same deterministic
//     kernel on the same bytes, so the step's numbers do not change), or
//   - moves it to the slow tier (fast tier only): hcs.offload after its
//     last use before the gap, hcs.prefetch before its next use, each
//     waited on; each copy runs beside the calls its window holds (the
//     `lookahead` option: a fixed number of calls, or auto: as many as the
//     cost model says the copy takes, planned beside 2-call windows and the
//     cheaper kept, copies' exposed seconds counted).
// That loop can also run after segment recomputation (AutoMemSegments.cpp:
// whole stretches of the forward run again from kept cuts); planBest()
// keeps the cheapest plan that fits among none, all and the fewest segments.
// The decisions and the tiers are recorded in `hcs.memory` on @step;
// hc-plan-buffers then lays out "act" and "offload", and hc-verify-plan
// proves the result (VerifyMemory.cpp).
#include "hc/Passes/Passes.h"

#include "AutoMemRewrite.h"
#include "AutoMemSegments.h"
#include "BufferLiveness.h"
#include "CostModel.h"
#include "hc/Schedule/Placement.h"

#include "hc/base/topology.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"

#include <cerrno>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <limits>
#include <map>

using namespace mlir;
namespace hs = hc::schedule;

namespace hc {
#define GEN_PASS_DEF_AUTOMEM
#include "hc/Passes/Passes.h.inc"

namespace {

using automem::freshBuffer;
using automem::redirect;
using automem::Uses;
using automem::usesOf;
using automem::writes;

// A way to free `buffer`'s bytes across the peak: recompute its producer
// before `next`, or offload after `last` and prefetch before `next`.
struct Choice {
  hs::BufferOp buffer;
  hs::CallOp producer;
  Operation *last = nullptr, *next = nullptr;
  Operation *peak = nullptr;  // the op where the bytes must be free
  // A buffer a prefetch filled still has its copy in the slow tier: moving
  // it again is one more prefetch from there, no offload.
  hs::BufferOp slowCopy;
  bool recompute = true;
  double seconds = 0, score = 0;
  bool overMove = false;  // recomputed although it could have been moved
};

// What a plan did, and what it is predicted to cost per step.
struct Tally {
  int64_t recomputes = 0, moved = 0, prefetched = 0, overMove = 0;
  double recomputeSeconds = 0, moveSeconds = 0;
  // Of moveSeconds, the part the calls in the copies' windows do not cover
  // (by the cost model): what the step is predicted to wait on them.
  double exposedSeconds = 0;
  automem::SegmentResult segments;
  double seconds() const { return recomputeSeconds + moveSeconds + segments.seconds; }
};

// `m` with `otherPlan` as what the other plans would cost.
hs::MemoryPlanAttr withOtherPlan(hs::MemoryPlanAttr m, const std::string &otherPlan) {
  return hs::MemoryPlanAttr::get(m.getContext(), m.getBudget(), m.getReserve(), m.getTiers(),
                                 m.getOffloadDir(), m.getRecomputedCalls(),
                                 m.getRecomputeSeconds(), m.getSegments(), m.getCopySeconds(),
                                 m.getOffloadBytes(), m.getPrefetchBytes(),
                                 m.getRecomputedOverMove(), otherPlan);
}

// lookahead=auto: a copy's window ends once its calls cover its predicted
// seconds, and holds at most this many calls (a window holds the moved
// bytes live longer).
constexpr int64_t kMaxWindowCalls = 16;
// lookahead=auto's other plan: the fixed windows it is compared with.
constexpr int64_t kAutoFixedWindowCalls = 2;

struct AutoMemPass : impl::AutoMemBase<AutoMemPass> {
  using AutoMemBase::AutoMemBase;

  MachineRates machine;
  // Calls in each copy's window; -1: by the copy's predicted seconds.
  int64_t windowCalls = kAutoFixedWindowCalls;

  // Whether a window of `calls` calls covering `covered` predicted seconds
  // is long enough for a copy of `copy` seconds.
  bool windowDone(int64_t calls, double covered, double copy) const {
    if (windowCalls >= 0)
      return calls >= windowCalls;
    return calls >= kMaxWindowCalls || (calls >= 1 && covered >= copy);
  }
  int64_t minWindowCalls() const { return windowCalls >= 0 ? windowCalls : 1; }

  // The node's memory per kind (hwloc subtypes), this rank's share, fastest
  // kind first (rt::memoryKindRank).
  LogicalResult memoryKinds(std::vector<std::pair<std::string, int64_t>> &kinds) {
    rt::Topology topo;
    std::string error;
    if (!rt::discoverTopology(rt::parseTopologySpec(topology), topo, error))
      return getOperation().emitError("--topology " + topology + ": " + error);
    for (const rt::NumaNode &n : topo.numa) {
      auto it = llvm::find_if(kinds, [&](auto &k) { return k.first == n.kind; });
      if (it == kinds.end())
        kinds.push_back({n.kind, 0});
      it = llvm::find_if(kinds, [&](auto &k) { return k.first == n.kind; });
      it->second += static_cast<int64_t>(n.bytes) / std::max<int64_t>(1, ranksPerNode);
    }
    // The rank's kernel team, for the cost model.
    machine.threads = std::max(1, topo.numCores() / static_cast<int>(std::max<int64_t>(1, ranksPerNode)));
    std::stable_sort(kinds.begin(), kinds.end(), [](auto &x, auto &y) {
      return rt::memoryKindRank(x.first) < rt::memoryKindRank(y.first);
    });
    return success();
  }

  // The cheapest way to free bytes at position `peak`, or none.
  // `slowRoom`: bytes the slow tier (the disk) has left for new slots.
  std::optional<Choice> choose(const Uses &u, unsigned peak, bool allowOffload,
                               int64_t slowRoom) {
    const bool toDisk = !offloadDir.empty();
    std::vector<Choice> all;
    for (hs::BufferOp buf : u.buffers) {
      auto found = u.of.find(buf);
      if (found == u.of.end() || buf.getArena() != "act" || buf.getName())
        continue;
      const std::vector<unsigned> &positions = found->second;
      // Only kernels and earlier tier copies touch it: the loss marker and
      // collectives keep theirs.
      if (positions.size() < 2 ||
          llvm::any_of(positions, [&](unsigned p) {
            return !isa<hs::CallOp, hs::OffloadOp, hs::PrefetchOp, hs::WaitOp>(u.ops[p - 1]);
          }))
        continue;
      auto gap = std::upper_bound(positions.begin(), positions.end(), peak);
      if (gap == positions.begin() || gap == positions.end() || gap[-1] == peak ||
          !isa<hs::CallOp>(u.ops[gap[-1] - 1]) || !isa<hs::CallOp>(u.ops[*gap - 1]))
        continue;
      unsigned lastBefore = gap[-1], nextAfter = *gap;
      // Written once, by a call or a prefetch that starts its life.
      Operation *first = u.ops[positions.front() - 1];
      auto producer = dyn_cast<hs::CallOp>(first);
      auto refill = dyn_cast<hs::PrefetchOp>(first);
      if ((!producer && !refill) || !writes(first, buf) ||
          llvm::any_of(ArrayRef<unsigned>(positions).drop_front(),
                       [&](unsigned p) { return writes(u.ops[p - 1], buf); }))
        continue;
      int64_t bytes = hs::byteSize(buf.getType());
      Choice c{buf, producer, u.ops[lastBefore - 1], u.ops[nextAfter - 1],
               u.ops[peak - 1], {}};
      if (refill) {
        c.slowCopy = baseBuffer(refill.getSource());
        if (!c.slowCopy)
          continue;
      }
      if (producer && recompute != "off" &&
          canRecompute(u, producer, positions.front(), nextAfter)) {
        c.recompute = true;
        c.seconds = callSeconds(producer, machine);
      } else {
        c.seconds = std::numeric_limits<double>::infinity();
      }
      // Moving costs an offload and a prefetch; it frees the bytes at the
      // peak only if the prefetch's window starts after it (by time, a
      // window is cut short at the peak: its copy partly exposed).
      int64_t callsAfterPeak = 0;
      for (unsigned p = peak + 1; p < nextAfter; ++p)
        callsAfterPeak += isa<hs::CallOp>(u.ops[p - 1]);
      // A new slot must fit what the disk has left; past that, recompute.
      if (allowOffload && callsAfterPeak >= minWindowCalls() &&
          (c.slowCopy || bytes <= slowRoom)) {
        double move = (c.slowCopy ? 1 : 2) *
                      (toDisk ? diskSeconds(bytes, machine) : copySeconds(bytes, machine));
        if (move < c.seconds) {
          c.recompute = false;
          c.seconds = move;
        } else {
          c.overMove = true;  // the disk (or copy) would cost more
        }
      }
      if (!std::isfinite(c.seconds) || (c.slowCopy && c.recompute))
        continue;
      // Seconds per byte freed, and per op the gap spans: bytes freed over
      // a long gap (forward to backward) lower the peak at every position
      // in it, where a short gap between two reads only moves the peak
      // next door (and a buffer moved gap by gap would cross the disk
      // once per gap).
      c.score = c.seconds / (static_cast<double>(bytes) *
                             static_cast<double>(nextAfter - lastBefore));
      all.push_back(c);
    }
    if (all.empty())
      return std::nullopt;
    const Choice *best = &all.front();
    for (const Choice &c : all)
      if (c.score < best->score)
        best = &c;
    // A consumer before its producer: recomputing `best` first would leave
    // a recomputable consumer's clone nothing to read (modulate's clone
    // reads layer norm's output), so a consumer that is not much dearer
    // goes first, and its producer's turn comes after.
    for (bool changed = true; changed;) {
      changed = false;
      for (const Choice &c : all)
        if (&c != best && c.recompute && c.score <= best->score * kConsumerFirst &&
            llvm::any_of(hs::CallOp(c.producer).getIns(),
                         [&](Value in) { return baseBuffer(in) == best->buffer; })) {
          best = &c;
          changed = true;
          break;
        }
    }
    return *best;
  }
  // How much dearer per byte a consumer may be and still go first.
  static constexpr double kConsumerFirst = 4.0;

  // A producer can run again before position `at` when it is a pure kernel
  // writing only fresh activations, and each input is there unchanged: a
  // host input or constant, or a buffer nothing writes between the
  // producer and `at` that is persistent or still live at `at`.
  bool canRecompute(const Uses &u, hs::CallOp producer, unsigned from, unsigned at) {
    if (!automem::isPureProducer(producer))
      return false;
    for (Value in : producer.getIns()) {
      hs::BufferOp b = baseBuffer(in);
      if (!b)
        continue;  // a host input or a constant
      auto it = u.of.find(b);
      if (it == u.of.end())
        return false;
      const std::vector<unsigned> &ps = it->second;
      if (hs::isLivenessArena(b.getArena()) && ps.back() < at)
        return false;  // it would have to live longer
      for (unsigned p : ps)
        if (p > from && p < at && writes(u.ops[p - 1], b))
          return false;
    }
    return true;
  }

  void apply(Choice c, Tally &t) {
    OpBuilder b(c.next);
    if (c.recompute) {
      IRMapping map;
      for (Value out : c.producer.getOuts()) {
        auto type = cast<MemRefType>(out.getType());
        map.map(out, freshBuffer(b, out.getLoc(), type, "act").getResult());
      }
      Operation *clone = b.clone(*c.producer, map);
      clone->setAttr("hcs.recompute", b.getUnitAttr());
      Value fresh = map.lookup(c.buffer.getResult());
      redirect(c.buffer, fresh, c.next);
      ++t.recomputes;
      t.overMove += c.overMove;
      t.recomputeSeconds += c.seconds;
      return;
    }
    auto type = c.buffer.getType();
    Location loc = c.buffer.getLoc();
    hs::BufferOp slow = c.slowCopy;
    Operation *earliest = c.last;
    // One direction's predicted seconds (c.seconds: both, or a refill's one).
    const double copy = c.seconds / (slow ? 1 : 2);
    // The calls' predicted seconds, for the window and the exposure.
    auto cover = [&](Operation *op, int64_t &calls, double &covered) {
      if (auto call = dyn_cast<hs::CallOp>(op)) {
        ++calls;
        covered += callSeconds(call, machine);
      }
    };
    if (!slow) {
      b.setInsertionPointAfter(c.last);
      slow = freshBuffer(b, loc, type, "offload");
      auto off = b.create<hs::OffloadOp>(loc, b.getType<hs::TokenType>(), c.buffer, slow);
      // The copy runs while its window's calls compute: waited on after
      // them (a wait right after the start held the stream for the whole
      // copy), but before the peak, where its bytes must be free.
      Operation *waitAt = off->getNextNode();
      int64_t calls = 0;
      double covered = 0;
      for (; !windowDone(calls, covered, copy) && waitAt != c.peak && waitAt != c.next;
           waitAt = waitAt->getNextNode())
        cover(waitAt, calls, covered);
      t.exposedSeconds += std::max(0.0, copy - covered);
      b.setInsertionPoint(waitAt);
      earliest = b.create<hs::WaitOp>(loc, off.getToken());
      t.moved += hs::byteSize(type);
    }
    // The prefetch starts its window's calls early, but after the peak and
    // not before the offload is done (or, refilling, the last use).
    Operation *start = c.next;
    int64_t calls = 0;
    double covered = 0;
    while (!windowDone(calls, covered, copy)) {
      Operation *prev = start->getPrevNode();
      if (!prev || prev == earliest || prev == c.peak)
        break;
      start = prev;
      cover(prev, calls, covered);
    }
    t.exposedSeconds += std::max(0.0, copy - covered);
    b.setInsertionPoint(start);
    hs::BufferOp back = freshBuffer(b, loc, type, "act");
    auto pre = b.create<hs::PrefetchOp>(loc, b.getType<hs::TokenType>(), slow, back);
    b.setInsertionPoint(c.next);
    b.create<hs::WaitOp>(loc, pre.getToken());
    redirect(c.buffer, back, c.next);
    t.prefetched += hs::byteSize(type);
    t.moveSeconds += c.seconds;
  }

  void runOnOperation() override {
    std::string error;
    if (!rates.empty() && !parseRates(rates, machine, error)) {
      getOperation().emitError(error);
      return signalPassFailure();
    }
    if (memBudget < 0 || fastMem < 0 || processReserve < 0) {
      getOperation().emitError("--mem-budget, --fast-mem and the reserve must not be negative");
      return signalPassFailure();
    }
    const bool autoWindows = lookahead == "auto";
    if (!autoWindows && (StringRef(lookahead).getAsInteger(10, windowCalls) || windowCalls < 0)) {
      getOperation().emitError("lookahead ") << lookahead << ": want auto or a number of calls";
      return signalPassFailure();
    }
    std::vector<std::pair<std::string, int64_t>> kinds;
    if (failed(memoryKinds(kinds)))
      return signalPassFailure();
    // The disk tier: the folder must be there now (hc-run checks again).
    int64_t diskBytes = 0;
    if (!offloadDir.empty()) {
      struct stat st;
      struct statvfs fs;
      const char *why = nullptr;
      if (stat(offloadDir.c_str(), &st) != 0)
        why = std::strerror(errno);
      else if (!S_ISDIR(st.st_mode))
        why = "not a folder";
      else if (statvfs(offloadDir.c_str(), &fs) != 0)
        why = std::strerror(errno);
      if (why) {
        getOperation().emitError("--offload-dir ") << offloadDir << ": " << why;
        return signalPassFailure();
      }
      diskBytes = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
    }
    // The fast tier: --fast-mem bytes of DRAM, else the node's HBM.
    int64_t fastBytes = fastMem;
    std::string fastKind = "DRAM (--fast-mem)";
    if (fastBytes == 0 && !kinds.empty() && rt::memoryKindRank(kinds[0].first) == 0) {
      fastBytes = kinds[0].second;
      fastKind = kinds[0].first;
    }
    if (memBudget == 0 && fastBytes == 0)
      return;  // one tier, no budget: nothing to plan
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (!autoWindows) {
        if (failed(planBest(f, fastBytes, fastKind, kinds, diskBytes, nullptr)))
          return signalPassFailure();
        continue;
      }
      if (failed(planWindows(f, fastBytes, fastKind, kinds, diskBytes)))
        return signalPassFailure();
    }
  }

  // lookahead=auto: plans `f` with windows by copy time and with fixed
  // 2-call windows, each on a clone, and keeps the cheaper that fits:
  // recomputation, copies and the copies' exposed seconds (longer windows
  // hide more of each copy but hold its bytes longer, which a tight budget
  // may pay for with more moves). Neither fits: the 2-call plan's error.
  LogicalResult planWindows(func::FuncOp f, int64_t fastBytes, const std::string &fastKind,
                            const std::vector<std::pair<std::string, int64_t>> &kinds,
                            int64_t diskBytes) {
    struct WindowPlan {
      int64_t windowCalls;
      func::FuncOp f;
      Tally t;
      bool fits = false;
      std::string error;
      // Exposure is a lower bound: each copy's window is counted as its
      // own, though copies queue on the engine's lanes (no lane model).
      double cost() const { return t.seconds() + t.exposedSeconds; }
    } options[2];
    options[0].windowCalls = -1;
    options[1].windowCalls = kAutoFixedWindowCalls;
    for (WindowPlan &o : options) {
      o.f = cast<func::FuncOp>(f->clone());
      windowCalls = o.windowCalls;
      ScopedDiagnosticHandler capture(f.getContext(), [&](Diagnostic &d) {
        if (o.error.empty())
          o.error = d.str();
        return success();
      });
      o.fits = succeeded(planBest(o.f, fastBytes, fastKind, kinds, diskBytes, &o.t));
    }
    WindowPlan &timed = options[0], &fixed = options[1];
    WindowPlan *best = timed.fits && (!fixed.fits || timed.cost() <= fixed.cost()) ? &timed
                   : fixed.fits                                                 ? &fixed
                                                                                : nullptr;
    if (!best) {
      f.emitError(fixed.error);
      for (WindowPlan &o : options)
        o.f->erase();
      return failure();
    }
    WindowPlan &other = best == &timed ? fixed : timed;
    f.getBody().takeBody(best->f.getBody());
    auto m = dyn_cast_or_null<hs::MemoryPlanAttr>(best->f->getAttr(hs::kMemoryAttr));
    if (!m || best->t.moved + best->t.prefetched == 0) {  // no copies: no windows
      if (m)
        f->setAttr(hs::kMemoryAttr, m);
      for (WindowPlan &o : options)
        o.f->erase();
      return success();
    }
    // The reader of --emit=schedule sees which windows won and what the
    // others would have cost.
    char line[160];
    std::snprintf(line, sizeof line, "windows %s (%.3g s exposed); windows %s: ",
                  best == &timed ? "by copy time" : "of 2 calls", best->t.exposedSeconds,
                  best == &timed ? "of 2 calls" : "by copy time");
    std::string others = line;
    if (other.fits)
      std::snprintf(line, sizeof line, "%.3g s predicted, %.3g s exposed", other.t.seconds(),
                    other.t.exposedSeconds);
    others += other.fits ? line : "does not fit";
    if (!m.getOtherPlan().empty())
      others += "; " + m.getOtherPlan().str();
    f->setAttr(hs::kMemoryAttr, withOtherPlan(m, others));
    for (WindowPlan &o : options)
      o.f->erase();
    return success();
  }

  // One trial plan, on a clone of the step.
  struct Trial {
    func::FuncOp f;
    Tally t;
    bool fits = false;
    std::string error;
  };

  // With segments allowed and found, plans `f` as the greedy alone, with
  // every segment recomputed, and with the fewest segments that fit (a
  // bisection: a budget just under the greedy's reach needs a few blocks,
  // not the whole forward, run twice); keeps the plan predicted cheapest
  // (recomputed plus copy seconds) among those that fit, and records what
  // the others cost. None fits: the all-segments plan's error, the
  // smallest need.
  LogicalResult planBest(func::FuncOp f, int64_t fastBytes, const std::string &fastKind,
                         const std::vector<std::pair<std::string, int64_t>> &kinds,
                         int64_t diskBytes, Tally *chosen) {
    if (segments != "auto" && segments != "on" && segments != "off") {
      f.emitError("--mem-segments ") << segments << ": want auto, on or off";
      return failure();
    }
    if (recompute != "auto" && recompute != "off") {
      f.emitError("--mem-recompute ") << recompute << ": want auto or off";
      return failure();
    }
    if (recompute == "off" && segments == "on") {
      f.emitError("--mem-segments on recomputes segments, which --mem-recompute off forbids");
      return failure();
    }
    // `segmentLimit` segments recomputed first (the earliest in the forward:
    // their activations wait longest for the backward), then the loop.
    auto trial = [&](int64_t segmentLimit, bool quiet) {
      Trial r;
      r.f = cast<func::FuncOp>(f->clone());
      if (segmentLimit > 0)
        r.t.segments = automem::recomputeSegments(r.f, machine, segmentLimit);
      if (!quiet) {
        r.fits = succeeded(plan(r.f, fastBytes, fastKind, kinds, diskBytes, r.t));
        return r;
      }
      ScopedDiagnosticHandler capture(f.getContext(), [&](Diagnostic &d) {
        if (r.error.empty())
          r.error = d.str();
        return success();
      });
      r.fits = succeeded(plan(r.f, fastBytes, fastKind, kinds, diskBytes, r.t));
      return r;
    };
    auto adopt = [&](Trial &r) {
      if (chosen)
        *chosen = r.t;
      f.getBody().takeBody(r.f.getBody());
      if (Attribute memory = r.f->getAttr(hs::kMemoryAttr))
        f->setAttr(hs::kMemoryAttr, memory);
      r.f->erase();
      r.f = nullptr;
    };
    const int64_t all = std::numeric_limits<int64_t>::max();
    if (segments != "auto" || recompute == "off") {
      Trial r = trial(segments == "on" ? all : 0, false);
      adopt(r);
      return success(r.fits);
    }
    std::vector<Trial> trials;
    trials.push_back(trial(all, true));
    const int64_t found = trials.back().t.segments.segments;
    if (found == 0) {
      trials.back().f->erase();
      Trial r = trial(0, false);
      adopt(r);
      return success(r.fits);
    }
    trials.push_back(trial(0, true));
    if (trials[0].fits && found > 1) {
      int64_t lo = 1, hi = found;  // `hi` segments fit
      std::optional<Trial> fewest;
      while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        Trial r = trial(mid, true);
        if (r.fits) {
          hi = mid;
          if (fewest)
            fewest->f->erase();
          fewest = std::move(r);
        } else {
          lo = mid + 1;
          r.f->erase();
        }
      }
      if (fewest)
        trials.push_back(std::move(*fewest));
    }
    Trial *best = nullptr;
    for (Trial &r : trials)
      if (r.fits && (!best || r.t.seconds() < best->t.seconds()))
        best = &r;
    if (!best) {
      f.emitError(trials[0].error);
      for (Trial &r : trials)
        r.f->erase();
      return failure();
    }
    // What the other plans would cost, for --emit=schedule's reader.
    std::string others;
    for (Trial &r : trials) {
      if (&r == best)
        continue;
      char line[96];
      int64_t n = r.t.segments.segments;
      std::snprintf(line, sizeof line,
                    n == 0 ? "per-activation: " : n == 1 ? "%lld segment: " : "%lld segments: ",
                    static_cast<long long>(n));
      others += (others.empty() ? "" : "; ") + std::string(line);
      if (r.fits)
        std::snprintf(line, sizeof line, "%.3g s predicted", r.t.seconds());
      others += r.fits ? line : "does not fit";
      r.f->erase();
    }
    adopt(*best);
    auto m = cast<hs::MemoryPlanAttr>(f->getAttr(hs::kMemoryAttr));
    f->setAttr(hs::kMemoryAttr, withOtherPlan(m, others));
    return success();
  }

  LogicalResult plan(func::FuncOp f, int64_t fastBytes, const std::string &fastKind,
                     const std::vector<std::pair<std::string, int64_t>> &kinds,
                     int64_t diskBytes, Tally &t) {
    const bool toDisk = !offloadDir.empty();
    // What the arenas do not hold: the host's inputs and the process.
    int64_t reserve = processReserve, persistent = 0;
    std::map<std::string, int64_t> persistentArena;
    for (Operation &op : f.getBody().front()) {
      if (auto in = dyn_cast<hs::InputOp>(op))
        reserve += hs::byteSize(in.getType());
      if (auto buf = dyn_cast<hs::BufferOp>(op))
        if (!hs::isLivenessArena(buf.getArena()) && !hs::isOnDemandArena(buf.getArena())) {
          int64_t end = (buf.getOffset() ? static_cast<int64_t>(*buf.getOffset()) : 0) +
                        hs::byteSize(buf.getType());
          int64_t &a = persistentArena[buf.getArena().str()];
          a = std::max(a, end);
        }
    }
    for (auto &[name, bytes] : persistentArena)
      persistent += bytes;
    int64_t actPeak = 0, offloadPeak = 0;
    for (;;) {
      std::vector<LiveInterval> live = bufferLiveness(f);
      if (toDisk)
        alignForDirectIO(f, live);
      std::vector<const LiveInterval *> act, off;
      for (LiveInterval &iv : live) {
        if (iv.touched() && iv.buffer.getArena() == "act")
          act.push_back(&iv);
        if (iv.touched() && iv.buffer.getArena() == "offload")
          off.push_back(&iv);
      }
      std::vector<int64_t> offsets;
      actPeak = firstFit(act, offsets);
      offloadPeak = firstFit(off, offsets, arenaAlignment("offload"));
      bool fastOver = fastBytes > 0 && actPeak > fastBytes;
      // On disk, moved activations leave the resident set.
      const int64_t resident = persistent + actPeak + (toDisk ? 0 : offloadPeak) + reserve;
      bool totalOver = memBudget > 0 && resident > memBudget;
      if (toDisk && offloadPeak > diskBytes) {
        f.emitError("--offload-dir ")
            << offloadDir << ": the plan moves " << offloadPeak
            << " bytes there at once, but only " << diskBytes << " are free";
        return failure();
      }
      if (!fastOver && !totalOver)
        break;
      // The position where the most activation bytes are live.
      unsigned n = static_cast<unsigned>(f.getBody().front().getOperations().size());
      std::vector<int64_t> delta(n + 2, 0);
      for (const LiveInterval *iv : act) {
        delta[iv->first] += iv->bytes;
        delta[iv->last + 1] -= iv->bytes;
      }
      unsigned peak = 1;
      int64_t running = 0, most = -1;
      for (unsigned p = 1; p <= n; ++p) {
        running += delta[p];
        if (running > most) {
          most = running;
          peak = p;
        }
      }
      Uses u = usesOf(f);
      std::optional<Choice> c =
          choose(u, peak, (fastOver && !totalOver) || toDisk,
                 toDisk ? diskBytes - offloadPeak : std::numeric_limits<int64_t>::max());
      if (!c) {
        InFlightDiagnostic d = f.emitError();
        if (totalOver)
          d << "--mem-budget " << static_cast<int64_t>(memBudget) << ": the smallest plan found needs "
            << resident << " bytes (parameters, "
            << "gradients and optimizer state " << persistent << ", activations "
            << resident - persistent - reserve << ", reserve " << reserve << ")";
        else
          d << "--fast-mem " << fastBytes << ": the activations need at least "
            << actPeak << " bytes of the fast tier";
        // Moves stop where the disk is full: say so, it may be the limit.
        if (toDisk)
          d << "; moved activations fill " << offloadPeak << " of the " << diskBytes
            << " bytes free in --offload-dir " << offloadDir;
        return failure();
      }
      apply(*c, t);
    }
    Builder b(f.getContext());
    auto tier = [&](StringRef name, StringRef kind, int64_t capacity,
                    ArrayRef<StringRef> arenas) {
      SmallVector<Attribute> names;
      for (StringRef a : arenas)
        names.push_back(b.getStringAttr(a));
      return static_cast<Attribute>(hs::MemoryTierAttr::get(b.getContext(), name, kind,
                                                            capacity, b.getArrayAttr(names)));
    };
    // Tiers, fastest first: the fast one (the activations), DRAM (the
    // rest; with a budget, its capacity is what the budget leaves), then
    // the node's slower kinds, which this plan does not use (issue 36 may).
    SmallVector<Attribute> tiers;
    int64_t dram = 0;
    for (auto &[kind, bytes] : kinds)
      if (kind == "DRAM")
        dram = bytes;
    int64_t slowCapacity = memBudget > 0 ? memBudget - reserve - (fastBytes > 0 ? actPeak : 0)
                                         : dram;
    SmallVector<StringRef> slow = {"param", "grad", "m", "v", "state"};
    if (fastBytes > 0)
      tiers.push_back(tier("fast", fastKind, fastBytes, {"act"}));
    else
      slow.insert(slow.begin(), "act");
    if (!toDisk)
      slow.push_back("offload");
    tiers.push_back(tier("slow", "DRAM", slowCapacity, slow));
    for (auto &[kind, bytes] : kinds)
      if (rt::memoryKindRank(kind) > 1)
        tiers.push_back(tier(kind, kind, bytes, {}));
    if (toDisk)
      tiers.push_back(tier("disk", "disk", diskBytes, {"offload"}));
    f->setAttr(hs::kMemoryAttr,
               hs::MemoryPlanAttr::get(
                   b.getContext(), memBudget, reserve, b.getArrayAttr(tiers), offloadDir,
                   t.recomputes + t.segments.calls,
                   b.getF64FloatAttr(t.recomputeSeconds + t.segments.seconds),
                   t.segments.segments, b.getF64FloatAttr(t.moveSeconds), t.moved,
                   t.prefetched, t.overMove, /*other_plan=*/""));
    return success();
  }
};

} // namespace
} // namespace hc
