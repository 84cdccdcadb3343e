// hc-run's check of this machine against the library's plan (the
// description's "topology" and "core_budget", hc-compile --topology): what
// differs, in one line, and whether the plan re-maps or cannot run.
#ifndef HCRUN_MACHINE_CHECK_H
#define HCRUN_MACHINE_CHECK_H

#include "hc/base/topology.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace hcrun {

// What this process has.
struct MachineView {
  hc::rt::Topology topo;   // the machine (or HC_TOPOLOGY), whole node
  std::vector<int> allowed;  // its cores this process may use (affinity)
  int cgroupLimit = 0;     // cgroup v2 cpu.max in cores (0: none)
  int localRanks = 1;      // ranks of this job on the node
  int localRank = 0;
};

struct MachineCheck {
  enum class Action { Match, Remap, Refuse } action = Action::Match;
  std::string line;        // the note or the refusal, one line
  int rankCores = 0;       // cores this rank may compute on (after limits)
  int planComm = 0;        // the plan's comm cores for this rank
  int threadLimit = 0;     // > 0: run the team with this many threads
};

// The machine as this process sees it (HC_TOPOLOGY when set, affinity
// mask, cgroup limit, Open MPI's local rank and size).
MachineView currentMachine();

// Compares; `strict`: any difference refuses. A description without a plan
// (older libraries) matches.
MachineCheck checkMachine(const nlohmann::json &desc, const MachineView &m,
                          bool strict);

// Memory: what the plan needs per rank against what the machine offers.
// Bytes the step's in-memory arenas take (the description's memory plan);
// 0 when it has none.
int64_t plannedArenaBytes(const nlohmann::json &desc);
// What this process may still allocate: MemAvailable, the cgroup's memory
// limit less its use (v2 memory.max/current), and the address-space limit
// (RLIMIT_AS) less what is mapped; -1 where there is none.
struct MemoryOffer {
  int64_t available = -1, cgroupFree = -1, cgroupLimit = -1;
  int64_t addressLimit = -1, addressFree = -1;
  int64_t least(int localRanks) const;  // per rank of this node, -1: unknown
  std::string text() const;             // "MemAvailable 20.1 GB, cgroup ..."
};
MemoryOffer memoryOffer();
// The plan (and `extraBytes` hc-run holds beside it: EMA, checkpoint
// buffer, batch) against the offer: "" when it fits (or nothing is known),
// else one line saying what is needed and what is offered.
std::string memoryShortfall(const nlohmann::json &desc, int64_t extraBytes,
                            int localRanks);

} // namespace hcrun

#endif
