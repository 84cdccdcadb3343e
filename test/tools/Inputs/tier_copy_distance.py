"""Prints, for an hc-compile --emit=schedule on stdin, the kernel calls
between each tier copy's start and its hcs.wait: "offload MIN..MAX" and
"prefetch MIN..MAX" over the step's copies (hc-compile --mem-lookahead).
"""
import re
import sys

lines = sys.stdin.read().splitlines()
spans = {"offload": [], "prefetch": []}
for i, line in enumerate(lines):
    m = re.search(r"(%\d+) = hcs\.(offload|prefetch) ", line)
    if not m:
        continue
    calls = 0
    for later in lines[i + 1:]:
        if re.search(r"hcs\.wait %s\b" % re.escape(m.group(1)), later):
            break
        calls += 'hcs.call "' in later
    spans[m.group(2)].append(calls)
for kind, v in spans.items():
    print("%s %s" % (kind, "%d..%d" % (min(v), max(v)) if v else "none"))
