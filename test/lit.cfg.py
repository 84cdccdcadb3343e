# lit configuration for hc.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "hc"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test", ".onnxtxt"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "runtime", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.hc_obj_root, "test")

config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%hc_src", config.hc_src_root))

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()

# Pinned: hc's own tools first, then LLVM 19's FileCheck/not/count.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.hc_tools_dir, append_path=True)
tool_dirs = [config.hc_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    ["hc-opt", "hc-compile", "hc-eval", "hc-run", "onnx-from-text"], tool_dirs)
