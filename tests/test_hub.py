"""A class on one hub: the nbgitpuller link, the hub's config, scripts/hub's messages, what students get (their
environment and the course they pull hold no solution and no answer key), and the load test."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from asgteach import cli
from asgteach.hub import nbgitpuller_link, repo_defaults

from wgpu_helpers import need_module, need_tool

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "deploy" / "jupyterhub" / "jupyterhub_config.py"
STUDENT_SIDE = ROOT / "deploy" / "jupyterhub" / "student_side.py"
BEGIN = "### BEGIN SOLUTION"
NODE = "apt-get install nodejs npm (Debian's), or ./scripts/setup"


def test_link_pulls_into_home_and_opens_lesson_00_in_lab():
    url = nbgitpuller_link("http://127.0.0.1:8000/", "file:///srv/course.git", "main")
    parts = urlsplit(url)
    assert parts.path == "/hub/user-redirect/git-pull"
    q = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert q == {"repo": "file:///srv/course.git", "branch": "main", "targetpath": "asgteach",
                 "urlpath": "lab/tree/asgteach/lessons/00-welcome.ipynb"}
    nb7 = parse_qs(urlsplit(nbgitpuller_link("https://hub.example.edu", "https://github.com/o/r", ui="notebook")).query)
    assert nb7["urlpath"] == ["notebooks/asgteach/lessons/00-welcome.ipynb"] and "branch" not in nb7


@pytest.mark.parametrize("kw, msg", [({"hub": "hub.example.edu"}, "http"), ({"targetpath": "a/b"}, "one folder"),
                                     ({"ui": "classic"}, "lab")])
def test_link_rejects_bad_input(kw, msg):
    args = {"hub": "http://127.0.0.1:8000", "repo": "file:///x"} | kw
    hub, repo = args.pop("hub"), args.pop("repo")
    with pytest.raises(ValueError, match=msg):
        nbgitpuller_link(hub, repo, **args)


def test_link_command_from_this_checkout(capsys):
    assert cli.main(["link", "--hub", "http://127.0.0.1:8123"]) == 0
    url = capsys.readouterr().out.strip()
    repo, branch = repo_defaults(ROOT)
    assert url == nbgitpuller_link("http://127.0.0.1:8123", repo, branch)
    assert repo.startswith(("file://", "http", "git@", "ssh://", "/"))
    assert cli.main(["link", "--hub", "nohttp"]) == 2
    assert "http://" in capsys.readouterr().err


@pytest.mark.slow
def test_hub_without_node_says_what_to_install(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("bash", "cat", "dirname", "sed", "id", "mkdir", "printf"):
        if shutil.which(tool):
            os.symlink(shutil.which(tool), bare / tool)
    env = dict(os.environ, PATH=str(bare), ASGTEACH_HUB_STATE=str(tmp_path / "state"))
    r = subprocess.run([str(ROOT / "scripts" / "hub"), "--no-install"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "apt-get install nodejs npm" in r.stderr, r.stderr
    env = dict(os.environ, ASGTEACH_HUB_PROXY=str(tmp_path / "no-proxy"), ASGTEACH_HUB_STATE=str(tmp_path / "s"))
    r = subprocess.run([str(ROOT / "scripts" / "hub"), "--no-install"], env=env, capture_output=True, text=True,
                       timeout=60)
    if shutil.which("node"):
        assert r.returncode == 1 and "npm install --prefix" in r.stderr and "configurable-http-proxy" in r.stderr


@pytest.mark.slow
def test_class_of_five_on_one_hub():
    """scripts/class-loadtest --students 5: install (idempotent), hub, nbgitpuller, lessons 00 + 03, 2 browsers,
    a server killed, a kernel killed, the hub restarted, a re-pull keeping an edit. Measured: about 2.5 minutes on
    2 cores (136 s; most of it 5 servers and kernels starting, the hub restart and the two browsers)."""
    t = time.monotonic()
    r = subprocess.run([str(ROOT / "scripts" / "class-loadtest"), "--students", "5", "--timeout", "480"],
                       capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    assert re.search(r"^5/5 students completed \(p95 [\d.]+ s, \d+ MiB per student\)$", out, re.M), out[-3000:]
    assert re.search(r"hub restarted mid-class .*: (\d+)/\1 running servers kept", out), out[-3000:]
    assert "their edit intact: True" in out and "notebook intact: True" in out and "edit kept: True" in out
    assert len(re.findall(r"^browser: student\d+: JupyterLab from the link", out, re.M)) == 2, out[-3000:]
    print(out[out.rfind("student    first output"):])   # the table and the numbers, in the CI log
    print(f"class of 5: {time.monotonic() - t:.0f} s")


# after the load test: on a fresh clone (CI) it is what installs JupyterHub into .venv, which these load
# (skipped, loudly, where JupyterHub is not installed; failed under CI=true)
def _load_config(monkeypatch, tmp_path, **env):
    need_module("jupyterhub", "pip install -e '.[hub]' (./scripts/setup does)")
    from traitlets.config.loader import PyFileConfigLoader

    proxy = tmp_path / "chp"
    proxy.write_text("#!/bin/sh\n")
    proxy.chmod(0o755)
    singleuser = tmp_path / "students" / "bin" / "jupyterhub-singleuser"   # the students' environment, as a stub
    singleuser.parent.mkdir(parents=True, exist_ok=True)
    singleuser.write_text("#!/bin/sh\n")
    singleuser.chmod(0o755)
    monkeypatch.setenv("ASGTEACH_HUB_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("ASGTEACH_HUB_PROXY", str(proxy))
    monkeypatch.setenv("ASGTEACH_HUB_VENV", str(tmp_path / "students"))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return PyFileConfigLoader(CONFIG.name, str(CONFIG.parent)).load_config()


def test_config_loopback_lab_culler_limits(monkeypatch, tmp_path):
    # the config refuses to load without Node (tested in test_hub_without_node_says_what_to_install)
    need_tool("node", NODE)
    c = _load_config(monkeypatch, tmp_path, ASGTEACH_HUB_ADMIN_TOKEN="t" * 32, ASGTEACH_HUB_PASSWORD="a-long-pass")
    assert c.JupyterHub.bind_url == "http://127.0.0.1:8000" and c.JupyterHub.hub_ip == "127.0.0.1"
    assert c.Spawner.default_url == "/lab" and c.Spawner.ip == "127.0.0.1"
    assert c.Spawner.cmd == [str(tmp_path / "students" / "bin" / "jupyterhub-singleuser")]
    assert c.JupyterHub.spawner_class.__name__ == "FolderSpawner"
    assert c.SimpleLocalProcessSpawner.home_dir_template == str(tmp_path / "state" / "homes" / "{username}")
    assert c.Spawner.mem_limit == "2G" and c.Spawner.cpu_limit == 1
    services = {s["name"]: s for s in c.JupyterHub.services}
    assert "jupyterhub_idle_culler" in services["idle-culler"]["command"]
    assert services["asgteach-admin"]["api_token"] == "t" * 32
    assert c.JupyterHub.cleanup_servers is False, "a hub restart must not end the students' servers"
    assert c.JupyterHub.authenticator_class == "shared-password"


def test_the_proxy_outlives_the_hub_when_scripts_hub_runs_it(monkeypatch, tmp_path):
    """scripts/hub starts configurable-http-proxy itself and sets ASGTEACH_HUB_PROXY_TOKEN: the hub must then not
    start (nor, on exit, stop) it, so a hub restart keeps every student's route; by hand, the hub manages it."""
    need_tool("node", NODE)   # the config loads only with Node
    c = _load_config(monkeypatch, tmp_path, ASGTEACH_HUB_PROXY_TOKEN="p" * 32)
    assert c.ConfigurableHTTPProxy.should_start is False and c.ConfigurableHTTPProxy.auth_token == "p" * 32
    monkeypatch.delenv("ASGTEACH_HUB_PROXY_TOKEN")
    c = _load_config(monkeypatch, tmp_path)
    assert "should_start" not in c.ConfigurableHTTPProxy
    assert "setsid" in (ROOT / "scripts" / "hub").read_text(), "scripts/hub starts the proxy in its own session"


