// libhcrt's step executor on hand-written programs (step_program.h), without
// the compiler: kernels, named tensors, hyperparameters, two cluster
// streams with a wait, --check-finite, the profile, collectives through
// the host's callbacks, evaluate(), micro-batches and a tier copy.
#include "hc/runtime/copy_engine.h"
#include "hc/runtime/kernels.h"
#include "hc/abi/step_program.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <algorithm>
#include <vector>

namespace {

int64_t count(const hcrt_tensor &t) {
  int64_t n = 1;
  for (int d = 0; d < t.rank; ++d)
    n *= t.shape[d];
  return n;
}

// out = x * w (elementwise)
void mulKernel(const hcrt_tensor *ins, int32_t, hcrt_tensor *outs, int32_t,
               const hcrt_attrs *, hc_threads) {
  const float *x = static_cast<const float *>(ins[0].data);
  const float *w = static_cast<const float *>(ins[1].data);
  float *y = static_cast<float *>(outs[0].data);
  for (int64_t i = 0; i < count(outs[0]); ++i)
    y[i] = x[i] * w[i];
}
// out = sum(x) * attrs.floats[0]
void sumKernel(const hcrt_tensor *ins, int32_t, hcrt_tensor *outs, int32_t,
               const hcrt_attrs *a, hc_threads) {
  const float *x = static_cast<const float *>(ins[0].data);
  double s = 0;
  for (int64_t i = 0; i < count(ins[0]); ++i)
    s += x[i];
  *static_cast<float *>(outs[0].data) = static_cast<float>(s * a->floats[0]);
}
// w -= lr * g, in place (the "optimizer": out 0 is in 0)
void updateKernel(const hcrt_tensor *ins, int32_t, hcrt_tensor *outs, int32_t,
                  const hcrt_attrs *a, hc_threads) {
  const float *g = static_cast<const float *>(ins[1].data);
  float *w = static_cast<float *>(outs[0].data);
  for (int64_t i = 0; i < count(outs[0]); ++i)
    w[i] -= static_cast<float>(a->floats[0]) * g[i];
}

const hcrt_kernel_fn kKernels[] = {mulKernel, sumKernel, updateKernel};
const char *const kKernelNames[] = {"mul", "sum", "update"};

constexpr int32_t kArenas = 3, kInput = 3, kConst = 4, kAccum = 2;
// Arena 0: w[4] at 0, g[4] at 16; arena 1: y[4] at 0, loss at 16, y2 at 32.
const int64_t kArenaBytes[kArenas] = {32, 64, 0};
const char *const kArenaContents[kArenas] = {"a parameter", "an activation",
                                             "the gradient accumulator"};
const hcrt_touch_slice kTouch[] = {{0, 0, -1, 0, 0}};
const int32_t kTouchNuma[] = {-1};
const void *const kConstants[] = {nullptr};

hcrt_desc vec(int32_t arena, int32_t base, int64_t offset, int64_t n) {
  hcrt_desc d{};
  d.arena = arena, d.base = base, d.dtype = HCRT_F32, d.rank = n ? 1 : 0;
  d.byte_offset = offset;
  d.shape[0] = n, d.strides[0] = 1;
  return d;
}
// 0 x (input 0), 1 w, 2 y, 3 loss, 4 g, 5 y2 (cluster 1's half of y's work)
const hcrt_desc kDescs[] = {vec(kInput, 0, 0, 4), vec(0, 0, 0, 4),  vec(1, 0, 0, 4),
                            vec(1, 0, 16, 0),     vec(0, 0, 16, 4), vec(1, 0, 32, 4)};
const hcrt_named kNamed[] = {{"param:w", 0, 0, 16}, {"grad:w", 0, 16, 16}};

hcrt_attrs floats1(double v) {
  hcrt_attrs a{};
  a.floats[0] = v;
  a.num_floats = 1;
  return a;
}
const hcrt_attrs kAttrs[] = {hcrt_attrs{}, floats1(0.5), floats1(0.1)};
const char *const kHyperNames[] = {"lr"};
const double kHyperDefaults[] = {0.1};
const hcrt_hyper_binding kHyperBindings[] = {{2, 0, 0}};

// The plan: y = x * w; loss = 0.5 sum(y); [bucket 0 all-reduce of g]; w -= lr g.
const int32_t kOperands[] = {0, 1, 2, /**/ 2, 3, /**/ 4, /**/ 4, /**/ 1, 4, 1};
const hcrt_entry kEntries[] = {
    {HCRT_ENTRY_KERNEL, 0, 0, 2, 1, 0, 0},
    {HCRT_ENTRY_KERNEL, 1, 3, 1, 1, 1, 0},
    {HCRT_ENTRY_ALLREDUCE_START, 0, 5, 0, 0, 0, 0},
    {HCRT_ENTRY_ALLREDUCE_WAIT, 0, 6, 0, 0, 0, 0},
    {HCRT_ENTRY_KERNEL, 2, 7, 2, 1, 2, 0},
};
const char *const kWhere[] = {"kernel mul (forward)", "kernel sum (forward)",
                              "gradient all-reduce start, bucket 0",
                              "gradient all-reduce wait, bucket 0",
                              "kernel update (optimizer)"};
const char *const kEntryKernel[] = {"mul", "sum", "allreduce_start", "allreduce_wait",
                                    "update"};
const double kFlops[] = {4, 4, 0, 0, 8};
const double kBytes[] = {48, 20, 16, 16, 48};

hcrt_step_program program() {
  hcrt_step_program p{};
  p.description = "{}";
  p.num_arenas = kArenas, p.input_arena = kInput, p.const_arena = kConst;
  p.accum_arena = kAccum;
  p.arena_bytes = kArenaBytes, p.arena_contents = kArenaContents;
  p.touch = kTouch, p.num_touch = 1, p.touch_numa = kTouchNuma, p.num_touch_numa = 1;
  p.ranks_per_node = 1;
  p.constants = kConstants, p.kernels = kKernels, p.kernel_names = kKernelNames;
  p.descs = kDescs, p.num_descs = std::size(kDescs), p.operands = kOperands;
  p.attrs = kAttrs, p.num_attrs = std::size(kAttrs);
  p.num_hypers = 1, p.hyper_names = kHyperNames, p.hyper_defaults = kHyperDefaults;
  p.hyper_bindings = kHyperBindings, p.num_hyper_bindings = 1;
  p.entries = kEntries, p.num_entries = std::size(kEntries);
  p.entry_where = kWhere, p.entry_kernel = kEntryKernel;
  p.entry_flops = kFlops, p.entry_bytes = kBytes;
  p.named = kNamed, p.num_named = std::size(kNamed);
  p.loss_desc = 3, p.loss_call = 1, p.gate_call = 4, p.update_call = 4;
  p.num_buckets = 1, p.num_copies = 0, p.disk_bytes = 0, p.offload_dir = "";
  p.num_clusters = 1;
  p.kept_panel_arena = -1, p.kept_panel_bytes = -1;
  return p;
}

struct Step {
  hc_step *s = nullptr;
  char error[256] = {};
  explicit Step(const hcrt_step_program &p, hc_step_env env = {1, 1}) {
    env.world_size = env.world_size ? env.world_size : 1;
    s = hcrt_step_create(&p, &env, error, sizeof error);
  }
  ~Step() { hcrt_step_destroy(s); }
};

const float kX[4] = {1, 2, 3, 4};
const void *const kInputs[] = {kX};

void setW(hc_step *s, std::vector<float> w, std::vector<float> g) {
  ASSERT_EQ(hcrt_step_set_tensor(s, "param:w", w.data(), 16), 0);
  ASSERT_EQ(hcrt_step_set_tensor(s, "grad:w", g.data(), 16), 0);
}

TEST(StepExecutor, RunsTheTableAndNamesTensors) {
  const hcrt_step_program p = program();
  Step st(p);
  ASSERT_NE(st.s, nullptr) << st.error;
  setW(st.s, {1, 1, 2, 2}, {1, 2, 3, 4});
  double loss = 0;
  ASSERT_EQ(hcrt_step_run(st.s, kInputs, &loss), 0) << hcrt_step_last_error(st.s);
  EXPECT_DOUBLE_EQ(loss, 0.5 * (1 + 2 + 6 + 8));
  float w[4];
  ASSERT_EQ(hcrt_step_get_tensor(st.s, "param:w", w, sizeof w), 0);
  const float want[4] = {0.9f, 0.8f, 1.7f, 1.6f};  // lr 0.1
  for (int i = 0; i < 4; ++i)
    EXPECT_FLOAT_EQ(w[i], want[i]);
  EXPECT_EQ(hcrt_step_get_tensor(st.s, "param:w", w, 8), -1);     // wrong size
  EXPECT_EQ(hcrt_step_get_tensor(st.s, "param:nope", w, 16), -1);  // unknown
}

TEST(StepExecutor, HyperparametersSetTheirBoundSlots) {
  const hcrt_step_program p = program();
  Step st(p);
  ASSERT_NE(st.s, nullptr) << st.error;
  double lr = 0;
  ASSERT_EQ(hcrt_step_get_hyperparameter(st.s, "lr", &lr), 0);
  EXPECT_EQ(lr, 0.1);
  EXPECT_EQ(hcrt_step_set_hyperparameter(st.s, "lr", NAN), -1);
  EXPECT_EQ(hcrt_step_set_hyperparameter(st.s, "momentum", 1), -1);
  ASSERT_EQ(hcrt_step_set_hyperparameter(st.s, "lr", 1.0), 0);
  setW(st.s, {1, 1, 1, 1}, {1, 2, 3, 4});
  double loss;
  ASSERT_EQ(hcrt_step_run(st.s, kInputs, &loss), 0);
  float w[4];
  ASSERT_EQ(hcrt_step_get_tensor(st.s, "param:w", w, sizeof w), 0);
  for (int i = 0; i < 4; ++i)
    EXPECT_FLOAT_EQ(w[i], 1.0f - static_cast<float>(i + 1));
  // A second context keeps the compiled value.
  Step other(p);
  ASSERT_EQ(hcrt_step_get_hyperparameter(other.s, "lr", &lr), 0);
  EXPECT_EQ(lr, 0.1);
}

TEST(StepExecutor, EvaluateRunsTheForwardOnly) {
  const hcrt_step_program p = program();
  Step st(p);
  setW(st.s, {2, 2, 2, 2}, {1, 1, 1, 1});
  double loss = 0;
  ASSERT_EQ(hcrt_step_evaluate(st.s, kInputs, &loss), 0);
  EXPECT_DOUBLE_EQ(loss, 10.0);
  float w[4];
  hcrt_step_get_tensor(st.s, "param:w", w, sizeof w);
  for (float v : w)
    EXPECT_EQ(v, 2.0f);  // no update ran
}

// Two ranks with identical data: the host's sum doubles, the mean restores.
struct FakeComm {
  int sums = 0;
};
int sumTwice(void *comm, float *data, size_t n) {
  ++static_cast<FakeComm *>(comm)->sums;
  for (size_t i = 0; i < n; ++i)
    data[i] *= 2;
  return 0;
}

TEST(StepExecutor, CollectivesGoThroughTheHostAndAverage) {
  const hcrt_step_program p = program();
  FakeComm comm;
  hc_step_env env{};
  env.rank = 0, env.world_size = 2, env.allreduce_sum_f32 = sumTwice, env.comm = &comm;
  Step st(p, env);
  ASSERT_NE(st.s, nullptr) << st.error;
  setW(st.s, {1, 1, 2, 2}, {1, 2, 3, 4});
  double loss = 0;
  ASSERT_EQ(hcrt_step_run(st.s, kInputs, &loss), 0) << hcrt_step_last_error(st.s);
  EXPECT_EQ(comm.sums, 2);  // the bucket and the loss
  EXPECT_DOUBLE_EQ(loss, 8.5);
  float g[4];
  hcrt_step_get_tensor(st.s, "grad:w", g, sizeof g);
  for (int i = 0; i < 4; ++i)
    EXPECT_FLOAT_EQ(g[i], static_cast<float>(i + 1));  // the mean of 2 equal ranks
  // Without a sum callback the collective fails: -1.
  hc_step_env none{};
  none.world_size = 2;
  Step broken(p, none);
  EXPECT_EQ(hcrt_step_run(broken.s, kInputs, &loss), -1);
}

TEST(StepExecutor, CheckFiniteNamesTheCallAndTensor) {
  const hcrt_step_program p = program();
  hc_step_env env{};
  env.world_size = 1, env.check_finite = 1;
  Step st(p, env);
  setW(st.s, {1, NAN, 1, 1}, {0, 0, 0, 0});
  double loss;
  EXPECT_EQ(hcrt_step_run(st.s, kInputs, &loss), -2);
  EXPECT_STREQ(hcrt_step_last_error(st.s),
               "kernel mul (forward) wrote nan into an activation (output 0 of call 0, "
               "element 1)");
}

// An element no named tensor covers is named by what its arena holds, so a
// CFTP partial weight gradient is not called an activation.
TEST(StepExecutor, CheckFiniteNamesAnUnnamedElementByItsArena) {
  hcrt_step_program p = program();
  const char *const contents[kArenas] = {"a parameter", "a partial weight gradient",
                                         "the gradient accumulator"};
  p.arena_contents = contents;
  hc_step_env env{};
  env.world_size = 1, env.check_finite = 1;
  Step st(p, env);
  setW(st.s, {1, 1, 1, INFINITY}, {0, 0, 0, 0});
  double loss;
  EXPECT_EQ(hcrt_step_run(st.s, kInputs, &loss), -2);
  EXPECT_STREQ(hcrt_step_last_error(st.s),
               "kernel mul (forward) wrote inf into a partial weight gradient (output 0 of "
               "call 0, element 3)");
}

TEST(StepExecutor, ProfileCountsEveryEntry) {
  const hcrt_step_program p = program();
  hc_step_env env{};
  env.world_size = 1, env.profile = 1;
  Step st(p, env);
  setW(st.s, {1, 1, 1, 1}, {0, 0, 0, 0});
  double loss;
  ASSERT_EQ(hcrt_step_run(st.s, kInputs, &loss), 0);
  ASSERT_EQ(hcrt_step_run(st.s, kInputs, &loss), 0);
  hc_call_profile prof[8];
  ASSERT_EQ(hcrt_step_profile(st.s, prof, 8), std::size(kEntries));
  EXPECT_STREQ(prof[4].kernel, "update");
  EXPECT_STREQ(prof[4].where, "kernel update (optimizer)");
  EXPECT_EQ(prof[0].calls, 2);
  EXPECT_EQ(prof[4].flops, 8.0);
  EXPECT_EQ(prof[1].bytes, 20.0);
  EXPECT_GE(prof[0].seconds, 0.0);
}

// micro_batches K: the calls before K - 1 run forward and backward only;
// the last updates, and its loss is the mean; out of order is refused.
TEST(StepExecutor, MicroBatchesUpdateOnlyAtTheLast) {
  static const char *const names[] = {"lr", "micro_batch", "micro_batches"};
  static const double defaults[] = {0.1, 0, 1};
  hcrt_step_program p = program();
  p.num_hypers = 3, p.hyper_names = names, p.hyper_defaults = defaults;
  Step st(p);
  setW(st.s, {1, 1, 1, 1}, {1, 1, 1, 1});
  ASSERT_EQ(hcrt_step_set_hyperparameter(st.s, "micro_batches", 2), 0);
  double loss = 0;
  ASSERT_EQ(hcrt_step_set_hyperparameter(st.s, "micro_batch", 1), 0);
  EXPECT_EQ(hcrt_step_run(st.s, kInputs, &loss), -1);
  EXPECT_STREQ(hcrt_step_last_error(st.s),
               "micro-batch 1 of 2 given where micro-batch 0 comes next");
  ASSERT_EQ(hcrt_step_set_hyperparameter(st.s, "micro_batch", 0), 0);
  ASSERT_EQ(hcrt_step_run(st.s, kInputs, &loss), 0);
  EXPECT_DOUBLE_EQ(loss, 5.0);
  float w[4];
  hcrt_step_get_tensor(st.s, "param:w", w, sizeof w);
  EXPECT_EQ(w[0], 1.0f);  // not updated yet
  EXPECT_EQ(hcrt_step_set_hyperparameter(st.s, "micro_batches", 3), -1);  // mid-step
  const float x2[4] = {2, 2, 2, 2};
  const void *const inputs2[] = {x2};
  ASSERT_EQ(hcrt_step_set_hyperparameter(st.s, "micro_batch", 1), 0);
  ASSERT_EQ(hcrt_step_run(st.s, inputs2, &loss), 0);
  EXPECT_DOUBLE_EQ(loss, (5.0 + 4.0) / 2);
  hcrt_step_get_tensor(st.s, "param:w", w, sizeof w);
  EXPECT_FLOAT_EQ(w[0], 0.9f);
}

// Cluster 1 computes y2 = x * w while cluster 0 computes y; the loss reads
// y2 after a wait for cluster 1's first entry. Whatever the team size (two
// streams, or program order), the loss is the same.
TEST(StepExecutor, TwoClusterStreamsWaitForEachOther) {
  static const int32_t ops[] = {0, 1, 2, /**/ 0, 1, 5, /**/ 5, 3};
  static const hcrt_entry entries[] = {
      {HCRT_ENTRY_KERNEL, 0, 0, 2, 1, 0, 0},
      {HCRT_ENTRY_KERNEL, 0, 3, 2, 1, 0, 1},
      {HCRT_ENTRY_CLUSTER_WAIT, 1, 1, 0, 0, 0, 0},
      {HCRT_ENTRY_KERNEL, 1, 6, 1, 1, 1, 0},
  };
  static const char *const where[] = {"a", "b", "wait", "c"};
  static const double zeros[] = {0, 0, 0, 0};
  hcrt_step_program p = program();
  p.operands = ops, p.entries = entries, p.num_entries = std::size(entries);
  p.entry_where = where, p.entry_kernel = where, p.entry_flops = zeros, p.entry_bytes = zeros;
  p.loss_call = 3, p.gate_call = 4, p.update_call = 4, p.num_buckets = 0;
  p.num_clusters = 2;
  Step st(p);
  ASSERT_NE(st.s, nullptr) << st.error;
  setW(st.s, {1, 2, 3, 4}, {0, 0, 0, 0});
  for (int k = 0; k < 3; ++k) {  // progress counters carry across steps
    double loss = 0;
    ASSERT_EQ(hcrt_step_run(st.s, kInputs, &loss), 0) << hcrt_step_last_error(st.s);
    EXPECT_DOUBLE_EQ(loss, 0.5 * (1 + 4 + 9 + 16));
  }
}

// A scoped wait (hcrt_wait_scope) orders only the next entry of its stream,
// and is skipped where that entry does nothing. Here cluster 0's scoped
// wait for cluster 1 precedes `guarded` (an all-reduce start or a kernel
// standing for grad_accumulate), and cluster 1 waits for that entry before
// it writes y2, which cluster 0's loss then reads: if the scoped wait were
// kept in a step where it may be skipped, the streams would wait for each
// other forever.
hcrt_step_program scopedWaitProgram(int32_t scope) {
  static const int32_t ops[] = {4, /**/ 0, 1, 5, /**/ 5, 3, /**/ 4};
  static hcrt_entry entries[] = {
      {HCRT_ENTRY_CLUSTER_WAIT, 1, 1, 0, 0, -1, 0},
      {HCRT_ENTRY_ALLREDUCE_START, 0, 0, 0, 0, 0, 0},
      {HCRT_ENTRY_CLUSTER_WAIT, 0, 1, HCRT_WAIT_ORDERS_ALL, 0, -1, 1},
      {HCRT_ENTRY_KERNEL, 0, 1, 2, 1, 0, 1},
      {HCRT_ENTRY_CLUSTER_WAIT, 1, 1, HCRT_WAIT_ORDERS_ALL, 0, -1, 0},
      {HCRT_ENTRY_KERNEL, 1, 4, 1, 1, 1, 0},
      {HCRT_ENTRY_ALLREDUCE_WAIT, 0, 6, 0, 0, 0, 0},
  };
  entries[0].nin = scope;
  // grad_accumulate's stand-in: a kernel (y = x * w) on cluster 0.
  entries[1] = scope == HCRT_WAIT_ORDERS_ALLREDUCE
                   ? hcrt_entry{HCRT_ENTRY_ALLREDUCE_START, 0, 6, 0, 0, 0, 0}
                   : hcrt_entry{HCRT_ENTRY_KERNEL, 0, 1, 2, 1, 0, 0};
  static const char *const where[] = {"w0", "guarded", "w1", "b", "w2", "loss", "aw"};
  static const double zeros[] = {0, 0, 0, 0, 0, 0, 0};
  hcrt_step_program p = program();
  p.operands = ops, p.entries = entries, p.num_entries = std::size(entries);
  p.entry_where = where, p.entry_kernel = where, p.entry_flops = zeros, p.entry_bytes = zeros;
  p.loss_call = 5, p.gate_call = 7, p.update_call = 7;
  p.num_buckets = scope == HCRT_WAIT_ORDERS_ALLREDUCE ? 1 : 0;
  p.num_clusters = 2;
  return p;
}

// Runs one step on its own thread; a step still running after a minute is
// a deadlock (its streams spin forever), which ends the test binary.
int runOrDeadlock(hc_step *s, double *loss) {
  auto done = std::async(std::launch::async, [&] { return hcrt_step_run(s, kInputs, loss); });
  if (done.wait_for(std::chrono::seconds(60)) == std::future_status::timeout) {
    std::fprintf(stderr, "the step's streams deadlocked at a scoped wait\n");
    std::_Exit(1);
  }
  return done.get();
}

TEST(StepExecutor, ScopedWaitsAreSkippedWhereTheirEntryDoesNothing) {
  for (int32_t scope : {HCRT_WAIT_ORDERS_ALLREDUCE, HCRT_WAIT_ORDERS_ACCUMULATE}) {
    const hcrt_step_program p = scopedWaitProgram(scope);
    Step st(p);  // one rank, one micro-batch
    ASSERT_NE(st.s, nullptr) << st.error;
    setW(st.s, {1, 2, 3, 4}, {0, 0, 0, 0});
    for (int k = 0; k < 2; ++k) {
      double loss = 0;
      ASSERT_EQ(runOrDeadlock(st.s, &loss), 0) << hcrt_step_last_error(st.s);
      EXPECT_DOUBLE_EQ(loss, 0.5 * (1 + 4 + 9 + 16)) << "scope " << scope;
    }
  }
}

// Where the all-reduce runs (two ranks), its scoped wait is kept: cluster 1
// writes the bucket late, and the sum still sees what it wrote.
void slowFill(const hcrt_tensor *, int32_t, hcrt_tensor *outs, int32_t, const hcrt_attrs *,
              hc_threads) {
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  float *g = static_cast<float *>(outs[0].data);
  for (int i = 0; i < 4; ++i)
    g[i] = 3.0f;
}
int addTen(void *comm, float *data, size_t n) {
  ++static_cast<FakeComm *>(comm)->sums;
  for (size_t i = 0; i < n; ++i)
    data[i] += 10;
  return 0;
}

TEST(StepExecutor, ScopedWaitsOrderTheirEntryWhereItRuns) {
  static const hcrt_kernel_fn kernels[] = {mulKernel, sumKernel, updateKernel, slowFill};
  static const int32_t ops[] = {4, /**/ 0, 1, 2, /**/ 2, 3};
  static const hcrt_entry entries[] = {
      {HCRT_ENTRY_KERNEL, 3, 0, 0, 1, 0, 1},  // cluster 1: g = 3, late
      {HCRT_ENTRY_KERNEL, 0, 1, 2, 1, 0, 0},  // cluster 0: y = x * w
      {HCRT_ENTRY_KERNEL, 1, 4, 1, 1, 1, 0},  // loss
      {HCRT_ENTRY_CLUSTER_WAIT, 1, 1, HCRT_WAIT_ORDERS_ALLREDUCE, 0, -1, 0},
      {HCRT_ENTRY_ALLREDUCE_START, 0, 0, 0, 0, 0, 0},
      {HCRT_ENTRY_ALLREDUCE_WAIT, 0, 0, 0, 0, 0, 0},
  };
  static const char *const where[] = {"fill", "mul", "loss", "w", "start", "wait"};
  static const double zeros[] = {0, 0, 0, 0, 0, 0};
  hcrt_step_program p = program();
  p.kernels = kernels;
  p.operands = ops, p.entries = entries, p.num_entries = std::size(entries);
  p.entry_where = where, p.entry_kernel = where, p.entry_flops = zeros, p.entry_bytes = zeros;
  p.loss_call = 2, p.gate_call = 6, p.update_call = 6, p.num_buckets = 1;
  p.num_clusters = 2;
  FakeComm comm;
  hc_step_env env{};
  env.rank = 0, env.world_size = 2, env.allreduce_sum_f32 = addTen, env.comm = &comm;
  Step st(p, env);
  ASSERT_NE(st.s, nullptr) << st.error;
  setW(st.s, {1, 1, 1, 1}, {0, 0, 0, 0});
  double loss = 0;
  ASSERT_EQ(runOrDeadlock(st.s, &loss), 0) << hcrt_step_last_error(st.s);
  float g[4];
  hcrt_step_get_tensor(st.s, "grad:w", g, sizeof g);
  for (float v : g)
    EXPECT_FLOAT_EQ(v, (3.0f + 10) / 2);  // summed after cluster 1 wrote it
}

// A conditional call (hcrt_call_condition) runs only in the steps it is
// for: "reduced" where the step reduces gradients per bucket (two ranks,
// or more than one micro-batch), "local" where it does not. Here g += 1
// if reduced and g += 100 if local, after the loss.
void addOne(const hcrt_tensor *, int32_t, hcrt_tensor *outs, int32_t, const hcrt_attrs *,
            hc_threads) {
  for (int i = 0; i < 4; ++i)
    static_cast<float *>(outs[0].data)[i] += 1;
}
void addHundred(const hcrt_tensor *, int32_t, hcrt_tensor *outs, int32_t, const hcrt_attrs *,
                hc_threads) {
  for (int i = 0; i < 4; ++i)
    static_cast<float *>(outs[0].data)[i] += 100;
}

// The hyperparameters a program needs to run micro-batches.
void withMicroBatches(hcrt_step_program &p) {
  static const char *const names[] = {"lr", "micro_batch", "micro_batches"};
  static const double defaults[] = {0.1, 0, 1};
  p.num_hypers = 3, p.hyper_names = names, p.hyper_defaults = defaults;
}

hcrt_step_program conditionalProgram() {
  static const hcrt_kernel_fn kernels[] = {mulKernel, sumKernel, addOne, addHundred};
  static const int32_t ops[] = {0, 1, 2, /**/ 2, 3, /**/ 4, 4, /**/ 4, 4};
  static const hcrt_entry entries[] = {
      {HCRT_ENTRY_KERNEL, 0, 0, 2, 1, 0, 0},
      {HCRT_ENTRY_KERNEL, 1, 3, 1, 1, 1, 0},
      {HCRT_ENTRY_KERNEL, 2, 5, 1, 1, 0, 0},
      {HCRT_ENTRY_KERNEL, 3, 7, 1, 1, 0, 0},
  };
  static const int8_t when[] = {HCRT_RUNS_ALWAYS, HCRT_RUNS_ALWAYS, HCRT_RUNS_IF_REDUCED,
                                HCRT_RUNS_IF_LOCAL};
  static const char *const where[] = {"mul", "loss", "if reduced", "if local"};
  static const double zeros[] = {0, 0, 0, 0};
  hcrt_step_program p = program();
  p.kernels = kernels;
  p.operands = ops, p.entries = entries, p.num_entries = std::size(entries);
  p.entry_condition = when;
  p.entry_where = where, p.entry_kernel = where, p.entry_flops = zeros, p.entry_bytes = zeros;
  p.loss_call = 1, p.gate_call = 4, p.update_call = 4, p.num_buckets = 0;
  withMicroBatches(p);
  return p;
}

TEST(StepExecutor, ConditionalCallsRunOnlyInTheirSteps) {
  const hcrt_step_program p = conditionalProgram();
  auto gradAfterOneRun = [&](hc_step_env env, int micros) {
    Step st(p, env);
    EXPECT_NE(st.s, nullptr) << st.error;
    setW(st.s, {1, 1, 1, 1}, {0, 0, 0, 0});
    if (micros > 1)
      EXPECT_EQ(hcrt_step_set_hyperparameter(st.s, "micro_batches", micros), 0);
    double loss = 0;
    EXPECT_EQ(hcrt_step_run(st.s, kInputs, &loss), 0) << hcrt_step_last_error(st.s);
    float g[4];
    hcrt_step_get_tensor(st.s, "grad:w", g, sizeof g);
    return g[0];
  };
  EXPECT_FLOAT_EQ(gradAfterOneRun({}, 1), 100.0f);  // one rank, one micro-batch
  EXPECT_FLOAT_EQ(gradAfterOneRun({}, 2), 1.0f);    // micro-batch 0 of 2
  FakeComm comm;
  hc_step_env two{};
  two.rank = 0, two.world_size = 2, two.allreduce_sum_f32 = sumTwice, two.comm = &comm;
  EXPECT_FLOAT_EQ(gradAfterOneRun(two, 1), 1.0f);  // two ranks
  // Without the table (a program of no conditional calls) every call runs.
  hcrt_step_program all = p;
  all.entry_condition = nullptr;
  Step st(all);
  ASSERT_NE(st.s, nullptr) << st.error;
  setW(st.s, {1, 1, 1, 1}, {0, 0, 0, 0});
  double loss = 0;
  ASSERT_EQ(hcrt_step_run(st.s, kInputs, &loss), 0) << hcrt_step_last_error(st.s);
  float g[4];
  hcrt_step_get_tensor(st.s, "grad:w", g, sizeof g);
  EXPECT_FLOAT_EQ(g[0], 101.0f);
}

// The waits scoped to a conditional call are skipped where it does not
// run: scopedWaitProgram's guarded entry as a call if reduced in a local
// step, and as a call if local in a step of two micro-batches.
TEST(StepExecutor, WaitsScopedToAConditionalCallAreSkippedWhereItDoesNotRun) {
  for (int32_t scope : {HCRT_WAIT_ORDERS_IF_REDUCED, HCRT_WAIT_ORDERS_IF_LOCAL}) {
    hcrt_step_program p = scopedWaitProgram(scope);
    static int8_t when[7];
    std::fill(std::begin(when), std::end(when), int8_t(HCRT_RUNS_ALWAYS));
    when[1] = scope == HCRT_WAIT_ORDERS_IF_REDUCED ? HCRT_RUNS_IF_REDUCED : HCRT_RUNS_IF_LOCAL;
    p.entry_condition = when;
    withMicroBatches(p);
    Step st(p);
    ASSERT_NE(st.s, nullptr) << st.error;
    setW(st.s, {1, 2, 3, 4}, {0, 0, 0, 0});
    const int micros = scope == HCRT_WAIT_ORDERS_IF_LOCAL ? 2 : 1;
    ASSERT_EQ(hcrt_step_set_hyperparameter(st.s, "micro_batches", micros), 0);
    double loss = 0;
    ASSERT_EQ(runOrDeadlock(st.s, &loss), 0) << hcrt_step_last_error(st.s);
    EXPECT_DOUBLE_EQ(loss, 0.5 * (1 + 4 + 9 + 16)) << "scope " << scope;
  }
}

// y = x * w; a tier copy of y into `target`; loss = 0.5 sum(y2). `bytes`:
// the copy entry's profile bytes (read + written).
hcrt_step_program copyProgram(int32_t target, double bytes) {
  static int32_t ops[] = {0, 1, 2, /**/ 2, 5, /**/ 5, 3};
  static const hcrt_entry entries[] = {
      {HCRT_ENTRY_KERNEL, 0, 0, 2, 1, 0, 0},
      {HCRT_ENTRY_COPY_START, HCRT_COPY_TO_SLOW, 3, 0, 0, 0, 0},
      {HCRT_ENTRY_COPY_WAIT, 0, 0, 0, 0, 0, 0},
      {HCRT_ENTRY_KERNEL, 1, 5, 1, 1, 1, 0},
  };
  static const char *const where[] = {"a", "offload of an activation", "wait", "c"};
  static const double zeros[] = {0, 0, 0, 0};
  static double profile[] = {0, 0, 0, 0};
  ops[4] = target;
  profile[1] = bytes;
  hcrt_step_program p = program();
  p.operands = ops, p.entries = entries, p.num_entries = std::size(entries);
  p.entry_where = where, p.entry_kernel = where, p.entry_flops = zeros, p.entry_bytes = profile;
  p.loss_call = 3, p.gate_call = 4, p.update_call = 4, p.num_buckets = 0, p.num_copies = 1;
  return p;
}

// A tier copy to memory and its wait, on the host stream: the bytes arrive,
// all of them, whatever the profile's bytes say (generated steps print those
// rounded to 7 digits: a copy sized by them lost or overran a few bytes).
TEST(StepExecutor, TierCopiesStartAndWait) {
  const hcrt_step_program p = copyProgram(/*y2*/ 5, /*rounded down*/ 30);  // the step keeps &p
  Step st(p);
  ASSERT_NE(st.s, nullptr) << st.error;
  setW(st.s, {1, 1, 1, 1}, {0, 0, 0, 0});
  double loss = 0;
  ASSERT_EQ(hcrt_step_run(st.s, kInputs, &loss), 0) << hcrt_step_last_error(st.s);
  EXPECT_DOUBLE_EQ(loss, 5.0);
}

// A copy whose target is not its source's size is refused when the step is
// made, naming the entry: the plan is wrong, and no step may run it.
TEST(StepExecutor, TierCopyOfUnequalSizesIsRefused) {
  const hcrt_step_program p = copyProgram(/*the loss, a scalar*/ 3, 32);
  Step st(p);
  EXPECT_EQ(st.s, nullptr);
  EXPECT_STREQ(st.error, "entry 1 (offload of an activation): a tier copy of 16 bytes into 4 "
                         "bytes, ticket 0 of 1");
}

} // namespace

