"""Find and read the language files: one ``<code>.toml`` per language in this folder.

Adding a language is adding a file: ``languages()`` lists whatever ``*.toml`` files sit
next to this module, so nothing here names "en" or "ru" except the fallback language.
Files are parsed once (``tomllib``, Python 3.11's standard TOML reader; on 3.10 the same parser from the
``tomli`` package, a dependency there) and cached.
"""

from __future__ import annotations

import sys
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

__all__ = ["FALLBACK", "HERE", "languages", "table", "reload", "resolve_language", "language_name"]

#: The language every other one falls back to (and the one tests compare against).
FALLBACK = "en"
#: The folder that holds the language files.
HERE = Path(__file__).resolve().parent


@lru_cache(maxsize=None)
def _files() -> dict[str, Path]:
    return {p.stem: p for p in sorted(HERE.glob("*.toml"))}


def languages() -> list[str]:
    """The language codes there is a file for, e.g. ``['en', 'ru']``."""
    return list(_files())


@lru_cache(maxsize=None)
def table(lang: str) -> dict[str, Any]:
    """The parsed file of language ``lang`` (a code from :func:`languages`)."""
    path = _files().get(lang)
    if path is None:
        raise KeyError(f"no explanation file for language {lang!r}; known: {', '.join(languages())}")
    with path.open("rb") as f:
        return tomllib.load(f)


def reload() -> None:
    """Forget what was read: the next look-up reads the folder (``HERE``) and its files again.

    Files are read once and kept (every node of every graph view asks for its texts). A language
    file added or edited while Python runs, by a translator trying a new ``xx.toml`` in a notebook,
    is seen after ``reload()`` without restarting the kernel.
    """
    _files.cache_clear()
    table.cache_clear()


def language_name(lang: str) -> str:
    """The language's own name for itself ("English", "Русский")."""
    return str(table(lang).get("language", {}).get("name", lang))


def resolve_language(lang: str | None) -> str:
    """Map what a user typed ("ru", "RU", "ru-RU", "Russian", "русский") to a known code.

    An unknown language gives a warning naming the known ones and falls back to English,
    so a typo never breaks a lesson.
    """
    if lang is None:
        return FALLBACK
    wanted = str(lang).strip().lower().replace("_", "-")
    known = languages()
    if wanted in known:
        return wanted
    base = wanted.split("-")[0]
    if base in known:
        return base
    for code in known:  # by name: the language's own ("русский") or its English one ("russian")
        header = table(code).get("language", {})
        if wanted in (str(header.get("name", "")).lower(), str(header.get("english_name", "")).lower()):
            return code
    warnings.warn(
        f"no explanations in language {lang!r}; known languages: {', '.join(known)}. Using English.",
        stacklevel=3,
    )
    return FALLBACK
