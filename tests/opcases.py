"""Test data for every op in the registry: small graphs whose OUTPUT node is that op.

Each :class:`OpCase` builds a fresh graph around one op (with the inputs it needs, at
values chosen away from kinks, ties and domain edges) and says which inputs to
differentiate. The per-op tests (gradcheck, jvp, dtype, wgpu parity) iterate these cases.

Every registered op has at least one case without anything written here: its own sample
(``OpSpec.tools.sample``, or the one derived from its arity, see ``asgteach.opsamples``), built
by the same builder as ``asgteach check`` uses; unary elementwise ops get it at three
shapes. The cases below add what a sample cannot: broadcasting shapes for binary ops,
axis variants for reductions, index forms, attribute variants.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Callable

import asgteach as at
from asgteach import opsamples
from asgteach.opsamples import Sample as Built  # noqa: F401  (y, xs, feeds, feeds_as)
from asgteach.opsamples import SampleInputs as Builder
from asgteach.ops import REGISTRY
from asgteach.ops.registry import apply


@dataclass(frozen=True)
class OpCase:
    op: str
    label: str
    fn: Callable[[Builder], at.Tensor]
    shape: tuple = (2, 3)   # the builder's default shape (what a shape-free sample is built at)

    @property
    def id(self) -> str:
        return f"{self.op}[{self.label}]"

    def build(self) -> Built:
        b = Builder(zlib.crc32(self.id.encode()), at.Graph("case"), self.shape)
        with b.graph:
            y = self.fn(b)
        assert y.op == self.op, f"case {self.id} builds a {y.op} node, not {self.op}"
        return Built(self.op, b.graph, y, b.xs, b.feeds)


CASES: list[OpCase] = []


def case(op: str, label: str) -> Callable:
    def deco(fn: Callable[[Builder], at.Tensor]) -> Callable:
        CASES.append(OpCase(op, label, fn))
        return fn

    return deco


def cases_for(op: str) -> list[OpCase]:
    """The cases of ``op``: the ones below, and its registry sample (also for ops registered after import)."""
    return [c for c in CASES if c.op == op] + ([] if op in _SAMPLED or op not in REGISTRY else sample_cases(op))


def sample_cases(op: str) -> list[OpCase]:
    """The op's own sample as test cases: at three shapes for a unary elementwise op, else once."""
    s, make = REGISTRY[op], opsamples.maker(op)
    if s.gpu.kernel == "elementwise" and s.arity == 1:
        return [OpCase(op, "sample " + str(sh).replace(" ", ""), make, sh) for sh in ((), (5,), (2, 3))]
    return [OpCase(op, "sample", make)]


_SAMPLED = sorted(n for n, s in REGISTRY.items() if not s.leaf)
for _op in _SAMPLED:
    CASES.extend(sample_cases(_op))


# --- binary elementwise: broadcasting shapes ------------------------------------------------
BINARY_SHAPES = [((4, 3), (3,)), ((4, 1), (1, 3)), ((2, 3, 4), (4,)), ((), (2, 3)), ((2, 3), ()), ((3,), (3,))]


def _label(sa: tuple, sb: tuple) -> str:
    return f"{sa}x{sb}".replace(" ", "")


def _separated(b: Builder, sa: tuple, sb: tuple) -> tuple[at.Tensor, at.Tensor]:
    """a and b with |a - b| >= 0.15 everywhere after broadcasting (no ties for max/min)."""
    return b.pair(sa, sb)


for _sa, _sb in BINARY_SHAPES:
    _lab = _label(_sa, _sb)
    case("add", _lab)(lambda b, sa=_sa, sb=_sb: b.x(sa) + b.x(sb))
    case("sub", _lab)(lambda b, sa=_sa, sb=_sb: b.x(sa) - b.x(sb))
    case("mul", _lab)(lambda b, sa=_sa, sb=_sb: b.x(sa) * b.x(sb))
    case("div", _lab)(lambda b, sa=_sa, sb=_sb: b.x(sa) / b.x(sb, away=0.5))
    case("pow", _lab)(lambda b, sa=_sa, sb=_sb: at.pow(b.x(sa, lo=0.5, hi=2.0), b.x(sb, lo=-1.5, hi=1.5)))
    case("maximum", _lab)(lambda b, sa=_sa, sb=_sb: at.maximum(*_separated(b, sa, sb)))
    case("minimum", _lab)(lambda b, sa=_sa, sb=_sb: at.minimum(*_separated(b, sa, sb)))
    case("greater", _lab)(lambda b, sa=_sa, sb=_sb: at.greater(*_separated(b, sa, sb)))
    case("equal", _lab)(lambda b, sa=_sa, sb=_sb: at.equal(*_separated(b, sa, sb)))

