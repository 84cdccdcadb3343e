#include "EmitPlacement.h"

#include "hc/Schedule/Placement.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace hs = hc::schedule;

namespace hc {

namespace {
llvm::json::Array ints(const std::vector<int32_t> &v) {
  return llvm::json::Array(v);
}
} // namespace

bool emitMachinePlan(func::FuncOp f, int (*arenaCode)(StringRef),
                     llvm::json::Object &desc, std::string &tables,
                     std::string &error) {
  llvm::raw_string_ostream os(tables);
  hs::PlanPlacement p;
  hs::PlanBudget b;
  if (!f->hasAttr(hs::kPlacementAttr)) {
    // No machine plan: every arena whole, touched by the first cluster.
    os << "constexpr int32_t kRanksPerNode = 1;\n"
       << "const hcrt_touch_slice kTouch[] = {\n";
    auto sizes = f->getAttrOfType<DictionaryAttr>("hcs.arena_bytes");
    for (NamedAttribute a : sizes)
      if (int64_t bytes = cast<IntegerAttr>(a.getValue()).getInt())
        os << "  {" << arenaCode(a.getName()) << ", 0, -1, 0, " << bytes << "},\n";
    os << "  {0, 0, -1, 0, 0},  // never empty\n};\nconst int32_t kTouchNuma[] = {-1};\n";
    return true;
  }
  hs::PlanTopology t;
  if (!hs::readTopology(f->getAttr(hs::kTopologyAttr), t, error) ||
      !hs::readBudget(f->getAttr(hs::kCoreBudgetAttr), b, error) ||
      !hs::readPlacement(f->getAttr(hs::kPlacementAttr), p, error))
    return false;

  llvm::json::Array clusters, numa, ranks, slices;
  for (const hs::PlanCluster &c : t.clusters)
    clusters.push_back(llvm::json::Object{
        {"cores", ints(c.cores)}, {"numa", c.numa}, {"near", ints(c.near)}});
  for (const hs::PlanNuma &n : t.numa)
    numa.push_back(llvm::json::Object{
        {"os", n.os}, {"kind", n.kind}, {"bytes", n.bytes}});
  for (const hs::PlanRank &r : b.ranks)
    ranks.push_back(llvm::json::Object{{"clusters", ints(r.clusters)},
                                       {"compute", ints(r.compute)},
                                       {"comm", ints(r.comm)}});
  os << "constexpr int32_t kRanksPerNode = " << b.ranksPerNode << ";\n"
     << "const hcrt_touch_slice kTouch[] = {\n";
  std::string numaRows;
  for (const hs::PlanSlice &s : p.slices) {
    slices.push_back(llvm::json::Object{{"arena", s.arena},
                                        {"offset", s.offset},
                                        {"bytes", s.bytes},
                                        {"owner", s.owner},
                                        {"numa", ints(s.numa)}});
    os << "  {" << arenaCode(s.arena) << ", " << s.owner << ", -1, " << s.offset
       << ", " << s.bytes << "},\n";
    for (int32_t n : s.numa)
      numaRows += std::to_string(n) + ", ";
  }
  if (p.slices.empty())
    os << "  {0, 0, -1, 0, 0},  // never empty\n";
  os << "};\n// Home NUMA node per slice and local rank (slice-major).\n"
     << "const int32_t kTouchNuma[] = {" << (numaRows.empty() ? "-1" : numaRows)
     << "};\n";
  desc["topology"] = llvm::json::Object{{"source", t.source},
                                        {"summary", t.summary},
                                        {"split", t.split},
                                        {"clusters", std::move(clusters)},
                                        {"numa", std::move(numa)}};
  desc["core_budget"] = llvm::json::Object{{"ranks_per_node", b.ranksPerNode},
                                           {"division", b.division},
                                           {"ranks", std::move(ranks)}};
  desc["placement"] = llvm::json::Object{{"page_bytes", p.pageBytes},
                                         {"slices", std::move(slices)}};
  return true;
}

} // namespace hc
