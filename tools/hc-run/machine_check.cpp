#include "machine_check.h"
#include "hc/base/settings.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sys/resource.h>

namespace hcrun {

namespace {



std::string kindsOf(const std::set<std::string> &kinds) {
  std::string s;
  for (const std::string &k : kinds)
    s += (s.empty() ? "" : "+") + k;
  return s;
}

} // namespace

MachineView currentMachine() {
  MachineView m;
  const char *sim = hc::rt::setting(hc::rt::Setting::Topology);  // checkSettings validated it
  std::string error;
  if (!hc::rt::discoverTopology(hc::rt::parseTopologySpec(sim ? sim : ""),
                                m.topo, error))
    m.topo = hc::rt::Topology();
  std::set<int> mask;
  if (!(sim && *sim)) {
    std::vector<int> a = hc::rt::allowedCores();
    mask.insert(a.begin(), a.end());
  }
  for (const hc::rt::Cluster &c : m.topo.clusters)
    for (int core : c.cores)
      if (mask.empty() || mask.count(core))
        m.allowed.push_back(core);
  m.cgroupLimit = sim && *sim ? 0 : hc::rt::cgroupCpuLimit();
  m.localRanks = std::max(1, static_cast<int>(hc::rt::settingInt(hc::rt::Setting::OmpiLocalSize, 1)));
  m.localRank = std::clamp(static_cast<int>(hc::rt::settingInt(hc::rt::Setting::OmpiLocalRank, 0)), 0,
                           m.localRanks - 1);
  return m;
}

MachineCheck checkMachine(const nlohmann::json &desc, const MachineView &m,
                          bool strict) {
  MachineCheck out;
  if (!desc.contains("topology") || !desc.contains("core_budget"))
    return out;
  const nlohmann::json &topo = desc["topology"], &budget = desc["core_budget"];
  int planRanks = budget.value("ranks_per_node", 1);
  const nlohmann::json &ranks = budget["ranks"];
  const nlohmann::json &mine =
      ranks.at(static_cast<std::size_t>(m.localRank % std::max(1, planRanks)));
  int planCompute = static_cast<int>(mine["compute"].size());
  out.planComm = static_cast<int>(mine["comm"].size());

  // This rank's cores: its affinity mask when a launcher bound it, else its
  // contiguous share of the node (the team's rule); then the cgroup limit,
  // shared by the node's ranks.
  int total = m.topo.numCores(), usable = static_cast<int>(m.allowed.size());
  bool bound = usable < total;
  int share = usable;
  if (!bound && m.localRanks > 1 && usable >= m.localRanks)
    share = usable * (m.localRank + 1) / m.localRanks -
            usable * m.localRank / m.localRanks;
  out.rankCores = share;
  if (m.cgroupLimit > 0) {
    int perRank = std::max(1, m.cgroupLimit / m.localRanks);
    if (perRank < share) {
      out.rankCores = perRank;
      out.threadLimit = perRank;
    }
  }

  // What differs.
  std::vector<std::string> diffs;
  std::vector<std::size_t> planSizes, hereSizes;
  for (const auto &c : topo["clusters"])
    planSizes.push_back(c["cores"].size());
  hc::rt::Topology here = m.topo;
  std::string error;
  int split = topo.value("split", 0);
  if (split > 0 && !hc::rt::splitClusters(here, split, error))
    diffs.push_back("the plan's --clusters " + std::to_string(split) +
                    " does not fit here");
  for (const auto &c : here.clusters)
    hereSizes.push_back(c.cores.size());
  if (out.rankCores != planCompute + out.planComm)
    diffs.push_back(std::to_string(out.rankCores) + " cores for this rank, the plan " +
                    std::to_string(planCompute + out.planComm));
  if (planSizes != hereSizes)
    diffs.push_back("another cluster layout");
  if (m.localRanks != planRanks)
    diffs.push_back(std::to_string(m.localRanks) + " ranks on this node, the plan " +
                    std::to_string(planRanks));
  std::set<std::string> planKinds, hereKinds, missing;
  for (const auto &n : topo["numa"])
    planKinds.insert(n.value("kind", "DRAM"));
  for (const auto &n : here.numa)
    hereKinds.insert(n.kind);
  for (const std::string &k : planKinds)
    if (!hereKinds.count(k))
      missing.insert(k);
  if (!missing.empty())
    diffs.push_back("no " + kindsOf(missing) + " memory here");
  // A binding to exactly the plan's cores for this rank is the plan.
  std::set<int> planCores;
  for (const char *k : {"compute", "comm"})
    for (const auto &c : mine[k])
      planCores.insert(c.get<int>());
  if (bound && planCores != std::set<int>(m.allowed.begin(), m.allowed.end()))
    diffs.push_back("bound by the launcher to " + std::to_string(usable) + " of " +
                    std::to_string(total) + " cores");
  if (out.threadLimit > 0)
    diffs.push_back("cgroup cpu.max allows " + std::to_string(m.cgroupLimit) + " cores");
  if (diffs.empty())
    return out;

  std::string what;
  for (const std::string &d : diffs)
    what += (what.empty() ? "" : "; ") + d;
  std::string planned = "planned for " + topo.value("summary", std::string("?")) +
                        ", " + std::to_string(planRanks) + " rank(s) per node of " +
                        std::to_string(planCompute) + " compute + " +
                        std::to_string(out.planComm) + " comm cores; here " +
                        here.summary() + " (" + what + ")";
  if (out.planComm > 0 && out.rankCores <= out.planComm) {
    out.action = MachineCheck::Action::Refuse;
    out.line = planned + ": the plan reserves " + std::to_string(out.planComm) +
               " comm cores per rank, which leaves no core to compute; recompile "
               "with --topology native (or fewer --comm-cores)";
    return out;
  }
  if (strict) {
    out.action = MachineCheck::Action::Refuse;
    out.line = planned + ": --strict-topology refuses a machine unlike the plan";
    return out;
  }
  std::set<int> allowed(m.allowed.begin(), m.allowed.end());
  int teamClusters = 0;
  for (const auto &c : here.clusters)
    teamClusters += std::any_of(c.cores.begin(), c.cores.end(),
                                [&](int core) { return allowed.count(core) > 0; });
  out.action = MachineCheck::Action::Remap;
  out.line = planned + "; re-mapped: " +
             std::to_string(out.rankCores - out.planComm) +
             " compute threads, cluster k's slices first-touched by team cluster "
             "k mod " + std::to_string(std::max(1, teamClusters)) +
             (missing.empty() ? "" : ", homes on the memory there is");
  return out;
}

// ------------------------------------------------------------------ memory
namespace {
int64_t readInt(const std::string &path) {
  std::ifstream f(path);
  std::string v;
  if (!(f >> v) || v == "max")
    return -1;
  return std::strtoll(v.c_str(), nullptr, 10);
}

// "Key:   N kB" from a /proc file, in bytes; -1 when absent.
int64_t procKb(const char *file, const char *key) {
  std::ifstream f(file);
  std::string line;
  const std::size_t n = std::strlen(key);
  while (std::getline(f, line))
    if (line.compare(0, n, key) == 0)
      return std::strtoll(line.c_str() + n, nullptr, 10) * 1024;
  return -1;
}

std::string gb(int64_t b) {
  char buf[32];
  if (b >= 1000000000)
    std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%.1f MB", b / 1e6);
  return buf;
}
} // namespace

int64_t plannedArenaBytes(const nlohmann::json &desc) {
  const nlohmann::json mp = desc.value("memory_plan", nlohmann::json::object());
  if (mp.contains("planned_bytes") && mp["planned_bytes"].is_number_integer())
    return mp["planned_bytes"].get<int64_t>();
  int64_t total = 0;
  const nlohmann::json tiers = mp.value("tiers", nlohmann::json::array());
  for (const auto &tier : tiers) {
    if (!tier.is_object() || tier.value("kind", "") == "disk")
      continue;
    const nlohmann::json arenas = tier.value("arena_bytes", nlohmann::json::object());
    for (const auto &bytes : arenas)
      if (bytes.is_number_integer())
        total += bytes.get<int64_t>();
  }
  return total;
}

MemoryOffer memoryOffer() {
  MemoryOffer m;
  m.available = procKb("/proc/meminfo", "MemAvailable:");
  // cgroup v2: this process's group from /proc/self/cgroup ("0::/path").
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line))
    if (line.rfind("0::", 0) == 0) {
      std::string dir = "/sys/fs/cgroup" + line.substr(3);
      m.cgroupLimit = readInt(dir + "/memory.max");
      int64_t used = readInt(dir + "/memory.current");
      if (m.cgroupLimit >= 0)
        m.cgroupFree = std::max<int64_t>(0, m.cgroupLimit - std::max<int64_t>(0, used));
    }
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    int64_t mapped = procKb("/proc/self/status", "VmSize:");
    m.addressLimit = static_cast<int64_t>(rl.rlim_cur);
    m.addressFree = std::max<int64_t>(0, m.addressLimit - std::max<int64_t>(0, mapped));
  }
  return m;
}

