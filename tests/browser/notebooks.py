"""The notebooks the browser tests run, as lists of cell sources.

They are written out as .ipynb files into the JupyterLab server's temp root by the tests
(kept as Python here so that nbval, which runs every committed notebook, does not run
them a second time without a browser).
"""

from __future__ import annotations

#: A small MLP with a fan-out, a broadcast bias, a node with a hostile name, and a recorded
#: backward pass. The last cells print facts the test compares with what the browser shows.
MLP = [
    """
import json
import numpy as np
import asgteach as at

with at.Graph("mlp") as g:
    x = at.input("x", (4, 2))
    t = at.input("<img src=x onerror=alert(1)>", (4, 1))
    net = at.nn.MLP([2, 8, 1], activation="tanh", name="mlp")
    h = net(x)
    pred = at.sigmoid(h) + 0.1 * h          # h is used twice: its gradient is a sum (fan-out)
    loss = at.nn.mse_loss(pred, t)
    params = net.parameters()
    grads = at.grad(loss, params)
rng = np.random.default_rng(0)
feeds = {x: rng.standard_normal((4, 2)), t: rng.random((4, 1)),
         **{p: rng.standard_normal(p.shape) * 0.5 for p in params}}
""",
    """
view = at.show(loss, feeds=feeds, display=False)
view
""",
    """
from asgteach.widgets.steps import steps_of
expected = {"steps": [f"n{s.node}" for s in steps_of(g, g.passes[-1])],
            "order": g.passes[-1]["order"],
            "param": f"n{params[0].node_id}", "tanh": f"n{[n.id for n in g.nodes if n.op == 'tanh'][0]}",
            "hostile": f"n{t.node_id}", "fanout": f"n{h.node_id}"}
print("EXPECTED=" + json.dumps(expected))
""",
]

#: A transformer block: hundreds of nodes, drawn with its layers collapsed.
TRANSFORMER = [
    """
import asgteach as at
from asgteach import nn

with at.Graph("transformer") as g:
    tokens = at.input("tokens", (2, 8), dtype="int")
    targets = at.input("targets", (2, 8), dtype="int")
    emb = nn.Embedding(20, 16, name="embed")
    block = nn.TransformerBlock(16, 2, causal=True, name="block")
    head = nn.Linear(16, 20, name="head")
    loss = nn.cross_entropy(head(block(emb(tokens))), targets)
    at.grad(loss, [p for p in (emb.parameters() + block.parameters() + head.parameters())])
print("NODES", len(g.nodes))
""",
    """
loss
""",
]
