"""Pass ``causal_tiles``: the products of causal attention leave out the tiles that add only zeros.

What it rewrites. In causal attention (``nn.MultiHeadAttention(..., causal=True)``) a query never
looks at a later key: the mask adds ``c = -1e9`` above the diagonal of each (T, T) score matrix, and
``exp`` of a number that negative is exactly 0, so the weights ``w = softmax(scores)`` are exactly 0
above the diagonal. Six matrix products of a training step touch those zeros (``match_forward`` and
``match_backward`` of the pass ``attention`` find them, as drawn there):

=====================================  ===========================  ==============================
product                                what is known                what a workgroup leaves out
=====================================  ===========================  ==============================
``scores = q @ k^T`` (* scale + mask)  C above the diagonal: only   a tile wholly above: no K step
                                       the mask counts              (stored as 0 * scale + c)
``heads = w @ v``                      A = w zero above             keys after its last query
``dW = dO @ v^T``                      C above: multiplied by w = 0  a tile wholly above: stored 0
``dv = w^T @ dO``                      A = w^T zero below           queries before its first key
``dq = dS @ k``  (dS = w * (...))      A = dS zero above            keys after its last query
``dk^T = q^T @ dS``                    B = dS zero above            queries before its first key
=====================================  ===========================  ==============================

Each matmul keeps its kernel; it is told these facts (``plan.fusion.zero``: rule names of
``wgpu_matmul.ZERO_RULES``), and its K loop starts and stops per workgroup
(``shaders/matmul.wgsl``). Half the square's tiles are above the diagonal, so at long sequences
these six products do a little more than half of their work (the tiles crossing the diagonal are
computed in full).

Why the results do not change. A term left out is ``0 * x``: adding it changes no sum, so every
result is the one the full product gives (bit for bit, tested on lavapipe), provided that

* the mask's value is at most ``SKIP_BELOW`` (-1e6): then ``exp(score + c - max)`` underflows to
  exactly 0 for any scores a model can have (|scores| far below 1e6, as for the fused kernels of the
  pass ``attention``, which skip the same tiles). The row's max is at most its diagonal's score,
  which no mask lowers;
* there is no key padding bias: a query whose every earlier key is padded has all its scores near
  ``c``, masked or not, and its weights above the diagonal are then not 0 (such an attention runs
  every tile, as the fused kernels do);
* the other factor ``x`` is finite: a NaN or inf in ``v``, ``dO``, ``k`` or ``q`` at a position
  only masked queries see would turn ``0 * x`` into NaN in the full product and is not seen here.
  A NaN anywhere else still reaches the outputs, and the plan's output check refuses it as before.

The products that write a (T, T) matrix (the scores, dW) still write every element: a tile above the
diagonal is stored as its epilogue of 0, finite, and read only where it is multiplied by a zero weight
or masked again (the pattern's single-reader conditions say so).

The two row kernels between them skip the same half. The softmax node of such an attention is recorded in
``plan.fusion.causal`` and runs ``softmax_causal_*`` (shaders/softmax.wgsl, :func:`causal_softmax_kernel`):
query i reads only keys j <= i and writes exactly 0.0 above the diagonal, the value the full kernel's exp
underflows to there, with the same max and sum bit for bit (a skipped score enters them as -inf, in the
same lanes and reduction tree). The softmax backward whose ``y`` is that node (pass ``softmax_grad``) runs
``softmax_grad_causal_*``: it reads y and g only at j <= i, since y = 0 above makes every term there 0.
Both are memory-bound, and at long sequences half of what they read was that upper half.

Why it pays. The score path is the part of a transformer step that grows with the square of the
sequence: at seq 1024 its five products take about 2.9 ms of a 13 ms layer step on an H100
(bench/README.md, issue 27), and about half of that is tiles above the diagonal.
"""

from __future__ import annotations

from ...graph import Node
from ..wgpu_kernels import _softmax
from ..wgpu_matmul import Tile
from .attention import AttentionGrad, match_backward, match_forward
from .rewrites import Made, Rewriting, matmul_kernel, own_kernel

NAME = "causal_tiles"
SKIP_BELOW = -1e6   # a causal mask value at most this adds exactly 0 after softmax's exp


def rules_of(ctx: Rewriting, o_id: int) -> tuple[int | None, dict[int, tuple[str, ...]]]:
    """(the softmax node, {matmul node: its zero rules}) for the causal attention whose ``heads`` is node
    ``o_id``; (None, {}) when it is not one."""
    a = match_forward(ctx, ctx.graph.nodes[o_id])
    if a is None or a.causal is None or a.causal > SKIP_BELOW or a.bias is not None:
        return None, {}
    rules = {a.inner[-1]: ("C_above",), a.o: ("A_above",)}   # (inner ends with the scores' matmul)
    gr = match_backward(ctx, a)
    if isinstance(gr, AttentionGrad):
        dw = gr.inner[1]   # (wt, dW, ...)
        rules |= {dw: ("C_above",), gr.dv: ("A_below",), gr.dq: ("A_above",), gr.dk: ("B_above",)}
    return a.inner[0], rules   # (inner starts with the softmax)


def causal_softmax_kernel(ctx: Rewriting, n: Node, tile: Tile) -> Made:
    """The weights ``n`` = softmax(scores + causal mask) by ``softmax_causal_*``: row i reads keys 0..i only."""
    ds = _softmax(ctx.graph, n, causal=True) if n.size else []
    note = (f"// softmax (node #{n.id}) is the weights of a causal attention (pass causal_tiles): entry "
            f"{ds[0].entry if ds else ''} reads only keys j <= i of query i's row and writes 0.0 above the "
            f"diagonal (the value exp underflows to there), with the full kernel's max and sum\n")
    return Made(ds, [ctx.f.root(i) for i in n.inputs], note=note)


def run(ctx: Rewriting) -> str:
    """Tell the matmuls of every (unfused) causal attention which of their tiles add only zeros, and its
    softmax to read only the keys at or before each query."""
    f = ctx.f
    found = 0
    for n in ctx.compute:
        if n.op != "matmul" or n.id not in ctx.kernels:
            continue
        w, rules = rules_of(ctx, n.id)
        rules = {k: v for k, v in rules.items() if k in ctx.kernels}
        if not rules:
            continue
        found += 1
        f.causal.add(w)
        if ctx.kernels.get(w) is own_kernel:
            ctx.kernels[w] = causal_softmax_kernel
        for k, v in rules.items():
            f.zero[k] = v
            ctx.kernels[k] = matmul_kernel
    if not found:
        return "no unfused causal attention in this plan"
    rows = sum(ctx.kernels.get(w) is causal_softmax_kernel for w in f.causal)
    return (f"{found} causal attention(s): {len(f.zero)} matmul(s) leave out the tiles that add only zeros "
            f"(above or below the diagonal); {rows} softmax(es) read only the keys j <= i")
