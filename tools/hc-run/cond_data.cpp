// Conditioning inputs and their files: see cond_data.h.
#include "cond_data.h"

#include "common.h"
#include "data.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace hcrun {

namespace {
bool isIdentifier(const std::string &s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

// "vector:NAME:5" -> (Vector, NAME, {5}); false when malformed.
bool parseSpec(const std::string &text, CondKind &kind, std::string &name,
               std::vector<int64_t> &dims) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t colon; (colon = text.find(':', start)) != std::string::npos;
       start = colon + 1)
    parts.push_back(text.substr(start, colon - start));
  parts.push_back(text.substr(start));
  if (parts.size() < 3)
    return false;
  const std::string &k = parts[0];
  kind = k == "vector" ? CondKind::Vector : k == "concat" ? CondKind::Field : CondKind::Tokens;
  const std::size_t want = kind == CondKind::Tokens ? 4 : 3;
  if ((k != "vector" && k != "concat" && k != "tokens") || parts.size() != want)
    return false;
  name = parts[1];
  dims.clear();
  for (std::size_t i = 2; i < parts.size(); ++i) {
    char *end = nullptr;
    const long long v = std::strtoll(parts[i].c_str(), &end, 10);
    if (parts[i].empty() || *end || v <= 0)
      return false;
    dims.push_back(v);
  }
  return isIdentifier(name);
}

const TensorSpec *inputNamed(const Description &d, const std::string &name, int *pos) {
  for (std::size_t i = 0; i < d.inputs.size(); ++i)
    if (d.inputs[i].name == name) {
      *pos = static_cast<int>(i);
      return &d.inputs[i];
    }
  return nullptr;
}
} // namespace

std::string joinCondFlags(const std::vector<CondFlag> &flags,
                          const std::function<std::string(const CondFlag &)> &value,
                          const std::string &none) {
  std::string s;
  for (const CondFlag &c : flags)
    s += (s.empty() ? "" : ",") + c.name + "=" + value(c);
  return s.empty() ? none : s;
}

void CondInput::write(const float *src, bool null, bool mirror, float *out, float *drop) const {
  *drop = null && kind != CondKind::Field ? 1.0f : 0.0f;
  if (null && kind == CondKind::Field) {
    std::fill(out, out + elems, 0.0f);
    return;
  }
  const std::size_t w = static_cast<std::size_t>(sampleShape.back());
  for (std::size_t i = 0; i < elems; ++i)
    out[i] = src[mirroredIndex(i, mirror, w)];
}

const char *condKindName(CondKind k) {
  return k == CondKind::Vector ? "vector" : k == CondKind::Field ? "field" : "tokens";
}

std::string CondInput::describe() const {
  return std::string(condKindName(kind)) + " " + shapeString(sampleShape);
}

CondFlag parseCondFlag(const std::string &flag, const std::string &value,
                       const std::vector<CondFlag> &seen) {
  const std::size_t eq = value.find('=');
  CondFlag c;
  if (eq != std::string::npos) {
    c.name = value.substr(0, eq);
    c.path = value.substr(eq + 1);
  }
  if (eq == std::string::npos || !isIdentifier(c.name) || c.path.empty())
    usageError(flag + " needs NAME=FILE.npy (NAME the graph input it feeds), got '" + value +
               "'");
  for (const CondFlag &s : seen)
    if (s.name == c.name)
      usageError(flag + " " + c.name + " is given twice (" + s.path + ", " + c.path + ")");
  return c;
}

