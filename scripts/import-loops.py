#!/usr/bin/env python3
"""Import loops between the modules of each crate, at every depth (issue 14's rule,
extended by issue 29: no module `use`s a module that uses it back).

Every file is a module (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`). A module's edges are
its references to other modules: `crate::a::b::X` (resolved to the deepest module that
exists), `super::x` and `self::x` paths, outside comments and `#[cfg(test)] mod tests`.
An edge between a module and its own ancestor or descendant is composition (a parent
declares its children; a child may read its parent's items), not a loop. Any other edge
is charged to the two siblings under the modules' nearest common ancestor, so
`handlers::openai` -> `handlers::stream::sse` is an edge openai -> stream among the children
of `handlers`, and a loop is a strongly connected component of more than one sibling in
any parent's graph. Prints each loop and the count; exits 1 when there is one.

Usage: scripts/import-loops.py               (from the repository root)
       scripts/import-loops.py --self-test   (the rule checked on a throwaway tree)
"""
import collections
import os
import re
import sys


def modules(src):
    """(module path as a tuple, file) for every .rs file but tests."""
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(root, f)
            parts = os.path.relpath(p, src)[:-3].split(os.sep)
            if "tests" in parts:
                continue
            if parts[-1] == "mod":
                parts = parts[:-1]
            if parts in (["lib"], ["main"]):
                parts = []
            yield tuple(parts), p


def code(path):
    s = open(path).read()
    s = re.split(r"#\[cfg\(test\)\]\s*mod tests\s*\{", s)[0]
    return "\n".join(l for l in s.split("\n") if not l.strip().startswith("//"))


def expand_groups(s):
    """`use crate::a::{b, c::d}` -> `crate::a::b`, `crate::a::c::d` (one level of braces)."""
    out = []
    for m in re.finditer(r"\b((?:crate|super|self)(?:::[a-z_0-9]+)*)::\{([^{}]*)\}", s):
        for item in m.group(2).split(","):
            item = item.strip()
            if item and item != "self":
                out.append(f"{m.group(1)}::{item}")
            elif item == "self":
                out.append(m.group(1))
    return out


def references(mod, s):
    """Absolute module-path candidates this module's code refers to."""
    paths = re.findall(r"\b((?:crate|super|self)(?:::[a-zA-Z_0-9]+)+)", s) + expand_groups(s)
    for p in paths:
        parts = p.split("::")
        if parts[0] == "crate":
            yield tuple(parts[1:])
        elif parts[0] == "self":
            yield mod + tuple(parts[1:])
        else:
            base = list(mod)
            while parts and parts[0] == "super":
                parts = parts[1:]
                if base:
                    base.pop()
            yield tuple(base) + tuple(parts)


def deepest_module(path, known):
    for k in range(len(path), -1, -1):
        if path[:k] in known:
            return path[:k]
    return ()


def loops_in(graph):
    idx, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        idx[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in idx:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(comp)

    for v in list(graph):
        if v not in idx:
            visit(v)
    return sccs


def self_test():
    """The rule on a throwaway tree: a loop two levels down is found, composition is not."""
    import tempfile

    with tempfile.TemporaryDirectory() as root:
        files = {
            "lib.rs": "mod handlers;\nmod state;\nuse crate::handlers::serve;\n",
            "state.rs": "pub struct S;\n",
            "handlers/mod.rs": "mod openai;\nmod stream;\npub use openai::serve;\nuse crate::state::S;\n",
            "handlers/openai.rs": "use super::stream::sse::Event;\nuse super::S;\n",
            "handlers/stream/mod.rs": "pub mod sse;\n",
            "handlers/stream/sse.rs": "use crate::handlers::{openai::helper, S};\n",
        }
        for name, text in files.items():
            path = os.path.join(root, "crates", "demo", "src", name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        here = os.getcwd()
        os.chdir(root)
        try:
            found = run_all(quiet=True)
        finally:
            os.chdir(here)
    want = [("demo", ("handlers",), ["openai", "stream"])]
    if found != want:
        print(f"self-test failed: found {found}, expected {want}")
        return 1
    print("self-test: the nested loop is found, parent-child references are not loops")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    found = run_all(quiet=False)
    print("loops:", len(found))
    return 1 if found else 0


def run_all(quiet):
    sys.setrecursionlimit(10000)
    found = []
    for crate in sorted(os.listdir("crates")):
        src = f"crates/{crate}/src"
        if not os.path.isdir(src):
            continue
        mods = dict(modules(src))
        known = set(mods)
        # parent -> {child -> {child}}: edges among each parent's children.
        graphs = collections.defaultdict(lambda: collections.defaultdict(set))
        for mod, path in mods.items():
            for ref in references(mod, code(path)):
                target = deepest_module(ref, known)
                if target[: len(mod)] == mod or mod[: len(target)] == target:
                    continue  # itself, a descendant or an ancestor
                k = 0
                while mod[k] == target[k]:
                    k += 1
                graphs[mod[:k]][mod[k]].add(target[k])
        for parent, graph in sorted(graphs.items()):
            for comp in loops_in(graph):
                found.append((crate, parent, sorted(comp)))
                if not quiet:
                    print(crate, "loop among", sorted(comp), "under", "::".join(parent) or "the crate root")
    return found


if __name__ == "__main__":
    sys.exit(main())
