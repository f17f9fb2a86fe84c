#!/usr/bin/python3
"""lint.py — the layering and hygiene rules of docs/design.md, checked on the tree.

  1. lib/ folders are layers (LAYERS, bottom first): a file in lib/<f>/ may include
     "g/..." only when g is f or comes before f. A folder missing from LAYERS fails
     with a message saying where to add it.
  2. Nothing refers to the design notes that live outside the repository (the old
     design file name, or the shared notes folder): docs/design.md and docs/format.md are
     the references.
  3. A header (or .c file) in lib/ includes a lib/ header only if it uses a name that
     header declares (cheap check: some dfl_/DFL_ name of the included header, or of a
     header it includes in turn, appears in the including file). An include that is
     kept on purpose says so in a comment on its line containing "re-export".
  4. Every C file (lib/, tools/, tests/, fuzz/, bench/) is formatted as the checked-in
     .clang-format says (`make format` fixes it): clang-format --dry-run reports nothing.
  5. lib/render/render_tables.c is what scripts/colormaps.py generates (--check).

Usage: scripts/lint.py [ROOT]   (default: the repository holding this script)
Exit status 1 and one line per problem when any rule is broken; 0 otherwise.
"""
import os
import re
import subprocess
import sys

# Bottom layer first. A new top folder (e.g. "view") is appended after "train".
LAYERS = ["base", "text", "model", "dump", "render", "analysis", "train", "cluster", "view"]

# Built from pieces so this file does not trip rule 2 itself.
FORBIDDEN = ["DESIGN" + ".md", "../" + "shared"]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"(.*)$')
NAME = re.compile(r"\b(?:dfl_|DFL_|dfl__)\w+")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def lib_files(root):
    out = []
    for folder in sorted(os.listdir(os.path.join(root, "lib"))):
        d = os.path.join(root, "lib", folder)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h")):
                out.append((folder, os.path.join(d, name)))
    return out


def check_layers(root, problems):
    for folder in sorted(os.listdir(os.path.join(root, "lib"))):
        if os.path.isdir(os.path.join(root, "lib", folder)) and folder not in LAYERS:
            problems.append("lib/%s: folder not in the layer list; add it to LAYERS in scripts/lint.py "
                            "(and to docs/design.md) at its place in the order %s" % (folder, ", ".join(LAYERS)))
    for folder, path in lib_files(root):
        if folder not in LAYERS:
            continue
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            for no, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                if "/" not in inc:
                    problems.append('%s:%d: #include "%s" does not name its folder (write "folder/%s")'
                                    % (rel, no, inc, inc))
                    continue
                target = inc.split("/", 1)[0]
                if target not in LAYERS:
                    problems.append('%s:%d: #include "%s": unknown folder %s (layers: %s)'
                                    % (rel, no, inc, target, ", ".join(LAYERS)))
                elif LAYERS.index(target) > LAYERS.index(folder):
                    problems.append('%s:%d: upward include "%s": %s may include only %s'
                                    % (rel, no, inc, folder, ", ".join(LAYERS[:LAYERS.index(folder) + 1])))


def tracked_text_files(root):
    try:
        names = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard"],
                               check=True, capture_output=True, text=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        names = []
        for d, _, files in os.walk(root):
            if "/." in d or "/build" in d or "/bin" in d:
                continue
            names += [os.path.relpath(os.path.join(d, n), root) for n in files]
    return [n for n in names if n and os.path.isfile(os.path.join(root, n))]


def check_references(root, problems):
    for rel in tracked_text_files(root):
        try:
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                lines = f.readlines()
        except (UnicodeDecodeError, OSError):
            continue  # binary files (images, models)
        for no, line in enumerate(lines, 1):
            for bad in FORBIDDEN:
                if bad in line:
                    problems.append("%s:%d: refers to %s, outside the repository (use docs/design.md or "
                                    "docs/format.md)" % (rel, no, bad))


def declared_names(root, inc, seen=None):
    """dfl_/DFL_ names declared in lib/<inc> and in the lib headers it includes."""
    seen = set() if seen is None else seen
    if inc in seen:
        return set()
    seen.add(inc)
    path = os.path.join(root, "lib", inc)
    if not os.path.isfile(path):
        return set()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    body = strip_comments(text)
    guard = re.search(r"#ifndef\s+(\w+)", body)
    names = set(NAME.findall(body)) - ({guard.group(1)} if guard else set())
    for line in text.splitlines():
        m = INCLUDE.match(line)
        if m:
            names |= declared_names(root, m.group(1), seen)
    return names


def check_unused(root, problems):
    for folder, path in lib_files(root):
        rel = os.path.relpath(path, root)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        own = os.path.relpath(path, os.path.join(root, "lib"))
        body_lines = [l for l in text.splitlines() if not INCLUDE.match(l)]
        used = set(NAME.findall(strip_comments("\n".join(body_lines))))
        for no, line in enumerate(text.splitlines(), 1):
            m = INCLUDE.match(line)
            if not m or "re-export" in m.group(2):
                continue
            inc = m.group(1)
            # a .c file's own header, and headers outside lib/, are not judged
            if inc == own[:-2] + ".h" or not os.path.isfile(os.path.join(root, "lib", inc)):
                continue
            if not (declared_names(root, inc) & used):
                problems.append('%s:%d: #include "%s" is not used (no name it declares appears here)'
                                % (rel, no, inc))


def c_sources(root):
    out = []
    for top in ("lib", "tools", "tests", "fuzz", "bench"):
        for d, _, files in os.walk(os.path.join(root, top)):
            out += [os.path.join(d, f) for f in files if f.endswith((".c", ".h"))]
    return sorted(out)


def check_format(root, problems):
    try:
        r = subprocess.run(["clang-format", "--dry-run", "--style=file"] + c_sources(root), cwd=root,
                           capture_output=True, text=True)
    except FileNotFoundError:
        problems.append("clang-format is not installed (scripts/deps.sh installs it)")
        return
    bad = sorted({ln.split(":", 1)[0] for ln in r.stderr.splitlines() if ": warning:" in ln})
    for f in bad:
        problems.append("%s: not formatted as .clang-format says (run make format)" % os.path.relpath(f, root))
    if r.returncode and not bad:
        problems.append("clang-format failed: " + r.stderr.strip().splitlines()[-1])


def check_generated(root, problems):
    r = subprocess.run([sys.executable, os.path.join(root, "scripts", "colormaps.py"), "--check"],
                       capture_output=True, text=True)
    if r.returncode:
        problems.append("lib/render/render_tables.c: " + (r.stdout + r.stderr).strip().splitlines()[-1] +
                        " (regenerate: scripts/colormaps.py > lib/render/render_tables.c)")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    problems = []
    check_layers(root, problems)
    check_references(root, problems)
    check_unused(root, problems)
    check_format(root, problems)
    check_generated(root, problems)
    for p in problems:
        print("lint: " + p)
    if problems:
        print("lint: %d problem%s" % (len(problems), "" if len(problems) == 1 else "s"))
        return 1
    print("lint: ok (%d lib files; layers %s)" % (len(lib_files(root)), " < ".join(LAYERS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