case("pow", "x**2 constant exponent, negative base")(lambda b: b.x((2, 3)) ** 2)
case("pow", "x**3")(lambda b: b.x((4,)) ** 3)
case("pow", "2**x scalar base")(lambda b: 2.0 ** b.x((3,)))
case("div", "10/x scalar numerator")(lambda b: 10.0 / b.x((2, 3), away=0.5))
case("equal", "with ties")(lambda b: at.equal(b.x((3,), value=[1.0, 2.0, 3.0]), b.x((3,), value=[1.0, 0.0, 3.0])))


@case("where", "int cond (4,3), a (4,3), b (3,)")
def _where1(b: Builder) -> at.Tensor:
    cond = b.ids((4, 3), b.rng.integers(0, 2, size=(4, 3)))
    return at.where(cond, b.x((4, 3)), b.x((3,)))


@case("where", "float cond (3,) broadcast, a (), b (2,3)")
def _where2(b: Builder) -> at.Tensor:
    cond = b.x((3,), value=[1.0, 0.0, 1.0], diff=False)
    return at.where(cond, b.x(()), b.x((2, 3)))


@case("where", "cond from greater")
def _where3(b: Builder) -> at.Tensor:
    a = b.x((2, 3), away=0.3)
    return at.where(a > 0.0, a * 2.0, b.x((2, 1)))


# --- unary elementwise: their samples run at three shapes (above); attribute variants here -------
case("gelu", "approximate=tanh")(lambda b: at.gelu(b.x((2, 4), lo=-3, hi=3), approximate="tanh"))
case("softplus", "beta=2")(lambda b: at.softplus(b.x((4,), lo=-2, hi=2), beta=2.0))
case("leaky_relu", "slope 0.2")(lambda b: at.leaky_relu(b.x((6,), away=0.2), negative_slope=0.2))
case("neg", "uniform")(lambda b: at.neg(b.x((2, 3))))
case("sigmoid", "wide range")(lambda b: at.sigmoid(b.x((2, 3), lo=-4.0, hi=4.0)))
for _f in (at.gelu, at.silu, at.softplus):
    case(_f.__name__, "wide range")(lambda b, f=_f: f(b.x((2, 3), lo=-3.0, hi=3.0)))

# --- reductions: axis int, negative, tuple, None, keepdims ------------------------------------
AXES = [None, 0, -1, (0, 2), ((1,), True), (-2, True), (None, True)]


def _axis_label(a: Any) -> str:
    ax, keep = a if isinstance(a, tuple) and len(a) == 2 and isinstance(a[1], bool) else (a, False)
    return f"axis={ax}{',keepdims' if keep else ''}".replace(" ", "")


def _reduction(name: str, a: Any) -> Callable[[Builder], at.Tensor]:
    ax, keep = a if isinstance(a, tuple) and len(a) == 2 and isinstance(a[1], bool) else (a, False)
    fn = getattr(at, name)

    def build(b: Builder) -> at.Tensor:
        shape = (2, 3, 4)
        x = b.distinct(shape, gap=0.15) if name == "max" else b.x(shape)
        return fn(x, axis=ax, keepdims=keep)

    return build


for _name in ("sum", "mean", "max", "var"):
    for _a in AXES:
        case(_name, _axis_label(_a))(_reduction(_name, _a))
    case(_name, "1-D")(lambda b, f=getattr(at, _name): f(b.distinct((5,))))
case("sum", "method x.sum(axis=1, keepdims=True)")(lambda b: b.x((3, 4)).sum(axis=1, keepdims=True))
case("max", "ties from broadcast split the gradient")(
    lambda b: at.max(at.broadcast_to(b.x((3,), value=[0.1, 0.9, -0.3]), (2, 3)), axis=0))

for _a in (-1, 0, 1):
    case("argmax", f"axis={_a}")(lambda b, a=_a: at.argmax(b.distinct((3, 4)), axis=a))
case("argmax", "keepdims")(lambda b: at.argmax(b.distinct((2, 3, 4)), axis=1, keepdims=True))

