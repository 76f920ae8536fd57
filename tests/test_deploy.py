"""deploy/z2jh/values.yaml: Zero to JupyterHub's values for a class on Kubernetes, checked by structure.

No installable package ships the chart's published values schema (it lives in the Helm chart, fetched by helm),
so this checks the keys and types the chart reads for what the class needs, that the image's environment
(deploy/z2jh/image/, binder/'s with asgteach from its wheel) and the one-machine hub (pyproject's ``hub`` extra) pin
the same nbgitpuller, and that students get the student versions: the image installs the wheel (no solution, no
answer key: tests/test_packaging.py), never the repository, and they pull a repository of the student versions.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from wgpu_helpers import need_module

try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10: the same parser as the tomli package
    import tomli as tomllib

yaml = need_module("yaml", "pip install -e '.[dev]', which brings pyyaml (./scripts/setup does)", module_level=True)

ROOT = Path(__file__).resolve().parents[1]
VALUES = ROOT / "deploy" / "z2jh" / "values.yaml"
IMAGE = ROOT / "deploy" / "z2jh" / "image"
#: top-level keys of the z2jh 4.x chart's values (a typo at the top level is silently ignored by helm)
CHART_TOP_LEVEL = {"fullnameOverride", "nameOverride", "enabled", "imagePullSecrets", "imagePullSecret", "hub",
                   "proxy", "singleuser", "scheduling", "ingress", "prePuller", "custom", "cull", "debug", "rbac",
                   "global", "apps"}


def _size(text: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT])", str(text))
    assert m, f"a z2jh size is a number with K, M, G or T: {text!r}"
    return int(float(m.group(1)) * 1024 ** "KMGT".index(m.group(2)) * 1024)


@pytest.fixture(scope="module")
def values() -> dict:
    return yaml.safe_load(VALUES.read_text())


def test_only_chart_keys_at_the_top(values):
    assert set(values) <= CHART_TOP_LEVEL, set(values) - CHART_TOP_LEVEL


def test_user_resources_guarantee_below_limit(values):
    su = values["singleuser"]
    assert _size(su["memory"]["guarantee"]) <= _size(su["memory"]["limit"])
    # the load test measured ~375 MiB per student for lessons 00 + 03: the guarantee must cover that
    assert _size(su["memory"]["guarantee"]) >= 400 * 2**20
    assert 0 < float(su["cpu"]["guarantee"]) <= float(su["cpu"]["limit"])
    assert su["extraEnv"]["OMP_NUM_THREADS"] == str(int(float(su["cpu"]["limit"])))


def test_jupyterlab_nbgitpuller_and_image(values):
    su = values["singleuser"]
    assert su["defaultUrl"] == "/lab" and su["extraEnv"]["NBGITPULLER_APP"] == "lab"
    assert su["image"]["name"] and isinstance(su["image"]["tag"], str)
    cmd = su["lifecycleHooks"]["postStart"]["exec"]["command"]
    assert cmd[0] == "gitpuller" and len(cmd) == 4, cmd
    hub_extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["hub"]
    puller = next(r for r in hub_extra if r.startswith("nbgitpuller=="))
    assert puller in (ROOT / "binder" / "postBuild").read_text(), "binder/ must pin the same nbgitpuller"
    assert puller in (IMAGE / "postBuild").read_text(), "the class image must pin the same nbgitpuller"


def test_the_class_image_installs_the_wheel_not_the_repository(values):
    """The class image is binder/'s environment with asgteach from its wheel (the student versions of the lessons,
    no answer keys); binder/ installs the repository itself, solutions and keys included."""
    for name in ("apt.txt", "runtime.txt", "start"):
        assert (IMAGE / name).read_text() == (ROOT / "binder" / name).read_text(), f"{name} differs from binder/'s"
    post = (IMAGE / "postBuild").read_text()
    assert 'wheels=(asgteach-*.whl)' in post and '"${wheels[0]}[gpu,lab]"' in post
    assert "-e " not in post and "pip install --no-cache-dir ." not in post, "the image must not install the repo"
    assert "solutions_dir() is None" in post and "keys_path() is None" in post
    assert "*.whl" in (IMAGE / ".gitignore").read_text()
    # what the students pull, at server start and with the link: the student versions, not the course's repository
    repo = values["singleuser"]["lifecycleHooks"]["postStart"]["exec"]["command"][1]
    assert repo.endswith("/asgteach-course"), repo
    readme = (ROOT / "deploy" / "README.md").read_text()
    assert "--repo https://github.com/<owner>/asgteach-course --branch main" in " ".join(readme.split())


def test_culling_and_placeholders(values):
    cull = values["cull"]
    assert cull["enabled"] is True and int(cull["timeout"]) >= 600 and int(cull["every"]) > 0
    sched = values["scheduling"]
    assert sched["userPlaceholder"]["enabled"] is True and int(sched["userPlaceholder"]["replicas"]) > 0
    assert sched["podPriority"]["enabled"] is True, "placeholders are evicted by priority: podPriority must be on"
    assert sched["userScheduler"]["enabled"] is True
    assert values["prePuller"]["hook"]["enabled"] is True


def test_hub_auth_and_https(values):
    cfg = values["hub"]["config"]
    assert cfg["JupyterHub"]["authenticator_class"] in {"github", "generic-oauth", "native",
                                                        "ltiauthenticator.lti13.auth.LTI13Authenticator"}
    assert values["proxy"]["https"]["enabled"] is True and values["proxy"]["https"]["hosts"]
