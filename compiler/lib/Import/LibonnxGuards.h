// What the importer checks before handing a model to libonnx's shape
// inference, which divides by and indexes with attribute values unchecked
// (fuzz.import found SIGFPE and SEGV there).
#ifndef HC_IMPORT_LIBONNXGUARDS_H
#define HC_IMPORT_LIBONNXGUARDS_H

#include <onnx/onnx_pb.h>

#include <string>

namespace hc::import {

// False + a one-line `error` naming the node when a window op (Conv, pools)
// has a zero or negative stride, dilation, kernel size or group, negative
// pads, attribute lengths that disagree with the input's rank, or a data
// input and weight of different ranks (where inputs, initializers and
// value_info give the ranks).
bool checkBeforeLibonnxInference(const onnx::ModelProto &model, std::string &error);

} // namespace hc::import

#endif // HC_IMPORT_LIBONNXGUARDS_H
