// NPY (NumPy's .npy v1/v2) reading and writing: datasets, test inputs and
// outputs. Little-endian, C order; dtypes f4, f8, i4, i8, u1, b1.
#ifndef HC_BASE_NPY_H
#define HC_BASE_NPY_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hc::rt {

struct NpyHeader {
  std::string dtype;            // "f4", "f8", "i4", "i8", "u1", "b1"
  std::vector<int64_t> shape;   // empty for a 0-d array
  std::size_t dataOffset = 0;   // bytes from the start of the file
  std::size_t itemSize() const;
  std::size_t numElements() const;
};

struct NpyArray {
  NpyHeader header;
  std::vector<char> data;
  template <typename T> const T *as() const {
    return reinterpret_cast<const T *>(data.data());
  }
};

// Parses the header at the start of `bytes` (e.g. a memory-mapped file of
// `size` bytes) and checks that the data fits. False + `error` on bad input.
bool parseNpyHeader(const char *bytes, std::size_t size, NpyHeader &out,
                    std::string &error);

// Reads a whole file. Errors name the file and what is wrong.
bool readNpy(const std::string &path, NpyArray &out, std::string &error);

// Writes atomically (temp file in the same folder, then rename).
bool writeNpy(const std::string &path, const std::string &dtype,
              const std::vector<int64_t> &shape, const void *data,
              std::string &error);

} // namespace hc::rt

#endif // HC_BASE_NPY_H
