// The step executor: runs a compiled step's tables (step_program.h) on
// the host's threads. One context per hc_step: its arenas, its bound
// inputs, its hyperparameters and, on a CFTP plan, one stream per cluster
// that waits for the others' progress where the plan says. Collectives and
// tier copies run on cluster 0's stream (the host's), which also decides
// the update gate. The generated step library holds only the tables.
#include "hc/abi/step_program.h"
#include "hc/base/settings.h"
#include "hc/runtime/copy_engine.h"
#include "hc/runtime/graph_ops.h"
#include "hc/runtime/kernels.h"
#include "hc/runtime/placement.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

struct hc_step {
  const hcrt_step_program *program = nullptr;
  hc_step_env env;
  std::vector<char *> arena;
  std::vector<hcrt_tensor> tensors;  // P->descs resolved to addresses
  // P->attrs with this context's hyperparameters in their slots (two
  // contexts may train with different learning rates).
  std::vector<hcrt_attrs> attrs;
  std::vector<double> hypers;
  std::vector<int64_t> requests;           // this step's bucket all-reduces
  std::vector<char> inflight;              // started, not yet waited for
  int32_t pending = 0;                     // started, not yet waited for
  float lossSum = 0;                       // the loss's own request
  int64_t lossRequest = -1;
  char error[1024] = {};                   // last_error()
  std::vector<double> seconds;             // per entry, with env.profile
  std::vector<int64_t> runs;
  // CFTP: entries each cluster has completed (monotonic over steps: a
  // step's base is its ordinal times P->num_entries + 1), and s->error's guard.
  std::unique_ptr<std::atomic<int64_t>[]> progress;
  std::vector<int64_t> tickets;            // this step's tier copies
  std::vector<char> copying;               // started, not yet waited for
  std::vector<int64_t> copyBytes;          // each tier copy's size
  // Preemption (env.abandon_requested / env.update_gate): this step runs
  // no more kernels; the gate's verdict for step `gateStep` (1 stop, 0 go).
  std::atomic<bool> abandoned{false};
  std::atomic<int64_t> gateStep{0};
  std::atomic<int32_t> gateVerdict{0};
  int32_t disk = -1;                       // the disk tier's file
  int64_t steps = 0;
  std::mutex errorMu;
  size_t errorCall = SIZE_MAX;  // the entry s->error describes
  // Gradient accumulation: the hyperparameters "micro_batch" (this call's
  // index) and "micro_batches" (K); the index the next call must have, and
  // the sum of this rank's losses of the step's earlier micro-batches.
  int32_t micro = 0, microCount = 1, nextMicro = 0;
  bool lastMicro = true;
  float lossAccum = 0;
};

