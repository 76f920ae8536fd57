"""The records ``explain`` hands out: plain frozen dataclasses, one per kind of text.

Prose fields are plain text in which `backticks` mark code; ``formula`` and ``vjp`` are
LaTeX without the surrounding ``$`` (render them with ``$...$`` in MathJax or matplotlib).
User-provided names are inserted as they are: HTML-escape before putting them in a page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["OpText", "RoleText", "InitText", "CategoryText", "OP_FIELDS", "ROLE_FIELDS", "INIT_FIELDS",
           "CATEGORY_FIELDS", "LATEX_FIELDS"]

#: Fields every op record has, in every language. All must be non-empty.
OP_FIELDS = ("headline", "what", "formula", "vjp", "why", "pitfalls")
#: Fields every parameter-role record has.
ROLE_FIELDS = ("headline", "what", "formula", "why", "pitfalls")
#: Fields every initialiser record has.
INIT_FIELDS = ("headline", "what", "formula")
#: Fields every category record has.
CATEGORY_FIELDS = ("label", "what")
#: Fields holding LaTeX (the same in every language), not prose.
LATEX_FIELDS = ("formula", "vjp")


@dataclass(frozen=True)
class CategoryText:
    """A legend entry: ``label`` is the legend's word, ``what`` one sentence about it."""

    name: str
    lang: str
    label: str
    what: str


@dataclass(frozen=True)
class InitText:
    """How a parameter was initialised: ``args`` are the extra arguments stored with it."""

    name: str
    lang: str
    headline: str
    what: str
    formula: str
    args: dict[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> str:
        """The headline plus its arguments, e.g. ``normal distribution N(μ, σ²) (std=0.02)``."""
        if not self.args:
            return self.headline
        return f"{self.headline} ({', '.join(f'{k}={v}' for k, v in self.args.items())})"


@dataclass(frozen=True)
class RoleText:
    """What a parameter is for in its layer; placeholders already filled from its metadata."""

    key: str
    lang: str
    headline: str
    what: str
    formula: str
    why: str
    pitfalls: str
    init: InitText | None = None


@dataclass(frozen=True)
class OpText:
    """Everything the inspector says about one op (and, for a parameter node, its role)."""

    op: str
    lang: str
    category: CategoryText
    headline: str
    what: str
    formula: str
    vjp: str
    why: str
    pitfalls: str
    role: RoleText | None = None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict (for widgets and the static HTML view)."""
        from dataclasses import asdict

        return asdict(self)
