"""What a course needs before someone else can adopt it: licences, one version, a changelog, a citation, a release.

* the version is written once (``__version__`` in asgteach/__init__.py; pyproject.toml reads it through hatch's
  dynamic version) and the built wheel says the same;
* LICENSE (MIT, the code) and LICENSE-lessons (CC BY 4.0, the lessons' text and figures) exist, are named by
  pyproject's PEP 639 ``license``/``license-files`` and travel in the wheel and the sdist, whose METADATA says
  ``License-Expression: MIT AND CC-BY-4.0`` (AND: both licences apply at once, each to its part);
* CITATION.cff is Citation File Format 1.2.0; CHANGELOG.md has a section for the current version;
* every lesson ends with the licence footer, and its links lead to the licence files;
* ``scripts/release`` builds, checks, installs the wheel into a clean venv and runs it (slow: the end-to-end
  test runs all of it with ``--check``, which leaves out only the rule that the version's tag is new);
* the sdist is the instructors' source release (lessons/ with the solutions, instructor/ with the answer keys,
  hatch_build.py); the wheel, what students install, holds the student versions and no keys (issue 34;
  tests/test_packaging.py reads every file of a wheel for a solution's text).
"""

from __future__ import annotations

import email
import json
import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import asgteach

from wgpu_helpers import need_module

try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10: the same reader, before it joined the standard library
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
VERSION = asgteach.__version__
LESSONS = sorted((ROOT / "lessons").glob("*.ipynb"))
EXPRESSION = "MIT AND CC-BY-4.0"
LICENCE_FILES = ["LICENSE", "LICENSE-lessons"]
#: the keys CFF 1.2.0 allows at the top level (its schema.json has additionalProperties: false)
CFF_KEYS = {"abstract", "authors", "cff-version", "commit", "contact", "date-released", "doi", "identifiers",
            "keywords", "license", "license-url", "message", "preferred-citation", "references", "repository",
            "repository-artifact", "repository-code", "title", "type", "url", "version"}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


# --- one version ------------------------------------------------------------------------------------------------

def test_the_version_is_written_in_one_place() -> None:
    project = _pyproject()["project"]
    assert "version" not in project, "pyproject.toml must not write the version: it reads asgteach/__init__.py"
    assert "version" in project.get("dynamic", []), "pyproject.toml: dynamic = [\"version\"]"
    assert _pyproject()["tool"]["hatch"]["version"] == {"path": "asgteach/__init__.py"}
    init = (ROOT / "asgteach" / "__init__.py").read_text(encoding="utf-8")
    assert re.findall(r'^__version__ = "([^"]+)"$', init, re.M) == [VERSION]
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION), f"a release version is X.Y.Z, not {VERSION!r}"
    assert not re.search(r"^version\s*=", (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)


# --- licences --------------------------------------------------------------------------------------------------

def test_licence_files_hold_the_licences_pyproject_names() -> None:
    from packaging.licenses import canonicalize_license_expression

    project = _pyproject()["project"]
    assert project["license"] == EXPRESSION, "PEP 639: license is an SPDX expression string"
    assert canonicalize_license_expression(EXPRESSION) == EXPRESSION
    assert project["license-files"] == LICENCE_FILES
    mit = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert mit.startswith("MIT License\n\nCopyright (c) 2026 asgteach contributors\n")
    assert "<year>" not in mit and "<copyright holders>" not in mit
    assert "THE SOFTWARE IS PROVIDED \"AS IS\"" in mit
    cc = (ROOT / "LICENSE-lessons").read_text(encoding="utf-8")
    for words in ("Creative Commons Attribution 4.0 International Public License", "Section 1 – Definitions.",
                  "Section 8 – Interpretation.", "Copyright (c) 2026 asgteach contributors"):
        assert words in cc, f"LICENSE-lessons lacks {words!r}"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.stem)
