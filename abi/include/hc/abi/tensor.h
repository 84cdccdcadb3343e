// The tensor, attribute and thread-range types every kernel call carries:
// shared by the compiler (which lays out attributes and emits descriptors)
// and the runtime (whose kernels read them). Plain C.
#ifndef HC_ABI_TENSOR_H
#define HC_ABI_TENSOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// A range of the runtime's thread team (hc/runtime/kernels.h says how
// kernels run on it).
typedef struct hc_threads {
  int32_t first;  // first team thread
  int32_t count;  // number of team threads; <= 0: all from `first` on
} hc_threads;

#define HCRT_MAX_RANK 8

// HCRT_BF16: bfloat16 storage (the upper 16 bits of a float32, rounded to
// nearest even), only where kernels.def's HCRT_BF16_SLOTS allow it: the
// activations that only bf16 GEMMs read (hc-bf16-storage).
enum {
  HCRT_F32 = 0,
  HCRT_F64 = 1,
  HCRT_I64 = 2,
  HCRT_I32 = 3,
  HCRT_I1 = 4, /* uint8 0/1 */
  HCRT_BF16 = 5
};

// Bytes of one element of `dtype`.
static inline int32_t hcrt_dtype_bytes(int32_t dtype) {
  return dtype == HCRT_F64 || dtype == HCRT_I64 ? 8
         : dtype == HCRT_I1                     ? 1
         : dtype == HCRT_BF16                   ? 2
                                                : 4;
}

typedef struct hcrt_tensor {
  void *data;
  int32_t dtype;
  int32_t rank;
  int64_t shape[HCRT_MAX_RANK];
  int64_t strides[HCRT_MAX_RANK];  // elements; contiguous row-major for outputs
} hcrt_tensor;

// Kernel attributes, by position (each kernel's layout is its row of
// hc/abi/kernels.def). Unused entries are ignored.
typedef struct hcrt_attrs {
  int64_t ints[2 * HCRT_MAX_RANK];
  int32_t num_ints;
  double floats[8];
  int32_t num_floats;
} hcrt_attrs;

typedef void (*hcrt_kernel_fn)(const hcrt_tensor *ins, int32_t nin, hcrt_tensor *outs,
                               int32_t nout, const hcrt_attrs *attrs, hc_threads threads);

#ifdef __cplusplus
}
#endif

#endif // HC_ABI_TENSOR_H