// Preemption: a stop asked for before the update gate abandons the step
// (-4, nothing updated); one asked for after the gate let the step go on
// is for the next boundary: the update finishes whole. (Polling past the
// gate once skipped the optimizer calls after the poll, and hc-run saved
// a half-updated state: the Slurm test's preempted run then differed from
// the unbroken one.)
struct Preempt {
  int polls = 0, stopFromPoll = 0;
};
int32_t pollStop(void *host) {
  Preempt &p = *static_cast<Preempt *>(host);
  return ++p.polls >= p.stopFromPoll ? 1 : 0;
}
int32_t gateFromFlag(void *, int32_t abandoned) { return abandoned ? 1 : 0; }

TEST(StepExecutor, AStopAfterTheGateLetsTheUpdateFinish) {
  const hcrt_step_program p = program();
  for (int one = 0; one < 2; ++one) {  // program order, and the cluster streams
    hcrt_step_program q = p;
    q.num_clusters = one ? 1 : 2;  // 2: one cluster's stream runs every entry
    for (int stopFromPoll : {1, 4, 5, 6}) {
      Preempt pre;
      pre.stopFromPoll = stopFromPoll;
      hc_step_env env{};
      env.world_size = 1, env.host = &pre;
      env.abandon_requested = pollStop, env.update_gate = gateFromFlag;
      Step st(q, env);
      ASSERT_NE(st.s, nullptr) << st.error;
      setW(st.s, {1, 1, 2, 2}, {1, 2, 3, 4});
      double loss = 0;
      const int rc = hcrt_step_run(st.s, kInputs, &loss);
      float w[4];
      ASSERT_EQ(hcrt_step_get_tensor(st.s, "param:w", w, sizeof w), 0);
      // The host polls at each of entries 0..3 before the gate (entry 4).
      const std::string at = "stop from poll " + std::to_string(stopFromPoll) +
                             (one ? ", one stream" : ", two clusters");
      if (stopFromPoll <= 4) {
        EXPECT_EQ(rc, -4) << at;
        EXPECT_EQ(w[0], 1.0f) << at;  // nothing updated
      } else {
        EXPECT_EQ(rc, 0) << at << ": " << hcrt_step_last_error(st.s);
        EXPECT_FLOAT_EQ(w[0], 0.9f) << at;  // the whole update
        EXPECT_FLOAT_EQ(w[3], 1.6f) << at;
      }
    }
  }
}

