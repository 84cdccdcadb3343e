// Internal to the ONNX importer: hc's own ONNX domain, "hc" version 1.
// It holds what a training graph must say that ONNX cannot:
//   hc::StopGradient(x) -> y   identity forward, no gradient backward (the
//                              exporter's `.detach()`, which torch.onnx drops).
// docs/input-format.md defines it for exporters.
#ifndef HC_COMPILER_IMPORT_HCDOMAIN_H
#define HC_COMPILER_IMPORT_HCDOMAIN_H

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

namespace hc::import {

inline constexpr const char *kHcDomain = "hc";
inline constexpr int64_t kHcDomainVersion = 1;

// Makes libonnx's checker and shape inference know the domain's ops (once).
void registerHcDomainSchemas();

// Empty when `n` (domain "hc") is a valid node of the domain at `version`,
// else what is wrong (one line, without the node label).
std::string validateHcNode(const onnx::NodeProto &n, int64_t version);

} // namespace hc::import

#endif // HC_COMPILER_IMPORT_HCDOMAIN_H
