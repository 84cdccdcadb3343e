// hc's schemas of the ai.onnx operators it imports at opsets 18..21, from
// ONNX's operator changelog (docs/Changelog.md of onnx 1.16/1.17). One row
// per operator: every since-version up to 21 (the operators whose newer
// versions only widen the type lists keep them, so the node label can say
// which definition applies), input and output counts, and the attributes of
// the definition in effect at 18..21. Where 18..21 differ for an operator
// DiT exports use, the row says from which opset an attribute exists:
//   ReduceMean-18  axes moved from an attribute to input 1 (hc's handler
//                  reads the input at >= 18, the attribute before);
//   Split-18       num_outputs (uneven: ceil-sized pieces, the last smaller);
//   Cast-19, CastLike-19  saturate (float8 only; hc has no float8 types);
//   Gelu-20        new (approximate = "none" | "tanh");
//   Reshape/Shape/Identity/Constant/... 19, 21: type lists only.
// Semantics live in the handlers (OpHandlers*.cpp): this table is what the
// ONNX checker would have enforced for the node's form.
#include "OpsetSchemas.h"

#include "google/protobuf/unknown_field_set.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <vector>

namespace hc::import {
namespace {

using AP = onnx::AttributeProto;
constexpr int kMany = 1 << 30;

struct AttrSpec {
  const char *name;
  AP::AttributeType type;
  bool required = false;
  int since = 0;                          // opset the attribute appeared in
  std::vector<const char *> values = {};  // allowed strings, if enumerated
};

struct Schema {
  std::vector<int> versions;  // since-versions, ascending, all <= 21
  int minIn, maxIn, minOut, maxOut;
  std::vector<AttrSpec> attrs;
};

const std::map<std::string, Schema> &schemas() {
  const auto F = AP::FLOAT, I = AP::INT, S = AP::STRING, T = AP::TENSOR,
             G = AP::GRAPH, Fs = AP::FLOATS, Is = AP::INTS, Ss = AP::STRINGS,
             ST = AP::SPARSE_TENSOR;
  static const std::map<std::string, Schema> table = {
      // elementwise
      {"Add", {{1, 6, 7, 13, 14}, 2, 2, 1, 1, {}}},
      {"Sub", {{1, 6, 7, 13, 14}, 2, 2, 1, 1, {}}},
      {"Mul", {{1, 6, 7, 13, 14}, 2, 2, 1, 1, {}}},
      {"Div", {{1, 6, 7, 13, 14}, 2, 2, 1, 1, {}}},
      {"Pow", {{1, 7, 12, 13, 15}, 2, 2, 1, 1, {}}},
      {"Max", {{1, 6, 8, 12, 13}, 1, kMany, 1, 1, {}}},
      {"Clip", {{1, 6, 11, 12, 13}, 1, 3, 1, 1, {}}},
      {"Min", {{1, 6, 8, 12, 13}, 1, kMany, 1, 1, {}}},
      {"Less", {{1, 7, 9, 13}, 2, 2, 1, 1, {}}},
      {"Greater", {{1, 7, 9, 13}, 2, 2, 1, 1, {}}},
      {"Equal", {{1, 7, 11, 13, 19}, 2, 2, 1, 1, {}}},
      {"Where", {{9, 16}, 3, 3, 1, 1, {}}},
      {"Neg", {{1, 6, 13}, 1, 1, 1, 1, {}}},
      {"Sqrt", {{1, 6, 13}, 1, 1, 1, 1, {}}},
      {"Exp", {{1, 6, 13}, 1, 1, 1, 1, {}}},
      {"Log", {{1, 6, 13}, 1, 1, 1, 1, {}}},
      {"Tanh", {{1, 6, 13}, 1, 1, 1, 1, {}}},
      {"Sigmoid", {{1, 6, 13}, 1, 1, 1, 1, {}}},
      {"Reciprocal", {{1, 6, 13}, 1, 1, 1, 1, {}}},
      {"Sin", {{7}, 1, 1, 1, 1, {}}},
      {"Cos", {{7}, 1, 1, 1, 1, {}}},
      {"Erf", {{9, 13}, 1, 1, 1, 1, {}}},
      {"Gelu", {{20}, 1, 1, 1, 1, {{"approximate", S, false, 0, {"none", "tanh"}}}}},
      // normalization, reductions, products
      {"Softmax", {{1, 11, 13}, 1, 1, 1, 1, {{"axis", I}}}},
      {"ReduceMean", {{1, 11, 13, 18}, 1, 2, 1, 1,
                      {{"keepdims", I}, {"noop_with_empty_axes", I}}}},
      {"ReduceSum", {{1, 11, 13}, 1, 2, 1, 1,
                     {{"keepdims", I}, {"noop_with_empty_axes", I}}}},
      {"LayerNormalization", {{17}, 2, 3, 1, 3,
                              {{"axis", I}, {"epsilon", F}, {"stash_type", I}}}},
      {"MatMul", {{1, 9, 13}, 2, 2, 1, 1, {}}},
      {"Gemm", {{1, 6, 7, 9, 11, 13}, 2, 3, 1, 1,
                {{"alpha", F}, {"beta", F}, {"transA", I}, {"transB", I}}}},
      {"Conv", {{1, 11}, 2, 3, 1, 1,
                {{"auto_pad", S, false, 0, {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"}},
                 {"dilations", Is}, {"group", I}, {"kernel_shape", Is},
                 {"pads", Is}, {"strides", Is}}}},
      {"Einsum", {{12}, 1, kMany, 1, 1, {{"equation", S, true}}}},
      // shapes and data movement
      {"Reshape", {{1, 5, 13, 14, 19, 21}, 2, 2, 1, 1, {{"allowzero", I}}}},
      {"Flatten", {{1, 9, 11, 13, 21}, 1, 1, 1, 1, {{"axis", I}}}},
      {"Squeeze", {{1, 11, 13, 21}, 1, 2, 1, 1, {}}},
      {"Unsqueeze", {{1, 11, 13, 21}, 2, 2, 1, 1, {}}},
      {"Transpose", {{1, 13, 21}, 1, 1, 1, 1, {{"perm", Is}}}},
      {"Expand", {{8, 13}, 2, 2, 1, 1, {}}},
      {"Slice", {{1, 10, 11, 13}, 3, 5, 1, 1, {}}},
      {"Concat", {{1, 4, 11, 13}, 1, kMany, 1, 1, {{"axis", I, true}}}},
      {"Split", {{1, 2, 11, 13, 18}, 1, 2, 1, kMany,
                 {{"axis", I}, {"num_outputs", I, false, 18}}}},
      {"SplitToSequence", {{11}, 1, 2, 1, 1, {{"axis", I}, {"keepdims", I}}}},
      {"SequenceAt", {{11}, 2, 2, 1, 1, {}}},
      {"Gather", {{1, 11, 13}, 2, 2, 1, 1, {{"axis", I}}}},
      {"GatherND", {{11, 12, 13}, 2, 2, 1, 1, {{"batch_dims", I, false, 12}}}},
      {"Cast", {{1, 6, 9, 13, 19, 21}, 1, 1, 1, 1,
                {{"to", I, true}, {"saturate", I, false, 19}}}},
      {"CastLike", {{15, 19, 21}, 2, 2, 1, 1, {{"saturate", I, false, 19}}}},
      {"Constant", {{1, 9, 11, 12, 13, 19, 21}, 0, 0, 1, 1,
                    {{"value", T}, {"value_float", F}, {"value_floats", Fs},
                     {"value_int", I}, {"value_ints", Is}, {"value_string", S},
                     {"value_strings", Ss}, {"sparse_value", ST}}}},
      {"ConstantOfShape", {{9, 20, 21}, 1, 1, 1, 1, {{"value", T}}}},
      {"Shape", {{1, 13, 15, 19, 21}, 1, 1, 1, 1, {{"start", I}, {"end", I}}}},
      {"Range", {{11}, 3, 3, 1, 1, {}}},
      {"Identity", {{1, 13, 14, 16, 19, 21}, 1, 1, 1, 1, {}}},
      {"Dropout", {{1, 6, 7, 10, 12, 13}, 1, 3, 1, 2, {{"seed", I}}}},
      {"If", {{1, 11, 13, 16, 19, 21}, 1, 1, 1, kMany,
              {{"then_branch", G, true}, {"else_branch", G, true}}}},
      {"RandomUniform", {{1}, 0, 0, 1, 1,
                         {{"dtype", I}, {"high", F}, {"low", F}, {"seed", F},
                          {"shape", Is, true}}}},
      {"RandomUniformLike", {{1}, 1, 1, 1, 1,
                             {{"dtype", I}, {"high", F}, {"low", F}, {"seed", F}}}},
  };
  return table;
}

std::string typeName(int t) {
  return AP::AttributeType_Name(static_cast<AP::AttributeType>(t));
}

std::string count(int lo, int hi, const char *what) {
  std::string n = lo == hi      ? std::to_string(lo)
                  : hi == kMany ? "at least " + std::to_string(lo)
                                : std::to_string(lo) + " to " + std::to_string(hi);
  return n + " " + what + (hi == 1 ? "" : "s");
}

} // namespace

int opVersion(const std::string &op, int64_t opset) {
  auto it = schemas().find(op);
  if (it == schemas().end())
    return 0;
  int v = 0;
  for (int s : it->second.versions)
    if (s <= opset)
      v = s;
  return v;
}

std::string validateNode(const onnx::NodeProto &n, int64_t opset) {
  auto it = schemas().find(n.op_type());
  if (it == schemas().end())
    return "op '" + n.op_type() + "' is not one hc imports at opset " +
           std::to_string(opset) + " (not an ai.onnx op, or not used by DiT)";
  const Schema &s = it->second;
  int version = opVersion(n.op_type(), opset);
  if (version == 0)
    return "op '" + n.op_type() + "' does not exist at opset " +
           std::to_string(opset) + " (added in opset " +
           std::to_string(s.versions.front()) + ")";
  // Trailing empty names are absent optional inputs.
  int inputs = n.input_size();
  while (inputs > 0 && n.input(inputs - 1).empty())
    --inputs;
  if (inputs < s.minIn || inputs > s.maxIn)
    return n.op_type() + "-" + std::to_string(version) + " takes " +
           count(s.minIn, s.maxIn, "input") + ", the node has " +
           std::to_string(inputs);
  for (int i = 0; i < s.minIn; ++i)
    if (n.input(i).empty())
      return "required input " + std::to_string(i) + " is empty";
  if (n.output_size() < s.minOut || n.output_size() > s.maxOut)
    return n.op_type() + "-" + std::to_string(version) + " has " +
           count(s.minOut, s.maxOut, "output") + ", the node has " +
           std::to_string(n.output_size());
  std::vector<std::string> seen;
  for (const auto &a : n.attribute()) {
    if (std::find(seen.begin(), seen.end(), a.name()) != seen.end())
      return "attribute '" + a.name() + "' is given twice";
    seen.push_back(a.name());
    auto spec = std::find_if(s.attrs.begin(), s.attrs.end(), [&](const AttrSpec &x) {
      return a.name() == x.name && x.since <= opset;
    });
    if (spec == s.attrs.end())
      return "unknown attribute '" + a.name() + "' for " + n.op_type() + "-" +
             std::to_string(version);
    if (a.type() != spec->type)
      return "attribute '" + a.name() + "' must be " + typeName(spec->type) +
             ", it is " + typeName(a.type());
    if (!spec->values.empty()) {
      bool ok = false;
      std::string allowed;
      for (const char *v : spec->values) {
        ok |= a.s() == v;
        allowed += (allowed.empty() ? "'" : ", '") + std::string(v) + "'";
      }
      if (!ok)
        return "attribute '" + a.name() + "' is '" + a.s() + "', not one of " +
               allowed;
    }
  }
  for (const auto &spec : s.attrs)
    if (spec.required && spec.since <= opset &&
        std::find(seen.begin(), seen.end(), spec.name) == seen.end())
      return "required attribute '" + std::string(spec.name) + "' is missing";
  // If's branches: their nodes are judged by the same table (libonnx's
  // checker walks subgraphs too).
  for (const auto &a : n.attribute())
    if (a.type() == AP::GRAPH)
      for (const auto &inner : a.g().node()) {
        std::string bad = validateNode(inner, opset);
        if (!bad.empty())
          return a.name() + ": node '" +
                 (inner.name().empty() ? inner.op_type() : inner.name()) +
                 "' (" + inner.op_type() + "): " + bad;
      }
  if (n.op_type() == "Constant" && seen.size() != 1)
    return "Constant needs exactly one value attribute, it has " +
           std::to_string(seen.size());
  if (n.op_type() == "Split" && inputs == 2 &&
      std::find(seen.begin(), seen.end(), "num_outputs") != seen.end())
    return "Split takes the 'split' input or the 'num_outputs' attribute, "
           "not both";
  return "";
}

std::string generatedInitializer(const onnx::ModelProto &model, int64_t opset) {
  if (opset < kOwnSchemaMinOpset || model.producer_name() != "pytorch")
    return "";
  for (const auto &t : model.graph().initializer()) {
    if (t.data_type() != onnx::TensorProto::FLOAT)
      continue;
    const std::string &n = t.name();
    std::size_t digits = n.find_last_not_of("0123456789");
    if (n.find('.') == std::string::npos && digits != std::string::npos &&
        digits + 1 < n.size() && n[digits] == '_' &&
        std::all_of(n.begin(), n.begin() + digits,
                    [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; }))
      return n;
  }
  return "";
}

std::set<std::string> torchExportConstants(const onnx::ModelProto &model) {
  // ValueInfoProto.metadata_props is field 4 since ONNX 1.16; Debian's
  // libonnx 1.12 predates it and keeps it as an unknown field, which is
  // parsed here as the StringStringEntryProto it is.
  constexpr int kValueInfoMetadataProps = 4;
  std::set<std::string> out;
  auto scan = [&](const onnx::ValueInfoProto &vi) {
    const google::protobuf::UnknownFieldSet &unknown =
        vi.GetReflection()->GetUnknownFields(vi);
    for (int i = 0; i < unknown.field_count(); ++i) {
      const google::protobuf::UnknownField &f = unknown.field(i);
      onnx::StringStringEntryProto entry;
      if (f.number() != kValueInfoMetadataProps ||
          f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED ||
          !entry.ParseFromString(f.length_delimited()))
        continue;
      if (entry.key() == "pkg.torch.export.graph_signature.InputSpec.kind" &&
          (entry.value() == "BUFFER" || entry.value() == "CONSTANT_TENSOR"))
        out.insert(vi.name());
    }
  };
  for (const auto &vi : model.graph().value_info())
    scan(vi);
  for (const auto &vi : model.graph().input())
    scan(vi);
  return out;
}

} // namespace hc::import
