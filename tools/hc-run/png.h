// Sample grids as PNG: 8-bit grey or RGB, written by hand (zlib's deflate
// and CRC-32, no image library), atomically.
#ifndef HC_RUN_PNG_H
#define HC_RUN_PNG_H

#include <cstdint>
#include <string>
#include <vector>

namespace hcrun {

struct Image {
  int width = 0, height = 0, channels = 1;  // 1 grey, 3 RGB
  std::vector<uint8_t> pixels;              // row-major, interleaved
};

// Writes `image` to `path` through a temporary file in the same folder,
// fsync and rename. False + a one-line `error`.
bool writePng(const std::string &path, const Image &image, std::string &error);

// One row per class, in the given order, `perRow` samples each, with the
// class id drawn left of its row (none where the id is negative). `samples` is float [rows*perRow, C, H, W]
// in [-1, 1] (clamped); `bands` picks the channels shown: one (grey) or
// three (R, G, B), each < C.
Image labelledGrid(const float *samples, const std::vector<int64_t> &rowLabels,
                   int perRow, int channels, int height, int width,
                   const std::vector<int> &bands);

} // namespace hcrun

#endif // HC_RUN_PNG_H
