"""Sphinx configuration of the course website: ``./scripts/site`` builds it into ``build/site/``.

The site's pages are the repository's own files, reached through symbolic links in this folder, so
nothing is copied and nothing can drift: ``lessons -> ../../lessons`` (every lesson, rendered from its
committed outputs: nothing is executed), ``docs/*.md -> ../../*.md`` and ``deploy/README.md`` (the same
folder layout as the repository, so the relative links between those pages keep working). The API
reference is generated from the docstrings (``api/``, with the ``asgteach-api`` directive of
``_ext/asgteach_site.py``), and the licence page shows the licence files found when the site is built.

The site is built and viewed offline: the theme is a pip package (furo), MathJax is served from the site
itself (sphinx-mathjax-offline), and ``tests/test_site.py`` checks that a page loads nothing from
outside the site.
"""

from __future__ import annotations

import sys
from pathlib import Path

import asgteach

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "asgteach"
author = "the asgteach contributors"
copyright = "2026, the asgteach contributors"
release = version = asgteach.__version__

extensions = [
    "myst_nb",                  # notebooks (.ipynb) and Markdown (MyST) pages
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",      # the package's docstrings are Google style (Args:, Returns:, Raises:)
    "sphinx.ext.viewcode",      # "[source]" beside each API entry: the module's code, highlighted
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",   # MathJax 3 copied into _static/mathjax: no CDN at view time
    "asgteach_site",            # the API directive and the licence page (_ext/asgteach_site.py)
]

root_doc = "index"
exclude_patterns = ["_build", "_ext", "**/.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
# CHANGELOG.md is a link like the other pages; a repository without one shows no such page (the index's toctree
# then warns that it is missing)
if not (HERE / "CHANGELOG.md").exists():
    exclude_patterns.append("CHANGELOG.md")
# a lesson's Markdown cells and the docs/ pages are MyST: $...$ and $$...$$ math, heading anchors for the
# links between pages (teaching.md#running-on-a-hub)
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

# --- notebooks: shown as committed, never executed ----------------------------------------------------
nb_execution_mode = "off"
# A graph (at.show) is stored as its picture (PNG + SVG, widgets/picture.py); a notebook saved from a live session
# also holds a widget view, whose state is not saved (scripts/run-notebooks). Without that state the view would
# render as nothing, so pages take the picture: the widget mime type is dropped from the HTML builder's priority
# list.
nb_mime_priority_overrides = [
    ("html", "application/vnd.jupyter.widget-view+json", None),
    ("dirhtml", "application/vnd.jupyter.widget-view+json", None),
]
# Long outputs (a training log) scroll inside their cell instead of making the page endless.
nb_merge_streams = True
# A public site must not hand out the answers: an exercise's solution code is cut as `asgteach student` cuts it
# (`raise NotImplementedError("exercise N")`) and that cell's output is not shown (asgteach_site.read_lesson).
nb_custom_formats = {".ipynb": ["asgteach_site.read_lesson", {}, False]}

# --- API reference ---------------------------------------------------------------------------------------
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autodoc_member_order = "bysource"
autoclass_content = "both"           # a class's docstring and its __init__'s (where the arguments are)
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
maximum_signature_line_length = 100  # a long signature gets one parameter per line
python_display_short_literal_types = True
toc_object_entries_show_parents = "hide"

# --- HTML ------------------------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"asgteach {release}"
html_static_path = ["_static"]
html_css_files = ["asgteach.css"]
html_show_sourcelink = False        # the lessons are in the repository; a page's text copy helps no one
html_copy_source = False
html_last_updated_fmt = None
html_theme_options = {"navigation_with_keys": True}
mathjax_path = "mathjax/tex-chtml.js"   # inside the site: sphinx-mathjax-offline copies it to _static/mathjax
