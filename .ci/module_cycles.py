#!/usr/bin/env python3
"""Fail on a dependency cycle between the library's top-level modules (issue 24).

Reads every library source file under src/ (not src/bin/, a separate crate), drops comments,
string literals, `#[cfg(test)]` (and `#[cfg(all(test, ..))]`) items and `tests.rs` files, and collects the modules named by
`use crate::x` lines (groups included) and `crate::x::` paths. A name the crate root
re-exports (`crate::Error`) counts as its home module. Prints the module graph and every
elementary cycle; exits 1 when there is one. Python 3 standard library only.

Usage: .ci/module_cycles.py [path/to/src]
"""

import os
import re
import sys


def strip_code(text):
    """Blank comments, string and char literals, keeping line breaks and braces of code."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
        elif re.match(r'b?r#*"', text[i:i + 40]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'b?r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"' or (c == "b" and text.startswith('b"', i) and (i == 0 or not text[i - 1].isalnum())):
            i += 1 if c == '"' else 2
            start = i
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", start, i))
            i += 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{7f}'), else a lifetime.
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append("' '")
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_test_items(code):
    """Remove every item carrying `#[cfg(test)]` (a `mod tests {..}`, a test-only `use` or fn)."""
    out = []
    i = 0
    # `#[cfg(test)]` and `#[cfg(all(test, ..))]`: items only a test build has.
    pat = re.compile(r"#\[cfg\((?:test|all\(\s*test\s*,[^\]]*)\)\]")
    while True:
        m = pat.search(code, i)
        if not m:
            out.append(code[i:])
            break
        out.append(code[i:m.start()])
        j = m.end()
        # The item ends at the first `;` outside braces, or at the brace closing its body.
        depth = 0
        while j < len(code):
            ch = code[j]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    j += 1
                    break
            elif ch == ";" and depth == 0:
                j += 1
                break
            j += 1
        out.append("\n" * code.count("\n", m.start(), j))
        i = j
    return "".join(out)


def use_trees(code):
    """Yield the text of every `use crate::...;` tree."""
    for m in re.finditer(r"\buse\s+crate\s*::\s*", code):
        end = code.find(";", m.end())
        yield code[m.end():end]


def first_segments(tree):
    """The first path segment of each path in a use tree: `{a::b, c}` -> [a, c]."""
    tree = tree.strip()
    if tree.startswith("{"):
        inner = tree[1:tree.rfind("}")]
        depth, part, parts = 0, [], []
        for ch in inner:
            if ch == "," and depth == 0:
                parts.append("".join(part))
                part = []
                continue
            depth += ch == "{"
            depth -= ch == "}"
            part.append(ch)
        parts.append("".join(part))
        return [seg for p in parts if p.strip() for seg in first_segments(p)]
    m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", tree)
    return [m.group(0)] if m else []


def module_of(src, path):
    rel = os.path.relpath(path, src)
    head = rel.split(os.sep)[0]
    return head[:-3] if head.endswith(".rs") else head


def root_reexports(src, modules):
    """Names the crate root re-exports (`pub use error::{Error, ..}`) mapped to their module."""
    names = {}
    with open(os.path.join(src, "lib.rs"), encoding="utf-8") as f:
        code = strip_code(f.read())
    for m in re.finditer(r"\bpub(?:\([a-z]+\))?\s+use\s+([a-z_]+)\s*::\s*([^;]*);", code):
        module, rest = m.group(1), m.group(2)
        if module not in modules:
            continue
        for name in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:[,}]|$)", rest):
            names[name] = module
    return names


def graph(src):
    files = []
    for root, dirs, names in os.walk(src):
        if os.path.relpath(root, src).split(os.sep)[0] == "bin":
            continue
        for name in names:
            if name.endswith(".rs") and name != "tests.rs" and os.path.join(root, name) != os.path.join(src, "lib.rs"):
                files.append(os.path.join(root, name))
    modules = {module_of(src, f) for f in files}
    alias = root_reexports(src, modules)
    edges = {m: set() for m in modules}
    for path in files:
        if os.sep + "tests" + os.sep in path:
            continue
        with open(path, encoding="utf-8") as f:
            code = drop_test_items(strip_code(f.read()))
        here = module_of(src, path)
        targets = []
        for tree in use_trees(code):
            targets += first_segments(tree)
        # `$crate::` paths in a `macro_rules!` body resolve where the macro is used: skipped.
        targets += re.findall(r"(?<![$\w])crate\s*::\s*([A-Za-z_][A-Za-z0-9_]*)", code)
        for t in targets:
            t = alias.get(t, t)
            if t in modules and t != here:
                edges[here].add(t)
    return edges


def cycles(edges):
    """Every elementary cycle, each once, starting from its smallest module name."""
    found = []
    for start in sorted(edges):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in sorted(edges[node]):
                if nxt == start:
                    found.append(path + [start])
                elif nxt > start and nxt not in path:
                    stack.append((nxt, path + [nxt]))
    return found


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    edges = graph(os.path.normpath(src))
    print("module graph (module -> modules it uses):")
    for m in sorted(edges):
        print(f"  {m:10} -> {', '.join(sorted(edges[m])) or '-'}")
    found = cycles(edges)
    mutual = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges[b]})
    print(f"{len(found)} cycle(s), {len(mutual)} mutually dependent pair(s)")
    for c in found:
        print("  cycle: " + " -> ".join(c))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