// y[0] = x . w through hc_sgemm with b_constant (a constant weight's kept
// panels, as linear with weight = "constant" asks), y[1..3] = 0.
void constantDotKernel(const hcrt_tensor *ins, int32_t, hcrt_tensor *outs, int32_t,
                       const hcrt_attrs *, hc_threads t) {
  float *y = static_cast<float *>(outs[0].data);
  hc_sgemm_args g{};
  g.M = 1, g.N = 1, g.K = 4, g.batch = 1, g.alpha = 1.0f;
  g.A = static_cast<const float *>(ins[0].data), g.lda = 4;
  g.B = static_cast<const float *>(ins[1].data), g.ldb = 1;
  g.C = y, g.ldc = 1;
  g.b_constant = 1;
  hc_sgemm(&g, t);
  y[1] = y[2] = y[3] = 0.0f;
}

TEST(StepExecutor, SettingAParameterDropsItsKeptPanels) {
  // The host loads new weights between steps (a sampler given another
  // checkpoint): the next step must read them, not the panels packed from
  // the old ones. lr 0 leaves w as set.
  const hcrt_kernel_fn kernels[] = {constantDotKernel, sumKernel, updateKernel};
  hcrt_step_program p = program();
  p.kernels = kernels;
  auto st = std::make_unique<Step>(p);
  ASSERT_NE(st->s, nullptr) << st->error;
  ASSERT_EQ(hcrt_step_set_hyperparameter(st->s, "lr", 0.0), 0);
  double loss = 0;
  setW(st->s, {1, 1, 2, 2}, {0, 0, 0, 0});
  ASSERT_EQ(hcrt_step_run(st->s, kInputs, &loss), 0) << hcrt_step_last_error(st->s);
  EXPECT_DOUBLE_EQ(loss, 0.5 * (1 + 2 + 6 + 8));
  EXPECT_GT(hcrt_gemm_packed_bytes(), 0u);
  setW(st->s, {-1, 0, 0, 1}, {0, 0, 0, 0});
  ASSERT_EQ(hcrt_step_run(st->s, kInputs, &loss), 0) << hcrt_step_last_error(st->s);
  EXPECT_DOUBLE_EQ(loss, 0.5 * (-1 + 4));
  // The context's arenas are freed: the panels packed from them go too.
  EXPECT_GT(hcrt_gemm_packed_bytes(), 0u);
  st.reset();
  EXPECT_EQ(hcrt_gemm_packed_bytes(), 0u);
}