int64_t MemoryOffer::least(int localRanks) const {
  int64_t best = -1;
  auto take = [&](int64_t v) {
    if (v >= 0 && (best < 0 || v < best))
      best = v;
  };
  const int n = std::max(1, localRanks);
  take(available >= 0 ? available / n : -1);
  take(cgroupFree >= 0 ? cgroupFree / n : -1);
  take(addressFree);  // per process already
  return best;
}

std::string MemoryOffer::text() const {
  std::string t = "MemAvailable " + (available >= 0 ? gb(available) : std::string("unknown"));
  t += cgroupLimit >= 0 ? ", cgroup limit " + gb(cgroupLimit) + " (" + gb(cgroupFree) + " free)"
                        : ", no cgroup memory limit";
  if (addressFree >= 0)
    t += ", address-space limit (ulimit -v) " + gb(addressLimit) + " with " +
         gb(addressFree) + " unmapped";
  return t;
}

std::string memoryShortfall(const nlohmann::json &desc, int64_t extraBytes,
                            int localRanks) {
  const int64_t plan = plannedArenaBytes(desc);
  if (plan <= 0)
    return "";
  const MemoryOffer offer = memoryOffer();
  const int64_t need = plan + extraBytes, have = offer.least(localRanks);
  if (have < 0 || need <= have)
    return "";
  return "the plan needs " + gb(plan) + " of arenas per rank (" + gb(need) +
         " with hc-run's own buffers), " + std::to_string(localRanks) +
         " rank(s) on this node; the machine offers " + offer.text();
}

} // namespace hcrun
