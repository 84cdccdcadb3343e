// Defines kernels.def's macros so that its entries read as
// hc::schedule::KernelInfo initializers. No include guard: include it
// before the .def file(s) inside a braced list, KernelInfoMacrosEnd.h after.
// (HCRT_KERNEL is variadic: the slots' own commas arrive as arguments.)
#define HCRT_KERNEL(name, flops, split, effect, ...)                           \
  ::hc::schedule::KernelInfo{#name, ::hc::schedule::FlopRule::flops,           \
                             HCRT_SPLIT_##split, HCRT_EFFECT_##effect,         \
                             {__VA_ARGS__}},
// The split and effect columns; an unknown word does not compile.
#define HCRT_SPLIT_(rule, mask, axis)                                          \
  ::hc::schedule::KernelSplit{::hc::schedule::SplitRule::rule, mask, axis}
#define HCRT_SPLIT_WHOLE HCRT_SPLIT_(None, 0, false)
#define HCRT_SPLIT_BCAST HCRT_SPLIT_(Bcast, 0, false)
#define HCRT_SPLIT_BCAST_AXIS HCRT_SPLIT_(Bcast, 0, true)
#define HCRT_SPLIT_LEAD HCRT_SPLIT_(Lead, 0, false)
#define HCRT_SPLIT_LEAD_AXIS HCRT_SPLIT_(Lead, 0, true)
#define HCRT_SPLIT_ROWS(mask) HCRT_SPLIT_(Rows, mask, false)
#define HCRT_SPLIT_ROWS_AXIS(mask) HCRT_SPLIT_(Rows, mask, true)
#define HCRT_SPLIT_FEATURES HCRT_SPLIT_(Features, 0, false)
#define HCRT_SPLIT_REDUCE HCRT_SPLIT_(Reduce, 0, false)
#define HCRT_SPLIT_MATMUL HCRT_SPLIT_(Matmul, 0, false)
#define HCRT_EFFECT_PURE ::hc::schedule::KernelEffect::Pure
#define HCRT_EFFECT_RANDOM ::hc::schedule::KernelEffect::Random
#define HCRT_EFFECT_OPTIMIZER ::hc::schedule::KernelEffect::Optimizer
#define HCRT_INT(key)                                                          \
  ::hc::schedule::AttrSlot{#key, ::hc::schedule::AttrSlotKind::Int},
#define HCRT_INTS(key)                                                         \
  ::hc::schedule::AttrSlot{#key, ::hc::schedule::AttrSlotKind::Ints},
#define HCRT_FLOAT(key)                                                        \
  ::hc::schedule::AttrSlot{#key, ::hc::schedule::AttrSlotKind::Float},
#define HCRT_HYPER(key)                                                        \
  ::hc::schedule::AttrSlot{#key, ::hc::schedule::AttrSlotKind::Hyper},
#define HCRT_FLAG(key, value, other, absent)                                   \
  ::hc::schedule::AttrSlot{#key, ::hc::schedule::AttrSlotKind::Flag, #value,   \
                           absent, #other},
#define HCRT_UNUSED(key)                                                       \
  ::hc::schedule::AttrSlot{#key, ::hc::schedule::AttrSlotKind::Unused},
