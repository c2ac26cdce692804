#!/usr/bin/env python3
"""The daemon's include graph, by module (x.c and x.h are module x).

Prints each module's dependencies (the daemon headers its .c and .h
include), then every include that points up a layer (the folders, bottom
to top: common, device, memory, exec, requests, server), every cycle (a
strongly connected component of more than one module) and every source
over the line limit. Exits 1 on any of them, so that `make check` gates
the layering docs/design.md describes.

    python3 tests/include_graph.py [--dir daemon] [--max-lines 800] [--dot]
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def modules(root):
    """module -> {'files': [...], 'deps': set()} for every .c/.h under root."""
    mods = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            if not name.endswith(('.c', '.h')):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            mod = os.path.splitext(rel)[0]
            mods.setdefault(mod, {'files': [], 'deps': set()})['files'].append(path)
    for mod, m in mods.items():
        for path in m['files']:
            with open(path, encoding='utf-8', errors='replace') as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                # as the compiler looks: beside the file, then from root (-Idaemon)
                target = os.path.normpath(os.path.join(os.path.dirname(path), inc))
                if not os.path.exists(target):
                    target = os.path.normpath(os.path.join(root, inc))
                dep = os.path.splitext(os.path.relpath(target, root))[0]
                if dep in mods and dep != mod:
                    m['deps'].add(dep)
    return mods


# The daemon's layers, bottom to top: a module includes its own or lower ones.
LAYERS = ['common', 'device', 'memory', 'exec', 'requests', 'server']


def upward(mods):
    """(module, dependency) pairs where the dependency is a higher layer,
    or a module outside every layer folder."""
    def rank(mod):
        top = mod.split('/')[0]
        return LAYERS.index(top) if '/' in mod and top in LAYERS else None
    out = []
    for mod in sorted(mods):
        if rank(mod) is None:
            out.append((mod, '(no layer folder)'))
            continue
        for dep in sorted(mods[mod]['deps']):
            if rank(dep) is None or rank(dep) > rank(mod):
                out.append((mod, dep))
    return out


def cycles(mods):
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(mods[v]['deps']):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(mods):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--dir', default='daemon')
    ap.add_argument('--max-lines', type=int, default=800)
    ap.add_argument('--dot', action='store_true', help='print Graphviz instead')
    ap.add_argument('--quiet', action='store_true', help='print only what is wrong and the count')
    a = ap.parse_args()
    mods = modules(a.dir)
    if a.dot:
        print('digraph daemon {')
        for mod in sorted(mods):
            for dep in sorted(mods[mod]['deps']):
                print(f'  "{mod}" -> "{dep}";')
        print('}')
        return 0
    for mod in sorted(mods) if not a.quiet else []:
        print(f'{mod}: {" ".join(sorted(mods[mod]["deps"])) or "-"}')
    up = upward(mods)
    for mod, dep in up:
        print(f'up a layer: {mod} -> {dep}')
    found = cycles(mods)
    for comp in found:
        print(f'cycle ({len(comp)} modules): {" ".join(comp)}')
    big = []
    for mod in sorted(mods):
        for path in mods[mod]['files']:
            with open(path, encoding='utf-8', errors='replace') as f:
                n = sum(1 for _ in f)
            if n > a.max_lines:
                big.append((path, n))
    for path, n in big:
        print(f'over {a.max_lines} lines: {path} ({n})')
    print(f'include graph: {len(mods)} modules, {len(up)} include(s) up a layer, {len(found)} cycle(s), '
          f'{len(big)} source(s) over {a.max_lines} lines')
    return 1 if up or found or big else 0


if __name__ == '__main__':
    sys.exit(main())
