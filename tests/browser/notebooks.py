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

#: Issue 13's graphs, seen at 1400 x 1000: (0) a two-layer MLP loss with ``at.grad`` of its two
#: weights in the default "both" view; (1) a 20-node graph shown with ``present=True``; (2) a
#: ~60-node graph drawn with every detail; (3) the first graph again with details on.
LEGIBLE = [
    """
import json
import numpy as np
import asgteach as at

with at.Graph("mlp2") as g:
    x = at.input("x", (4, 2))
    t = at.input("t", (4, 1))
    net = at.nn.MLP([2, 8, 1], activation="tanh", name="mlp")
    pred = at.sigmoid(net(x))
    loss = at.nn.mse_loss(pred, t)
    weights = [p for p in net.parameters() if p.name.endswith("weight")]
    at.grad(loss, weights)

with at.Graph("small") as g2:
    a = at.input("a", (4, 3))
    target = at.input("target", (4, 2))
    w = at.parameter("w", (3, 2))
    b = at.parameter("b", (2,), init="zeros")
    y = at.mean((at.sigmoid(a @ w + b) - target) ** 2)
    at.grad(y, [w, b])

with at.Graph("bigger") as g3:
    x3 = at.input("x", (4, 3))
    t3 = at.input("t", (4, 1))
    net3 = at.nn.MLP([3, 6, 6, 1], activation="tanh", name="net")
    loss3 = at.nn.mse_loss(net3(x3), t3)
    at.grad(loss3, net3.parameters())
from asgteach.widgets.elements import build_elements, scope_of
count = lambda z, d: sum(e["group"] == "nodes" for e in build_elements(scope_of(z), "both", None, details=d))
print("COUNTS=" + json.dumps({"mlp2": [count(loss, False), count(loss, True)], "small": count(y, False),
                             "bigger": count(loss3, True)}))
""",
    """
at.show(loss, display=False)
""",
    """
at.show(y, present=True, display=False)
""",
    """
at.show(loss3, details=True, display=False)
""",
]