# --- softmax / log_softmax: any axis ----------------------------------------------------------
for _name in ("softmax", "log_softmax"):
    for _a in (-1, 0, 1):
        case(_name, f"(2,3,4) axis={_a}")(lambda b, f=getattr(at, _name), a=_a: f(b.x((2, 3, 4), lo=-3, hi=3), axis=a))
    case(_name, "1-D")(lambda b, f=getattr(at, _name): f(b.x((5,), lo=-3, hi=3)))
    case(_name, "large logits (stability)")(
        lambda b, f=getattr(at, _name): f(b.x((2, 3), value=[[1000.0, 1001.0, 999.0], [-500.0, -501.0, -499.5]])))

# --- matmul: 1-D, 2-D, batched, batch-broadcast ---------------------------------------------
MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 2)), ((2, 3), (3, 4)), ((2, 2, 3), (3, 4)),
                 ((2, 2, 3), (2, 3, 2)), ((2, 1, 2, 3), (3, 3, 2)), ((3,), (2, 3, 2)), ((2, 2, 3), (3,))]
for _sa, _sb in MATMUL_SHAPES:
    case("matmul", _label(_sa, _sb))(lambda b, sa=_sa, sb=_sb: b.x(sa) @ b.x(sb))

# --- shape ops ----------------------------------------------------------------------------
case("transpose", "x.T")(lambda b: b.x((2, 3)).T)
case("transpose", "axes=(1,2,0)")(lambda b: at.transpose(b.x((2, 3, 4)), (1, 2, 0)))
case("transpose", "negative axes (-1,0,1)")(lambda b: at.transpose(b.x((2, 3, 4)), (-1, 0, 1)))
case("transpose", "method x.transpose(0,2,1)")(lambda b: b.x((2, 3, 4)).transpose(0, 2, 1))

case("reshape", "(2,6)->(3,4)")(lambda b: at.reshape(b.x((2, 6)), (3, 4)))
case("reshape", "flatten -1")(lambda b: b.x((2, 3, 2)).reshape(-1))
case("reshape", "(4,3)->(2,-1,3)")(lambda b: b.x((4, 3)).reshape(2, -1, 3))
case("reshape", "()->(1,1)")(lambda b: at.reshape(b.x(()), (1, 1)))

case("broadcast_to", "(3,)->(4,3)")(lambda b: at.broadcast_to(b.x((3,)), (4, 3)))
case("broadcast_to", "(4,1)->(2,4,3)")(lambda b: at.broadcast_to(b.x((4, 1)), (2, 4, 3)))
case("broadcast_to", "()->(2,3)")(lambda b: at.broadcast_to(b.x(()), (2, 3)))

case("sum_to", "(4,3)->(3,)")(lambda b: at.sum_to(b.x((4, 3)), (3,)))
case("sum_to", "(2,4,3)->(4,1)")(lambda b: at.sum_to(b.x((2, 4, 3)), (4, 1)))
case("sum_to", "(2,3)->()")(lambda b: at.sum_to(b.x((2, 3)), ()))

GETITEM = {
    "int": lambda t: t[1],
    "negative int": lambda t: t[-1, 2],
    "slices": lambda t: t[1:3, ::2],
    "negative steps": lambda t: t[::-1, 3:0:-2],
    "None": lambda t: t[None, 1:],
    "Ellipsis": lambda t: t[..., 1],
    "mixed": lambda t: t[-2, ..., None, ::-3],
}
for _lab, _ix in GETITEM.items():
    case("getitem", _lab)(lambda b, ix=_ix: ix(b.x((4, 5))))
case("getitem", "3-D int and step")(lambda b: b.x((3, 4, 2))[1, ::2])

case("getitem_grad", "slice into (4,5)")(
    lambda b: apply("getitem_grad", b.x((2, 3)), shape=(4, 5), index=(("s", 1, 3, None), ("s", None, None, 2))))
case("getitem_grad", "int + Ellipsis")(
    lambda b: apply("getitem_grad", b.x((4,)), shape=(4, 5), index=(("e",), ("i", -1))))

case("concat", "axis=0 two")(lambda b: at.concat([b.x((2, 3)), b.x((1, 3))], axis=0))
case("concat", "axis=1 three")(lambda b: at.concat([b.x((2, 1)), b.x((2, 3)), b.x((2, 2))], axis=1))
case("concat", "axis=-1 3-D")(lambda b: at.concat([b.x((2, 2, 1)), b.x((2, 2, 2))], axis=-1))
case("concat", "same tensor twice")(lambda b: at.concat([(t := b.x((2, 2))), t * 2.0], axis=0))

