// The kernel registry read from abi/include/hc/abi/kernels.def.
#include "hc/Schedule/KernelRegistry.h"
#include "hc/abi/tensor.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"

#include <atomic>

using namespace mlir;

namespace hc::schedule {

static_assert(sizeof(hcrt_attrs::ints) / sizeof(int64_t) == kMaxAttrInts &&
                  sizeof(hcrt_attrs::floats) / sizeof(double) == kMaxAttrFloats,
              "KernelRegistry.h's limits are hcrt_attrs' sizes");

namespace {
struct Bf16Slots {
  const char *name;
  unsigned ins, outs;
};
} // namespace

// kernels.def's HCRT_BF16_SLOTS rows onto the entries they name.
KernelRegistry::KernelRegistry(std::vector<KernelInfo> kernels)
    : all(std::move(kernels)) {
  static const Bf16Slots slots[] = {
#define HCRT_KERNEL(...)
#define HCRT_BF16_SLOTS(name, ins, outs) {#name, ins, outs},
#include "hc/abi/kernels.def"
#undef HCRT_BF16_SLOTS
#undef HCRT_KERNEL
  };
  for (const Bf16Slots &s : slots)
    for (KernelInfo &k : all)
      if (StringRef(k.name) == s.name)
        k.bf16Ins = s.ins, k.bf16Outs = s.outs;
}

bool KernelRegistry::bf16Allowed(const KernelInfo &k, DictionaryAttr attrs, bool output,
                                 unsigned index) {
  if (index >= 32 || !(((output ? k.bf16Outs : k.bf16Ins) >> index) & 1))
    return false;
  if (output)
    return true;
  auto precision = attrs ? attrs.getAs<StringAttr>("precision") : StringAttr();
  return precision && precision.getValue() == "bf16";
}

namespace {
std::vector<KernelInfo> &extensionKernels() {
  static std::vector<KernelInfo> kernels;
  return kernels;
}
std::atomic<bool> registryFixed{false};
} // namespace

void KernelRegistry::addExtensionKernels(std::vector<KernelInfo> kernels) {
  if (registryFixed)
    llvm::report_fatal_error("kernel registry extended after its first use");
  for (KernelInfo &k : kernels) {
    k.extension = true;
    extensionKernels().push_back(std::move(k));
  }
}

const KernelRegistry &KernelRegistry::active() {
  static const KernelRegistry registry = [] {
    std::vector<KernelInfo> all = {
#include "hc/Schedule/KernelInfoMacros.h"
#include "hc/abi/kernels.def"
#include "hc/Schedule/KernelInfoMacrosEnd.h"
    };
    for (const KernelInfo &k : extensionKernels()) {
      for (const KernelInfo &known : all)
        if (StringRef(known.name) == k.name)
          llvm::report_fatal_error(Twine("kernel '") + k.name +
                                   "' is registered twice");
      all.push_back(k);
    }
    registryFixed = true;
    return KernelRegistry(std::move(all));
  }();
  return registry;
}

const KernelInfo *KernelRegistry::lookup(llvm::StringRef name) const {
  for (const KernelInfo &k : all)
    if (name == k.name)
      return &k;
  return nullptr;
}

static const char *kindName(AttrSlotKind kind) {
  switch (kind) {
  case AttrSlotKind::Int:
    return "an integer";
  case AttrSlotKind::Ints:
    return "an i64 array";
  case AttrSlotKind::Float:
  case AttrSlotKind::Hyper:
    return "a float";
  case AttrSlotKind::Flag:
    return "a string";
  case AttrSlotKind::Unused:
    return "any attribute";
  }
  return "?";
}

static bool hasKind(Attribute a, AttrSlotKind kind) {
  switch (kind) {
  case AttrSlotKind::Int:
    return isa<IntegerAttr>(a);
  case AttrSlotKind::Ints:
    return isa<DenseI64ArrayAttr>(a);
  case AttrSlotKind::Float:
  case AttrSlotKind::Hyper:
    return isa<FloatAttr>(a);
  case AttrSlotKind::Flag:
    return isa<StringAttr>(a);
  case AttrSlotKind::Unused:
    return true;
  }
  return false;
}

LogicalResult KernelRegistry::verifyAttrs(
    const KernelInfo &k, DictionaryAttr attrs,
    llvm::function_ref<InFlightDiagnostic()> emitError) {
  for (NamedAttribute na : attrs) {
    auto slot = llvm::find_if(
        k.attrs, [&](const AttrSlot &s) { return na.getName() == s.key; });
    if (slot == k.attrs.end()) {
      std::string keys;
      for (const AttrSlot &s : k.attrs)
        keys += (keys.empty() ? "" : ", ") + std::string(s.key);
      return emitError() << "kernel '" << k.name << "' has no attribute '"
                         << na.getName().getValue() << "' ("
                         << (k.extension ? "its registry entry" : "kernels.def") << ": "
                         << (keys.empty() ? "none" : keys) << ")";
    }
    if (!hasKind(na.getValue(), slot->kind))
      return emitError() << "kernel '" << k.name << "': attribute '"
                         << slot->key << "' must be " << kindName(slot->kind);
    // A flag names its two values: any other string would pack as the
    // second one and run silently as something it does not say.
    if (slot->kind == AttrSlotKind::Flag) {
      StringRef v = cast<StringAttr>(na.getValue()).getValue();
      if (v != slot->flagValue && (!slot->flagOther || v != slot->flagOther))
        return emitError() << "kernel '" << k.name << "': attribute '"
                           << slot->key << "' must be \"" << slot->flagValue
                           << "\" or \"" << (slot->flagOther ? slot->flagOther : "")
                           << "\", got \"" << v << "\"";
    }
  }
  for (const AttrSlot &s : k.attrs)
    if ((s.kind == AttrSlotKind::Int || s.kind == AttrSlotKind::Ints ||
         s.kind == AttrSlotKind::Float || s.kind == AttrSlotKind::Hyper) &&
        !attrs.get(s.key))
      return emitError() << "kernel '" << k.name << "' needs attribute '"
                         << s.key << "' (" << kindName(s.kind) << ")";
  PackedAttrs p = pack(k, attrs);
  if (p.ints.size() > kMaxAttrInts || p.floats.size() > kMaxAttrFloats)
    return emitError() << "kernel '" << k.name << "': " << p.ints.size()
                       << " integer and " << p.floats.size()
                       << " float attribute values, hcrt_attrs holds "
                       << kMaxAttrInts << " and " << kMaxAttrFloats;
  return success();
}

PackedAttrs KernelRegistry::pack(const KernelInfo &k, DictionaryAttr attrs) {
  PackedAttrs p;
  for (const AttrSlot &s : k.attrs) {
    Attribute a = attrs.get(s.key);
    switch (s.kind) {
    case AttrSlotKind::Int:
      if (auto x = dyn_cast_or_null<IntegerAttr>(a))
        p.ints.push_back(x.getInt());
      break;
    case AttrSlotKind::Ints:
      if (auto x = dyn_cast_or_null<DenseI64ArrayAttr>(a))
        p.ints.insert(p.ints.end(), x.asArrayRef().begin(),
                      x.asArrayRef().end());
      break;
    case AttrSlotKind::Float:
    case AttrSlotKind::Hyper:
      if (auto x = dyn_cast_or_null<FloatAttr>(a))
        p.floats.push_back(x.getValueAsDouble());
      break;
    case AttrSlotKind::Flag: {
      auto x = dyn_cast_or_null<StringAttr>(a);
      p.ints.push_back(!x ? s.flagAbsent : x.getValue() == s.flagValue);
      break;
    }
    case AttrSlotKind::Unused:
      break;
    }
  }
  return p;
}

std::vector<HyperSlot> KernelRegistry::hyperSlots(const KernelInfo &k) {
  std::vector<HyperSlot> slots;
  unsigned floats = 0;
  for (const AttrSlot &s : k.attrs) {
    if (s.kind == AttrSlotKind::Hyper)
      slots.push_back({s.key, floats});
    floats += s.kind == AttrSlotKind::Float || s.kind == AttrSlotKind::Hyper;
  }
  return slots;
}

double KernelRegistry::flops(const KernelInfo &k,
                             llvm::ArrayRef<llvm::ArrayRef<int64_t>> ins,
                             llvm::ArrayRef<llvm::ArrayRef<int64_t>> outs) {
  auto numel = [](llvm::ArrayRef<int64_t> s) {
    double n = 1;
    for (int64_t d : s)
      n *= static_cast<double>(d);
    return n;
  };
  auto last = [](llvm::ArrayRef<int64_t> s) {
    return s.empty() ? 1.0 : static_cast<double>(s.back());
  };
  switch (k.flops) {
  case FlopRule::NONE:
    return 0;
  case FlopRule::LINEAR:  // y [M,out] = x [M,in] w [out,in]^T: 2 M out in
    return 2 * numel(outs[0]) * last(ins[1]);
  case FlopRule::LINEAR_GRAD_INPUT:  // dx [M,in] = dy [M,out] w: 2 M in out
    return 2 * numel(outs[0]) * last(ins[0]);
  case FlopRule::LINEAR_GRAD_WEIGHT:  // dw = dy^T x: 2 M out in
    return 2 * numel(ins[0]) * last(ins[1]);
  case FlopRule::MATMUL:
    return 2 * numel(outs[0]) * last(ins[0]);
  case FlopRule::ATTENTION:
  case FlopRule::ATTENTION_GRAD: {
    // Q K^T and P V, 2 B N L D each; the backward 2.5x that. The forward's
    // inputs (qkv [B, N, 3D], or q [B, N, D], k [B, L, D], v) follow the
    // backward's dOut, out and lse.
    const std::size_t first = k.flops == FlopRule::ATTENTION ? 0 : 3;
    if (ins.size() <= first || ins[first].size() < 3)
      return 0;
    const auto &q = ins[first];
    const bool packed = ins.size() == first + 1;
    const double D = packed ? q[2] / 3 : q[2];
    const double L = packed ? q[1] : ins[first + 1].size() >= 2 ? ins[first + 1][1] : 0;
    const double base = 4.0 * q[0] * q[1] * L * D;
    return k.flops == FlopRule::ATTENTION ? base : 2.5 * base;
  }
  }
  return 0;
}

} // namespace hc::schedule
