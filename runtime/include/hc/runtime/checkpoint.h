// Training checkpoints on disk: one safetensors file per checkpoint,
//   DIR/ckpt-<step, 8+ digits>.safetensors
// written atomically (a temporary ".ckpt-*.tmp.*" in DIR, fsync, rename,
// fsync DIR), so a crash leaves either the previous set of checkpoints or the
// new one, never a half-written file under a checkpoint name. The metadata
// carries a checksum ("hc.checksum") over the other metadata and every
// tensor's name, dtype, shape and bytes, so a file damaged or edited after
// the fact (truncated copy, bit rot, a changed step or seed) is refused, not
// loaded. Format 1 files ("hc.data_checksum", data only) are refused too.
//
// What goes into a checkpoint (tensor names, model description) is the
// host's business (hc-run); this layer only names, lists, writes, verifies
// and prunes files.
//
// Test hook: HC_CKPT_CRASH_AFTER_BYTES=N makes the writer SIGKILL the process
// once N checkpoint bytes (counted over all checkpoints this process writes)
// are on disk, so a crash in the middle of a write is deterministic.
#ifndef HC_RUNTIME_CHECKPOINT_H
#define HC_RUNTIME_CHECKPOINT_H

#include "hc/base/safetensors.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hc::rt {

// "DIR/ckpt-00000100.safetensors" for step 100.
std::string checkpointPath(const std::string &dir, int64_t step);
// Whether a file name (no folder) is one listCheckpoints() takes for a
// checkpoint: ckpt-<8 to 18 digits>.safetensors.
bool isCheckpointName(const std::string &name);

struct CheckpointFile {
  int64_t step = 0;
  std::string path;
};
// Complete checkpoints in `dir` (names of the form above), oldest first.
// Temporary files are not listed. False + `error` when `dir` cannot be read.
bool listCheckpoints(const std::string &dir, std::vector<CheckpointFile> &out,
                     std::string &error);

// Removes temporary files a crashed writer left in `dir`; returns how many.
int removeStaleCheckpointTemporaries(const std::string &dir);

// Writes checkpoint `step` atomically with the checksum added to
// `metadata`, then removes all but the newest `keep` checkpoints (keep <= 0:
// keep all). False + a one-line `error` naming the file.
bool writeCheckpoint(const std::string &dir, int64_t step,
                     const std::vector<SafetensorsTensorRef> &tensors,
                     std::map<std::string, std::string> metadata, int keep,
                     std::string &error);

// Opens a checkpoint and verifies its checksum. False + `error`.
bool openCheckpoint(const std::string &path, SafetensorsFile &file,
                    std::string &error);

} // namespace hc::rt

#endif // HC_RUNTIME_CHECKPOINT_H
