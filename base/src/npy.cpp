#include "hc/base/npy.h"
#include "hc/base/files.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace hc::rt {

std::size_t NpyHeader::itemSize() const {
  if (dtype == "f8" || dtype == "i8")
    return 8;
  if (dtype == "f4" || dtype == "i4")
    return 4;
  return 1;
}

std::size_t NpyHeader::numElements() const {
  std::size_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<std::size_t>(d);
  return n;
}

namespace {
// Value of 'key' in the header dict text, up to the next ',' or '}' at depth 0.
bool dictValue(const std::string &dict, const std::string &key,
               std::string &value) {
  std::size_t k = dict.find("'" + key + "'");
  if (k == std::string::npos)
    return false;
  std::size_t colon = dict.find(':', k);
  if (colon == std::string::npos)
    return false;
  std::size_t i = colon + 1, depth = 0;
  std::size_t start = i;
  for (; i < dict.size(); ++i) {
    char c = dict[i];
    if (c == '(')
      ++depth;
    else if (c == ')') {
      if (depth == 0)
        break;
      --depth;
    } else if ((c == ',' || c == '}') && depth == 0)
      break;
  }
  value = dict.substr(start, i - start + (i < dict.size() && dict[i] == ')'));
  // strip blanks and quotes
  std::string v;
  for (char c : value)
    if (c != ' ' && c != '\'')
      v += c;
  value = v;
  return true;
}
} // namespace

bool parseNpyHeader(const char *bytes, std::size_t size, NpyHeader &out,
                    std::string &error) {
  if (size < 10 || std::memcmp(bytes, "\x93NUMPY", 6) != 0) {
    error = "not an NPY file (bad magic)";
    return false;
  }
  unsigned major = static_cast<unsigned char>(bytes[6]);
  std::size_t headerLen, prefix;
  if (major == 1) {
    headerLen = static_cast<unsigned char>(bytes[8]) |
                (static_cast<unsigned char>(bytes[9]) << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) {
      error = "truncated NPY header";
      return false;
    }
    headerLen = 0;
    for (int b = 3; b >= 0; --b)
      headerLen = (headerLen << 8) | static_cast<unsigned char>(bytes[8 + b]);
    prefix = 12;
  } else {
    error = "unsupported NPY version " + std::to_string(major);
    return false;
  }
  // numpy itself refuses headers over 10 000 bytes unless told otherwise
  // (max_header_size); 64 KiB leaves room and stops a huge header's parse.
  constexpr std::size_t kMaxHeader = 64 << 10;
  if (headerLen > kMaxHeader) {
    error = "NPY header of " + std::to_string(headerLen) + " bytes, over the " +
            std::to_string(kMaxHeader) + " an NPY file needs (a damaged or "
            "hostile file?)";
    return false;
  }
  if (prefix + headerLen > size) {
    error = "truncated NPY header";
    return false;
  }
  std::string dict(bytes + prefix, headerLen);
  std::string descr, fortran, shape;
  if (!dictValue(dict, "descr", descr) || !dictValue(dict, "shape", shape) ||
      !dictValue(dict, "fortran_order", fortran)) {
    error = "malformed NPY header dict";
    return false;
  }
  if (fortran != "False") {
    error = "Fortran-ordered NPY arrays are not supported";
    return false;
  }
  if (descr.size() == 3 && (descr[0] == '<' || descr[0] == '|'))
    descr = descr.substr(1);
  static const char *known[] = {"f4", "f8", "i4", "i8", "u1", "b1"};
  bool ok = false;
  for (const char *k : known)
    ok |= descr == k;
  if (!ok) {
    error = "unsupported NPY dtype '" + descr + "' (little-endian f4, f8, i4, "
            "i8, u1, b1 only)";
    return false;
  }
  out.dtype = descr;
  out.shape.clear();
  if (shape.size() < 2 || shape.front() != '(' || shape.back() != ')') {
    error = "malformed NPY shape '" + shape + "'";
    return false;
  }
  std::stringstream ss(shape.substr(1, shape.size() - 2));
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty())
      continue;
    char *end = nullptr;
    long long d = std::strtoll(item.c_str(), &end, 10);
    if (*end != '\0' || d < 0 || d > (1LL << 40)) {
      error = "bad NPY dimension '" + item + "'";
      return false;
    }
    out.shape.push_back(d);
  }
  out.dataOffset = prefix + headerLen;
  long double bytesNeeded = out.itemSize();
  for (int64_t d : out.shape)
    bytesNeeded *= d;
  if (bytesNeeded > static_cast<long double>(size - out.dataOffset)) {
    error = "NPY data truncated: header promises " +
            std::to_string(static_cast<unsigned long long>(bytesNeeded)) +
            " bytes, file has " + std::to_string(size - out.dataOffset);
    return false;
  }
  return true;
}

bool readNpy(const std::string &path, NpyArray &out, std::string &error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot open";
    return false;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  std::string why;
  if (!parseNpyHeader(bytes.data(), bytes.size(), out.header, why)) {
    error = path + ": " + why;
    return false;
  }
  std::size_t n = out.header.numElements() * out.header.itemSize();
  out.data.assign(bytes.begin() + out.header.dataOffset,
                  bytes.begin() + out.header.dataOffset + n);
  return true;
}

bool writeNpy(const std::string &path, const std::string &dtype,
              const std::vector<int64_t> &shape, const void *data,
              std::string &error) {
  NpyHeader h;
  h.dtype = dtype;
  h.shape = shape;
  std::string dict = "{'descr': '" + std::string(dtype == "u1" || dtype == "b1" ? "|" : "<") +
                     dtype + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < shape.size(); ++i)
    dict += std::to_string(shape[i]) + (shape.size() == 1 || i + 1 < shape.size() ? "," : "");
  dict += "), }";
  std::size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                           static_cast<unsigned char>(dict.size() & 0xff),
                           static_cast<unsigned char>(dict.size() >> 8)};
  std::size_t n = h.numElements() * h.itemSize();
  AtomicFile f;
  if (!f.open(path, error))
    return false;
  if (!f.write(pre, 10) || !f.write(dict.data(), dict.size()) ||
      (n > 0 && !f.write(data, n))) {
    error = f.error();
    return false;
  }
  return f.commit(error);
}

} // namespace hc::rt
