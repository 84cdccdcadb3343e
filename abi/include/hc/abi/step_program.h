// A compiled training step as data: the tables hc-compile emits into a
// step library (--emit=cpp shows them) and libhcrt's executor
// (runtime/src/exec/step_executor.cpp) runs. The generated library holds only
// what is specific to its graph: these tables, its constants and the
// kernels it calls; it hands the tables to hcrt_step_create and exports the
// step ABI (step_abi.h) with the executor's entry points.
#ifndef HC_ABI_STEP_PROGRAM_H
#define HC_ABI_STEP_PROGRAM_H

#include "hc/abi/step_abi.h"
#include "hc/abi/tensor.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// What a tier copy moves (an HCRT_ENTRY_COPY_START's direction), for the
// copy engine (runtime: hc/runtime/copy_engine.h) and its statistics.
enum {
  HCRT_COPY_TO_SLOW = 0,    // fast -> DRAM (memcpy)
  HCRT_COPY_FROM_SLOW = 1,  // DRAM -> fast (memcpy)
  HCRT_COPY_TO_DISK = 2,    // memory -> the disk tier file at an offset
  HCRT_COPY_FROM_DISK = 3,  // the disk tier file -> memory
  HCRT_COPY_KINDS = 4
};

// One planned slice of an arena to first-touch from its owning cluster
// (hcs.placement; the runtime's hcrt_first_touch in hc/runtime/placement.h).
typedef struct {
  int32_t arena;   // index into the step's arenas
  int32_t owner;   // the owning cluster: index among this rank's clusters
  int32_t numa;    // its planned home NUMA node (OS index; -1: none)
  int64_t offset;  // bytes from the arena's start, page-aligned
  int64_t bytes;
} hcrt_touch_slice;

// A tensor of the plan: a window of an arena (arena < num_arenas), of
// constant `base` (arena == const_arena) or of step input `base` (arena ==
// input_arena, bound at each step).
typedef struct hcrt_desc {
  int32_t arena, base, dtype, rank;
  int64_t byte_offset;
  int64_t shape[HCRT_MAX_RANK], strides[HCRT_MAX_RANK];
} hcrt_desc;

// What one entry of the plan does. `kernel`, `first`, `attrs` mean, per kind:
typedef enum hcrt_entry_kind {
  HCRT_ENTRY_KERNEL = 0,           // kernels[kernel](operands[first..]), attrs row
  HCRT_ENTRY_ALLREDUCE_START = 1,  // bucket `kernel`: operands[first] is its slice
  HCRT_ENTRY_ALLREDUCE_WAIT = 2,   // bucket `kernel`: the mean is ready after it
  HCRT_ENTRY_CLUSTER_WAIT = 3,     // wait until cluster `kernel` finished `first` entries
  HCRT_ENTRY_COPY_START = 4,       // tier copy `attrs`, direction `kernel` (HCRT_COPY_*)
  HCRT_ENTRY_COPY_WAIT = 5,        // tier copy `attrs` is complete
} hcrt_entry_kind;

// A cluster wait's `nin`: what it orders. A scoped wait (hcs.cluster_wait's
// `only_for`) stands right before the one entry of its stream it orders, an
// entry that does nothing in some steps; the executor skips the wait then,
// and the planner orders every later entry by waits of its own.
typedef enum hcrt_wait_scope {
  HCRT_WAIT_ORDERS_ALL = 0,         // every later entry of its stream
  HCRT_WAIT_ORDERS_ALLREDUCE = 1,   // the next, a gradient all-reduce start (nothing
                                    // with one rank or before the last micro-batch)
  HCRT_WAIT_ORDERS_ACCUMULATE = 2,  // the next, a grad_accumulate call (nothing with
                                    // one micro-batch)
  HCRT_WAIT_ORDERS_IF_REDUCED = 3,  // the next, a call of HCRT_RUNS_IF_REDUCED
  HCRT_WAIT_ORDERS_IF_LOCAL = 4,    // the next, a call of HCRT_RUNS_IF_LOCAL
} hcrt_wait_scope;

// When a kernel entry runs (entry_condition; hcs.call's `only_if`). A step
// "reduces" its gradients per bucket when another rank or micro-batch
// shares them: its buckets' grad_accumulate and all-reduce then do work.
// CFTP folds per-cluster partial weight gradients before those (if
// reduced), or once before the update (if local), never both.
typedef enum hcrt_call_condition {
  HCRT_RUNS_ALWAYS = 0,
  HCRT_RUNS_IF_REDUCED = 1,  // world_size > 1 or more than one micro-batch
  HCRT_RUNS_IF_LOCAL = 2,    // one rank and one micro-batch
} hcrt_call_condition;

