// The runtime's kernel registry (abi/include/hc/abi/kernels.def) as
// the compiler reads it: names, attribute layouts, FLOP rules, CFTP split
// rules and effects. hcs.call's verifier, the emitter's attribute packing,
// the profile's FLOP counts, hc-cftp's cuts, hc-automem's recomputation and
// the step's update gate all come from here, so a kernel is described once.
#ifndef HC_SCHEDULE_KERNELREGISTRY_H
#define HC_SCHEDULE_KERNELREGISTRY_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hc::schedule {

// Hyper: a Float whose value is the default of a step hyperparameter the
// host may change per step (kernels.def's HCRT_HYPER).
enum class AttrSlotKind { Int, Ints, Float, Hyper, Flag, Unused };

struct AttrSlot {
  const char *key;
  AttrSlotKind kind;
  const char *flagValue = nullptr;  // Flag: the string that packs as 1
  int flagAbsent = 0;               // Flag: the value when missing
  const char *flagOther = nullptr;  // Flag: the other accepted string (packs as 0)
};

enum class FlopRule {
  NONE,
  LINEAR,
  LINEAR_GRAD_INPUT,
  LINEAR_GRAD_WEIGHT,
  MATMUL,
  ATTENTION,
  ATTENTION_GRAD
};

// How hc-cftp may cut one call across clusters (kernels.def's split column;
// the cut itself is passes/lib/CftpRules.cpp's planSplit).
enum class SplitRule {
  None,      // runs whole (a scalar result, per-call sample numbering, ...)
  Bcast,     // NumPy broadcasting: out dim 0 rows; an input of the output's
             // rank with that dim is cut too, any other is read whole
  Lead,      // dim 0 of every ranked operand is the sample: all cut
  Rows,      // dim 0 of the inputs in `mask` and of every output
  Features,  // linear_grad_weight: dw's rows = dy's last dim; x read whole
  Reduce,    // the first kept axis of the input, and of the output
  Matmul,    // NumPy matmul: A's rows (2-D) or the batch dim 0
};

struct KernelSplit {
  SplitRule rule = SplitRule::None;
  unsigned mask = 0;         // Rows: inputs cut along dim 0
  bool axisNotFirst = false;  // the `axis` attribute must not be dim 0
};

// What running a call again, or elsewhere, would change (kernels.def's
// effect column): Pure calls may be recomputed; Random draws are keyed by
// the call and Optimizer calls update the training state in place.
enum class KernelEffect { Pure, Random, Optimizer };

struct KernelInfo {
  const char *name;
  FlopRule flops;
  KernelSplit split;
  KernelEffect effect;
  std::vector<AttrSlot> attrs;
  // Set for entries a compiler extension added (not in kernels.def): the
  // step library declares their hcrt_op_ bodies itself and links their
  // library.
  bool extension = false;
  // Inputs / outputs that may be bf16 buffers (kernels.def's
  // HCRT_BF16_SLOTS), bit i for operand i.
  unsigned bf16Ins = 0, bf16Outs = 0;
  // Whether the layout has a slot `key` (e.g. the GEMM class's "precision").
  bool hasSlot(llvm::StringRef key) const {
    for (const AttrSlot &s : attrs)
      if (key == s.key)
        return true;
    return false;
  }
};

// The hcrt_attrs a call passes: ints then floats, in the layout's order.
struct PackedAttrs {
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

// A hyperparameter slot of a call: `key` is floats[floatIndex].
struct HyperSlot {
  const char *key;
  unsigned floatIndex;
};

// Hard limits of hcrt_attrs (graph_ops.h).
constexpr size_t kMaxAttrInts = 16, kMaxAttrFloats = 8;

// A set of kernels. active() is the one every pass reads: kernels.def,
// then the entries compiler extensions added (hc/Compiler/Extension.h);
// tests build others from kernels.def plus entries of their own.
class KernelRegistry {
public:
  explicit KernelRegistry(std::vector<KernelInfo> kernels);
  static const KernelRegistry &active();
  // Adds an extension's entries (read from its .def file with
  // KernelInfoMacros.h). Only before the first active(): the registry is
  // fixed once a pass has read it. A name already known is a fatal error.
  static void addExtensionKernels(std::vector<KernelInfo> kernels);

  const KernelInfo *lookup(llvm::StringRef name) const;
  // Whether a call of `k` with these attributes may have bf16 operand
  // `index` of its inputs (`output` false) or outputs: the slot is in the
  // kernel's HCRT_BF16_SLOTS, and an input's call has precision "bf16".
  static bool bf16Allowed(const KernelInfo &k, mlir::DictionaryAttr attrs, bool output,
                          unsigned index);
  llvm::ArrayRef<KernelInfo> kernels() const { return all; }

  // Whether `attrs` fit `k`'s layout: every Int/Ints/Float slot present with
  // that type, Flag a string, no key the layout does not name, and the
  // packed sizes within hcrt_attrs. The message names the kernel and key.
  static mlir::LogicalResult
  verifyAttrs(const KernelInfo &k, mlir::DictionaryAttr attrs,
              llvm::function_ref<mlir::InFlightDiagnostic()> emitError);
  // Packs verified attributes.
  static PackedAttrs pack(const KernelInfo &k, mlir::DictionaryAttr attrs);
  // k's HCRT_HYPER slots with their places among the packed floats.
  static std::vector<HyperSlot> hyperSlots(const KernelInfo &k);
  // FLOPs of one call by k's rule, from its operand and result shapes.
  static double flops(const KernelInfo &k,
                      llvm::ArrayRef<llvm::ArrayRef<int64_t>> insShapes,
                      llvm::ArrayRef<llvm::ArrayRef<int64_t>> outsShapes);

private:
  std::vector<KernelInfo> all;
};

} // namespace hc::schedule

// Reading kernels.def (and a test's own entries) into KernelInfo
// initializers: include KernelInfoMacros.h, then the .def file(s), then
// KernelInfoMacrosEnd.h, inside a braced list (KernelRegistry.cpp).

#endif // HC_SCHEDULE_KERNELREGISTRY_H
