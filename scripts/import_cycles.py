"""Print spotrun's import cycles, function-level imports included; fail on any not known.

    .venv/bin/python scripts/import_cycles.py

The graph is grimp's (the one import-linter checks). A cycle is a strongly connected group of
modules. KNOWN lists the groups still open (docs/ARCHITECTURE.md says how each is cut); a new
group, or a known one that grew, fails the check. Remove a group from KNOWN once it is cut.
"""

from __future__ import annotations

import sys

import grimp

KNOWN: list[frozenset[str]] = []  # none left open


def cycles(graph: grimp.ImportGraph) -> list[set[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    modules = sorted(m for m in graph.modules if m.startswith("spotrun"))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    groups: list[set[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if not child.startswith("spotrun"):
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append(
                        (child, iter(sorted(graph.find_modules_directly_imported_by(child))))
                    )
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return groups


def main() -> int:
    graph = grimp.build_graph("spotrun")
    found = cycles(graph)
    unknown = [g for g in found if not any(g <= known for known in KNOWN)]
    for group in found:
        mark = "NEW " if group in unknown else "known "
        print(f"{mark}cycle of {len(group)} modules: {', '.join(sorted(group))}")
    print(f"{len(found)} import cycle(s), {len(unknown)} not known")
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main())
