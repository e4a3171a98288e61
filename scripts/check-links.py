#!/usr/bin/env python3
"""Checks the Markdown of the repository: every relative link resolves to a file, and to a heading
when it has an `#anchor` (GitHub's slugs); no page names a directory of a development machine
(/work, /root, /home). Usage: python3 scripts/check-links.py [FILE.md ...] (default: README.md,
docs/, bench/, shim/, fuzz/ and the crates' READMEs). Prints one line per problem; status 1 if any."""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["README.md", "docs/*.md", "bench/*.md", "shim/*.md", "fuzz/*.md", "crates/*/README.md"]
# [text](target) and ![alt](target); the text may hold one level of brackets.
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
MACHINE_PATH = re.compile(r"(?<![\w.~$-])/(?:work|root|home)/[^\s`)\"'|,;]*")


def prose_lines(path):
    """(line number, text) outside fenced code blocks, inline code spans removed."""
    in_fence = False
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if not in_fence:
            yield no, re.sub(r"`[^`]*`", "", line)


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return "".join("-" if c == " " else c for c in text if c.isalnum() or c in " -_")


def anchors(path):
    seen, result = {}, set()
    in_fence = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            result.add(s if n == 0 else f"{s}-{n}")
    result.update(re.findall(r'<a\s+(?:name|id)="([^"]+)"', path.read_text(encoding="utf-8")))
    return result


def main(args):
    files = [Path(a).resolve() for a in args] or sorted(
        {p for pattern in DEFAULT for p in ROOT.glob(pattern)}
    )
    problems = 0
    known = {}
    for f in files:
        where = f.relative_to(ROOT) if f.is_relative_to(ROOT) else f
        for no, text in prose_lines(f):
            for target in LINK.findall(text):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                file_part, _, anchor = target.partition("#")
                dest = (f.parent / file_part).resolve() if file_part else f
                if not dest.exists():
                    print(f"{where}:{no}: {target}: no such file")
                    problems += 1
                elif anchor and dest.suffix == ".md":
                    if dest not in known:
                        known[dest] = anchors(dest)
                    if anchor not in known[dest]:
                        print(f"{where}:{no}: {target}: no heading with this anchor")
                        problems += 1
        for no, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            for path in MACHINE_PATH.findall(line):
                print(f"{where}:{no}: {path}: a directory of a development machine")
                problems += 1
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
