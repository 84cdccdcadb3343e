#include "hc/Compiler/CompileMain.h"

int main(int argc, char **argv) { return hc::compileMain(argc, argv); }
