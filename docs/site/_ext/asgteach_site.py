"""What the course website adds to Sphinx (docs/site/conf.py loads this file as the extension ``asgteach_site``).

Two directives, described below; two fixes to the package's docstrings as reST (escape_docstring,
keep_value_comments); the links of the pages that are symbolic links (relink_symlinked_pages); links to a licence
file that open the licence page (licence_links_to_page); and MyST-NB's extracted images kept in the build's cache
folder (keep_outputs_with_doctrees).

``.. asgteach-api:: asgteach``
    Documents every public name of a module, as students write it (``asgteach.grad``, ``asgteach.nn.Linear``,
    ``asgteach.optim.Adam``), in one section per module of the package that defines those names, titled from
    that module's docstring. Nothing is listed by hand, so a new public function, layer or op appears on the
    site without editing the page. The public names are the module's ``__all__``, or, for a module without one
    (``asgteach.nn``), its names that the package defines. Options:

    ``:order: MODULE MODULE ...``
        the defining modules whose sections come first, in this order; the others follow in order of first
        appearance.
    ``:skip-top-level:``
        leave out what ``asgteach`` itself exports (``at.Trainer`` is documented once, on the ``asgteach`` page).
    ``:ignore-all:``
        take the names the package defines even where the module has an ``__all__`` (``asgteach.ops``, whose
        ``__all__`` is the op functions, ``at.*``, and whose registry API is the rest).

``.. asgteach-licences::``
    The text of each licence file at the repository's top level (LICENSE, LICENSE-*, COPYING*), read when the
    site is built, so the page shows whatever licences the repository holds.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import types
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[3]
PACKAGE = "asgteach"
LICENCE_DOC = "licence"
LICENCE_PATTERNS = ("LICENSE", "LICENSE.*", "LICENSE-*", "LICENCE*", "COPYING*")
SECTION_UNDERLINE = "-"


def resolve(path: str) -> Any:
    """The object at a dotted path as students write it: ``asgteach.optim`` is ``asgteach.nn.optim``'s alias."""
    head, *rest = path.split(".")
    obj = importlib.import_module(head)
    for part in rest:
        obj = getattr(obj, part)
    return obj


def public_names(module: types.ModuleType, use_all: bool = True) -> list[str]:
    """``__all__``, or else the names the package defines, modules aside (``annotations``, ``np`` and the
    submodules a package imports for itself are not its API)."""
    names = getattr(module, "__all__", None)
    if names is not None and use_all:
        return list(names)
    out = []
    for name, obj in vars(module).items():
        if name.startswith("_") or isinstance(obj, types.ModuleType):
            continue
        home = getattr(obj, "__module__", None)
        if home is None and not callable(obj):  # data (REGISTRY, a dict): defined where it was found
            home = module.__name__
        if isinstance(home, str) and (home == PACKAGE or home.startswith(PACKAGE + ".")):
            out.append(name)
    return out


def directive_for(obj: Any) -> str | None:
    """The autodoc directive that documents ``obj`` (None: a module, which has its own page)."""
    if isinstance(obj, types.ModuleType):
        return None
    if inspect.isclass(obj):
        return "autoexception" if issubclass(obj, BaseException) else "autoclass"
    if callable(obj):
        return "autofunction"
    return "autodata"


def data_entry(path: str, name: str, obj: Any) -> list[str]:
    """A module-level value: documented from its ``#:`` comment in the module that defines it.

    autodoc would otherwise show the docstring of its type (a dict's constructor, in reST it does not parse);
    a value without a comment is listed by name only.
    """
    for modname, mod in sorted(sys.modules.items()):
        if not (modname == PACKAGE or modname.startswith(PACKAGE + ".")) or getattr(mod, name, None) is not obj:
            continue
        try:
            docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
        except PycodeError:
            continue
        if ("", name) in docs:
            return [f".. autodata:: {modname}.{name}", "   :no-value:", ""]
    return [f".. py:data:: {path}.{name}", ""]


def heading_of(module_name: str) -> tuple[str, str]:
    """A section title and a lead paragraph from a module's docstring.

    The title is the docstring's first sentence up to its first colon ("Reductions: sum, mean, ..." ->
    "Reductions"); the lead is the first paragraph, whole.
    """
    doc = inspect.getdoc(sys.modules.get(module_name)) or ""
    para = " ".join(doc.split("\n\n", 1)[0].split())
    if not para:
        return module_name, ""
    sentence = re.split(r"(?<=[.?!])\s", para, maxsplit=1)[0]
    title = sentence.split(": ", 1)[0].rstrip(".")
    return title, para


