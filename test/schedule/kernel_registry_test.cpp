// The kernel registry end to end with a throwaway kernel: one entry in
// throwaway_kernel.def (kernels.def's format) and its body are all it
// takes for the compiler side (lookup, attribute verification, hcrt_attrs
// packing, FLOP rule) and the runtime side (a table of entry points built
// from the same X-macro, called with the packed attributes) to know it.
#include "hc/Schedule/KernelRegistry.h"
#include "hc/runtime/graph_ops.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <string>

using namespace hc::schedule;

// The throwaway kernel's body lives in test/extension's kernel library.
extern "C" void hcrt_op_throwaway_axpb(const hcrt_tensor *, int32_t, hcrt_tensor *,
                                       int32_t, const hcrt_attrs *, hc_threads);

namespace {

// The compiler's reading: kernels.def, then the throwaway entry.
const KernelRegistry &withThrowaway() {
  static const KernelRegistry r({
#include "hc/Schedule/KernelInfoMacros.h"
#include "hc/abi/kernels.def"
#include "throwaway_kernel.def"
#include "hc/Schedule/KernelInfoMacrosEnd.h"
  });
  return r;
}

// The runtime's reading: name -> entry point, from the same files.
using OpFn = void (*)(const hcrt_tensor *, int32_t, hcrt_tensor *, int32_t,
                      const hcrt_attrs *, hc_threads);
struct RuntimeEntry {
  const char *name;
  OpFn fn;
};
const RuntimeEntry kRuntimeTable[] = {
#define HCRT_KERNEL(name, flops, split, effect, ...) {#name, hcrt_op_##name},
#include "hc/abi/kernels.def"
#include "throwaway_kernel.def"
#undef HCRT_KERNEL
};

struct KernelRegistryTest : ::testing::Test {
  mlir::MLIRContext ctx;
  mlir::Builder b{&ctx};
  std::string lastError;
  mlir::DictionaryAttr dict(llvm::ArrayRef<mlir::NamedAttribute> attrs) {
    return b.getDictionaryAttr(attrs);
  }
  mlir::NamedAttribute named(const char *k, mlir::Attribute v) {
    return b.getNamedAttr(k, v);
  }
  bool verify(const KernelInfo &k, mlir::DictionaryAttr a) {
    lastError.clear();
    mlir::ScopedDiagnosticHandler h(&ctx, [&](mlir::Diagnostic &d) {
      lastError = d.str();
      return mlir::success();
    });
    return mlir::succeeded(KernelRegistry::verifyAttrs(
        k, a, [&] { return mlir::emitError(b.getUnknownLoc()); }));
  }
};

TEST_F(KernelRegistryTest, ThrowawayKernelIsKnownOnlyWhereItsEntryIsRead) {
  EXPECT_EQ(KernelRegistry::active().lookup("throwaway_axpb"), nullptr);
  const KernelInfo *k = withThrowaway().lookup("throwaway_axpb");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->flops, FlopRule::NONE);
  ASSERT_EQ(k->attrs.size(), 4u);
  EXPECT_STREQ(k->attrs[2].key, "mode");
  EXPECT_EQ(k->attrs[2].kind, AttrSlotKind::Flag);
  // Every builtin kernel is read the same way in both registries.
  EXPECT_EQ(withThrowaway().kernels().size(),
            KernelRegistry::active().kernels().size() + 1);
}

TEST_F(KernelRegistryTest, SplitAndEffectColumnsAreRead) {
  // The throwaway entry's own columns.
  const KernelInfo *t = withThrowaway().lookup("throwaway_axpb");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->split.rule, SplitRule::Bcast);
  EXPECT_EQ(t->effect, KernelEffect::Pure);
  // Builtin entries: each column word becomes its rule, mask and flag.
  const KernelRegistry &r = KernelRegistry::active();
  const KernelInfo *lngrad = r.lookup("layer_norm_grad");
  ASSERT_NE(lngrad, nullptr);
  EXPECT_EQ(lngrad->split.rule, SplitRule::Rows);
  EXPECT_EQ(lngrad->split.mask, 0x3u);
  EXPECT_TRUE(lngrad->split.axisNotFirst);
  EXPECT_EQ(r.lookup("linear_grad_input_gelu")->split.mask, 0x5u);
  EXPECT_EQ(r.lookup("linear_grad_weight")->split.rule, SplitRule::Features);
  EXPECT_EQ(r.lookup("mse_loss")->split.rule, SplitRule::None);
  EXPECT_TRUE(r.lookup("softmax")->split.axisNotFirst);
  EXPECT_FALSE(r.lookup("add")->split.axisNotFirst);
  // Effects: exactly the optimizers update state, exactly random_uniform
  // draws; everything else is pure.
  std::vector<std::string> optimizers, random;
  for (const KernelInfo &k : r.kernels()) {
    if (k.effect == KernelEffect::Optimizer)
      optimizers.push_back(k.name);
    if (k.effect == KernelEffect::Random)
      random.push_back(k.name);
  }
  EXPECT_EQ(optimizers, (std::vector<std::string>{"adamw", "adam", "sgd"}));
  EXPECT_EQ(random, (std::vector<std::string>{"random_uniform"}));
}