std::vector<CondInput> condInputsOf(const Description &d, const std::string &lib,
                                    const std::vector<int64_t> &xtShape,
                                    bool (*isOwn)(const std::string &), const std::string &own) {
  std::vector<CondInput> out;
  const nlohmann::json &cfg = d.ditConfig;
  const bool listed = cfg.is_object() && cfg.contains("conds") && cfg["conds"].is_array();
  // A padding mask ([B, L] or [B, 1, L]) beside token sequences is out of
  // scope; a field named *_mask (an inpainting mask, [B, C, H, W]) is not one.
  for (const TensorSpec &s : d.inputs) {
    const std::string &n = s.name;
    const bool named = n == "mask" || n == "attention_mask" ||
                       (n.size() > 5 && n.compare(n.size() - 5, 5, "_mask") == 0);
    const bool isListed =
        listed && std::any_of(cfg["conds"].begin(), cfg["conds"].end(), [&](const auto &c) {
          return c.is_string() && c.template get<std::string>().find(":" + n + ":") !=
                                      std::string::npos;
        });
    if (named && !isListed && s.shape.size() <= 3 && !isOwn(n))
      usageError(lib + ": input '" + n + "' looks like an attention mask: padded token "
                 "sequences are not supported (a conditioning's tokens have a fixed length; "
                 "fill short ones with your own padding tokens, unmasked)");
  }
  // The batch every input shares, and a field's H and W.
  const int64_t B = xtShape.empty() ? 0 : xtShape[0];
  auto check = [&](CondInput &c) {
    const TensorSpec *s = inputNamed(d, c.name, &c.input);
    if (!s)
      usageError(lib + ": dit_config lists the conditioning '" + c.name +
                 "', but the graph has no input of that name");
    const std::size_t rank = c.kind == CondKind::Field ? 4 : c.kind == CondKind::Tokens ? 3 : 2;
    bool ok = s->dtype == "F32" && s->shape.size() == rank && s->shape[0] == B;
    if (ok && c.kind == CondKind::Field && xtShape.size() == 4)
      ok = s->shape[2] == xtShape[2] && s->shape[3] == xtShape[3];
    if (!c.sampleShape.empty() && ok)
      ok = std::equal(c.sampleShape.begin(), c.sampleShape.end(), s->shape.begin() + 1,
                      s->shape.end());
    if (!ok)
      usageError(lib + ": conditioning input " + c.name + " is " + s->dtype + " " +
                 shapeString(s->shape) + ", a " + condKindName(c.kind) +
                 " conditioning is F32 " +
                 (c.kind == CondKind::Vector   ? "[B,D]"
                  : c.kind == CondKind::Tokens ? "[B,L,D]"
                                               : "[B,C,H,W] with x_t's H and W"));
    c.sampleShape.assign(s->shape.begin() + 1, s->shape.end());
    c.elems = 1;
    for (int64_t v : c.sampleShape)
      c.elems *= static_cast<std::size_t>(v);
    if (c.kind != CondKind::Field) {
      const TensorSpec *drop = inputNamed(d, c.name + "_drop", &c.dropInput);
      if (!drop || drop->dtype != "F32" || drop->shape != std::vector<int64_t>{B})
        usageError(lib + ": the " + condKindName(c.kind) + " conditioning " + c.name +
                   " needs an input " + c.name + "_drop F32 [" + std::to_string(B) +
                   "] (1 = its null form)" +
                   (drop ? ", it is " + drop->dtype + " " + shapeString(drop->shape) : ""));
    }
  };

  if (listed) {
    for (const auto &spec : cfg["conds"]) {
      CondInput c;
      std::vector<int64_t> dims;
      if (!spec.is_string() || !parseSpec(spec.get<std::string>(), c.kind, c.name, dims))
        usageError(lib + ": dit_config.conds holds " + spec.dump() +
                   ", not vector:NAME:D, concat:NAME:C or tokens:NAME:L:D");
      if (c.kind != CondKind::Field)  // a field's H and W are x_t's
        c.sampleShape = dims;
      check(c);
      if (c.kind == CondKind::Field && c.sampleShape[0] != dims[0])
        usageError(lib + ": conditioning input " + c.name + " has " +
                   std::to_string(c.sampleShape[0]) + " channels, dit_config.conds says " +
                   std::to_string(dims[0]));
      out.push_back(c);
    }
  } else {
    for (const TensorSpec &s : d.inputs) {
      if (isOwn(s.name))
        continue;
      int dropPos = -1;
      const bool hasDrop = inputNamed(d, s.name + "_drop", &dropPos) != nullptr;
      const bool isDrop = s.name.size() > 5 &&
                          s.name.compare(s.name.size() - 5, 5, "_drop") == 0 &&
                          inputNamed(d, s.name.substr(0, s.name.size() - 5), &dropPos);
      if (isDrop)
        continue;
      CondInput c;
      c.name = s.name;
      c.kind = hasDrop ? (s.shape.size() == 3 ? CondKind::Tokens : CondKind::Vector)
                       : CondKind::Field;
      if (!hasDrop && s.shape.size() != 4)
        usageError(lib + ": input '" + s.name + "' (" + s.dtype + " " + shapeString(s.shape) +
                   ") is not one of " + own + ", nor a conditioning (a field [B,C,H,W], or "
                   "a vector [B,D] or tokens [B,L,D] beside NAME_drop)");
      check(c);
      out.push_back(c);
    }
  }
  // Every input is the graph's own or a conditioning's.
  for (const TensorSpec &s : d.inputs) {
    const bool claimed =
        isOwn(s.name) || std::any_of(out.begin(), out.end(), [&](const CondInput &c) {
          return c.name == s.name || (c.dropInput >= 0 && c.name + "_drop" == s.name);
        });
    if (!claimed)
      usageError(lib + ": input '" + s.name + "' is not one of " + own +
                 ", nor a conditioning dit_config.conds lists");
  }
  return out;
}

