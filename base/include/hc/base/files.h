// File facts shared by hc-compile and hc-run: content hashes (checkpoint
// checksums, the step library's hash of its init file), file identity
// (an output must never be one of the run's inputs, however it is spelled)
// and writing outputs: atomically, and never through a link.
#ifndef HC_BASE_FILES_H
#define HC_BASE_FILES_H

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

// hashFile's value of a byte stream fed in pieces of any size: contentHash
// over whole 8 MiB chunks, then the last partial one (an empty stream: one
// empty chunk). A writer hashes what it writes without reading it back.
class ContentHasher {
public:
  static constexpr std::size_t kChunk = std::size_t(8) << 20;
  void add(const void *data, std::size_t n);
  uint64_t finish();  // the hash; the hasher is spent

private:
  void closeChunk();
  uint64_t h_ = kContentHashSeed;  // after the chunks closed so far
  uint64_t c_ = kContentHashSeed;  // inside the current chunk
  std::size_t inChunk_ = 0;        // its bytes so far
  unsigned char tail_[8] = {};     // bytes of a word not yet complete
  std::size_t tailN_ = 0;
  bool any_ = false;               // a chunk was closed
};
// A file's identity without reading it all (a dataset may be terabytes):
// "size:hash" where the hash covers the first and last 64 KiB and 64 blocks
// of 4 KiB spread evenly between (the NPY header included). Two copies of
// one dataset on two nodes agree; another dataset, or one edited or cut,
// differs in practice. False + one-line `error` naming the file.
bool sampledIdentity(const std::string &path, std::string &identity,
                     std::string &error);

// Device and inode of an existing file; false when it does not exist (or
// cannot be stat'ed).
struct FileId {
  uint64_t dev = 0, ino = 0;
  bool operator==(const FileId &o) const { return dev == o.dev && ino == o.ino; }
};
bool fileId(const std::string &path, FileId &id);
// Both exist and are the same file (hard links and symlinks included).
bool sameFile(const std::string &a, const std::string &b);

// Outputs never follow a link. True when `path` exists as a symbolic link
// (lstat); the one-line refusal callers print names the flag and the path.
bool isSymlink(const std::string &path);
// Opens (creating, mode 0644 less the umask) a file that is not a link:
// O_NOFOLLOW | O_CLOEXEC added to `flags`. -1 with `error` (one line naming
// the path; a link is "is a symbolic link, which hc does not write through").
int openNoFollow(const std::string &path, int flags, std::string &error);

// A file written under a temporary name (mkostemp: created exclusively, so
// never through a link) in the destination's folder and renamed over the
// destination only by commit(), after fsync (the folder is fsynced after the
// rename). open() refuses a destination that is a link. Destroyed
// uncommitted, it removes the temporary file and leaves the destination
// untouched; a process ended by a signal removes it through
// removeTemporariesFromSignal().
class AtomicFile {
public:
  AtomicFile() = default;
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;
  ~AtomicFile();
  bool open(const std::string &path, std::string &error);
  bool write(const void *data, std::size_t n);
  bool commit(std::string &error);
  const std::string &error() const { return error_; }
  // Test hook (HC_CKPT_CRASH_AFTER_BYTES): SIGKILL after this many bytes.
  int64_t crashAfterBytes = -1;
  // When set, sees every byte written, in order (hashFile's value of the
  // file without reading it back).
  ContentHasher *hasher = nullptr;

private:
  std::string path_, tmp_, error_;
  int fd_ = -1, slot_ = -1;
  int64_t written_ = 0;
};
// `data` to `path` through an AtomicFile. False + one-line `error`.
bool writeFileAtomic(const std::string &path, const void *data, std::size_t n,
                     std::string &error);
// Async-signal-safe: unlinks every AtomicFile temporary still open in this
// process (a second preemption signal ends the process without a
// half-written file left behind).
void removeTemporariesFromSignal();

} // namespace hc::rt

#endif // HC_BASE_FILES_H