TEST_F(KernelRegistryTest, ThrowawayAttributesAreVerifiedAndPacked) {
  const KernelInfo &k = *withThrowaway().lookup("throwaway_axpb");
  auto good = dict({named("alpha", b.getF64FloatAttr(2.5)),
                    named("beta", b.getF64FloatAttr(-1.0)),
                    named("note", b.getStringAttr("compiler only"))});
  EXPECT_TRUE(verify(k, good)) << lastError;
  PackedAttrs p = KernelRegistry::pack(k, good);
  EXPECT_EQ(p.ints, (std::vector<int64_t>{0}));  // mode absent -> 0
  EXPECT_EQ(p.floats, (std::vector<double>{2.5, -1.0}));
  auto off = dict({named("alpha", b.getF64FloatAttr(1.0)),
                   named("beta", b.getF64FloatAttr(0.0)),
                   named("mode", b.getStringAttr("off"))});
  EXPECT_TRUE(verify(k, off)) << lastError;
  EXPECT_EQ(KernelRegistry::pack(k, off).ints, (std::vector<int64_t>{1}));

  EXPECT_FALSE(verify(k, dict({named("alpha", b.getF64FloatAttr(1.0))})));
  EXPECT_EQ(lastError,
            "kernel 'throwaway_axpb' needs attribute 'beta' (a float)");
  EXPECT_FALSE(verify(k, dict({named("alpha", b.getI64IntegerAttr(1)),
                               named("beta", b.getF64FloatAttr(0.0))})));
  EXPECT_EQ(lastError,
            "kernel 'throwaway_axpb': attribute 'alpha' must be a float");
  EXPECT_FALSE(verify(k, dict({named("alpha", b.getF64FloatAttr(1.0)),
                               named("beta", b.getF64FloatAttr(0.0)),
                               named("gamma", b.getF64FloatAttr(0.0))})));
  EXPECT_EQ(lastError, "kernel 'throwaway_axpb' has no attribute 'gamma' "
                       "(kernels.def: alpha, beta, mode, note)");
  // Registered by a compiler extension, the message names its own entry.
  KernelInfo ext = k;
  ext.extension = true;
  EXPECT_FALSE(verify(ext, dict({named("alpha", b.getF64FloatAttr(1.0)),
                                 named("beta", b.getF64FloatAttr(0.0)),
                                 named("gamma", b.getF64FloatAttr(0.0))})));
  EXPECT_EQ(lastError, "kernel 'throwaway_axpb' has no attribute 'gamma' "
                       "(its registry entry: alpha, beta, mode, note)");
}

TEST_F(KernelRegistryTest, FlopsFollowTheEntrysRule) {
  // The throwaway entry says NONE (elementwise); linear's says LINEAR:
  // 2 * numel(out) * last dim of ins[1].
  int64_t x[] = {6, 5}, w[] = {3, 5}, y[] = {6, 3};
  llvm::ArrayRef<int64_t> ins[] = {x, w}, outs[] = {y};
  EXPECT_EQ(KernelRegistry::flops(*withThrowaway().lookup("throwaway_axpb"), ins, outs), 0.0);
  EXPECT_EQ(KernelRegistry::flops(*withThrowaway().lookup("linear"), ins, outs), 2.0 * 18 * 5);
}

