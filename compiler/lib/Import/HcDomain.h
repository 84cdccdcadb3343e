// Internal to the ONNX importer: hc's own ONNX domain, "hc" version 1.
// It holds what a training graph must say that ONNX cannot:
//   hc::StopGradient(x) -> y   identity forward, no gradient backward (the
//                              exporter's `.detach()`, which torch.onnx drops).
// docs/input-format.md defines it for exporters. It is the first entry of
// the importer's domain table (GraphImporter.h's OpDomain), the same kind
// of entry a compiler extension registers.
#ifndef HC_COMPILER_IMPORT_HCDOMAIN_H
#define HC_COMPILER_IMPORT_HCDOMAIN_H

#include "hc/Compiler/GraphImporter.h"

namespace hc::import {

inline constexpr const char *kHcDomain = "hc";
inline constexpr int64_t kHcDomainVersion = 1;

OpDomain hcOpDomain();

} // namespace hc::import

#endif // HC_COMPILER_IMPORT_HCDOMAIN_H
