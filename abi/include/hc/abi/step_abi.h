// The C ABI of a compiled training step (dit_step.so), shared by hc-compile's
// generated code and its hosts (hc-run, tests). Versioned: a host refuses a
// library whose abi_version differs from its own HC_STEP_ABI_VERSION.
//
// One step() call does everything: forward, loss, backward, the gradient
// all-reduce across ranks (through the host's env callbacks) and the
// optimizer update. Contexts hold all mutable state (parameters, optimizer
// state, activations, last gradients); two contexts in one process are
// independent.
#ifndef HC_ABI_STEP_ABI_H
#define HC_ABI_STEP_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// 6: a library calls the runtime's ops by their ABI too, and
// attention_grad's operands changed order (dOut, out, lse, then the forward's
// inputs) when cross-attention joined; a library of 5 would feed it garbage.
// 7: the step program (step_program.h) gained the kept panels' limit; the
// runtime would read a library of 6's table past its end.
// 8: buffers may be bf16 (HCRT_BF16, hc-bf16-storage): a runtime of 7 would
// read their descriptors' dtype 5 as a 4-byte type.
// 9: the step program gained entry_condition (calls that run only when the
// step reduces gradients per bucket, or only when it does not: CFTP's
// per-cluster partial weight gradients); a runtime of 8 would run both.
// 10: the step program gained arena_contents (what --check-finite calls an
// unnamed byte of each arena); a runtime of 9 would read its table shifted.
#define HC_STEP_ABI_VERSION 10

// What the host gives a step: its place in the job and the collective.
typedef struct hc_step_env {
  int32_t rank;        // 0-based
  int32_t world_size;  // ranks in the job; 1: no communication at all
  // In-place sum of n floats over all ranks (e.g. MPI_Allreduce). Returns 0
  // on success. May be NULL when world_size == 1.
  int (*allreduce_sum_f32)(void *comm, float *data, size_t n);
  void *comm;
  // Asynchronous form for gradient buckets (version 2): start returns a
  // request id >= 0 (or -1 on failure) and the sum is in `data` once wait
  // returns 0. Requests complete in the order started; the step starts each
  // bucket as soon as backward has written it and waits right before the
  // optimizer reads it. Both NULL: the step sums each bucket with
  // allreduce_sum_f32 where it would have started it.
  int64_t (*allreduce_start_f32)(void *comm, float *data, size_t n);
  int (*allreduce_wait)(void *comm, int64_t request);
  // Version 3: non-zero asks the step to check every float tensor a kernel
  // writes (activations, gradients, updated parameters and moments) and to
  // stop at the first NaN or infinity: step() then returns -2 and
  // last_error() names the kernel, its ONNX node, the phase and the element.
  int32_t check_finite;
  // Version 3: advances started requests without blocking; the step calls
  // it between kernels while any is outstanding (an MPI without
  // asynchronous progress moves them only inside MPI calls). May be NULL.
  // With the asynchronous callbacks the loss is summed by one more request,
  // started right after the forward pass and waited for at the end.
  void (*allreduce_progress)(void *comm);
  // Version 3: non-zero makes the step time every call (get_profile).
  int32_t profile;
  // Version 4, preemption (hc-run --checkpoint-on): `host` is passed back to
  // the two callbacks below; either may be NULL (a step then runs to its end).
  void *host;
  // Polled by the host stream between calls, cheap and local: non-zero asks
  // the step to abandon itself. From then on it runs no kernel, but still
  // makes the collectives and tier copies its schedule holds before the
  // update gate, so every rank reaches the gate.
  int32_t (*abandon_requested)(void *host);
  // The update gate: called once per step, right before the first call that
  // writes a parameter or optimizer state, by every rank at the same place
  // of the schedule; the host makes it a collective. `abandoned`: this rank
  // abandoned the step. Returns 0 to go on, 1 to stop (step() then waits for
  // what it started and returns -4, parameters and optimizer state exactly
  // as before the call), or -1 when the collective failed.
  int32_t (*update_gate)(void *host, int32_t abandoned);
} hc_step_env;

// One call of the step's schedule, profiled (version 3).
typedef struct hc_call_profile {
  const char *kernel;  // runtime kernel ("linear", ...), or "allreduce_start"
                       // / "allreduce_wait" for a gradient bucket
  const char *where;   // "kernel linear (forward) of ONNX node '...'"
  int64_t calls;       // runs since the context was created
  double seconds;      // their total wall time
  double flops;        // per run, as the compiler counts them (0: none)
  double bytes;        // per run: operands read plus results written
} hc_call_profile;

