// File facts shared by hc-compile and hc-run: content hashes (checkpoint
// checksums, the step library's hash of its init file) and file identity
// (an output must never be one of the run's inputs, however it is spelled).
#ifndef HC_RUNTIME_FILES_H
#define HC_RUNTIME_FILES_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace hc::rt {

// 64-bit multiply-xor hash over 8-byte words, chained through `h` (several
// GB/s: a DiT-XL/2 checkpoint is 8 GB with its moments and EMA). Not a
// cryptographic hash: it catches damage and edits, not an adversary.
constexpr uint64_t kContentHashSeed = 0xcbf29ce484222325ull;
uint64_t contentHash(uint64_t h, const void *data, std::size_t n);
// 16 lowercase hex digits.
std::string hashHex(uint64_t h);
// contentHash of a whole file's bytes from kContentHashSeed. False + a
// one-line `error` naming the file.
bool hashFile(const std::string &path, uint64_t &hash, std::string &error);

// Device and inode of an existing file; false when it does not exist (or
// cannot be stat'ed).
struct FileId {
  uint64_t dev = 0, ino = 0;
  bool operator==(const FileId &o) const { return dev == o.dev && ino == o.ino; }
};
bool fileId(const std::string &path, FileId &id);
// Both exist and are the same file (hard links and symlinks included).
bool sameFile(const std::string &a, const std::string &b);

} // namespace hc::rt

#endif // HC_RUNTIME_FILES_H
