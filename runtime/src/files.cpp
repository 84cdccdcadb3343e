#include "hc/runtime/files.h"

#include <cerrno>
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

bool hashFile(const std::string &path, uint64_t &hash, std::string &error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  // Whole 8 MiB chunks (short reads refilled), so the value depends on the
  // bytes alone, not on how read() split them.
  std::vector<char> buf(8 << 20);
  uint64_t h = kContentHashSeed;
  for (bool eof = false; !eof;) {
    std::size_t have = 0;
    while (have < buf.size()) {
      ssize_t got = ::read(fd, buf.data() + have, buf.size() - have);
      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0) {
        error = path + ": cannot read: " + std::strerror(errno);
        ::close(fd);
        return false;
      }
      if (got == 0) {
        eof = true;
        break;
      }
      have += static_cast<std::size_t>(got);
    }
    if (have > 0 || h == kContentHashSeed)
      h = contentHash(h, buf.data(), have);
  }
  ::close(fd);
  hash = h;
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
