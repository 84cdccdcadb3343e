// Registration of compiler extensions: each part goes to the table of the
// layer that reads it (import's domains, the kernel registry, the step
// library's link line); the dialects are kept here for the driver.
#include "hc/Compiler/Extension.h"

#include "hc/Compiler/EmitStep.h"

namespace hc {

namespace {
std::vector<std::function<void(mlir::DialectRegistry &)>> &dialectHooks() {
  static std::vector<std::function<void(mlir::DialectRegistry &)>> hooks;
  return hooks;
}
} // namespace

void registerExtension(CompilerExtension e) {
  if (e.registerDialects)
    dialectHooks().push_back(std::move(e.registerDialects));
  for (import::OpDomain &d : e.domains)
    import::registerOpDomain(std::move(d));
  schedule::KernelRegistry::addExtensionKernels(std::move(e.kernels));
  for (const std::string &lib : e.kernelLibraries)
    addKernelLibrary(lib);
}

void appendExtensionDialects(mlir::DialectRegistry &registry) {
  for (const auto &hook : dialectHooks())
    hook(registry);
}

} // namespace hc