namespace {

// The plan's slices of the allocated arenas (or of arena `only`), zeroed by
// the clusters that own them: first touch puts each slice on its home node;
// then the padding past the plan.
void firstTouch(hc_step *s, int only) {
  const hcrt_step_program *P = s->program;
  const size_t n = P->num_touch;
  const int32_t local = s->env.rank % P->ranks_per_node;
  std::vector<hcrt_touch_slice> touch;
  for (size_t i = 0; i < n; ++i) {
    const int a = P->touch[i].arena;
    if (P->arena_bytes[a] == 0 || !s->arena[a] || (only >= 0 && a != only))
      continue;  // not in memory (the disk tier's arena, the accumulator)
    touch.push_back(P->touch[i]);
    touch.back().numa = P->num_touch_numa >= n * P->ranks_per_node
                            ? P->touch_numa[i * P->ranks_per_node + local] : -1;
  }
  hcrt_first_touch(s->arena.data(), touch.data(), static_cast<int32_t>(touch.size()));
  for (int a = 0; a < P->num_arenas; ++a) {
    if (!s->arena[a] || (only >= 0 && a != only))
      continue;
    const size_t page = HCRT_PLACEMENT_PAGE;
    size_t bytes = (static_cast<size_t>(P->arena_bytes[a]) + 127 + page - 1) / page * page;
    std::memset(s->arena[a] + P->arena_bytes[a], 0, bytes - P->arena_bytes[a]);
  }
}

// The bytes a contiguous descriptor covers.
int64_t descBytes(const hcrt_desc &d) {
  int64_t n = hcrt_dtype_bytes(d.dtype);
  for (int k = 0; k < d.rank; ++k)
    n *= d.shape[k];
  return n;
}

hc_step *create(const hcrt_step_program *P, const hc_step_env *env, char *error,
                size_t size) {
  hc_step *s = new (std::nothrow) hc_step();
  if (!s) {
    std::snprintf(error, size, "out of memory creating the step context");
    return nullptr;
  }
  s->program = P;
  s->env = *env;
  s->arena.assign(static_cast<size_t>(P->num_arenas), nullptr);
  s->attrs.assign(P->attrs, P->attrs + P->num_attrs);
  s->hypers.assign(P->hyper_defaults, P->hyper_defaults + P->num_hypers);
  s->requests.assign(static_cast<size_t>(P->num_buckets) + 1, 0);
  s->inflight.assign(static_cast<size_t>(P->num_buckets) + 1, 0);
  s->progress.reset(new std::atomic<int64_t>[static_cast<size_t>(P->num_clusters) + 1]());
  s->tickets.assign(static_cast<size_t>(P->num_copies) + 1, 0);
  s->copying.assign(static_cast<size_t>(P->num_copies) + 1, 0);
  s->copyBytes.assign(static_cast<size_t>(P->num_copies) + 1, 0);
  for (size_t ci = 0; ci < P->num_entries; ++ci) {
    // A tier copy moves its source's bytes (contiguous, as its target's:
    // the copy op's verifier), counted here from the descriptors, never
    // from the profile's entry_bytes (printed rounded).
    const hcrt_entry &c = P->entries[ci];
    if (c.kind != HCRT_ENTRY_COPY_START)
      continue;
    const int64_t from = descBytes(P->descs[P->operands[c.first]]),
                  to = descBytes(P->descs[P->operands[c.first + 1]]);
    if (from != to || c.attrs < 0 || c.attrs >= P->num_copies) {
      std::snprintf(error, size, "entry %zu (%s): a tier copy of %lld bytes into %lld bytes, "
                    "ticket %d of %d", ci, P->entry_where[ci], static_cast<long long>(from),
                    static_cast<long long>(to), c.attrs, P->num_copies);
      delete s;
      return nullptr;
    }
    s->copyBytes[static_cast<size_t>(c.attrs)] = from;
  }
  s->seconds.assign(P->num_entries, 0.0);
  s->runs.assign(P->num_entries, 0);
  // Page-aligned arenas (the plan's slices are whole pages), zeroed by the
  // clusters that own them: first touch puts each slice on its home node.
  for (int a = 0; a < P->num_arenas; ++a) {
    if (a == P->accum_arena)
      continue;  // allocated when more than one micro-batch is asked for
    const size_t page = HCRT_PLACEMENT_PAGE;
    size_t bytes = (static_cast<size_t>(P->arena_bytes[a]) + 127 + page - 1) / page * page;
    s->arena[a] = hcrt_arena_alloc(bytes);  // huge pages where it is large
    if (!s->arena[a]) {
      std::snprintf(error, size, "cannot allocate %zu bytes for arena %d", bytes, a);
      for (int b = 0; b < a; ++b)
        hcrt_arena_free(s->arena[b]);
      delete s;
      return nullptr;
    }
  }
  if (P->disk_bytes > 0) {
    // The disk tier: made and fully reserved now, so a missing, read-only
    // or full folder fails before the first step.
    s->disk = hcrt_disk_open(P->offload_dir, P->disk_bytes, error, size);
    if (s->disk < 0) {
      for (char *a : s->arena)
        hcrt_arena_free(a);
      delete s;
      return nullptr;
    }
  }
  firstTouch(s, -1);
  // Dropped with the arena's panels in destroy.
  if (P->kept_panel_bytes >= 0 && P->kept_panel_arena >= 0 &&
      P->kept_panel_arena < P->num_arenas && s->arena[static_cast<size_t>(P->kept_panel_arena)])
    hcrt_gemm_limit_packed(s->arena[static_cast<size_t>(P->kept_panel_arena)],
                           static_cast<size_t>(P->arena_bytes[P->kept_panel_arena]),
                           static_cast<size_t>(P->kept_panel_bytes));
  s->tensors.resize(P->num_descs);
  for (size_t i = 0; i < s->tensors.size(); ++i) {
    const hcrt_desc &d = P->descs[i];
    hcrt_tensor &t = s->tensors[i];
    t.dtype = d.dtype;
    t.rank = d.rank;
    for (int k = 0; k < d.rank; ++k) {
      t.shape[k] = d.shape[k];
      t.strides[k] = d.strides[k];
    }
    if (d.arena < P->num_arenas)
      t.data = s->arena[d.arena] ? s->arena[d.arena] + d.byte_offset : nullptr;
    else if (d.arena == P->const_arena)
      t.data = const_cast<char *>(static_cast<const char *>(P->constants[d.base])) + d.byte_offset;
    else
      t.data = nullptr;  // an input: bound at each step
  }
  return s;
}

void destroy(hc_step *s) {
  if (!s)
    return;
  // The GEMMs' kept panels of constant weights packed from these arenas,
  // and their limit.
  for (int a = 0; a < s->program->num_arenas; ++a)
    if (char *arena = s->arena[static_cast<size_t>(a)]) {
      const size_t bytes = static_cast<size_t>(s->program->arena_bytes[a]);
      hcrt_gemm_forget_packed(arena, bytes);
      hcrt_gemm_unlimit_packed(arena, bytes);
    }
  for (char *a : s->arena)
    hcrt_arena_free(a);
  if (s->disk >= 0)
    hcrt_disk_close(s->disk);
  delete s;
}

const hcrt_named *lookup(const hcrt_step_program *P, const char *name) {
  for (size_t i = 0; i < P->num_named; ++i)
    if (std::strcmp(P->named[i].name, name) == 0)
      return &P->named[i];
  return nullptr;
}

int setTensor(hc_step *s, const char *name, const void *data, size_t bytes) {
  const hcrt_step_program *P = s->program;
  const hcrt_named *n = lookup(P, name);
  if (!n || static_cast<size_t>(n->bytes) != bytes)
    return -1;
  char *dst = s->arena[n->arena] + n->byte_offset;
  hcrt_gemm_forget_packed(dst, bytes);  // a constant weight's kept panels
  std::memcpy(dst, data, bytes);
  return 0;
}

int getTensor(const hc_step *s, const char *name, void *data, size_t bytes) {
  const hcrt_step_program *P = s->program;
  const hcrt_named *n = lookup(P, name);
  if (!n || static_cast<size_t>(n->bytes) != bytes)
    return -1;
  std::memcpy(data, s->arena[n->arena] + n->byte_offset, bytes);
  return 0;
}

// The hyperparameter `name` (P->hyper_names) for every later step: each call
// bound to it reads `value`. -1 for a name the step does not have or a
// value that is not finite.
// "micro_batches" K > 1 allocates the accumulator (zeroed) on first use.
bool allocateAccumulator(hc_step *s) {
  const hcrt_step_program *P = s->program;
  if (s->arena[P->accum_arena] || P->arena_bytes[P->accum_arena] == 0)
    return true;
  const size_t page = HCRT_PLACEMENT_PAGE;
  size_t bytes = (static_cast<size_t>(P->arena_bytes[P->accum_arena]) + 127 + page - 1) / page * page;
  char *a = hcrt_arena_alloc(bytes);
  if (!a) {
    std::snprintf(s->error, sizeof s->error,
                  "cannot allocate %zu bytes for the gradient accumulator", bytes);
    return false;
  }
  s->arena[P->accum_arena] = a;
  firstTouch(s, P->accum_arena);  // zeroed, each slice on its owner's node
  for (size_t i = 0; i < s->tensors.size(); ++i)
    if (P->descs[i].arena == P->accum_arena)
      s->tensors[i].data = a + P->descs[i].byte_offset;
  return true;
}

int setHyperparameter(hc_step *s, const char *name, double value) {
  const hcrt_step_program *P = s->program;
  for (int32_t h = 0; h < P->num_hypers; ++h) {
    if (std::strcmp(P->hyper_names[h], name) != 0)
      continue;
    if (!std::isfinite(value))
      return -1;
    const bool micros = std::strcmp(name, "micro_batches") == 0;
    if (micros || std::strcmp(name, "micro_batch") == 0) {
      // Whole numbers; the index below the count, set in order by step().
      if (value != std::floor(value) || value < (micros ? 1 : 0) || value > 1e6 ||
          (!micros && value >= s->microCount)) {
        std::snprintf(s->error, sizeof s->error, "%s = %g: %s", name, value,
                      micros ? "needs a whole number of micro-batches, 1 or more"
                             : "needs a whole number below micro_batches");
        return -1;
      }
      if (micros && s->nextMicro != 0) {
        std::snprintf(s->error, sizeof s->error,
                      "micro_batches changed in the middle of a step (after micro-batch %d)",
                      static_cast<int>(s->nextMicro - 1));
        return -1;
      }
      if (micros && value > 1 && !allocateAccumulator(s))
        return -1;
      (micros ? s->microCount : s->micro) = static_cast<int32_t>(value);
    }
    s->hypers[h] = value;
    for (size_t i = 0; i < P->num_hyper_bindings; ++i)
      if (P->hyper_bindings[i].hyper == h)
        s->attrs[P->hyper_bindings[i].attrs].floats[P->hyper_bindings[i].float_index] = value;
    return 0;
  }
  return -1;
}

int getHyperparameter(const hc_step *s, const char *name, double *value) {
  const hcrt_step_program *P = s->program;
  for (int32_t h = 0; h < P->num_hypers; ++h)
    if (std::strcmp(P->hyper_names[h], name) == 0) {
      *value = s->hypers[h];
      return 0;
    }
  return -1;
}

int64_t numElements(const hcrt_tensor &t) {
  int64_t n = 1;
  for (int k = 0; k < t.rank; ++k)
    n *= t.shape[k];
  return n;
}

// env.profile: the wall time of call `ci`, however the loop leaves it.
struct CallTimer {
  hc_step *s;
  size_t ci;
  std::chrono::steady_clock::time_point t0;
  CallTimer(hc_step *s, size_t ci) : s(s), ci(ci) {
    if (s->env.profile)
      t0 = std::chrono::steady_clock::now();
  }
  ~CallTimer() {
    if (!s->env.profile)
      return;
    s->seconds[ci] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++s->runs[ci];
  }
};

size_t getProfile(const hc_step *s, hc_call_profile *out, size_t capacity) {
  const hcrt_step_program *P = s->program;
  for (size_t ci = 0; ci < P->num_entries && ci < capacity; ++ci)
    out[ci] = {P->entry_kernel[ci], P->entry_where[ci], s->runs[ci], s->seconds[ci],
               P->entry_flops[ci], P->entry_bytes[ci]};
  return P->num_entries;
}

bool callRuns(const hc_step *s, size_t ci);

#if HC_TEST_SEAMS
// HC_CHECK_FINITE_PLANT=KERNEL[@CLUSTER] (tests): a NaN into element 0 of
// the first non-empty float output of that kernel's first call in program
// order that runs (on that CFTP cluster's stream), once per process.
// Program order, not time: CFTP's streams reach their calls in either
// order, and the planted call must be the one a sequential run plants (the
// first in time was once the other stream's).
void plantNonFinite(const hc_step *s, size_t ci, const hcrt_tensor *outs, int32_t n) {
  static const char *plant = hc::rt::setting(hc::rt::Setting::CheckFinitePlant);
  static std::atomic<bool> planted{false};
  if (!plant || planted.load())
    return;
  const char *at = std::strchr(plant, '@');
  const size_t nameLen = at ? static_cast<size_t>(at - plant) : std::strlen(plant);
  const int32_t cluster = at ? std::atoi(at + 1) : -1;
  const hcrt_step_program *P = s->program;
  auto wanted = [&](size_t e) {
    const hcrt_entry &en = P->entries[e];
    if (en.kind != HCRT_ENTRY_KERNEL || (cluster >= 0 && en.cluster != cluster))
      return false;
    const char *k = P->kernel_names[en.kernel];
    return std::strncmp(k, plant, nameLen) == 0 && k[nameLen] == '\0' && callRuns(s, e);
  };
  size_t first = 0;
  while (first < P->num_entries && !wanted(first))
    ++first;
  if (ci != first || planted.exchange(true))
    return;
  for (int32_t k = 0; k < n; ++k) {
    const hcrt_tensor &t = outs[k];
    int64_t elems = 1;
    for (int32_t d = 0; d < t.rank; ++d)
      elems *= t.shape[d];
    if (!t.data || elems <= 0)
      continue;
    if (t.dtype == HCRT_F32)
      *static_cast<float *>(t.data) = std::nanf("");
    else if (t.dtype == HCRT_F64)
      *static_cast<double *>(t.data) = std::nan("");
    else if (t.dtype == HCRT_BF16)
      *static_cast<uint16_t *>(t.data) = 0x7FC0;  // a quiet NaN's upper half
    else
      continue;
    return;
  }
}
#endif

// --check-finite: every float output of call `ci`; the first NaN or
// infinity stops the step with its place in s->error.
bool outputsFinite(hc_step *s, size_t ci, const hcrt_tensor *outs, int32_t n) {
  const hcrt_step_program *P = s->program;
#if HC_TEST_SEAMS
  plantNonFinite(s, ci, outs, n);
#endif
  for (int32_t k = 0; k < n; ++k) {
    double v = 0;
    int64_t at = hcrt_first_nonfinite(&outs[k], &v);
    if (at >= 0) {
      // Parameters, gradients and optimizer state are named slices of their
      // arenas (one optimizer call spans many): name the one holding it.
      const hcrt_desc &d = P->descs[P->operands[P->entries[ci].first + P->entries[ci].nin + k]];
      int64_t byte = d.byte_offset + at * hcrt_dtype_bytes(d.dtype);
      // Streams run at once: report the failure earliest in program order,
      // the one a sequential run reports.
      std::lock_guard<std::mutex> lk(s->errorMu);
      if (s->error[0] && s->errorCall <= ci)
        return false;
      s->errorCall = ci;
      const char *tensor = d.arena < P->num_arenas ? P->arena_contents[d.arena]
                           : d.arena == P->input_arena ? "a step input"
                                                       : "a constant";
      for (size_t i = 0; i < P->num_named; ++i) {
        const hcrt_named &nm = P->named[i];
        if (nm.arena == d.arena && byte >= nm.byte_offset &&
            byte < nm.byte_offset + nm.bytes)
          tensor = nm.name;
      }
      std::snprintf(s->error, sizeof s->error,
                    "%s wrote %g into %s (output %d of call %zu, element %lld)",
                    P->entry_where[ci], v, tensor, static_cast<int>(k), ci,
                    static_cast<long long>(at));
      return false;
    }
  }
  return true;
}

// This rank's loss of the step: with micro-batches, their mean.
float stepLoss(const hc_step *s) {
  const hcrt_step_program *P = s->program;
  const float l = *static_cast<const float *>(s->tensors[P->loss_desc].data);
  return s->microCount > 1 ? (s->lossAccum + l) / static_cast<float>(s->microCount) : l;
}

// Whether this step reduces its gradients per bucket: its buckets'
// grad_accumulate calls and all-reduces do work (hcrt_call_condition).
bool reducesPerBucket(const hc_step *s) {
  return s->env.world_size > 1 || s->microCount > 1;
}

// Whether kernel entry `ci` runs in this step (its hcrt_call_condition).
bool callRuns(const hc_step *s, size_t ci) {
  const int8_t *when = s->program->entry_condition;
  switch (when ? when[ci] : HCRT_RUNS_ALWAYS) {
  case HCRT_RUNS_IF_REDUCED:
    return reducesPerBucket(s);
  case HCRT_RUNS_IF_LOCAL:
    return !reducesPerBucket(s);
  default:
    return true;
  }
}

// Entry `ci` of the plan on `threads`; `host`: the stream that owns the
// collectives and tier copies (cluster 0). 0, or step()'s -1 / -2 / -3.
int runEntry(hc_step *s, size_t ci, hc_threads threads, bool host) {
  const hcrt_step_program *P = s->program;
  hcrt_tensor args[64];
  const hcrt_tensor absent = {};
  const float scale = 1.0f / static_cast<float>(s->env.world_size);
  {
    const hcrt_entry &c = P->entries[ci];
    CallTimer timer(s, ci);
    // Polled only before the update gate: a step the gate let go on
    // finishes its update whole, and a stop asked for later waits for the
    // next boundary. (Polled past the gate, a late request skipped the
    // optimizer calls after it: a half-updated state saved as the step's.)
    if (host && ci < P->gate_call &&
        !s->abandoned.load(std::memory_order_relaxed) && s->env.abandon_requested &&
        s->env.abandon_requested(s->env.host))
      s->abandoned.store(true);
    if (c.kind == HCRT_ENTRY_KERNEL) {
      // An abandoned step runs no kernel (its results are never used), but
      // keeps its collectives and copies so every rank reaches the gate. A
      // micro-batch before the last of its step stops at the update phase.
      // A conditional call runs only in the steps it is for.
      if (!s->abandoned.load(std::memory_order_relaxed) &&
          (s->lastMicro || ci < P->update_call) && callRuns(s, ci)) {
        int32_t n = c.nin + c.nout;
        for (int32_t k = 0; k < n; ++k) {
          int32_t d = P->operands[c.first + k];
          args[k] = d < 0 ? absent : s->tensors[d];
        }
        P->kernels[c.kernel](args, c.nin, args + c.nin, c.nout, &s->attrs[c.attrs],
                           threads);
        if (s->env.check_finite && !outputsFinite(s, ci, args + c.nin, c.nout))
          return -2;
      }
      if (host && s->pending && s->env.allreduce_progress)
        s->env.allreduce_progress(s->env.comm);
      if (ci == P->loss_call && s->lastMicro && s->env.world_size > 1 &&
          s->env.allreduce_start_f32 && s->env.allreduce_wait) {
        // The loss's sum overlaps backward too, instead of ending the step.
        s->lossSum = stepLoss(s);
        s->lossRequest = s->env.allreduce_start_f32(s->env.comm, &s->lossSum, 1);
        if (s->lossRequest < 0)
          return -1;
        ++s->pending;
      }
    } else if (c.kind == HCRT_ENTRY_COPY_START) {
      // A tier copy starts; the disk side is the offload buffer's offset.
      const int32_t from = P->operands[c.first], to = P->operands[c.first + 1];
      const int64_t bytes = s->copyBytes[static_cast<size_t>(c.attrs)];
      int64_t offset = c.kernel == HCRT_COPY_TO_DISK     ? P->descs[to].byte_offset
                       : c.kernel == HCRT_COPY_FROM_DISK ? P->descs[from].byte_offset
                                                         : 0;
      s->copying[c.attrs] = true;
      // On its stream's lane: a cluster's copies queue behind its own only.
      s->tickets[c.attrs] = hcrt_copy_start(
          c.cluster, c.kernel, c.kernel == HCRT_COPY_TO_DISK ? nullptr : s->tensors[to].data,
          c.kernel == HCRT_COPY_FROM_DISK ? nullptr : s->tensors[from].data, bytes,
          s->disk, offset);
    } else if (c.kind == HCRT_ENTRY_COPY_WAIT) {
      s->copying[c.attrs] = false;
      if (hcrt_copy_wait(s->tickets[c.attrs], s->error, sizeof s->error) != 0)
        return -3;
    } else if (s->env.world_size > 1 && s->lastMicro) {
      // A bucket: start its sum (or, without the asynchronous callbacks, sum
      // it now); at the wait, the mean is what the optimizer reads.
      const hcrt_tensor &b = s->tensors[P->operands[c.first]];
      float *data = static_cast<float *>(b.data);
      size_t n = static_cast<size_t>(numElements(b));
      bool async = s->env.allreduce_start_f32 && s->env.allreduce_wait;
      if (c.kind == HCRT_ENTRY_ALLREDUCE_START && async) {
        s->requests[c.kernel] = s->env.allreduce_start_f32(s->env.comm, data, n);
        if (s->requests[c.kernel] < 0)
          return -1;
        s->inflight[c.kernel] = true;
        ++s->pending;
        return 0;
      }
      if (c.kind == HCRT_ENTRY_ALLREDUCE_START && (!s->env.allreduce_sum_f32 ||
                          s->env.allreduce_sum_f32(s->env.comm, data, n) != 0))
        return -1;
      if (c.kind == HCRT_ENTRY_ALLREDUCE_WAIT && async) {
        s->inflight[c.kernel] = false;
        if (s->env.allreduce_wait(s->env.comm, s->requests[c.kernel]) != 0)
          return -1;
        --s->pending;
      }
      if ((c.kind == HCRT_ENTRY_ALLREDUCE_START) != async)
        for (size_t i = 0; i < n; ++i)
          data[i] *= scale;
    }
  }
  return 0;
}

// A host without preemption callbacks has no gate: no stream waits at it;
// nor does a micro-batch before the last, which updates nothing.
bool gated(const hc_step *s) {
  return s->lastMicro && (s->env.update_gate || s->env.abandon_requested);
}

// The update gate before call P->gate_call, the first that writes a parameter
// or optimizer state: 0 go on, -4 stop (every rank agreed), -1 the
// collective failed. Decided once per step, by the host stream.
int passGate(hc_step *s) {
  int32_t v = 0;
  if (s->env.update_gate) {
    v = s->env.update_gate(s->env.host, s->abandoned.load() ? 1 : 0);
    v = v < 0 ? -1 : v > 0 ? -4 : 0;
  } else if (s->abandoned.load()) {
    v = -4;  // no collective to agree through: one rank, stop alone
  }
  s->gateVerdict.store(v, std::memory_order_relaxed);
  s->gateStep.store(s->steps, std::memory_order_release);
  return v;
}

// After a stop at the gate: the requests and copies started before it are
// waited for (the same on every rank), so nothing is left in flight.
int drainAfterStop(hc_step *s) {
  const hcrt_step_program *P = s->program;
  int rc = -4;
  for (int32_t b = 0; b < P->num_buckets; ++b)
    if (s->inflight[b]) {
      s->inflight[b] = false;
      --s->pending;
      if (s->env.allreduce_wait(s->env.comm, s->requests[b]) != 0)
        rc = -1;
    }
  if (s->lossRequest >= 0) {
    if (s->env.allreduce_wait(s->env.comm, s->lossRequest) != 0)
      rc = -1;
    s->lossRequest = -1;
    --s->pending;
  }
  for (int32_t t = 0; t < P->num_copies; ++t)
    if (s->copying[t]) {
      s->copying[t] = false;
      char ignored[256];
      hcrt_copy_wait(s->tickets[t], ignored, sizeof ignored);
    }
  return rc;
}

// A scoped cluster wait orders only the next entry of its stream; where
// that entry does nothing in this step, nothing needs the wait.
bool scopedWaitSkipped(const hc_step *s, const hcrt_entry &wait) {
  switch (wait.nin) {
  case HCRT_WAIT_ORDERS_ALLREDUCE:  // runEntry starts a bucket's sum only then
    return !(s->env.world_size > 1 && s->lastMicro);
  case HCRT_WAIT_ORDERS_ACCUMULATE:  // grad_accumulate: nothing with one micro-batch
    return s->microCount <= 1;
  case HCRT_WAIT_ORDERS_IF_REDUCED:
    return !reducesPerBucket(s);
  case HCRT_WAIT_ORDERS_IF_LOCAL:
    return reducesPerBucket(s);
  default:
    return false;
  }
}

// CFTP: cluster k's stream, on its threads. An entry another cluster's
// result must precede waits for that cluster's progress counter. After a
// failure every stream still walks (and counts) its entries without running
// them, so no wait is left hanging; the first failure's code is returned.
struct ClusterRun {
  hc_step *s;
  int64_t base;
  std::atomic<size_t> failAt{SIZE_MAX};  // earliest failed entry so far
  std::mutex mu;
  int rc = 0;                            // its code
};

void runCluster(void *ctx, int32_t k, hc_threads threads) {
  ClusterRun &r = *static_cast<ClusterRun *>(ctx);
  hc_step *s = r.s;
  const hcrt_step_program *P = s->program;
  int64_t done = 0;
  for (size_t ci = 0; ci < P->num_entries; ++ci) {
    const hcrt_entry &c = P->entries[ci];
    if (ci == P->gate_call && k == 0 && gated(s)) {
      // The host stream decides; a stop walks every later entry unrun. A
      // step failed already only lets the other streams go on walking.
      if (ci < r.failAt.load(std::memory_order_acquire)) {
        if (int rc = passGate(s)) {
          std::lock_guard<std::mutex> lk(r.mu);
          if (ci < r.failAt.load()) {
            r.failAt.store(ci, std::memory_order_release);
            r.rc = rc;
          }
        }
      } else {
        s->gateStep.store(s->steps, std::memory_order_release);
      }
    }
    if (c.cluster != k)
      continue;
    if (ci >= P->gate_call && k != 0 && c.kind != HCRT_ENTRY_CLUSTER_WAIT && gated(s) &&
               s->gateStep.load(std::memory_order_acquire) != s->steps) {
      // Nothing of this cluster past the gate runs before its verdict.
      for (int spin = 0; s->gateStep.load(std::memory_order_acquire) != s->steps; ++spin)
        if (spin > 20000)
          std::this_thread::yield();
    }
    if (c.kind == HCRT_ENTRY_CLUSTER_WAIT) {
      if (scopedWaitSkipped(s, c))
        continue;
      CallTimer timer(s, ci);  // the profile shows time spent waiting
      const int64_t target = r.base + c.first;
      // Meanwhile this thread runs pieces of the kernel the awaited stream
      // has under way, if it offers any (the wait's time includes them).
      for (int spin = 0; s->progress[c.kernel].load(std::memory_order_acquire) < target;
           ++spin)
        if (hcrt_help_cluster(c.kernel))
          spin = 0;
        else if (spin > 20000)
          std::this_thread::yield();
      continue;
    }
    // Entries before the earliest failure still run (a sequential run
    // would have run them), so which failure is reported is deterministic.
    if (ci < r.failAt.load(std::memory_order_acquire)) {
      if (int rc = runEntry(s, ci, threads, k == 0)) {
        std::lock_guard<std::mutex> lk(r.mu);
        if (ci < r.failAt.load()) {
          r.failAt.store(ci, std::memory_order_release);
          r.rc = rc;
        }
      }
    }
    s->progress[k].store(r.base + ++done, std::memory_order_release);
  }
}

void bindInputs(hc_step *s, const void *const *inputs) {
  const hcrt_step_program *P = s->program;
  for (size_t i = 0; i < s->tensors.size(); ++i)
    if (P->descs[i].arena == P->input_arena)
      s->tensors[i].data =
          const_cast<char *>(static_cast<const char *>(inputs[P->descs[i].base])) +
          P->descs[i].byte_offset;
}

// The forward pass alone (validation): the calls up to the loss, in program
// order on every thread, without collectives or tier copies (those serve
// the backward pass). Parameters, optimizer state and gradients are
// untouched; *loss is this rank's, not averaged.
int evaluate(hc_step *s, const void *const *inputs, double *loss) {
  const hcrt_step_program *P = s->program;
  bindInputs(s, inputs);
  s->error[0] = 0;
  s->errorCall = SIZE_MAX;
  if (s->nextMicro != 0) {
    std::snprintf(s->error, sizeof s->error,
                  "evaluate() in the middle of a step's micro-batches");
    return -1;
  }
  hcrt_tensor args[64];
  const hcrt_tensor absent = {};
  for (size_t ci = 0; ci <= P->loss_call && ci < P->num_entries; ++ci) {
    const hcrt_entry &c = P->entries[ci];
    if (c.kind != HCRT_ENTRY_KERNEL)
      continue;
    const int32_t n = c.nin + c.nout;
    for (int32_t k = 0; k < n; ++k) {
      const int32_t d = P->operands[c.first + k];
      args[k] = d < 0 ? absent : s->tensors[d];
    }
    P->kernels[c.kernel](args, c.nin, args + c.nin, c.nout, &s->attrs[c.attrs],
                       hc_threads{0, 0});
    if (s->env.check_finite && !outputsFinite(s, ci, args + c.nin, c.nout))
      return -2;
  }
  *loss = *static_cast<const float *>(s->tensors[P->loss_desc].data);
  return 0;
}

int step(hc_step *s, const void *const *inputs, double *loss) {
  const hcrt_step_program *P = s->program;
  bindInputs(s, inputs);
  const float scale = 1.0f / static_cast<float>(s->env.world_size);
  s->error[0] = 0;
  if (s->micro != s->nextMicro) {
    std::snprintf(s->error, sizeof s->error,
                  "micro-batch %d of %d given where micro-batch %d comes next",
                  static_cast<int>(s->micro), static_cast<int>(s->microCount),
                  static_cast<int>(s->nextMicro));
    return -1;
  }
  s->lastMicro = s->micro == s->microCount - 1;
  // A stop asked for during any micro-batch holds until the step's gate.
  if (s->micro == 0)
    s->abandoned.store(false);
  ClusterRun run;
  run.s = s;
  run.base = ++s->steps * static_cast<int64_t>(P->num_entries + 1);
  s->errorCall = SIZE_MAX;
  if (P->num_clusters > 1 && hcrt_run_clusters(P->num_clusters, runCluster, &run) == 0) {
    if (run.failAt.load() != SIZE_MAX) {
      s->nextMicro = 0;  // the step is dropped whole, its micro-batches too
      s->lossAccum = 0;
      return run.rc == -4 ? drainAfterStop(s) : run.rc;
    }
  } else {
    // One stream (or a team smaller than the plan's clusters): program
    // order is a valid order of every stream's entries.
    for (size_t ci = 0; ci < P->num_entries; ++ci) {
      if (ci == P->gate_call && gated(s))
        if (int rc = passGate(s)) {
          s->nextMicro = 0;
          s->lossAccum = 0;
          return rc == -4 ? drainAfterStop(s) : rc;
        }
      if (P->entries[ci].kind != HCRT_ENTRY_CLUSTER_WAIT)
        if (int rc = runEntry(s, ci, hc_threads{0, 0}, true)) {
          s->nextMicro = 0;
          s->lossAccum = 0;
          return rc;
        }
    }
  }
  if (!s->lastMicro) {
    // Forward and backward only: this rank's loss, the gradients summed.
    const float mine = *static_cast<const float *>(s->tensors[P->loss_desc].data);
    s->lossAccum += mine;
    s->nextMicro = s->micro + 1;
    *loss = mine;
    return 0;
  }
  float l = stepLoss(s);
  s->lossAccum = 0;
  s->nextMicro = 0;
  if (s->lossRequest >= 0) {
    if (s->env.allreduce_wait(s->env.comm, s->lossRequest) != 0)
      return -1;
    s->lossRequest = -1;
    --s->pending;
    l = s->lossSum * scale;
  } else if (s->env.world_size > 1) {
    if (!s->env.allreduce_sum_f32 || s->env.allreduce_sum_f32(s->env.comm, &l, 1) != 0)
      return -1;
    l *= scale;
  }
  *loss = l;
  return 0;
}

const char *lastError(const hc_step *s) { return s->error; }

} // namespace

