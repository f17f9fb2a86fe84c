#!/usr/bin/python3
"""public_headers.py — the headers `make install` installs, one path a line.

A lib/<folder>/<name>.h is public unless it is a *_internal.h file, has no dfl_/DFL_
name of its own, or declares functions that are all internal (dfl__..., shared between
library files: base/jsondoc.h, dump/f16_pack.h);
a header a public header includes is installed too, so every installed header compiles.

Usage: scripts/public_headers.py [ROOT]
"""
import glob
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
PUBLIC_NAME = re.compile(r"\b(?:dfl_[a-z0-9]|DFL_[A-Z0-9])\w*")
# a function declared (or defined inline) by the header: its name before "("
FUNCTION = re.compile(r"\b(dfl_\w+)\s*\([^;{]*\)\s*(?:__attribute__\s*\(\(.*?\)\)\s*)?[;{]", re.S)


def strip_comments(text):
    return re.sub(r"//[^\n]*", " ", re.sub(r"/\*.*?\*/", " ", text, flags=re.S))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    lib = os.path.join(root, "lib")
    texts = {}
    for path in sorted(glob.glob(os.path.join(lib, "*", "*.h"))):
        with open(path, encoding="utf-8") as f:
            texts[os.path.relpath(path, lib)] = strip_comments(f.read())
    public = set()
    for rel, text in texts.items():
        guard = re.sub(r"[^A-Z0-9]", "_", "DFL_" + os.path.basename(rel).upper())
        names = set(PUBLIC_NAME.findall(text)) - {guard}
        functions = FUNCTION.findall(text)
        internal_only = functions and all(f.startswith("dfl__") for f in functions)
        if not rel.endswith("_internal.h") and names and not internal_only:
            public.add(rel)
    todo = list(public)
    while todo:
        for inc in INCLUDE.findall(texts[todo.pop()]):
            if inc in texts and inc not in public:
                public.add(inc)
                todo.append(inc)
    for rel in sorted(public):
        print("lib/" + rel)


if __name__ == "__main__":
    main()
