"""The widget's own words (buttons, section titles, step-through messages) in the reader's language.

They live beside the explanations, in the ``[ui]`` table of ``asgteach/explain/<lang>.toml``, so
a translator edits one file per language and adding a language adds it to the toolbar too. A
word missing from a language falls back to English.
"""

from __future__ import annotations

from ..explain.loader import FALLBACK, languages, table

__all__ = ["LANGS", "t"]

#: Languages the toolbar offers: one per language file.
LANGS = tuple(languages())


def t(key: str, lang: str = FALLBACK) -> str:
    """The UI string ``key`` in ``lang`` (English when missing)."""
    code = (lang or FALLBACK).lower()[:2]
    words = table(code).get("ui", {}) if code in LANGS else {}
    return words.get(key) or table(FALLBACK)["ui"][key]
