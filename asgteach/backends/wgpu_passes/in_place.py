"""In-place updates (``wgpu_resident``'s ``bind_updates``): a fused update kernel writes the new parameter into
the old one's buffer.

What it rewrites. An optimizer's update ``p_new = p - lr * ...`` (with ``m`` and ``v``) is
one fused chain that reads ``p`` at each thread's own index. When no later kernel reads
``p`` and nothing else reads ``p_new``, that kernel may write ``p_new`` into ``p``'s buffer:
the chain's dispatch is made again with those outputs bound to the leaves' buffers.

Why it pays. No copy after the run, and one buffer less in flight per parameter and per
optimizer state. It runs when ``bind_updates`` names the pairs, so it is not one of the
passes at compile time; its rewrite is pure work, kept with the lowered plan per set of pairs.
"""

from __future__ import annotations

from ...graph import Graph
from .. import wgpu_plan_cache as plan_cache
from ..wgpu_chain import chain_dispatch, chain_leaves, in_place_leaves
from ..wgpu_kernels import Dispatch
from ..wgpu_memory import bind_entries

__all__ = ["in_place_rewrite"]


def in_place_rewrite(g: Graph, low: plan_cache.Lowered, outputs: list[int], pairs: list[tuple[int, int]]
                      ) -> tuple[frozenset, list[tuple[int, Dispatch, list[tuple[int, int, int]], dict]]]:
    """Which (new, old) pairs a fused kernel can write in place (see ``Plan._update_in_place``), and for each
    changed kernel: (dispatch index, new Dispatch, its bind entries, the new WGSL of its chain's nodes)."""
    f = low.fusion
    users: dict[int, list[int]] = {}   # buffer owner -> the dispatches that bind it
    for k, d in enumerate(low.dispatches):
        for nid in d.binds.values():
            users.setdefault(nid, []).append(k)
    per_chain: dict[int, dict[int, int]] = {}
    eligible: dict[int, set[int]] = {}   # chain root -> the leaves it reads at each thread's own index
    outs = set(outputs)   # (a Trainer's outputs and pairs are both one per parameter and state: no list scans)
    for new, old in pairs:
        root = f.chain_of.get(new)
        if root is None or root not in low.chain_at or old in outs:
            continue
        chain, k = f.chains[root], low.chain_at[root]
        if root not in eligible:
            eligible[root] = in_place_leaves(g, chain)
        if (new != root and new not in chain.stores) or old not in eligible[root]:
            continue
        if any(j > k for j in users.get(old, [])) or any(j != k for j in users.get(new, [])):
            continue   # read after the update, or the new value is read elsewhere: keep the copy
        per_chain.setdefault(root, {})[new] = old
    done: set[tuple[int, int]] = set()
    changed = []
    for root, inplace in per_chain.items():
        chain, k = f.chains[root], low.chain_at[root]
        stages = {leaf: v for leaf in chain_leaves(g, chain.members)
                  if (v := low.partials.get(root, {}).get(f.root(leaf))) is not None}
        made = chain_dispatch(g, chain, {i: f.root(i) for i in chain_leaves(g, chain.members)}, inplace,
                              partials=stages)
        if made is None:   # (no room for both in the uniform block: this chain keeps its copies)
            continue
        d, header = made
        sources = {root: (header, d.source)}
        for m in chain.members:
            if m != root:
                sources[m] = (f"// {g.nodes[m].op} (node #{m}) runs no kernel of its own: the fused kernel of node "
                              f"#{root} below computes it in registers\n", header, d.source)
        changed.append((k, d, bind_entries(g, d, low.scratch_bytes), sources))
        done.update(inplace.items())
    return frozenset(done), changed
