"""The graph view's browser module: committed, built from pinned sources, and the same as a rebuild.

``asgteach/widgets/bundle/graphview.js`` is cytoscape.js, KaTeX and ``js/src/graphview.js``
bundled by esbuild (``js/build.mjs``) at the versions ``js/package-lock.json`` pins. It is
committed, so ``pip install`` from git or a wheel needs no Node. This test rebuilds it from the
committed sources in a temporary folder (``npm ci`` then the build) and checks that the result
is byte for byte the committed file: a change to the sources without a rebuild (or a rebuild
from other versions) fails here. To rebuild: ``cd js && npm ci && npm run build``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from wgpu_helpers import need_tool

ROOT = Path(__file__).resolve().parents[1]
JS = ROOT / "js"
BUNDLE = ROOT / "asgteach" / "widgets" / "bundle" / "graphview.js"


def test_the_lockfile_pins_every_package() -> None:
    lock = json.loads((JS / "package-lock.json").read_text())
    pkg = json.loads((JS / "package.json").read_text())
    for name, version in {**pkg["dependencies"], **pkg["devDependencies"]}.items():
        assert version[0].isdigit(), f"{name}: pin an exact version in js/package.json, not {version!r}"
        entry = lock["packages"][f"node_modules/{name}"]
        assert entry["version"] == version and entry["integrity"].startswith("sha512-"), (name, entry)


@pytest.mark.slow  # npm ci (from npm's cache or the registry) and an esbuild run: about 10 s
def test_committed_bundle_is_what_the_pinned_build_makes(tmp_path: Path) -> None:
    # no npm: the committed bundle cannot be rebuilt and compared (the widget itself needs no npm); CI=true: failed
    npm = need_tool("npm", "apt-get install nodejs npm (Debian's), or ./scripts/setup")
    work = tmp_path / "js"
    work.mkdir()
    for name in ("package.json", "package-lock.json", "build.mjs"):
        shutil.copy2(JS / name, work / name)
    shutil.copytree(JS / "src", work / "src")
    (tmp_path / "asgteach" / "widgets" / "bundle").mkdir(parents=True)
    ci = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"], cwd=work, capture_output=True,
                        text=True, timeout=300)
    assert ci.returncode == 0, f"npm ci failed:\n{ci.stdout[-2000:]}\n{ci.stderr[-2000:]}"
    out = tmp_path / "graphview.js"
    build = subprocess.run(["node", "build.mjs", str(out)], cwd=work, capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, f"the build failed:\n{build.stdout}\n{build.stderr}"
    assert out.read_bytes() == BUNDLE.read_bytes(), (
        "asgteach/widgets/bundle/graphview.js is not what js/ builds: run `cd js && npm ci && npm run build` and "
        "commit the bundle with its sources")
