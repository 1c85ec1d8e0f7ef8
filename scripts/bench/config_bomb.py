#!/usr/bin/env python3
"""Time and memory of `deploy validate` on hostile configs (goal: <= 1 s and <= 100 MB each).

    python scripts/bench/config_bomb.py

A "billion laughs" config (nine levels of nine aliases: 9^9 values if expanded), 3,000 levels of
nesting, and a recursive alias. Each is a fresh `deploy validate` process; wall time and peak
memory (ru_maxrss of the child) are reported.
"""

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def bomb():
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    prev = "a"
    for name in "bcdefghi":
        lines.append("{0}: &{0} [{1}]".format(name, ",".join(["*" + prev] * 9)))
        prev = name
    return "\n".join(lines) + "\nrun: {name: x}\n"


CASES = {
    "billion_laughs": bomb(),
    "nested_3000": "a: " + "[" * 3000 + "]" * 3000 + "\n",
    "recursive_alias": "a: &a [1, 2]\nb: &b [*b, 1]\n",
}


def main():
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in CASES.items():
            path = Path(tmp) / (name + ".yaml")
            path.write_text(text)
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "pipeline", "validate", str(path)], cwd=str(ROOT),
                                  capture_output=True, text=True, timeout=120)
            seconds = time.perf_counter() - start
            peak_mb = max(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before) / 1024
            rows.append({"case": name, "bytes": len(text), "seconds": round(seconds, 2), "peak_mb": round(peak_mb, 1),
                         "exit": proc.returncode, "message": proc.stderr.strip()})
            print("{:<16} {:>6} bytes  {:5.2f} s  {:6.1f} MB  exit {}  {}".format(
                name, len(text), seconds, peak_mb, proc.returncode, proc.stderr.strip()[:90]))
    print(json.dumps({"benchmark": "config_bomb", "results": rows}))


if __name__ == "__main__":
    main()
