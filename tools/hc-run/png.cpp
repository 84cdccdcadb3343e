// PNG (ISO/IEC 15948): signature, IHDR, one zlib IDAT of filter-0 rows, IEND;
// each chunk is length, type, data, CRC-32 of type and data.
#include "png.h"

#include "hc/base/files.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace hcrun {
namespace {

void putU32(std::vector<uint8_t> &out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8)
    out.push_back(static_cast<uint8_t>(v >> s));
}

void chunk(std::vector<uint8_t> &out, const char type[4], const std::vector<uint8_t> &data) {
  putU32(out, static_cast<uint32_t>(data.size()));
  std::size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  uLong crc = crc32(0L, out.data() + start, static_cast<uInt>(out.size() - start));
  putU32(out, static_cast<uint32_t>(crc));
}

// 5x7 digits, one byte per row, bit 4 the leftmost pixel.
const uint8_t kDigits[10][7] = {
    {14, 17, 19, 21, 25, 17, 14}, {4, 12, 4, 4, 4, 4, 14},
    {14, 17, 1, 2, 4, 8, 31},     {31, 2, 4, 2, 1, 17, 14},
    {2, 6, 10, 18, 31, 2, 2},     {31, 16, 30, 1, 1, 17, 14},
    {6, 8, 16, 30, 17, 17, 14},   {31, 1, 2, 4, 8, 8, 8},
    {14, 17, 17, 14, 17, 17, 14}, {14, 17, 17, 15, 1, 2, 12}};

} // namespace

bool writePng(const std::string &path, const Image &im, std::string &error) {
  const std::size_t rowBytes = static_cast<std::size_t>(im.width) * im.channels;
  std::vector<uint8_t> raw;
  raw.reserve((rowBytes + 1) * im.height);
  for (int y = 0; y < im.height; ++y) {
    raw.push_back(0);  // filter: none
    const uint8_t *row = im.pixels.data() + y * rowBytes;
    raw.insert(raw.end(), row, row + rowBytes);
  }
  uLongf packedSize = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> packed(packedSize);
  if (compress2(packed.data(), &packedSize, raw.data(), static_cast<uLong>(raw.size()), 9) !=
      Z_OK) {
    error = path + ": zlib could not compress the image";
    return false;
  }
  packed.resize(packedSize);
  std::vector<uint8_t> header;
  putU32(header, static_cast<uint32_t>(im.width));
  putU32(header, static_cast<uint32_t>(im.height));
  header.push_back(8);                          // bit depth
  header.push_back(im.channels == 3 ? 2 : 0);   // colour type: RGB or grey
  header.insert(header.end(), {0, 0, 0});       // deflate, adaptive filters, no interlace
  std::vector<uint8_t> file = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  chunk(file, "IHDR", header);
  chunk(file, "IDAT", packed);
  chunk(file, "IEND", {});

  return hc::rt::writeFileAtomic(path, file.data(), file.size(), error);
}

Image labelledGrid(const float *samples, const std::vector<int64_t> &rowLabels, int perRow,
                   int channels, int height, int width, const std::vector<int> &bands) {
  const int pad = 2, scale = 2;  // digits drawn 2x
  const int labelWidth = 3 * 6 * scale + pad;
  Image im;
  im.channels = bands.size() == 3 ? 3 : 1;
  im.width = labelWidth + perRow * (width + pad) + pad;
  im.height = static_cast<int>(rowLabels.size()) * (height + pad) + pad;
  im.pixels.assign(static_cast<std::size_t>(im.width) * im.height * im.channels, 255);
  auto set = [&](int x, int y, int c, uint8_t v) {
    im.pixels[(static_cast<std::size_t>(y) * im.width + x) * im.channels + c] = v;
  };
  const std::size_t plane = static_cast<std::size_t>(height) * width;
  for (std::size_t r = 0; r < rowLabels.size(); ++r) {
    const int top = pad + static_cast<int>(r) * (height + pad);
    // The class id, right-aligned in the label column, vertically centred
    // (none for a negative id: unconditional samples).
    std::string id = rowLabels[r] < 0 ? std::string() : std::to_string(rowLabels[r]);
    int x0 = labelWidth - pad - static_cast<int>(id.size()) * 6 * scale;
    int y0 = top + std::max(0, (height - 7 * scale) / 2);
    for (std::size_t k = 0; k < id.size(); ++k)
      for (int gy = 0; gy < 7; ++gy)
        for (int gx = 0; gx < 5; ++gx)
          if (kDigits[id[k] - '0'][gy] >> (4 - gx) & 1)
            for (int sy = 0; sy < scale; ++sy)
              for (int sx = 0; sx < scale; ++sx)
                for (int c = 0; c < im.channels; ++c) {
                  int x = x0 + static_cast<int>(k) * 6 * scale + gx * scale + sx;
                  int y = y0 + gy * scale + sy;
                  if (x >= 0 && y < im.height)
                    set(x, y, c, 0);
                }
    for (int j = 0; j < perRow; ++j) {
      const float *img = samples + (r * perRow + j) * channels * plane;
      const int left = labelWidth + j * (width + pad);
      for (int y = 0; y < height; ++y)
        for (int x = 0; x < width; ++x)
          for (int c = 0; c < im.channels; ++c) {
            float v = img[bands[c] * plane + static_cast<std::size_t>(y) * width + x];
            v = std::clamp((v + 1.0f) * 127.5f, 0.0f, 255.0f);
            set(left + x, top + y, c, static_cast<uint8_t>(std::lround(v)));
          }
    }
  }
  return im;
}

} // namespace hcrun