TEST_F(KernelRegistryTest, RuntimeTableFromTheSameEntriesCallsTheThrowaway) {
  const RuntimeEntry *e = nullptr;
  for (const RuntimeEntry &r : kRuntimeTable)
    if (std::strcmp(r.name, "throwaway_axpb") == 0)
      e = &r;
  ASSERT_NE(e, nullptr);
  ASSERT_EQ(std::size(kRuntimeTable), withThrowaway().kernels().size());
  const KernelInfo &k = *withThrowaway().lookup("throwaway_axpb");
  auto call = [&](mlir::DictionaryAttr attrs, hcrt_tensor &in, hcrt_tensor &out) {
    PackedAttrs p = KernelRegistry::pack(k, attrs);
    hcrt_attrs a{};
    for (int64_t v : p.ints)
      a.ints[a.num_ints++] = v;
    for (double v : p.floats)
      a.floats[a.num_floats++] = v;
    e->fn(&in, 1, &out, 1, &a, hc_threads{});
  };
  auto tensor = [](float *data, std::vector<int64_t> shape, std::vector<int64_t> strides) {
    hcrt_tensor t{};
    t.data = data;
    t.dtype = HCRT_F32;
    t.rank = static_cast<int32_t>(shape.size());
    for (size_t d = 0; d < shape.size(); ++d)
      t.shape[d] = shape[d], t.strides[d] = strides[d];
    return t;
  };
  auto on = dict({named("alpha", b.getF64FloatAttr(3.0)),
                  named("beta", b.getF64FloatAttr(0.5))});
  float xs[3] = {1, -2, 0.25f}, ys[3] = {};
  hcrt_tensor in = tensor(xs, {3}, {1}), out = tensor(ys, {3}, {1});
  call(on, in, out);
  EXPECT_FLOAT_EQ(ys[0], 3.5f);
  EXPECT_FLOAT_EQ(ys[1], -5.5f);
  EXPECT_FLOAT_EQ(ys[2], 1.25f);
  // A strided input (the transpose of a 2 x 3 block) into a 3 x 2 output.
  float m[6] = {0, 1, 2, 3, 4, 5}, t[6] = {};
  hcrt_tensor tin = tensor(m, {3, 2}, {1, 3}), tout = tensor(t, {3, 2}, {2, 1});
  call(on, tin, tout);
  const float want[6] = {0.5f, 9.5f, 3.5f, 12.5f, 6.5f, 15.5f};
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(t[i], want[i]) << i;
  call(dict({named("alpha", b.getF64FloatAttr(3.0)), named("beta", b.getF64FloatAttr(0.5)),
             named("mode", b.getStringAttr("off"))}),
       tin, tout);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(t[i], m[(i % 2) * 3 + i / 2]) << i;
}

TEST_F(KernelRegistryTest, HyperparameterSlotsArePackedFloatsWithTheirPlaces) {
  // adamw: lr, beta1, beta2, eps, weight_decay -> floats 0..4; the step's
  // hyperparameters are floats 0 (lr) and 4 (weight_decay).
  const KernelRegistry &r = KernelRegistry::active();
  std::vector<HyperSlot> adamw = KernelRegistry::hyperSlots(*r.lookup("adamw"));
  ASSERT_EQ(adamw.size(), 2u);
  EXPECT_STREQ(adamw[0].key, "lr");
  EXPECT_EQ(adamw[0].floatIndex, 0u);
  EXPECT_STREQ(adamw[1].key, "weight_decay");
  EXPECT_EQ(adamw[1].floatIndex, 4u);
  // ONNX Adam's rate is a graph input: no hyperparameter slot.
  EXPECT_TRUE(KernelRegistry::hyperSlots(*r.lookup("adam")).empty());
  // A hyperparameter verifies and packs as the float it is.
  mlir::DictionaryAttr a = dict({named("lr", b.getF64FloatAttr(0.25)),
                                 named("weight_decay", b.getF64FloatAttr(0.5))});
  const KernelInfo *sgd = r.lookup("sgd");
  EXPECT_TRUE(verify(*sgd, a));
  PackedAttrs p = KernelRegistry::pack(*sgd, a);
  ASSERT_EQ(p.floats.size(), 2u);
  EXPECT_EQ(p.floats[0], 0.25);
  EXPECT_EQ(p.floats[1], 0.5);
  EXPECT_FALSE(verify(*sgd, dict({named("lr", b.getI64IntegerAttr(1)),
                                  named("weight_decay", b.getF64FloatAttr(0.5))})));
  EXPECT_NE(lastError.find("'lr' must be a float"), std::string::npos) << lastError;
}

} // namespace
