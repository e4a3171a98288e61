#!/usr/bin/env python3
"""The longest Rust functions of the workspace's library and binary code (crates/*/src, test
modules left out): lines from `fn` to its closing brace at the same indentation.

    scripts/longest-functions.py [N] [ROOT]     # N = 10, ROOT = the repository
"""
import pathlib
import re
import sys

FN = re.compile(r"^(\s*)(pub(\([a-z]+\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"C\"\s+)?fn\s+(\w+)")


def functions(path):
    lines = path.read_text(errors="replace").splitlines()
    # Unit tests sit at the end of a file, after #[cfg(test)].
    end = next((i for i, l in enumerate(lines) if l.strip() == "#[cfg(test)]"), len(lines))
    for i in range(end):
        m = FN.match(lines[i])
        if not m or lines[i].rstrip().endswith(";"):
            continue
        indent = m.group(1)
        for j in range(i, end):
            if lines[j] == indent + "}":
                yield (j - i + 1, m.group(8), i + 1)
                break


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    root = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else ".")
    found = []
    for path in sorted(root.glob("crates/*/src/**/*.rs")):
        for length, name, line in functions(path):
            found.append((length, f"{path.relative_to(root)}:{line}", name))
    for length, place, name in sorted(found, reverse=True)[:n]:
        print(f"{length:5}  {name}  {place}")


main()