TEST(StepExecutor, TheProgramsLimitBoundsTheKeptPanels) {
  // kept_panel_bytes: the room the memory plan left the kept panels of the
  // arena's weights. 0 keeps none (the results stay); the limit goes with
  // the context, so the next context without one keeps them again.
  const hcrt_kernel_fn kernels[] = {constantDotKernel, sumKernel, updateKernel};
  hcrt_step_program p = program();
  p.kernels = kernels;
  p.kept_panel_arena = 0, p.kept_panel_bytes = 0;
  double loss = 0;
  {
    Step st(p);
    ASSERT_NE(st.s, nullptr) << st.error;
    ASSERT_EQ(hcrt_step_set_hyperparameter(st.s, "lr", 0.0), 0);
    setW(st.s, {1, 1, 2, 2}, {0, 0, 0, 0});
    ASSERT_EQ(hcrt_step_run(st.s, kInputs, &loss), 0) << hcrt_step_last_error(st.s);
    EXPECT_DOUBLE_EQ(loss, 0.5 * (1 + 2 + 6 + 8));
    EXPECT_EQ(hcrt_gemm_packed_bytes(), 0u) << "panels kept past the program's limit";
  }
  p.kept_panel_arena = -1, p.kept_panel_bytes = -1;
  Step st(p);
  ASSERT_NE(st.s, nullptr) << st.error;
  ASSERT_EQ(hcrt_step_set_hyperparameter(st.s, "lr", 0.0), 0);
  setW(st.s, {1, 1, 2, 2}, {0, 0, 0, 0});
  ASSERT_EQ(hcrt_step_run(st.s, kInputs, &loss), 0) << hcrt_step_last_error(st.s);
  EXPECT_GT(hcrt_gemm_packed_bytes(), 0u);
}