extern "C" {

hc_step *hcrt_step_create(const hcrt_step_program *program, const hc_step_env *env,
                          char *error, size_t error_size) {
  return create(program, env, error, error_size);
}
void hcrt_step_destroy(hc_step *s) { destroy(s); }
int hcrt_step_set_tensor(hc_step *s, const char *name, const void *data, size_t bytes) {
  return setTensor(s, name, data, bytes);
}
int hcrt_step_get_tensor(const hc_step *s, const char *name, void *data, size_t bytes) {
  return getTensor(s, name, data, bytes);
}
int hcrt_step_run(hc_step *s, const void *const *inputs, double *loss) {
  return step(s, inputs, loss);
}
const char *hcrt_step_last_error(const hc_step *s) { return lastError(s); }
size_t hcrt_step_profile(const hc_step *s, hc_call_profile *out, size_t capacity) {
  return getProfile(s, out, capacity);
}
int hcrt_step_set_hyperparameter(hc_step *s, const char *name, double value) {
  return setHyperparameter(s, name, value);
}
int hcrt_step_get_hyperparameter(const hc_step *s, const char *name, double *value) {
  return getHyperparameter(s, name, value);
}
int hcrt_step_evaluate(hc_step *s, const void *const *inputs, double *loss) {
  return evaluate(s, inputs, loss);
}

} // extern "C"
