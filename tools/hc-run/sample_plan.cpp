// hc-run sample: which images to make and how guidance drops (sample_mode.h).
#include "sample_mode.h"

#include <algorithm>

namespace hcrun {

ImagePlan planImages(const SampleOptions &o, const ModelFacts &m, const StepLibrary &lib,
                     const CondData &condData) {
  ImagePlan p;
  if (!m.conds.empty()) {
    // One grid row per condition; the label is one class for all, or one per row.
    if (o.images > 0 || o.perClassGiven)
      usageError(std::string(o.images > 0 ? "--images" : "--per-class") + ": " + lib.path +
                 " is conditioned on --cond rows; use --per-cond N");
    const int64_t M = condData.samples();
    p.perRow = o.perCond > 0 ? o.perCond : 1;
    p.rowLabels.assign(static_cast<std::size_t>(M), -1);
    if (m.conditional) {
      if (!o.classesGiven)
        usageError("--classes: " + lib.path + " is class-conditional besides its --cond rows: "
                   "give one class for all " + std::to_string(M) + " rows or one per row");
      const std::vector<int64_t> c = parseList("--classes", o.classes, 0, m.numClasses - 1);
      if (c.size() != 1 && static_cast<int64_t>(c.size()) != M)
        usageError("--classes gives " + std::to_string(c.size()) + " classes for " +
                   std::to_string(M) + " --cond rows: give one for all or one per row");
      for (int64_t r = 0; r < M; ++r)
        p.rowLabels[r] = c.size() == 1 ? c[0] : c[r];
    } else if (o.classesGiven) {
      usageError("--classes: " + lib.path + " has no label input y");
    }
    p.images = M * p.perRow;
    for (int64_t i = 0; i < p.images; ++i) {
      p.condRow.push_back(i / p.perRow);
      if (m.conditional)
        p.labels.push_back(p.rowLabels[i / p.perRow]);
    }
    return p;
  }
  if (o.perCond > 0)
    usageError("--per-cond: " + lib.path + " has no conditioning beyond the label");
  if (!m.conditional) {
    // Rows of 8 unlabelled images (label -1).
    if (o.classesGiven || o.perClassGiven)
      usageError(std::string(o.classesGiven ? "--classes" : "--per-class") + ": " + lib.path +
                 " is unconditional (no label input y); use --images N");
    p.images = o.images > 0 ? o.images : 16;
    p.perRow = std::min<int64_t>(8, p.images);
    p.rowLabels.assign(static_cast<std::size_t>((p.images + p.perRow - 1) / p.perRow), -1);
    return p;
  }
  if (o.images > 0)
    usageError("--images is for unconditional models; " + lib.path +
               " is class-conditional: use --classes and --per-class");
  if (o.classes == "all")
    for (int64_t c = 0; c < m.numClasses; ++c)
      p.rowLabels.push_back(c);
  else
    p.rowLabels = parseList("--classes", o.classes, 0, m.numClasses - 1);
  p.perRow = o.perClass;
  p.images = static_cast<int64_t>(p.rowLabels.size()) * p.perRow;
  for (int64_t i = 0; i < p.images; ++i)
    p.labels.push_back(p.rowLabels[i / p.perRow]);
  return p;
}

Guidance planGuidance(const SampleOptions &o, const ModelFacts &m, const StepLibrary &lib) {
  Guidance g;
  g.nullConds.assign(m.conds.size(), false);
  const bool guidable = m.conditional || !m.conds.empty();
  // DiT's 4.0 is a class-conditional default; other models guide on request.
  g.scale = o.cfgGiven ? o.cfgScale : m.conditional ? 4.0 : 1.0;
  if (!guidable && g.scale != 1.0)
    usageError("--cfg-scale " + number(g.scale) + ": " + lib.path + " is unconditional "
               "(no label input y), there is no class to guide towards; omit --cfg-scale");
  if (!g.on()) {
    if (o.cfgDropGiven)
      usageError("--cfg-drop chooses what guidance drops; with --cfg-scale 1 there is none");
    return g;
  }
  if (o.cfgDrop == "all") {
    g.nullLabel = m.conditional;
    g.nullConds.assign(m.conds.size(), true);
  } else {
    std::string names = m.conditional ? "y" : "";
    for (const CondInput &c : m.conds)
      names += (names.empty() ? "" : ", ") + c.name;
    std::size_t start = 0;
    while (start <= o.cfgDrop.size()) {
      std::size_t comma = o.cfgDrop.find(',', start);
      if (comma == std::string::npos)
        comma = o.cfgDrop.size();
      const std::string n = o.cfgDrop.substr(start, comma - start);
      start = comma + 1;
      bool known = n == "y" && m.conditional;
      g.nullLabel |= known;
      for (std::size_t k = 0; k < m.conds.size(); ++k)
        if (m.conds[k].name == n)
          g.nullConds[k] = known = true;
      if (!known)
        usageError("--cfg-drop: '" + n + "' is not one of " + lib.path + "'s conditionings (" +
                   names + ", or all)");
    }
  }
  if (g.nullLabel && !m.hasNullClass)
    usageError("--cfg-scale " + number(g.scale) + " needs the null class, but " + lib.path +
               "'s label table has " + std::to_string(m.labelRows) + " rows for " +
               std::to_string(m.numClasses) +
               " classes (exported with --class-dropout-prob 0?); use --cfg-scale 1" +
               (m.conds.empty() ? "" : " or a --cfg-drop without y"));
  if (m.batch % 2)
    usageError("--cfg-scale " + number(g.scale) + " runs the conditional and "
               "null halves in one batch, so the library's batch must be even, not " +
               std::to_string(m.batch) + " (hc-compile --sampler --batch)");
  return g;
}

} // namespace hcrun
