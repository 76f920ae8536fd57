"""Lowering: everything a wgpu Plan decides before it touches the device.

``_lower`` turns a graph's compute nodes into dispatches (``wgpu_fuse`` decides the rewrites,
``wgpu_kernels`` / ``wgpu_chain`` write each kernel), gives every value a buffer (owned for
leaves and outputs, pooled by liveness for the rest), writes the uniform words and the staging
offsets. Its result, a :class:`wgpu_plan_cache.Lowered`, depends on no device object, so a plan of
the same structure reuses it (``wgpu_plan_cache``). ``_in_place_rewrite`` is the pure part of
``Plan.bind_updates``. The steps are numbered as in ``wgpu_backend``'s module docstring.
"""

from __future__ import annotations

import warnings
from bisect import bisect_left, insort
from collections import deque
from typing import Any

import numpy as np

from ..graph import Graph, Node
from ..ops.registry import spec
from . import wgpu_plan_cache as plan_cache
from .wgpu_chain import chain_dispatch, chain_leaves, in_place_leaves
from .wgpu_fuse import plan_fusion
from .wgpu_kernels import Dispatch, gemm_sum, lower

__all__ = ["nbytes"]   # (wgpu_backend also takes _lower and _in_place_rewrite: this package's own)


def nbytes(node: Node) -> int:
    """Bytes of a node's buffer: float32/int32 elements, rounded up to 16 (and at least 16)."""
    return max(16, (node.size * 4 + 15) // 16 * 16)


def _bind_entries(graph: Graph, d: Dispatch, scratch_bytes: dict[int, int]) -> list[tuple[int, int, int]]:
    """(binding, buffer owner, bytes bound) for each buffer binding of ``d``, in binding order."""
    return [(b, nid, scratch_bytes[nid] if nid < 0 else nbytes(graph.nodes[nid]))
            for b, nid in sorted(d.binds.items())]


def _lower(graph: Graph, outputs: list[int], node_ids: list[int], tile: Any, max_storage_buffers: int,
           uniform_align: int, prefetch: Any = None) -> plan_cache.Lowered:
    """Everything a Plan decides before touching the device (see wgpu_backend's module docstring, steps 1-3 and 5).

    ``prefetch(key, source, entry)`` is told each kernel as soon as it is known (``Gpu.prefetch``: the
    driver compiles it on another thread while this one lowers the rest).
    """
    nodes = [graph.nodes[i] for i in node_ids]
    leaves = [n for n in nodes if n.op in ("input", "parameter")]
    constants = [n for n in nodes if n.op == "constant"]
    compute = [n for n in nodes if not spec(n.op).leaf]

    # 1. rewrites (wgpu_fuse: reshape aliases, transposes read in place, weight-gradient GEMMs), then lower
    fusion = plan_fusion(graph, compute, outputs, max_storage_buffers)
    root = fusion.root
    fixed_values, failing = _empty_input_values(graph, [n for n in compute if n.id not in fusion.skip])
    dispatches: list[Dispatch] = []
    chain_at: dict[int, int] = {}   # chain root -> the index of its dispatch
    sources: dict[int, tuple[str, ...]] = {}   # node -> its WGSL, in shared parts
    reads: dict[int, list[int]] = {}   # node -> the buffers (owner nodes) its kernels read
    for n in compute:
        if n.id in fusion.skip or n.id in fixed_values:
            continue
        if n.id in fusion.gemm_sum:
            x, gy = fusion.gemm_sum[n.id]
            ds = gemm_sum(graph, n, x, gy, tile, (root(x), root(gy))) if n.size else []
            reads[n.id] = [root(x), root(gy)]
        elif n.id in fusion.shortcuts:   # a backward rule's mark: one kernel of another op computes this node
            op, inputs, attrs = fusion.shortcuts[n.id]
            stand_in = Node(n.id, op, tuple(root(i) for i in inputs), attrs, n.shape, n.dtype, n.name, n.phase,
                            n.source)
            plus = root(fusion.resid[n.id]) if n.id in fusion.resid else None   # (+ r: wgpu_fuse._shortcut_sums)
            ds = lower(graph, stand_in, spec(op).gpu.kernel, tile, stores=fusion.provides.get(n.id), resid=plus)
            reads[n.id] = list(stand_in.inputs) + ([plus] if plus is not None else [])
        elif n.id in fusion.chains:
            chain = fusion.chains[n.id]
            d, header = chain_dispatch(graph, chain, {i: root(i) for i in chain_leaves(graph, chain.members)})
            chain_at[n.id] = len(dispatches)
            reads[n.id] = [nid for b, nid in sorted(d.binds.items()) if b != 1 and b not in d.stores]
            text = (header, d.source)
            for m in chain.members:
                sources[m] = text
            dispatches.append(d)   # (prefetched below: the partial-sum pass may still rewrite it)
            continue
        else:
            ops = fusion.operands.get(n.id)
            prod = fusion.products.get(n.id)
            if prod is not None:
                prod = (root(prod[0]), root(prod[1]))
                reads[n.id] = list(prod)
            elif ops is not None:
                ops = tuple((root(i), *rest) for i, *rest in ops)
                reads[n.id] = [v[0] for v in ops]
            else:
                reads[n.id] = [root(i) for i in n.inputs]
            bias = root(fusion.bias[n.id]) if n.id in fusion.bias else None
            resid = root(fusion.resid[n.id]) if n.id in fusion.resid else None
            mat = root(fusion.mat[n.id]) if n.id in fusion.mat else None
            scale = float(np.asarray(graph.constants[fusion.scale[n.id]]).reshape(())) if n.id in fusion.scale else None
            reads[n.id] += [v for v in (bias, resid, mat) if v is not None]
            ds = lower(graph, n, spec(n.op).gpu.kernel, tile, ops, fusion.out_views.get(n.id), prod, bias, resid=resid,
                       mat=mat, scale=scale)
        dispatches.extend(ds)
        for d in ds if prefetch is not None else ():
            if d.entry != "sum_t":   # (a split GEMM's last stage may be dropped below)
                prefetch(d.key, d.source, d.entry)
        if ds:   # the kernel that does the node's work (a split GEMM's sum comes after it)
            first = n.id in fusion.gemm_sum or n.id in fusion.products   # (the stage that reads the operands)
            sources[n.id] = (ds[0 if first else -1].source,)
            if n.id in fusion.shortcuts:
                sources[n.id] = (
                    f"// {n.op} (node #{n.id}) is computed by the kernel of {fusion.shortcuts[n.id][0]} below, entry "
                    f"{ds[0].entry}: the backward rule that built it marked it as that op of nodes "
                    f"{', '.join(f'#{i}' for i in fusion.shortcuts[n.id][1])}\n", *sources[n.id])
    absorbers = _absorbers(graph, fusion)
    for n in compute:
        if n.id in fusion.written_by:
            w = fusion.written_by[n.id]
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel of its own: the matmul of node #{w} below writes its "
                f"result straight in this transpose's layout (row stride LDC, batch strides in words 32..)\n",
                *sources.get(w, ()))
        elif n.id in fusion.provided_by:
            k = fusion.provided_by[n.id]
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel of its own: the kernel that computes node #{k} "
                f"writes this value too, as a by-product\n", *sources.get(k, ()))
        elif n.id in fusion.dead:
            k = fusion.dead[n.id]
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel: its only use was node #{k}, which one kernel "
                f"computes from other nodes (below)\n", *sources.get(k, ()))
        elif n.id in fusion.bias_add and fusion.bias_add[n.id] in fusion.shortcuts:
            k = fusion.bias_add[n.id]
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel of its own: the {fusion.shortcuts[k][0]} kernel of node "
                f"#{k} below adds node #{fusion.resid[k]} (binding 8) as it writes its result, into its own buffer, "
                f"which this node's readers read\n", *sources.get(k, ()))
        elif n.id in fusion.bias_add:
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel of its own: the matmul of node #{fusion.bias_add[n.id]} "
                f"below computes this value as it stores its result (epilogue: * the scale in word 40, + Bias: a row "
                f"vector, binding 4; + Resid: a value of the result's shape, binding 5; + Mat: a matrix, binding 7)\n",
                *sources.get(fusion.bias_add[n.id], ()))
        elif n.id in fusion.alias:
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel: a row-major buffer read with another shape is the "
                f"same bytes, so it shares node #{root(n.id)}'s buffer\n",)
        elif n.id in fusion.chain_of:
            if n.id != fusion.chain_of[n.id]:
                sources[n.id] = (
                    f"// {n.op} (node #{n.id}) runs no kernel of its own: the fused kernel of node "
                    f"#{fusion.chain_of[n.id]} below computes it in registers\n", *sources[n.id])
        elif n.id in fixed_values:
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel: its inputs are empty, so its value depends on no "
                f"data; it was computed once, as numpy computes it, and is uploaded like a constant\n",)
        elif n.id in fusion.skip:
            sources[n.id] = (
                f"// {n.op} (node #{n.id}) runs no kernel of its own: the kernel below, which reads it, "
                f"reads its operands in place\n", *_absorbing_source(fusion, sources, n, absorbers))
    dispatches, chain_at, partials = _sum_last_stage_in_chains(graph, fusion, dispatches, chain_at, outputs,
                                                               reads, sources)
    for d in dispatches if prefetch is not None else ():
        if d.key[0] == "fused" or d.entry == "sum_t":
            prefetch(d.key, d.source, d.entry)
    unbound = {s for stages in partials.values() for s in stages}   # sums whose value no kernel writes now
    running = [n for n in compute if n.id not in fusion.skip and n.id not in fixed_values]
    indexing = [n.id for n in running if spec(n.op).gpu.index_bound is not None and n.size]

    # 2. memory plan: owned buffers (slots) for leaves/outputs, a liveness pool for the rest
    slot_sizes: list[int] = []
    slot_of: dict[int, int] = {}

    def new_slot(size: int) -> int:
        slot_sizes.append(size)
        return len(slot_sizes) - 1

    bytes_owned = bytes_pooled = 0
    fixed = [graph.nodes[i] for i in fixed_values]
    # a scalar constant that fused kernels read as a uniform word is bound by no kernel: it needs no buffer
    # (nor an upload); in a transformer's training step that is half of the plan's ~1100 buffers
    bound = {nid for d in dispatches for nid in d.binds.values()} | set(outputs)
    constants = [n for n in constants if n.id in bound]
    for n in leaves + constants + fixed + [graph.nodes[i] for i in outputs]:
        if n.id not in slot_of:
            slot_of[n.id] = new_slot(nbytes(n))
            bytes_owned += nbytes(n)
    last_use: dict[int, int] = {}
    for k, n in enumerate(running):
        for i in reads[n.id]:
            last_use[i] = k
    # buffers free for reuse: a value takes the smallest one big enough (at most twice its size), of those the
    # one freed first; kept by size so that the choice is a bisection, not a scan of every free buffer
    free: dict[int, deque[int]] = {}   # bytes -> slots of that size, in the order they were freed
    free_sizes: list[int] = []         # the keys of ``free``, ascending
    outs = set(outputs)
    for k, n in enumerate(running):
        for nid in (n.id, *fusion.provides.get(n.id, {}).values()):   # (and the by-products its kernel writes)
            if nid in slot_of or nid in unbound:
                continue
            need = nbytes(graph.nodes[nid])
            j = bisect_left(free_sizes, need)
            if j < len(free_sizes) and free_sizes[j] <= 2 * need:
                size = free_sizes[j]
                slot_of[nid] = free[size].popleft()
                if not free[size]:
                    del free[size], free_sizes[j]
            else:
                slot_of[nid] = new_slot(need)
                bytes_pooled += need
        for i in set(reads[n.id]):   # values read for the last time give their buffer back
            if last_use.get(i) != k or i in outs:
                continue
            if graph.nodes[i].op in ("input", "parameter", "constant") or i in fixed_values:
                continue
            s = slot_of[i]
            if slot_sizes[s] not in free:
                free[slot_sizes[s]] = deque()
                insort(free_sizes, slot_sizes[s])
            free[slot_sizes[s]].append(s)
    for n in compute:
        if n.id in fusion.alias and root(n.id) in slot_of:   # (a reshape of such a constant: no buffer either)
            slot_of[n.id] = slot_of[root(n.id)]
    scratch_bytes: dict[int, int] = {}
    for d in dispatches:
        for sid, size in (d.scratch or {}).items():
            scratch_bytes[sid] = max(16, (size + 15) // 16 * 16)
            slot_of[sid] = new_slot(scratch_bytes[sid])
            bytes_owned += scratch_bytes[sid]

    # 3. one uniform buffer for all dispatches, written once
    params = np.zeros((max(1, len(dispatches)), uniform_align // 4), dtype=np.uint32)
    for k, d in enumerate(dispatches):
        params[k, :64] = d.params

    # 5. staging: every requested output at its own offset in one mappable buffer
    out_offsets: list[int] = []
    off = 0
    for i in outputs:   # (outputs later bound by bind_updates are simply not copied or mapped)
        out_offsets.append(off)
        off += nbytes(graph.nodes[i])
    return plan_cache.Lowered(
        node_ids=list(node_ids), leaves=[n.id for n in leaves], constants=[n.id for n in constants], fusion=fusion,
        fixed=fixed_values, failing=failing, dispatches=dispatches, chain_at=chain_at, node_sources=sources,
        indexing=indexing, slot_sizes=slot_sizes, slot_of=slot_of,
        binds=[_bind_entries(graph, d, scratch_bytes) for d in dispatches], params=params,
        out_offsets=out_offsets, staging_size=max(off, 16), bytes_owned=bytes_owned, bytes_pooled=bytes_pooled,
        scratch_bytes=scratch_bytes, partials=partials)


def _sum_last_stage_in_chains(graph: Graph, fusion: Any, dispatches: list[Dispatch], chain_at: dict[int, int],
                              outputs: list[int], reads: dict[int, list[int]], sources: dict[int, tuple[str, ...]]
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


def _absorbers(g: Graph, f: Any) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """For each node, the kernels that may do its work, in plan order: the weight-gradient sums folded into one
    GEMM that read it (as their matmul, or its transposed operand), and the matmuls that read it as an operand.
    (Found once per plan: looking through every matmul for each skipped node was quadratic in the layers.)"""
    by_gemm: dict[int, list[int]] = {}
    for s_id in f.gemm_sum:
        m = g.nodes[g.nodes[s_id].inputs[0]]
        for i in dict.fromkeys((m.id, m.inputs[0])):
            by_gemm.setdefault(i, []).append(s_id)
    by_matmul: dict[int, list[int]] = {}
    for u in f.operands:
        for i in dict.fromkeys(g.nodes[u].inputs):
            by_matmul.setdefault(i, []).append(u)
    return by_gemm, by_matmul


def _absorbing_source(f: Any, sources: dict[int, tuple[str, ...]], n: Node,
                      absorbers: tuple[dict[int, list[int]], dict[int, list[int]]]) -> tuple[str, ...]:
    """The WGSL of the kernel that computes a skipped transpose's or matmul's work (``absorbers``: see above)."""
    by_gemm, by_matmul = absorbers
    for s_id in by_gemm.get(n.id, ()):
        if s_id in sources:
            return sources[s_id]
    u = f.read_through.get(n.id)
    if u is not None and u in sources:
        return sources[u]
    for u in by_matmul.get(n.id, ()):
        if u in sources:
            return sources[u]
    return ()


def _in_place_rewrite(g: Graph, low: plan_cache.Lowered, outputs: list[int], pairs: list[tuple[int, int]]
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
        changed.append((k, d, _bind_entries(g, d, low.scratch_bytes), sources))
        done.update(inplace.items())
    return frozenset(done), changed


def _empty_input_values(graph: Graph, nodes: list[Node]) -> tuple[dict[int, np.ndarray], dict[int, str]]:
    """Values (and errors) of the nodes whose every input is empty, computed once by numpy.

    A reduction over an empty axis reads no data, yet has a value: the sum of nothing is 0,
    the mean of nothing is NaN (0/0), and the max of nothing is an error. Those are
    numpy's conventions, and numpy is the reference, so such a node is not left to a GPU
    kernel looping zero times (which would give 0 for a variance, -inf for a max): its
    numpy kernel runs here on empty arrays. Returns (node id -> float32/int32 value, for
    non-empty results) and (node id -> the error numpy raised, raised again at run time).
    """
    fixed: dict[int, np.ndarray] = {}
    failing: dict[int, str] = {}
    for n in nodes:
        ins = [graph.nodes[i] for i in n.inputs]
        if not ins or any(i.size for i in ins):
            continue
        args = [np.zeros(i.shape, np.int32 if i.dtype == "int" else np.float32) for i in ins]
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")   # numpy's "Mean of empty slice": the NaN says it
                value = np.asarray(spec(n.op).numpy(*args, **n.attrs))
        except Exception as e:  # noqa: BLE001 - whatever numpy raises, the numpy backend would report
            failing[n.id] = str(e)
            continue
        if n.size:
            fixed[n.id] = np.ascontiguousarray(value, np.int32 if n.dtype == "int" else np.float32).reshape(n.shape)
    return fixed, failing
