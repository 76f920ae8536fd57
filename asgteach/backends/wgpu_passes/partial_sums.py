"""Pass ``partial_sums``: a split sum read only by a fused chain is added up by that chain.

What it rewrites. This pass runs on the lowered kernel list (it needs the dispatches). A
reduction too long for one workgroup runs in two stages: partial sums into a scratch
buffer, then a short kernel adding them up, one thread per output. A split weight-gradient
GEMM ends the same way. When the only reader of such a sum is a fused chain (the
optimizer's update reading the gradient), the chain adds the partial sums itself as it
reads them (``wgpu_chain.chain_dispatch``'s ``partials``), and the second stage does not
run.

Why it pays. One launch less per such gradient, and the sums are never written and read
back: in a training step, one per weight matrix.
"""

from __future__ import annotations

from ...graph import Graph
from ..wgpu_chain import chain_dispatch, chain_leaves
from ..wgpu_kernels import Dispatch
from .rewrites import Fusion

NAME = "partial_sums"


def apply(graph: Graph, fusion: Fusion, dispatches: list[Dispatch], chain_at: dict[int, int], outputs: list[int],
          reads: dict[int, list[int]], sources: dict[int, tuple[str, ...]]
          ) -> tuple[list[Dispatch], dict[int, int], dict[int, dict]]:
    """A two-stage sum (partial sums into a scratch buffer, then a short kernel adding them up, one thread
    per output) whose only reader is a fused chain: the chain adds the partial sums itself as it reads (a
    split weight-gradient GEMM read by the optimizer's update), and the second stage does not run.

    Returns the dispatches left, the chains' new positions, and chain root -> {sum node: (scratch,
    n, a, b)} (``wgpu_chain.chain_dispatch``'s ``partials``; the in-place rewrite passes them again).
    """
    users: dict[int, set[int]] = {}   # buffer owner -> the dispatches that bind it
    made_by: dict[int, list[int]] = {}   # node -> the dispatches lowered for it
    for k, d in enumerate(dispatches):
        made_by.setdefault(d.node.id, []).append(k)
        for nid in d.binds.values():
            users.setdefault(nid, set()).add(k)
    outs = set(outputs)
    drop: set[int] = set()
    found: dict[int, dict] = {}
    for root, k in chain_at.items():
        chain, d = fusion.chains[root], dispatches[k]
        shape = graph.nodes[root].shape
        stages = {}
        for leaf in chain_leaves(graph, chain.members):
            s = fusion.root(leaf)
            ks = made_by.get(s, [])
            if s in outs or len(ks) != 2 or users.get(s) != {ks[1], k} or graph.nodes[leaf].shape != shape:
                continue
            last = dispatches[ks[1]]
            w = last.params
            # only a one-thread-per-output second stage (sum_t: a split GEMM's few K-chunks): the chain's thread
            # does the same loop. A long per-output sum (sum_wg over 256 partial column sums of a bias gradient)
            # needs its workgroup: one thread per output adding them all measured slower on an H100.
            if last.entry != "sum_t" or set(last.binds) != {1, 2} or last.binds[2] != s \
                    or last.binds[1] >= 0 or w[2] != 1 or w[3] != 1:
                continue
            stages[leaf] = (last.binds[1], int(w[1]), int(w[16]), int(w[32]))
        if not stages:
            continue
        made = chain_dispatch(graph, chain, {i: fusion.root(i) for i in chain_leaves(graph, chain.members)},
                              partials=stages)
        if made is None:
            continue
        new, header = made
        dispatches[k] = new
        text = (header, new.source)
        for m in chain.members:
            sources[m] = text if m == root else (
                f"// {graph.nodes[m].op} (node #{m}) runs no kernel of its own: the fused kernel of node #{root} "
                f"below computes it in registers\n", header, new.source)
        reads[root] = [nid for b, nid in sorted(new.binds.items())   # (scratch buffers, ids < 0, are never pooled)
                       if b != 1 and b not in new.stores and nid >= 0]
        found[root] = {fusion.root(leaf): v for leaf, v in stages.items()}
        for leaf in stages:
            s = fusion.root(leaf)
            drop.add(made_by[s][1])
            sources[s] = (f"// {graph.nodes[s].op} (node #{s}): the kernel below writes its partial sums; the fused "
                          f"kernel of node #{root} adds them up as it reads them (no second stage)\n",
                          dispatches[made_by[s][0]].source)
    if not drop:
        return dispatches, chain_at, {}
    keep = [k for k in range(len(dispatches)) if k not in drop]
    where = {old: new for new, old in enumerate(keep)}
    return [dispatches[k] for k in keep], {r: where[k] for r, k in chain_at.items()}, \
        {r: {s: v for s, v in st.items()} for r, st in found.items()}