class ApiDirective(SphinxDirective):
    """``.. asgteach-api:: MODULE``: see the module docstring."""

    required_arguments = 1
    option_spec = {"order": directives.unchanged, "skip-top-level": directives.flag, "ignore-all": directives.flag}

    def run(self) -> list[nodes.Node]:
        path = self.arguments[0]
        module = resolve(path)
        top = importlib.import_module(PACKAGE)
        top_level = {id(getattr(top, n)) for n in top.__all__} if "skip-top-level" in self.options else set()
        groups: dict[str, list[tuple[str, str]]] = {}
        submodules = []
        for name in public_names(module, use_all="ignore-all" not in self.options):
            obj = getattr(module, name)
            kind = directive_for(obj)
            if kind is None:
                submodules.append(name)
                continue
            if id(obj) in top_level:
                continue
            home = getattr(obj, "__module__", None) if kind != "autodata" else None
            groups.setdefault(home or module.__name__, []).append((kind, name))
        order = self.options.get("order", "").split()
        ranked = sorted(groups, key=lambda m: (order.index(m) if m in order else len(order)))

        lines: list[str] = []
        if submodules:
            links = ", ".join(f":mod:`{path}.{name}`" for name in submodules)
            lines += [f"Modules, each on its own page: {links}.", ""]
        for home in ranked:
            title, lead = heading_of(home)
            lines += [title, SECTION_UNDERLINE * len(title), ""]
            if lead and lead.rstrip(".") != title:
                lines += [lead, ""]
            lines += [f"*Defined in* ``{home}``.", ""]
            for kind, name in groups[home]:
                if kind == "autodata":
                    lines += data_entry(path, name, getattr(module, name))
                else:
                    lines += [f".. {kind}:: {path}.{name}", ""]
        return self.parse_text_to_nodes("\n".join(lines), allow_section_headings=True)


# --- docstrings written for help(), read as reST -------------------------------------------------------------
# The package's docstrings are plain text with ``literals`` (Google style: Args/Returns, which napoleon reads).
# A few plain-text habits mean something else in reST; each rule below keeps the text as help() shows it.
PLAIN_TEXT = [
    # |x|, |numerical - analytical|: an absolute value, not a substitution reference
    (re.compile(r"(?<![\\|\w])\|(?=\S)([^|`]+?)(?<=\S)\|(?![\w|])"), r"\\|\1\\|"),
    # nn.init.uniform_: PyTorch's in-place name, not a link named "nn.init.uniform"
    (re.compile(r"(?<=[a-z0-9])_(?=[\s.,;:)]|$)"), r"\\_"),
    # p *= (1 - lr wd): an operator, not the start of emphasis
    (re.compile(r"(?<=\s)\*(?==)"), r"\\*"),
]
LITERAL = re.compile(r"(``.+?``|:[\w:]+:`[^`]+`|`[^`]+`_?)")


def plain_text_to_rest(line: str) -> str:
    parts = LITERAL.split(line)
    for i in range(0, len(parts), 2):  # the even parts are outside ``literals`` and roles
        for pattern, repl in PLAIN_TEXT:
            parts[i] = pattern.sub(repl, parts[i])
    return "".join(parts)


