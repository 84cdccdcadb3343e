#include "hc/base/files.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace hc::rt {

uint64_t contentHash(uint64_t h, const void *data, std::size_t n) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i)
    h = (h ^ p[i]) * 0x100000001b3ull;
  h = (h ^ n ^ (h >> 33)) * 0x9e3779b97f4a7c15ull; // every bit reaches all
  return h ^ (h >> 29);
}

std::string hashHex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// contentHash as a stream: its 8-byte words are taken at offsets from the
// chunk's start (chunks are whole words), so a word may span two pieces.
void ContentHasher::add(const void *data, std::size_t n) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  while (n > 0) {
    std::size_t take = std::min(n, kChunk - inChunk_);
    inChunk_ += take;
    n -= take;
    const unsigned char *end = p + take;
    while (tailN_ > 0 && tailN_ < 8 && p < end)
      tail_[tailN_++] = *p++;
    if (tailN_ == 8) {
      uint64_t w;
      std::memcpy(&w, tail_, 8);
      c_ = (c_ ^ w) * 0x100000001b3ull;
      c_ ^= c_ >> 29;
      tailN_ = 0;
    }
    for (; tailN_ == 0 && end - p >= 8; p += 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      c_ = (c_ ^ w) * 0x100000001b3ull;
      c_ ^= c_ >> 29;
    }
    while (p < end)
      tail_[tailN_++] = *p++;
    if (inChunk_ == kChunk)
      closeChunk();
  }
}

void ContentHasher::closeChunk() {
  for (std::size_t i = 0; i < tailN_; ++i)
    c_ = (c_ ^ tail_[i]) * 0x100000001b3ull;
  const uint64_t n = inChunk_;
  c_ = (c_ ^ n ^ (c_ >> 33)) * 0x9e3779b97f4a7c15ull;
  h_ = c_ ^ (c_ >> 29);
  c_ = h_;
  inChunk_ = tailN_ = 0;
  any_ = true;
}

uint64_t ContentHasher::finish() {
  if (inChunk_ > 0 || !any_)
    closeChunk();
  return h_;
}

bool hashFile(const std::string &path, uint64_t &hash, std::string &error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  std::vector<char> buf(ContentHasher::kChunk);
  ContentHasher hasher;
  for (;;) {
    ssize_t got = ::read(fd, buf.data(), buf.size());
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      error = path + ": cannot read: " + std::strerror(errno);
      ::close(fd);
      return false;
    }
    if (got == 0)
      break;
    hasher.add(buf.data(), static_cast<std::size_t>(got));
  }
  ::close(fd);
  hash = hasher.finish();
  return true;
}

bool sampledIdentity(const std::string &path, std::string &identity,
                     std::string &error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    error = path + ": cannot open: " + std::strerror(errno);
    if (fd >= 0)
      ::close(fd);
    return false;
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  constexpr uint64_t kEnds = 64 << 10, kBlock = 4 << 10, kBlocks = 64;
  std::vector<std::pair<uint64_t, uint64_t>> ranges = {{0, std::min(size, kEnds)}};
  if (size > kEnds) {
    for (uint64_t i = 0; i < kBlocks; ++i) {
      uint64_t at = kEnds + (size - kEnds) / kBlocks * i;
      ranges.push_back({at, std::min(kBlock, size - at)});
    }
    uint64_t tail = std::max(kEnds, size - std::min(size, kEnds));
    ranges.push_back({tail, size - tail});
  }
  uint64_t h = contentHash(kContentHashSeed, &size, sizeof size);
  std::vector<char> buf(kEnds);
  for (const auto &[at, n] : ranges) {
    std::size_t have = 0;
    while (have < n) {
      ssize_t got = ::pread(fd, buf.data() + have, n - have, static_cast<off_t>(at + have));
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0) {
        error = path + ": cannot read: " + (got < 0 ? std::strerror(errno) : "cut short");
        ::close(fd);
        return false;
      }
      have += static_cast<std::size_t>(got);
    }
    h = contentHash(h, buf.data(), n);
  }
  ::close(fd);
  identity = std::to_string(size) + ":" + hashHex(h);
  return true;
}

bool fileId(const std::string &path, FileId &id) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return false;
  id = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  return true;
}