typedef struct hc_step hc_step;  // opaque context

typedef struct hc_step_api {
  uint32_t abi_version;  // HC_STEP_ABI_VERSION the library was built with
  // JSON description of the compiled model:
  // { "abi_version", "batch_per_rank",
  //   "inputs": [{"name","dtype","shape"}],      (per-rank shapes, step order)
  //   "parameters": [{"name","shape","trainable"}], "frozen": [names],
  //   "state": [{"name","dtype","shape"}],        (optimizer state)
  //   "gradients": [names], "optimizer": {"name", hyper-parameters...},
  //   "monitors": [{"name","dtype","shape"}] (version 5: what a step
  //     computes for the host to log, read with get_tensor: "grad_norm",
  //     the global gradient norm before clipping),
  //   "hyperparameters": {"lr": 1e-4, "weight_decay": 0, ...} (version 5:
  //     what set_hyperparameter accepts, with the compiled values),
  //   "flops_per_step", "memory_plan": {...}, "buckets": [...],
  //   "init_file": "<file next to the library>", "dit_config": {...} }
  const char *description_json;
  // Creates a context: parameters zero until set_tensor; optimizer state
  // zero (step 0). NULL with a one-line message in `error` on failure.
  hc_step *(*create)(const hc_step_env *env, char *error, size_t error_size);
  void (*destroy)(hc_step *step);
  // Tensors by name: a parameter "NAME", state "adamw.m:NAME", "adamw.v:NAME",
  // "adamw.step" (int64) for AdamW, "adam.V:NAME", "adam.H:NAME", "adam.T"
  // (int64) for ONNX Adam, or (get only) "grad:NAME", the last step's averaged
  // gradient (clipped, when max_grad_norm clipped it), and the monitors. `bytes` must equal the tensor's size. Returns 0, or -1 for an
  // unknown name or a size mismatch.
  int (*set_tensor)(hc_step *step, const char *name, const void *data,
                    size_t bytes);
  int (*get_tensor)(const hc_step *step, const char *name, void *data,
                    size_t bytes);
  // One training step. inputs[i] is the i-th input of the description
  // (this rank's rows, contiguous, its dtype). *loss = the loss averaged over
  // ranks. Returns 0, -1 when the collective failed, -2 when check_finite
  // found a non-finite value (last_error says where), -3 when a tier copy
  // (the disk tier's I/O) failed; the step's results are then not to be
  // used. -4 (version 4): stopped at the update gate; parameters and
  // optimizer state are the previous step's, untouched.
  int (*step)(hc_step *step, const void *const *inputs, double *loss);
  // Version 3: one line about the last failure of step(), "" if none.
  const char *(*last_error)(const hc_step *step);
  // Version 3: with env.profile set, the profile of each call in schedule
  // order; writes at most `capacity` entries and returns how many calls the
  // schedule has.
  size_t (*get_profile)(const hc_step *step, hc_call_profile *out,
                        size_t capacity);
  // Version 5: a hyperparameter of the compiled step (the description's
  // "hyperparameters": the optimizer's "lr" and "weight_decay", clipping's
  // "max_grad_norm" (0: off), and gradient accumulation's "micro_batches"
  // K and "micro_batch" i: with K > 1 a step() call whose i < K - 1 runs
  // forward and backward only, adding its gradients to an accumulator, and
  // the call with i = K - 1 all-reduces the mean over the K and updates;
  // *loss of the earlier calls is this rank's own), used by
  // every later step() of this context until set again; a new context
  // starts from the compiled values. Learning-rate schedules call it before
  // each step. Returns 0, or -1 for a name the step does not have or a
  // value that is not finite.
  int (*set_hyperparameter)(hc_step *step, const char *name, double value);
  int (*get_hyperparameter)(const hc_step *step, const char *name,
                            double *value);
  // Version 5: the forward pass and loss alone (validation), on the same
  // inputs as step(): nothing is updated, nothing is communicated; *loss
  // is this rank's loss (the host averages). Returns 0, -1 (called between
  // a step's micro-batches) or -2 (check_finite).
  int (*evaluate)(hc_step *step, const void *const *inputs, double *loss);
} hc_step_api;

// The one symbol a step library exports.
const hc_step_api *hc_step_get_api(void);
typedef const hc_step_api *(*hc_step_get_api_fn)(void);

#ifdef __cplusplus
}
#endif

#endif // HC_ABI_STEP_ABI_H