def escape_docstring(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """autodoc-process-docstring: apply PLAIN_TEXT outside literals, literal blocks (after ``::``) and doctests.

    A value's ``#:`` comment is kept away from napoleon (keep_value_comments): it is prose, and napoleon reads a
    colon on its first line as "type: description" ("name -> Composite: functions of ...").
    """
    block_indent: int | None = None
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if block_indent is not None:
            if not line.strip() or indent > block_indent:
                continue
            block_indent = None
        if line.rstrip().endswith("::"):
            block_indent = indent
        if line.lstrip().startswith((">>>", "...")):
            continue
        lines[i] = plain_text_to_rest(line)


def keep_value_comments(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """autodoc-process-docstring, around napoleon (priority 450 and 550): a value's comment as it was written."""
    if what not in ("data", "attribute"):
        return
    kept = app.env.temp_data.setdefault("asgteach_value_comments", {})
    if name in kept:
        lines[:] = kept.pop(name)
    else:
        kept[name] = list(lines)


# --- pages that are symbolic links ------------------------------------------------------------------------------
def relink_symlinked_pages(app: Sphinx, doctree: nodes.document) -> None:
    """doctree-read: a page that is a symbolic link keeps the links it has in the repository.

    A relative link means a path from the real file: ``docs/teaching.md``'s ``../LICENSE`` is the repository's
    LICENSE, not ``docs/site/LICENSE``. Sphinx and MyST read it from where the link lies in this folder, and they
    name a page by its real path (``/repo/docs/teaching``), which is outside this folder. Both are put right here:
    a link to a file that this site shows as a page goes to that page; a link to another file of the repository
    becomes a download of that file (a licence file: its section of the licence page, see licence_links_to_page).
    Runs before Sphinx collects the downloads (priority 400 < 500).
    """
    env = app.env
    real = real_pages(app)
    here = Path(env.doc2path(env.docname))
    real_dir = here.resolve().parent
    for node in list(doctree.findall(addnodes.pending_xref)):
        if node.get("reftype") != "myst":
            continue
        target = node.get("reftarget", "")
        if node.get("refdomain") == "doc":
            if target not in env.found_docs and target in real:
                node["reftarget"] = real[target]
            continue
        path, _, anchor = target.partition("#")
        if node.get("refdomain") or not path or "://" in path:
            continue
        linked = (real_dir / path).resolve()
        if not linked.is_file():
            continue
        page = real.get(str(linked.with_suffix("")))
        if page is not None:
            new: nodes.Element = addnodes.pending_xref("", *node.children, refdomain="doc", reftarget=page,
                                                       reftargetid=anchor or None, reftype="myst",
                                                       refdoc=env.docname, refexplicit=node.get("refexplicit"))
        else:
            rel = os.path.relpath(linked, here.parent)
            new = addnodes.download_reference("", *node.children, refdomain=None, reftarget=rel, reftype="myst",
                                              refdoc=env.docname, refexplicit=node.get("refexplicit"))
        new.source, new.line = node.source, node.line
        node.replace_self(new)


def real_pages(app: Sphinx) -> dict[str, str]:
    """The real path of every page's file (without its suffix) -> the page's name."""
    real = getattr(app, "_asgteach_real_pages", None)
    if real is None:
        real = {}
        for docname in app.env.found_docs:
            real[str(Path(app.env.doc2path(docname)).resolve().with_suffix(""))] = docname
        app._asgteach_real_pages = real  # type: ignore[attr-defined]
    return real


def keep_outputs_with_doctrees(app: Sphinx) -> None:
    """builder-inited, after MyST-NB's: the images MyST-NB takes out of the notebooks go to the cache folder.

    MyST-NB writes them to ``jupyter_execute/`` beside the output folder, that is in its parent: with
    ``./scripts/site --out DIR`` a folder the user did not ask for. The cache (-d) is the site's own.
    """
    config = getattr(app.env, "mystnb_config", None)
    if config is not None:
        app.env.mystnb_config = config.copy(output_folder=str(Path(app.doctreedir) / "jupyter_execute"))


def licence_links_to_page(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """doctree-resolved: a link to a licence file (a lesson's ``[CC BY 4.0](../LICENSE-lessons)``) opens its text on
    the licence page instead of downloading a file without an extension."""
    names = {p.name: p.resolve() for p in licence_files()}
    if LICENCE_DOC not in app.env.found_docs:
        return
    for node in list(doctree.findall(addnodes.download_reference)):
        _, path = app.env.relfn2path(node["reftarget"], docname)
        name = Path(path).name
        if name in names and Path(path) == names[name]:
            uri = app.builder.get_relative_uri(docname, LICENCE_DOC) + "#" + licence_anchor(name)
            link = nodes.reference("", "", *node.children, refuri=uri, internal=True)
            node.replace_self(link)


def licence_anchor(name: str) -> str:
    return nodes.make_id("file-" + name)


def licence_files() -> list[Path]:
    found: dict[str, Path] = {}
    for pattern in LICENCE_PATTERNS:
        for p in sorted(REPO.glob(pattern)):
            if p.is_file():
                found.setdefault(p.name, p)
    return [found[k] for k in sorted(found)]


class LicencesDirective(SphinxDirective):
    """``.. asgteach-licences::``: every licence file's text, under its file name."""

    def run(self) -> list[nodes.Node]:
        files = licence_files()
        if not files:
            logger.warning("no licence file (LICENSE, LICENSE-*) at %s: the licence page says so", REPO,
                           location=self.get_location())
            return [nodes.paragraph(text="This copy of asgteach holds no licence file.")]
        out: list[nodes.Node] = []
        for path in files:
            self.env.note_dependency(str(path))
            section = nodes.section(ids=[licence_anchor(path.name)])
            section += nodes.title(text=path.name)
            text = path.read_text(encoding="utf-8")
            block = nodes.literal_block(text, text, classes=["asg-licence"])
            block["language"] = "text"
            section += block
            out.append(section)
        return out


def read_lesson(text: str) -> Any:
    """A notebook as the site shows it: the student's version of every exercise, the rest as committed.

    The code between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` becomes the placeholder that
    ``asgteach student`` writes (``asgteach.grading.student.student_source``, so the two never differ),
    and an exercise cell's outputs are dropped (they would show what the answer prints). Every other cell
    keeps its committed outputs: the graphs, the plots, the checks' feedback.
    """
    import nbformat

    from asgteach.grading.student import BEGIN, cell_source, student_source

    nb = nbformat.reads(text, as_version=4)
    first = 1
    for k, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or BEGIN not in cell_source(cell):
            continue
        cell.source, cut = student_source(cell.source, first, f"cell {k}")
        first += cut
        cell.outputs = []
        cell.execution_count = None
    return nb


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("asgteach-api", ApiDirective)
    app.add_directive("asgteach-licences", LicencesDirective)
    app.connect("autodoc-process-docstring", escape_docstring, priority=400)  # before napoleon (500)
    app.connect("autodoc-process-docstring", keep_value_comments, priority=450)
    app.connect("autodoc-process-docstring", keep_value_comments, priority=550)
    app.connect("doctree-read", relink_symlinked_pages, priority=400)  # before the download collector (500)
    app.connect("doctree-resolved", licence_links_to_page)
    app.connect("builder-inited", keep_outputs_with_doctrees, priority=600)  # after MyST-NB's (500)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