bool sameFile(const std::string &a, const std::string &b) {
  FileId x, y;
  return fileId(a, x) && fileId(b, y) && x == y;
}

} // namespace hc::rt

namespace hc::rt {
namespace {

std::string folderOf(const std::string &path) {
  std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Temporaries of open AtomicFiles, for removeTemporariesFromSignal(): fixed
// slots, because a signal handler may neither allocate nor lock.
constexpr int kSlots = 8;
char gTempPath[kSlots][4096];
std::atomic<int> gTempUsed[kSlots];

int claimSlot(const std::string &tmp) {
  if (tmp.size() >= sizeof gTempPath[0])
    return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = 0;
    if (gTempUsed[i].compare_exchange_strong(expected, 2)) {  // 2: filling
      std::memcpy(gTempPath[i], tmp.c_str(), tmp.size() + 1);
      gTempUsed[i].store(1);
      return i;
    }
  }
  return -1;
}

void releaseSlot(int &slot) {
  if (slot >= 0)
    gTempUsed[slot].store(0);
  slot = -1;
}

} // namespace

bool isSymlink(const std::string &path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

int openNoFollow(const std::string &path, int flags, std::string &error) {
  int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0)
    error = path + (errno == ELOOP ? std::string(": is a symbolic link, which hc "
                                                 "does not write through")
                                   : ": cannot open for writing: " +
                                         std::string(std::strerror(errno)));
  return fd;
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!tmp_.empty())
    ::unlink(tmp_.c_str());
  releaseSlot(slot_);
}

bool AtomicFile::open(const std::string &path, std::string &error) {
  path_ = path;
  std::string dir = folderOf(path);
  std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.empty()) {
    error = path + ": not a file name";
    return false;
  }
  if (isSymlink(path)) {
    error = path + ": is a symbolic link, which hc does not write through";
    return false;
  }
  std::string templ = dir + "/." + base + ".tmp.XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  fd_ = mkostemp(buf.data(), O_CLOEXEC);
  if (fd_ < 0) {
    error = path + ": cannot create a temporary file in " + dir + ": " +
            std::strerror(errno);
    return false;
  }
  tmp_ = buf.data();
  slot_ = claimSlot(tmp_);
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd_, 0666 & ~mask); // mkstemp makes 0600; give the usual mode
  return true;
}

bool AtomicFile::write(const void *data, std::size_t n) {
  const char *p = static_cast<const char *>(data);
  if (crashAfterBytes >= 0 && written_ + static_cast<int64_t>(n) >= crashAfterBytes) {
    std::size_t part = static_cast<std::size_t>(crashAfterBytes - written_);
    crashAfterBytes = -1;
    if (write(p, part)) {
      ::fsync(fd_); // the partial file must be there for the test to see
      ::raise(SIGKILL);
    }
    return false;
  }
  written_ += static_cast<int64_t>(n);
  if (hasher)
    hasher->add(p, n);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, std::min<std::size_t>(n, 1u << 30));
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      error_ = path_ + ": write failed: " + std::strerror(errno);
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool AtomicFile::commit(std::string &error) {
  if (fsync(fd_) != 0) {
    error = path_ + ": fsync failed: " + std::strerror(errno);
    return false;
  }
  int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    error = path_ + ": close failed: " + std::strerror(errno);
    return false;
  }
  // A link made at the destination while the file was written is refused
  // too (rename would replace the link, not write through it, but the
  // caller asked for a file there).
  if (isSymlink(path_)) {
    error = path_ + ": is a symbolic link, which hc does not write through";
    return false;
  }
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    error = path_ + ": cannot rename the temporary file over it: " +
            std::strerror(errno);
    return false;
  }
  tmp_.clear();
  releaseSlot(slot_);
  int dfd = ::open(folderOf(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd); // best effort: some file systems refuse fsync on folders
    ::close(dfd);
  }
  return true;
}

bool writeFileAtomic(const std::string &path, const void *data, std::size_t n,
                     std::string &error) {
  AtomicFile f;
  if (!f.open(path, error))
    return false;
  if (!f.write(data, n)) {
    error = f.error();
    return false;
  }
  return f.commit(error);
}

void removeTemporariesFromSignal() {
  for (int i = 0; i < kSlots; ++i)
    if (gTempUsed[i].load() == 1)
      ::unlink(gTempPath[i]);
}

} // namespace hc::rt
