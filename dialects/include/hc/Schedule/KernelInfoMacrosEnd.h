// Undefines what KernelInfoMacros.h defined. No include guard.
#undef HCRT_KERNEL
#undef HCRT_INT
#undef HCRT_INTS
#undef HCRT_FLOAT
#undef HCRT_FLAG
#undef HCRT_UNUSED
