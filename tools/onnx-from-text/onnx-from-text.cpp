// onnx-from-text IN.onnxtxt -o OUT.onnx: turns ONNX's textual syntax
// (libonnx's parser) into a model file, so lit tests keep their ONNX inputs
// readable next to their CHECK lines. Lines starting with "//" are dropped.
#include <onnx/defs/parser.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

int main(int argc, char **argv) {
  if (argc != 4 || std::string(argv[2]) != "-o") {
    std::fprintf(stderr, "usage: onnx-from-text IN.onnxtxt -o OUT.onnx\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "onnx-from-text: %s: cannot open\n", argv[1]);
    return 2;
  }
  std::string line, text;
  while (std::getline(in, line)) {
    std::size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line.compare(first, 2, "//") == 0)
      continue;
    text += line + "\n";
  }
  onnx::ModelProto model;
  auto status = onnx::OnnxParser::Parse(model, text.c_str());
  if (!status.IsOK()) {
    std::fprintf(stderr, "onnx-from-text: %s: %s\n", argv[1],
                 status.ErrorMessage().c_str());
    return 2;
  }
  std::ofstream out(argv[3], std::ios::binary);
  if (!out || !model.SerializeToOstream(&out)) {
    std::fprintf(stderr, "onnx-from-text: %s: cannot write\n", argv[3]);
    return 2;
  }
  return 0;
}
