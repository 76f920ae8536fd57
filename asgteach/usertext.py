"""User text -> HTML that shows it literally: never markup, never math.

Names of nodes, parameters and layers, op names of user-registered ops, source lines, file
names, attribute values: all of it is typed by the user, and all of it ends up in HTML that
JupyterLab's MathJax typesets (the inspector is an ``HTMLMath`` widget; ``text/html``
outputs are typeset too). MathJax there runs with every TeX package, ``\\href`` and
``\\require`` included, and with ``$...$``, ``\\(...\\)``, ``\\[...\\]`` and
``\\begin{...}`` as delimiters — so a parameter called ``$\\href{javascript:alert(1)}{x}$``
would become a live link if its text reached a typeset region.

Two layers of defence, both in :func:`user_text`:

* MathJax works on the page's DOM, where ``&#36;`` is already a ``$`` again; what stops it
  there is the class ``mathjax_ignore`` (MathJax 3; ``tex2jax_ignore`` for MathJax 2) on an
  element around the text: MathJax does not look inside. MathJax also breaks its search at
  every element boundary, so text outside the span cannot pair with a ``$`` inside it.
* Tools that look for math in the HTML *source* (nbconvert, some previewers) see
  ``&#36;`` and ``&#92;``, not ``$`` and ``\\``.

HTML-escaping (``& < > " '``) comes first, so ``<img src=x onerror=...>`` stays text.
Where a span cannot go (inside an attribute, an SVG ``<text>``), :func:`plain_text`
escapes the same way, and the enclosing element carries :data:`NO_MATH` instead.
"""

from __future__ import annotations

import html
from typing import Any

__all__ = ["NO_MATH", "plain_text", "user_text"]

#: Class that tells MathJax (3: ``mathjax_ignore``; 2: ``tex2jax_ignore``) to leave an element alone.
NO_MATH = "tex2jax_ignore mathjax_ignore"


def plain_text(text: Any) -> str:
    """HTML-escaped text (quotes too) with ``$`` and ``\\`` as character references.

    Safe in element content and in quoted attribute values; does not by itself stop MathJax
    (see the module doc): use it where the enclosing element carries :data:`NO_MATH`.
    """
    return html.escape(str(text), quote=True).replace("$", "&#36;").replace("\\", "&#92;")


def user_text(text: Any) -> str:
    """User text as an HTML fragment that shows the text literally, wherever it lands.

    ``user_text("$\\\\href{javascript:alert(1)}{x}$")`` ->
    ``<span class="tex2jax_ignore mathjax_ignore">&#36;&#92;href{javascript:alert(1)}{x}&#36;</span>``.
    """
    return f'<span class="{NO_MATH}">{plain_text(text)}</span>'