typedef struct hcrt_entry {
  int32_t kind, kernel, first, nin, nout, attrs, cluster;
} hcrt_entry;

// A tensor the host reads or writes by name (parameters, state, gradients).
typedef struct hcrt_named {
  const char *name;
  int32_t arena;
  int64_t byte_offset, bytes;
} hcrt_named;

// Hyperparameter `hyper` sets packed float `float_index` of attrs row `attrs`.
typedef struct hcrt_hyper_binding {
  int32_t attrs, float_index, hyper;
} hcrt_hyper_binding;

typedef struct hcrt_step_program {
  const char *description;  // the step ABI's description_json
  // Arenas: bytes each (0: not in memory), and the pseudo-arenas of descs.
  int32_t num_arenas, input_arena, const_arena, accum_arena;
  const int64_t *arena_bytes;
  // Per arena, what a byte of it that no named tensor covers holds, for
  // messages ("an activation", "a partial weight gradient ...").
  const char *const *arena_contents;
  // First touch: the plan's slices and, per slice and local rank, its node.
  const hcrt_touch_slice *touch;
  size_t num_touch;
  const int32_t *touch_numa;
  size_t num_touch_numa;
  int32_t ranks_per_node;
  const void *const *constants;
  const hcrt_kernel_fn *kernels;
  const char *const *kernel_names;
  const hcrt_desc *descs;
  size_t num_descs;
  const int32_t *operands;  // desc indices of every entry's operands (-1: absent)
  const hcrt_attrs *attrs;
  size_t num_attrs;
  int32_t num_hypers;
  const char *const *hyper_names;
  const double *hyper_defaults;
  const hcrt_hyper_binding *hyper_bindings;
  size_t num_hyper_bindings;
  const hcrt_entry *entries;
  size_t num_entries;
  // Per entry: where it is (messages), its kernel for the profile, FLOPs and
  // bytes per run.
  const char *const *entry_where;
  const char *const *entry_kernel;
  const double *entry_flops;
  const double *entry_bytes;
  const int8_t *entry_condition;  // hcrt_call_condition per entry
  const hcrt_named *named;
  size_t num_named;
  int32_t loss_desc;     // the loss scalar
  size_t loss_call;      // the entry writing it
  size_t gate_call;      // the update gate: first entry writing parameters or state
  size_t update_call;    // the update phase's first entry
  int32_t num_buckets;   // gradient all-reduce buckets
  int32_t num_copies;    // tier copies per step
  int64_t disk_bytes;    // the disk tier's size (0: none)
  const char *offload_dir;
  int32_t num_clusters;  // CFTP streams
  // The GEMMs' kept panels of constant weights (hc-constant-weights), all
  // packed from arena kept_panel_arena, hold at most kept_panel_bytes: the
  // room the memory plan left them (hcrt_gemm_limit_packed over the arena).
  // kept_panel_bytes -1: no limit of the plan's (libhcrt's own cap only).
  int32_t kept_panel_arena;
  int64_t kept_panel_bytes;
} hcrt_step_program;

// The executor. hcrt_step_create reads `program` for the context's life;
// the other entry points have the step ABI's signatures and meanings.
hc_step *hcrt_step_create(const hcrt_step_program *program, const hc_step_env *env,
                          char *error, size_t error_size);
void hcrt_step_destroy(hc_step *step);
int hcrt_step_set_tensor(hc_step *step, const char *name, const void *data, size_t bytes);
int hcrt_step_get_tensor(const hc_step *step, const char *name, void *data, size_t bytes);
int hcrt_step_run(hc_step *step, const void *const *inputs, double *loss);
const char *hcrt_step_last_error(const hc_step *step);
size_t hcrt_step_profile(const hc_step *step, hc_call_profile *out, size_t capacity);
int hcrt_step_set_hyperparameter(hc_step *step, const char *name, double value);
int hcrt_step_get_hyperparameter(const hc_step *step, const char *name, double *value);
int hcrt_step_evaluate(hc_step *step, const void *const *inputs, double *loss);

#ifdef __cplusplus
}
#endif

#endif // HC_ABI_STEP_PROGRAM_H
