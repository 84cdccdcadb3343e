#include "hc/runtime/checkpoint.h"
#include "hc/base/settings.h"
#include "hc/base/files.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hc::rt {
namespace {

constexpr const char *kPrefix = "ckpt-", *kSuffix = ".safetensors";
constexpr const char *kChecksumKey = "hc.checksum";
// Format 1 checksummed the data only; its metadata could be edited unseen.
constexpr const char *kDataOnlyChecksumKey = "hc.data_checksum";

// Step of a checkpoint file name, or -1 when `name` is not one.
int64_t stepOfName(const std::string &name) {
  const std::size_t p = std::strlen(kPrefix), s = std::strlen(kSuffix);
  if (name.size() <= p + s || name.compare(0, p, kPrefix) != 0 ||
      name.compare(name.size() - s, s, kSuffix) != 0)
    return -1;
  std::string digits = name.substr(p, name.size() - p - s);
  if (digits.size() < 8 || digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(),
                   [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::strtoll(digits.c_str(), nullptr, 10);
}

// The checksum covers the metadata (every key but the checksum's own, in key
// order) and, per tensor in file order, its name, dtype, shape and bytes: an
// edited step or seed, a renamed tensor and damaged data all change it.
uint64_t hashString(uint64_t h, const std::string &s) {
  uint64_t n = s.size();
  h = contentHash(h, &n, sizeof n);
  return contentHash(h, s.data(), s.size());
}

uint64_t hashMetadata(const std::map<std::string, std::string> &metadata) {
  uint64_t h = kContentHashSeed;
  for (const auto &[key, value] : metadata)
    if (key != kChecksumKey)
      h = hashString(hashString(h, key), value);
  return h;
}

uint64_t hashTensor(uint64_t h, const std::string &name, const std::string &dtype,
                    const std::vector<int64_t> &shape, const void *data,
                    std::size_t bytes) {
  h = hashString(hashString(h, name), dtype);
  uint64_t rank = shape.size();
  h = contentHash(h, &rank, sizeof rank);
  h = contentHash(h, shape.data(), shape.size() * sizeof(int64_t));
  return contentHash(h, data, bytes);
}

// Bytes the crash hook still allows (process-wide), or -1 when unset.
int64_t &crashBudget() {
  static int64_t budget = [] {
#if HC_TEST_SEAMS
    const char *s = hc::rt::setting(hc::rt::Setting::CkptCrashAfterBytes);
    return s && *s ? std::strtoll(s, nullptr, 10) : int64_t(-1);
#else
    return int64_t(-1);
#endif
  }();
  return budget;
}

} // namespace

bool isCheckpointName(const std::string &name) { return stepOfName(name) >= 0; }

std::string checkpointPath(const std::string &dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "%s%08lld%s", kPrefix,
                static_cast<long long>(step), kSuffix);
  return dir + "/" + name;
}

bool listCheckpoints(const std::string &dir, std::vector<CheckpointFile> &out,
                     std::string &error) {
  out.clear();
  DIR *d = opendir(dir.c_str());
  if (!d) {
    error = dir + ": cannot read the checkpoint folder: " + std::strerror(errno);
    return false;
  }
  while (const dirent *e = readdir(d)) {
    int64_t step = stepOfName(e->d_name);
    if (step >= 0)
      out.push_back({step, dir + "/" + e->d_name});
  }
  closedir(d);
  std::sort(out.begin(), out.end(),
            [](const CheckpointFile &a, const CheckpointFile &b) {
              return a.step < b.step;
            });
  return true;
}

int removeStaleCheckpointTemporaries(const std::string &dir) {
  DIR *d = opendir(dir.c_str());
  if (!d)
    return 0;
  std::vector<std::string> stale;
  const std::string start = std::string(".") + kPrefix;
  while (const dirent *e = readdir(d)) {
    std::string n = e->d_name;
    if (n.compare(0, start.size(), start) == 0 &&
        n.find(std::string(kSuffix) + ".tmp.") != std::string::npos)
      stale.push_back(dir + "/" + n);
  }
  closedir(d);
  int removed = 0;
  for (const auto &p : stale)
    removed += ::unlink(p.c_str()) == 0;
  return removed;
}

bool writeCheckpoint(const std::string &dir, int64_t step,
                     const std::vector<SafetensorsTensorRef> &tensors,
                     std::map<std::string, std::string> metadata, int keep,
                     std::string &error) {
  uint64_t h = hashMetadata(metadata);
  for (const auto &t : tensors) {
    std::size_t n = safetensorsItemSize(t.dtype);
    for (int64_t d : t.shape)
      n *= static_cast<std::size_t>(d);
    h = hashTensor(h, t.name, t.dtype, t.shape, t.data, n);
  }
  metadata[kChecksumKey] = hashHex(h);
  const std::string path = checkpointPath(dir, step);
  int64_t &budget = crashBudget();
  if (!writeSafetensors(path, tensors, metadata, error, budget))
    return false;
  struct stat st;
  if (budget >= 0 && ::stat(path.c_str(), &st) == 0)
    budget = std::max<int64_t>(0, budget - static_cast<int64_t>(st.st_size));
  if (keep <= 0)
    return true;
  std::vector<CheckpointFile> all;
  if (!listCheckpoints(dir, all, error))
    return false;
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < all.size(); ++i)
    if (all[i].step != step && ::unlink(all[i].path.c_str()) != 0) {
      error = all[i].path + ": cannot remove an old checkpoint: " +
              std::strerror(errno);
      return false;
    }
  return true;
}

bool openCheckpoint(const std::string &path, SafetensorsFile &file,
                    std::string &error) {
  if (!file.open(path, error))
    return false;
  auto it = file.metadata().find(kChecksumKey);
  if (it == file.metadata().end()) {
    error = file.metadata().count(kDataOnlyChecksumKey)
                ? path + ": written by an older hc-run (checkpoint format 1), "
                         "whose checksum does not cover the metadata (step, "
                         "seed, model); it cannot be verified, so it is not resumed"
                : path + ": not an hc checkpoint (no " + kChecksumKey + " metadata)";
    return false;
  }
  uint64_t h = hashMetadata(file.metadata());
  for (const auto &e : file.entries())
    h = hashTensor(h, e.name, e.dtype, e.shape, file.data(e), e.bytes);
  if (hashHex(h) != it->second) {
    error = path + ": corrupt or edited: the checksum over its metadata and "
            "data does not match (" + hashHex(h) + ", written " + it->second + ")";
    return false;
  }
  return true;
}

} // namespace hc::rt