def test_spawner_applies_rlimits_and_threads(monkeypatch, tmp_path):
    need_tool("node", NODE)   # the config loads only with Node
    c = _load_config(monkeypatch, tmp_path, ASGTEACH_HUB_AUTH="dummy")
    spawner_cls = c.JupyterHub.spawner_class

    class User:
        name = "ada"
        url = "/user/ada/"

    sp = spawner_cls.__new__(spawner_cls)
    sp.__init__(user=User(), mem_limit="1G", cpu_limit=2.0, home_dir_template=str(tmp_path / "h" / "{username}"))
    env = sp.user_env({"PATH": "/usr/bin"})
    assert env["OMP_NUM_THREADS"] == "2" and env["HOME"] == str(tmp_path / "h" / "ada")
    assert env["PATH"].startswith(str(tmp_path / "students" / "bin"))
    code = ("import resource, os; print(resource.getrlimit(resource.RLIMIT_AS)[0], os.getcwd(), os.nice(0))")
    out = subprocess.run([sys.executable, "-c", code], preexec_fn=sp.make_preexec_fn("ada"), capture_output=True,
                         text=True, check=True).stdout.split()
    assert int(out[0]) == 3 * 2**30 and out[1] == str(tmp_path / "h" / "ada") and int(out[2]) >= 5


