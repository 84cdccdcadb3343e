// Defines kernels.def's macros so that its entries read as
// hc::schedule::KernelInfo initializers. No include guard: include it
// before the .def file(s) inside a braced list, KernelInfoMacrosEnd.h after.
// (HCRT_KERNEL is variadic: the slots' own commas arrive as arguments.)
#define HCRT_KERNEL(name, flops, ...)                                          \
  ::hc::schedule::KernelInfo{#name, ::hc::schedule::FlopRule::flops,           \
                             {__VA_ARGS__}},
#define HCRT_INT(key)                                                          \
  ::hc::schedule::AttrSlot{#key, ::hc::schedule::AttrSlotKind::Int},
#define HCRT_INTS(key)                                                         \
  ::hc::schedule::AttrSlot{#key, ::hc::schedule::AttrSlotKind::Ints},
#define HCRT_FLOAT(key)                                                        \
  ::hc::schedule::AttrSlot{#key, ::hc::schedule::AttrSlotKind::Float},
#define HCRT_FLAG(key, value, other, absent)                                   \
  ::hc::schedule::AttrSlot{#key, ::hc::schedule::AttrSlotKind::Flag, #value,   \
                           absent, #other},
#define HCRT_UNUSED(key)                                                       \
  ::hc::schedule::AttrSlot{#key, ::hc::schedule::AttrSlotKind::Unused},
