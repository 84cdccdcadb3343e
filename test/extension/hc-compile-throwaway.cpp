// hc-compile with the throwaway extension registered: the same driver and
// command line, one more op (test/extension/).
#include "ThrowawayExtension.h"

#include "hc/Compiler/CompileMain.h"

int main(int argc, char **argv) {
  hc::throwaway::registerThrowawayExtension();
  return hc::compileMain(argc, argv);
}