def test_every_lesson_ends_with_the_licence_footer(lesson: Path) -> None:
    cells = json.loads(lesson.read_text(encoding="utf-8"))["cells"]
    footer = cells[-1]
    assert footer["cell_type"] == "markdown" and footer["id"] == "licence-footer", (
        f"{lesson.name}: the last cell must be the markdown licence footer (id 'licence-footer')")
    text = _source(footer)
    assert "CC BY 4.0" in text and "MIT" in text
    links = dict((label, target) for label, target in re.findall(r"\[([^\]]+)\]\(([^)]+)\)", text))
    assert links == {"CC BY 4.0": "../LICENSE-lessons", "MIT licence": "../LICENSE"}, links
    for target in links.values():
        assert (lesson.parent / target).resolve().is_file(), f"{lesson.name}: the footer's link {target} leads nowhere"
    assert sum(c.get("id") == "licence-footer" for c in cells) == 1


def test_the_footer_is_the_same_in_every_lesson() -> None:
    footers = {_source(json.loads(p.read_text(encoding="utf-8"))["cells"][-1]) for p in LESSONS}
    assert len(footers) == 1, "the lessons' licence footers differ"


# --- citation and changelog -------------------------------------------------------------------------------------

def test_citation_cff_is_cff_1_2_0() -> None:
    yaml = need_module("yaml", "pip install -e '.[dev]', which brings pyyaml (./scripts/setup does)")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert set(cff) <= CFF_KEYS, f"keys CFF 1.2.0 does not know: {set(cff) - CFF_KEYS}"
    assert cff["cff-version"] == "1.2.0"
    assert cff["type"] == "software"
    for key in ("message", "title", "abstract"):
        assert isinstance(cff[key], str) and cff[key].strip(), key
    assert cff["authors"] == [{"name": "asgteach contributors"}]
    # CFF reads a list of licences as alternatives (OR); asgteach's two apply together, so none is listed there
    assert "license" not in cff
    assert "version" not in cff, "the version is written in one place, asgteach/__init__.py"
    assert all(isinstance(k, str) and k for k in cff["keywords"])


def test_changelog_has_a_section_for_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert headings[0] == ("Unreleased", ""), "Keep a Changelog: [Unreleased] comes first"
    versions = [v for v, _ in headings[1:]]
    assert VERSION in versions, f"CHANGELOG.md has no section '## [{VERSION}] - YYYY-MM-DD'"
    assert versions[0] == VERSION, f"the newest section is {versions[0]}, not the current version {VERSION}"
    as_tuples = [tuple(map(int, v.split("."))) for v in versions]
    assert as_tuples == sorted(as_tuples, reverse=True), f"sections out of order: {versions}"
    dates = [d for _, d in headings[1:]]
    assert dates == sorted(dates, reverse=True) and all(dates), dates
    section = text.split(f"## [{VERSION}]", 1)[1].split("\n## [", 1)[0]
    assert re.search(r"^### \w", section, re.M) and section.count("\n- ") >= 3, "the section lists what changed"


# --- the release script -----------------------------------------------------------------------------------------

def test_release_script_is_a_checked_bash_script() -> None:
    script = ROOT / "scripts" / "release"
    assert script.is_file() and os.access(script, os.X_OK)
    text = script.read_text(encoding="utf-8")
    assert "set -euo pipefail" in text and 'source "$ROOT/scripts/env.sh"' in text and '"$ROOT/scripts/setup"' in text
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # it proposes the tag and never makes or pushes one: every `git tag`/`git push` sits in the text it prints
    printed = re.findall(r"^cat <<EOF\n(.*?)^EOF$", text, re.M | re.S)
    assert len(printed) == 1 and "git tag -a $tag $sha" in printed[0] and "git push origin $tag" in printed[0]
    outside = text.replace(printed[0], "")
    commands = [line for line in outside.splitlines() if not line.lstrip().startswith("#")
                and re.search(r"\bgit\b(\s+-C\s+\S+)?\s+(tag|push)\b", line)]
    assert not commands, f"scripts/release must not tag or push: {commands}"