# --- nn ops ---------------------------------------------------------------------------------
case("embedding", "repeated ids (2,3)")(lambda b: at.embedding(b.ids((2, 3), [[0, 2, 0], [4, 2, 2]]), b.x((5, 3))))
case("embedding", "1-D ids")(lambda b: at.embedding(b.ids((4,), [1, 1, 3, 0]), b.x((4, 2))))
case("embedding_grad", "repeated ids")(
    lambda b: apply("embedding_grad", b.ids((2, 3), [[0, 2, 0], [4, 2, 2]]), b.x((2, 3, 2)), num_embeddings=5))

case("layer_norm", "(2,4) weight, bias")(lambda b: at.layer_norm(b.x((2, 4)), b.x((4,)), b.x((4,))))
case("layer_norm", "1-D")(lambda b: at.layer_norm(b.x((5,)), b.x((5,)), b.x((5,))))
case("layer_norm", "(2,3,4) default affine")(lambda b: at.layer_norm(b.x((2, 3, 4))))
case("layer_norm", "eps=0.1")(lambda b: at.layer_norm(b.x((3, 3)), b.x((3,)), b.x((3,)), eps=0.1))
case("layer_norm_dx", "(3,5)")(lambda b: apply("layer_norm_dx", b.x((3, 5)), b.x((3, 5)), b.x((5,))))
case("layer_norm_dx", "(2,2,4) eps=0.1")(
    lambda b: apply("layer_norm_dx", b.x((2, 2, 4)), b.x((2, 2, 4)), b.x((4,)), eps=0.1))
case("layer_norm_dx", "1-D")(lambda b: apply("layer_norm_dx", b.x((6,)), b.x((6,)), b.x((6,))))

# --- convolution and pooling (NCHW) ------------------------------------------------------------
from asgteach.ops import conv as _conv  # noqa: E402

case("conv2d", "3x3 plain")(lambda b: _conv.conv2d(b.x((2, 3, 5, 5)), b.x((4, 3, 3, 3))))
case("conv2d", "stride 2 pad 1 rect kernel")(
    lambda b: _conv.conv2d(b.x((1, 2, 6, 5)), b.x((3, 2, 3, 2)), stride=2, padding=1))
case("conv2d", "dilation 2 groups 2")(
    lambda b: _conv.conv2d(b.x((1, 4, 7, 6)), b.x((6, 2, 2, 3)), stride=(1, 2), padding=(2, 1), dilation=2, groups=2))
_CONV = {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 1), "groups": 1}
case("conv2d_grad_input", "stride (2,1) pad (1,0)")(
    lambda b: apply("conv2d_grad_input", b.x((2, 3, 3, 3)), b.x((3, 2, 3, 3)), x_shape=(2, 2, 5, 5), **_CONV))
case("conv2d_grad_weight", "stride (2,1) pad (1,0)")(
    lambda b: apply("conv2d_grad_weight", b.x((2, 2, 5, 5)), b.x((2, 3, 3, 3)), w_shape=(3, 2, 3, 3), **_CONV))
case("max_pool2d", "2x2")(lambda b: _conv.max_pool2d(b.distinct((2, 3, 4, 6)), 2))
case("max_pool2d", "3x3 stride 2 pad 1")(
    lambda b: _conv.max_pool2d(b.distinct((1, 2, 5, 5)), 3, stride=2, padding=1))
_POOL = {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}
case("max_pool2d_grad", "3x3 stride 2 pad 1")(
    lambda b: apply("max_pool2d_grad", b.distinct((1, 2, 5, 5), diff=False),
                    b.x((1, 2, 3, 3)), **_POOL))
case("max_pool2d_gather", "3x3 stride 2 pad 1")(
    lambda b: apply("max_pool2d_gather", b.distinct((1, 2, 5, 5), diff=False),
                    b.x((1, 2, 5, 5)), **_POOL))
case("avg_pool2d", "2x2")(lambda b: _conv.avg_pool2d(b.x((2, 3, 4, 6)), 2))
case("avg_pool2d", "3x3 stride 2 pad 1")(lambda b: _conv.avg_pool2d(b.x((1, 2, 5, 5)), 3, stride=2, padding=1))
case("avg_pool2d_grad", "3x3 stride 2 pad 1")(
    lambda b: apply("avg_pool2d_grad", b.x((1, 2, 3, 3)), x_shape=(1, 2, 5, 5), **_POOL))