# --- what students get: no solution, no answer key (issue 34) ------------------------------------------------

def test_students_run_in_their_own_environment_never_the_checkouts(monkeypatch, tmp_path):
    """The default students' environment is .hub/student-venv (asgteach from a wheel), never the checkout's .venv,
    whose editable asgteach finds every solution and the answer keys; without it the config says how to build it."""
    need_tool("node", NODE)   # the config loads only with Node
    monkeypatch.delenv("ASGTEACH_HUB_VENV", raising=False)
    default = ROOT / ".hub" / "student-venv"
    need_module("jupyterhub", "pip install -e '.[hub]' (./scripts/setup does)")
    from traitlets.config.loader import PyFileConfigLoader

    proxy = tmp_path / "chp"
    proxy.write_text("#!/bin/sh\n")
    proxy.chmod(0o755)
    monkeypatch.setenv("ASGTEACH_HUB_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("ASGTEACH_HUB_PROXY", str(proxy))
    loader = PyFileConfigLoader(CONFIG.name, str(CONFIG.parent))
    if (default / "bin" / "jupyterhub-singleuser").is_file():
        assert loader.load_config().Spawner.cmd == [str(default / "bin" / "jupyterhub-singleuser")]
    else:
        with pytest.raises(SystemExit, match="students' environment is missing.*scripts/hub --install-only"):
            loader.load_config()
    hub = (ROOT / "scripts" / "hub").read_text()
    assert 'student_side.py" env --venv "$STUDENT_VENV"' in hub and 'student_side.py" course --course' in hub
    assert re.search(r'asgteach" link --hub "\$url" --repo "\$course_url" --branch main', hub), \
        "the link scripts/hub prints must pull the student versions, not the instructor's repository"


@pytest.mark.slow
def test_student_side_holds_no_solution_and_no_key(tmp_path):
    """deploy/jupyterhub/student_side.py, as scripts/hub runs it: the students' environment (a wheel of this tree,
    the rest shared from .venv) finds no solution and no key and says where they are; the course repository they
    pull holds every lesson's student version and nothing of instructor/. Measured: about 10 s."""
    venv, course = tmp_path / "students", tmp_path / "course"
    for what, where in (("env", ["--venv", str(venv)]), ("course", ["--course", str(course)])):
        r = subprocess.run([sys.executable, str(STUDENT_SIDE), what, *where], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("ASGTEACH_KEYS", "PYTHONPATH")}
    probe = ("import json, asgteach, asgteach.resources as r; from asgteach.grading.keys import keys_path; "
             "import jupyterhub.singleuser, nbgitpuller; "
             "print(json.dumps([asgteach.__file__, str(r.lessons_dir()), r.solutions_dir() is None, keys_path()]))")
    r = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    module, lessons, no_solutions, keys = json.loads(r.stdout)
    assert Path(module).is_relative_to(venv) and Path(lessons).is_relative_to(venv), (module, lessons)
    assert no_solutions and keys is None
    assert not [p for p in Path(lessons).glob("*.ipynb") if BEGIN in p.read_text(encoding="utf-8")]
    r = subprocess.run([str(venv / "bin" / "asgteach"), "solution", "03", "1"], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 1 and "git clone" in r.stderr and BEGIN not in r.stdout, r.stdout + r.stderr
    assert os.access(venv / "bin" / "jupyterhub-singleuser", os.X_OK)

    tracked = subprocess.run(["git", "-C", str(course), "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split()
    lessons_here = sorted(p.name for p in (ROOT / "lessons").glob("*.ipynb"))
    assert sorted(n.split("/", 1)[1] for n in tracked if n.startswith("lessons/")) == lessons_here
    assert not [n for n in tracked if n.startswith("instructor/") or "answer_keys" in n], tracked
    assert not [n for n in tracked if BEGIN in (course / n).read_text(encoding="utf-8", errors="replace")]
    assert {"LICENSE", "LICENSE-lessons", "README.md"} <= set(tracked)   # the lessons' footers link to both
    # publishing again with the lessons unchanged makes no new commit (students pull nothing new)
    head = subprocess.run(["git", "-C", str(course), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    r = subprocess.run([sys.executable, str(STUDENT_SIDE), "course", "--course", str(course)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0 and "course up to date" in r.stdout, r.stdout + r.stderr
    assert subprocess.run(["git", "-C", str(course), "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout == head
    link = nbgitpuller_link("http://127.0.0.1:8000", course.as_uri(), "main")
    opened = parse_qs(urlsplit(link).query)["urlpath"][0].split("/", 3)[3]   # lab/tree/asgteach/<path in repo>
    assert (course / opened).is_file(), opened