def _built(tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "dist"
    proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out / f"asgteach-{VERSION}.tar.gz", out / f"asgteach-{VERSION}-py3-none-any.whl"


@pytest.mark.slow
def test_wheel_and_sdist_carry_the_version_and_the_licences(tmp_path: Path) -> None:
    sdist, wheel = _built(tmp_path)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = email.message_from_string(z.read(f"asgteach-{VERSION}.dist-info/METADATA").decode())
    assert meta["Version"] == asgteach.__version__
    assert meta["License-Expression"] == EXPRESSION
    assert sorted(meta.get_all("License-File")) == LICENCE_FILES
    assert meta["License"] is None, "PEP 639: no legacy License field beside License-Expression"
    for name in LICENCE_FILES:
        assert f"asgteach-{VERSION}.dist-info/licenses/{name}" in names, f"the wheel lacks {name}"
    with tarfile.open(sdist) as t:
        members = set(t.getnames())
        pkg_info = email.message_from_string(t.extractfile(f"asgteach-{VERSION}/PKG-INFO").read().decode())
    for name in LICENCE_FILES:
        assert f"asgteach-{VERSION}/{name}" in members, f"the sdist lacks {name}"
    assert pkg_info["Version"] == VERSION and pkg_info["License-Expression"] == EXPRESSION
    # the instructors' source release: a wheel built from it runs the same hook, cutting the same solutions
    for name in ("instructor/answer_keys.py", "hatch_build.py", *(f"lessons/{p.name}" for p in LESSONS)):
        assert f"asgteach-{VERSION}/{name}" in members, f"the sdist lacks {name}"
    assert not [n for n in names if n.startswith("instructor/") or Path(n).name.startswith("answer_keys")]
    with zipfile.ZipFile(wheel) as z:
        assert not [n for n in names if n.endswith(".ipynb") and "### BEGIN SOLUTION" in z.read(n).decode()]


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout


@pytest.mark.slow
def test_release_script_builds_installs_and_runs_the_wheel(tmp_path: Path) -> None:
    """scripts/release --check on HEAD, end to end: build, twine check, a clean venv with the wheel, asgteach check,
    every lesson of the release (solutions in place) on the installed package under nbval, and every student lesson
    the installed package hands out under nbval-lax, without answer keys. Measured: 104 s on 2 cores before the
    student run was added (the lessons 52 s of it); the student lessons add about 45 s."""
    head_version = re.search(r'^__version__ = "([^"]+)"$', _git("show", "HEAD:asgteach/__init__.py"), re.M)[1]
    head_lessons = [p for p in _git("ls-tree", "--name-only", "HEAD", "lessons/").split() if p.endswith(".ipynb")]
    code_cells = sum(c["cell_type"] == "code"
                     for p in head_lessons for c in json.loads(_git("show", f"HEAD:{p}"))["cells"])
    tags_before = _git("tag")
    dist = tmp_path / "dist"
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run([str(ROOT / "scripts" / "release"), "--check", "--dist", str(dist)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert f"releasing asgteach {head_version} from commit" in out
    assert "PASSED" in out and "License-Expression MIT AND CC-BY-4.0" in out
    assert "OK: asgteach works here" in out and "(installed: " in out
    assert "no scipy in the clean venv" in out   # the wheel installs without scipy (issue 26)
    assert "lessons in the wheel, as student versions (no solution, no answer keys)" in out   # issue 34
    # nbval makes one test of each code cell: every cell of every lesson ran on the installed package, once with
    # the release's solutions (outputs compared), once as the student versions it hands out (every cell runs)
    assert f"running {len(head_lessons)} lesson(s) of the release (solutions in place) on the installed package" in out
    assert f"running {len(head_lessons)} student lesson(s) of the installed package (solutions cut, no answer keys)" \
        in out
    assert len(re.findall(rf"^{code_cells} passed in ", out, re.M)) == 2, \
        f"expected {code_cells} code cells to pass under nbval, twice"
    assert sorted(p.name for p in dist.iterdir()) == [f"asgteach-{head_version}-py3-none-any.whl",
                                                     f"asgteach-{head_version}.tar.gz"]
    assert _git("tag") == tags_before, "scripts/release made a tag"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("asgteach-release.")], "its work folder is left"
