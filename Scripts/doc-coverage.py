#!/usr/bin/env python3
"""Fails when a public symbol of a documented module has no documentation comment.

Reads the symbol graphs `make docs` extracted (.build/<triple>/extracted-symbols/main/<Module>/):
every public or open type, and every public member of the modules' own types, must have a `///`
comment of its own. Inherited and synthesized members (Equatable's ==, a protocol requirement's
default implementation documented at the protocol) are not the module's to document and are left
out, as DocC leaves them out of its coverage.

Usage: doc-coverage.py SYMBOL_GRAPH_DIR MODULE...   (prints each undocumented symbol; exit 1 if any)
"""
import json, os, sys

TYPES = {"swift.struct", "swift.class", "swift.enum", "swift.protocol", "swift.typealias", "swift.actor"}
# Apple's API re-created by name: its members are documented by Apple; the types still say here what they are.
TYPES_ONLY = {"AudioToolbox", "CoreAudioTypes", "AVFAudio", "AVFoundation"}


def main() -> int:
    root, modules = sys.argv[1], sys.argv[2:]
    missing, counted = [], 0
    for module in modules:
        folder = os.path.join(root, module)
        if not os.path.isdir(folder):
            print(f"no symbol graph for {module} in {folder}")
            return 1
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".symbols.json"):
                continue
            graph = json.load(open(os.path.join(folder, name)))
            inherited = {r["source"] for r in graph.get("relationships", [])
                         if r.get("kind") in ("defaultImplementationOf", "requirementOf") or "sourceOrigin" in r}
            for symbol in graph.get("symbols", []):
                if symbol.get("accessLevel") not in ("public", "open"):
                    continue
                kind = symbol["kind"]["identifier"]
                path = "/".join(symbol["pathComponents"])
                if kind not in TYPES and (module in TYPES_ONLY or symbol["identifier"]["precise"] in inherited):
                    continue
                if kind.endswith(".extension") or path.startswith("_"):
                    continue
                counted += 1
                doc = symbol.get("docComment", {}).get("lines", [])
                if not any(line.get("text", "").strip() for line in doc):
                    location = symbol.get("location", {})
                    where = f'{location.get("uri", "").split("/Sources/")[-1]}:{location.get("position", {}).get("line", 0) + 1}'
                    missing.append(f"{module}: {kind.split('.')[-1]} {path} ({where})")
    for line in missing:
        print("undocumented:", line)
    print(f"{counted} public symbols checked, {len(missing)} without a documentation comment")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
