// hc-compile's driver (tools/hc-compile/hc-compile.cpp) as a function, so
// that a tool registering a compiler extension (Extension.h) runs the same
// command line.
#ifndef HC_COMPILER_COMPILEMAIN_H
#define HC_COMPILER_COMPILEMAIN_H

namespace hc {

// hc-compile's command line; returns its exit code (it may also exit 2).
int compileMain(int argc, char **argv);

} // namespace hc

#endif // HC_COMPILER_COMPILEMAIN_H
