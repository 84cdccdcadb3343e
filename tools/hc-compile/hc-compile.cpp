// hc-compile: ONNX training graph -> dit_step.so. The pipeline stages land
// issue by issue; until a stage exists the tool says so and fails (exit 3),
// it never produces a pretend output.
#include <cstdio>
#include <cstring>

int main(int argc, char **argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::printf("usage: hc-compile MODEL.onnx -o dit_step.so --batch N\n"
                  "Compiles a DiT training graph exported to ONNX into a "
                  "shared library running one training step.\n");
      return 0;
    }
  std::fprintf(stderr, "hc-compile: not implemented yet: ONNX import and the "
                       "compilation pipeline are still being built\n");
  return 3;
}
