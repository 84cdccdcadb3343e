#!/usr/bin/python3
"""The layering of hc's sources, checked (ctest "layers").

  abi/      the ABI root: header-only, includes nothing of hc but itself
  base/     hc-base, below compiler and runtime: the ABI root and itself
  runtime/  libhcrt: abi, base and its own headers; never MLIR or LLVM
  compiler side (dialects/, passes/, compiler/, tools/hc-compile,
            tools/hc-eval, tools/hc-opt): abi, base and its own; never
            the runtime's headers (hc/runtime/)

that the compiler's binaries link neither MPI nor libhcrt, and that the test
seams (settings.def's rows under `#if HC_TEST_SEAMS`) are read only inside
`#if HC_TEST_SEAMS`, so a release build (HC_BUILD_TESTS=OFF) has none.
Usage: check_layers.py SOURCE_ROOT BIN_DIR
"""
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
SOURCE_EXT = ('.h', '.cpp', '.inc', '.def', '.td', '.c')

COMPILER = ['dialects', 'passes', 'compiler', 'tools/hc-compile',
            'tools/hc-eval', 'tools/hc-opt']
# layer -> (folders, include prefixes it must not use)
LAYERS = {
    'abi': (['abi'], ['hc/base/', 'hc/runtime/', 'hc/Compiler/', 'hc/Graph/',
                      'hc/Schedule/', 'hc/Passes/', 'mlir/', 'llvm/']),
    'base': (['base'], ['hc/runtime/', 'hc/Compiler/', 'hc/Graph/',
                        'hc/Schedule/', 'hc/Passes/', 'mlir/', 'llvm/', 'mpi.h']),
    'runtime': (['runtime'], ['hc/Compiler/', 'hc/Graph/', 'hc/Schedule/',
                              'hc/Passes/', 'mlir/', 'llvm/']),
    'compiler': (COMPILER, ['hc/runtime/', 'mpi.h']),
}
COMPILER_BINARIES = ['hc-compile', 'hc-eval', 'hc-opt']
FORBIDDEN_LINKS = ['libmpi', 'libhcrt', 'libopen-pal', 'libopen-rte']


def sources(root, folder):
    for dirpath, _, files in os.walk(os.path.join(root, folder)):
        for f in sorted(files):
            if f.endswith(SOURCE_EXT):
                yield os.path.join(dirpath, f)


def seam_settings(root):
    text = open(os.path.join(root, 'base/include/hc/base/settings.def')).read()
    block = re.search(r'#if HC_TEST_SEAMS.*?\n(.*?)#endif', text, re.S)
    return re.findall(r'HC_SETTING\((\w+),', block.group(1)) if block else []


def unguarded_seams(path, text, seams):
    """Lines reading a seam outside a `#if HC_TEST_SEAMS` branch."""
    stack, out = [], []  # per #if: is its current branch the seams-on one?
    for n, line in enumerate(text.splitlines(), 1):
        d = re.match(r'\s*#\s*(if|ifdef|ifndef|else|elif|endif)\b(.*)', line)
        if d:
            kind, rest = d.group(1), d.group(2).strip()
            if kind.startswith('if'):
                on = rest == 'HC_TEST_SEAMS' and kind == 'if'
                off = rest == '!HC_TEST_SEAMS' and kind == 'if'
                stack.append([on, off])
            elif kind == 'else' and stack:
                stack[-1] = [stack[-1][1], stack[-1][0]]
            elif kind == 'elif' and stack:
                stack[-1] = [False, False]
            elif kind == 'endif' and stack:
                stack.pop()
            continue
        for s in seams:
            if re.search(r'Setting::%s\b' % s, line) and not any(b[0] for b in stack):
                out.append('%s:%d: test seam %s read outside #if HC_TEST_SEAMS'
                           % (path, n, s))
    return out


def main():
    root, bin_dir = sys.argv[1], sys.argv[2]
    errors, seen = [], 0
    seams = seam_settings(root)
    if len(seams) < 5:
        errors.append('settings.def: %d test seams under #if HC_TEST_SEAMS' % len(seams))
    for folder in ['base', 'runtime', 'tools', 'compiler', 'passes', 'dialects']:
        for path in sources(root, folder):
            errors += unguarded_seams(os.path.relpath(path, root),
                                      open(path, encoding='utf-8').read(), seams)
    for layer, (folders, forbidden) in LAYERS.items():
        for folder in folders:
            for path in sources(root, folder):
                seen += 1
                with open(path, encoding='utf-8') as f:
                    text = f.read()
                for inc in INCLUDE.findall(text):
                    if any(inc.startswith(p) for p in forbidden):
                        errors.append('%s: the %s layer includes %s' %
                                      (os.path.relpath(path, root), layer, inc))
    for folder in COMPILER:
        cmake = os.path.join(root, folder, 'CMakeLists.txt')
        if os.path.exists(cmake) and 'runtime/include' in open(cmake).read():
            errors.append('%s: a compiler target sees runtime/include' %
                          os.path.relpath(cmake, root))
    for name in COMPILER_BINARIES:
        path = os.path.join(bin_dir, name)
        out = subprocess.run(['readelf', '-d', path], capture_output=True,
                             text=True, check=True).stdout
        needed = re.findall(r'\(NEEDED\).*\[(.+)\]', out)
        if not needed:
            errors.append('%s: readelf found no NEEDED entries' % name)
        for lib in needed:
            if any(lib.startswith(p) for p in FORBIDDEN_LINKS):
                errors.append('%s links %s' % (name, lib))
    if seen < 120:  # 155 when this was written
        errors.append('only %d sources found under %s' % (seen, root))
    for e in errors:
        print(e)
    print('%d sources, %d binaries checked: %s' %
          (seen, len(COMPILER_BINARIES), 'FAIL' if errors else 'ok'))
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