CondData::CondData() = default;
CondData::~CondData() = default;

void CondData::open(const std::vector<CondFlag> &given, const std::vector<CondInput> &graph,
                    int64_t samples, const std::string &flag, const std::string &dataFlag,
                    const std::string &lib) {
  flag_ = flag;
  samples_ = samples;
  std::string countFrom = dataFlag;
  for (const CondFlag &g : given)
    if (std::none_of(graph.begin(), graph.end(),
                     [&](const CondInput &c) { return c.name == g.name; })) {
      std::string names;
      for (const CondInput &c : graph)
        names += (names.empty() ? "" : ", ") + c.name;
      usageError(flag + " " + g.name + "=" + g.path + ": " + lib +
                 " has no conditioning named '" + g.name + "' (" +
                 (names.empty() ? "it has none" : "it has " + names) + ")");
    }
  for (const CondInput &c : graph) {
    auto it = std::find_if(given.begin(), given.end(),
                           [&](const CondFlag &g) { return g.name == c.name; });
    if (it == given.end())
      usageError(lib + " is conditioned on " + c.name + " (" + c.describe() +
                 " per sample): give " + flag + " " + c.name + "=FILE.npy");
    auto f = std::make_unique<MappedNpy>();
    f->open(it->path);
    const auto &h = f->header();
    const std::string what = flag + " " + c.name + "=" + it->path;
    const bool shapeOk = h.shape.size() == c.sampleShape.size() + 1 &&
                         std::equal(c.sampleShape.begin(), c.sampleShape.end(),
                                    h.shape.begin() + 1);
    if (h.dtype != "f4" || !shapeOk)
      usageError(what + ": " + h.dtype + " " + shapeString(h.shape) + ", " + c.name +
                 " is float32 [N," + shapeString(c.sampleShape).substr(1) + " (" +
                 c.describe() + " per sample)");
    if (samples_ < 0) {
      samples_ = h.shape[0];
      countFrom = flag + " " + c.name + "=" + it->path;
    }
    if (h.shape[0] != samples_)
      usageError(what + ": " + std::to_string(h.shape[0]) + " samples, " + countFrom +
                 " has " + std::to_string(samples_) + " (one row per sample, in its order)");
    files_.push_back(std::move(f));
    elems_.push_back(c.elems);
  }
}

const float *CondData::row(std::size_t k, int64_t row) const {
  return reinterpret_cast<const float *>(files_[k]->data()) +
         static_cast<std::size_t>(row) * elems_[k];
}

std::string CondData::nonFinite(int64_t r) const {
  for (std::size_t k = 0; k < files_.size(); ++k) {
    const float *v = row(k, r);
    for (std::size_t i = 0; i < elems_[k]; ++i)
      if (!std::isfinite(v[i]))
        return flag_ + " " + files_[k]->path() + ": sample " + std::to_string(r) + " holds " +
               (std::isnan(v[i]) ? "NaN" : "an infinity") + " at element " +
               std::to_string(i);
  }
  return "";
}

} // namespace hcrun
