"""A class on one hub, simulated: ``scripts/class-loadtest --students N`` (and tests/test_hub_loadtest.py).

On 127.0.0.1 only, bounded in time (``--timeout``) and in count (``--students`` <= 60):

1. a bare clone of this checkout is the course repository (a local git URL, ``file://``);
2. ``scripts/hub --no-install`` starts JupyterHub (dummy authenticator, a fresh state folder, free ports);
3. every student, in their own thread, arriving ``--ramp`` seconds apart: logs in through the hub's login form,
   follows the ``asgteach link`` URL (the hub starts their server; nbgitpuller's UI page answers), pulls the
   course through nbgitpuller's API, saves an edit of their own, then starts a kernel through the Jupyter
   server's REST API and runs lesson 00 and lesson 03 cell by cell over the kernel websocket (execute_request,
   as Shift+Enter does), checking every reply;
4. two students also use a real browser (Playwright + Debian's chromium): JupyterLab opens the link, runs
   lesson 00, the graph widget draws, and a click on a node changes the inspector;
5. faults: one student's server is killed mid-lesson (the student starts it again from the hub, finds their
   files intact and re-runs the lesson in a new kernel); one student's kernel dies mid-lesson (it is restarted
   through the REST API, as JupyterLab's "Restart kernel" does, and the notebook is intact); the hub process is
   stopped and started again mid-class (servers keep their pids, files and kernels; websockets reconnect);
   a re-pull after an upstream change keeps the student's edit;
6. prints, per student: time to first output, total time, memory (server + kernel RSS, the largest sample),
   failures naming the student and the cell, then ``N/N students completed (p95 X s, Y MiB per student)``.

Everything started here is stopped at the end (the hub, the proxy, the culler, every student's server and
kernel: by pid, found under this run's own state folder).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
import requests  # noqa: E402
import websocket  # noqa: E402

from asgteach.hub import nbgitpuller_link  # noqa: E402

LESSONS = ("lessons/00-welcome.ipynb", "lessons/03-chain-rule-and-reverse-mode.ipynb")
TARGET = "asgteach"
MAX_STUDENTS = 60
PASSWORD = "class-loadtest"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def say(*a: object) -> None:
    print("[class-loadtest]", *a, flush=True)


class Net(requests.Session):
    """requests, retried while the hub restarts, as a student's browser sees it and JupyterLab rides out: the hub's
    own pages answer 503 from the proxy for a few seconds (scripts/hub keeps the proxy, and so every student's
    route, running across the restart); connection refused only if the proxy itself is down."""

    patience = 120.0

    def request(self, method, url, *a, **kw):  # noqa: D102
        deadline = time.monotonic() + self.patience
        while True:
            try:
                r = super().request(method, url, *a, **kw)
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
                continue
            # a route the hub has not (re-)added yet: the hub answers for the student's server instead
            rerouted = "/user/" in url and "/hub/" not in url and "/hub/" in r.url
            # a student's server checks a token it has not seen yet with the hub; while the hub restarts it answers
            # 500 "Failed to connect to Hub API" (CI on 270a0df: student04's first request met the restart). A page
            # loaded before the restart keeps working; a new request is tried again, as a student presses again
            hub_down = r.status_code == 500 and "Failed to connect to Hub API" in r.text
            if (r.status_code in (502, 503, 504, 424) or rerouted or hub_down) and time.monotonic() < deadline:
                time.sleep(1)
                continue
            return r


def net(method: str, url: str, **kw) -> requests.Response:
    with Net() as session:
        return session.request(method, url, **kw)


class Failure(Exception):
    """A student could not go on: the message names the student and the step or cell."""


class KernelDied(Exception):
    pass


# --------------------------------------------------------------------------------------------------------------
# the hub
# --------------------------------------------------------------------------------------------------------------

class Hub:
    """scripts/hub on free loopback ports with its own state folder; restartable; stopped with all it started."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.state = tmp / "state"
        self.port, self.hub_port, self.api_port = free_port(), free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = uuid.uuid4().hex
        self.proc: subprocess.Popen | None = None
        self.log_path = tmp / "hub.log"
        self.starts = 0

    def start(self, timeout: float = 120) -> None:
        env = dict(os.environ, ASGTEACH_HUB_PORT=str(self.port), ASGTEACH_HUB_HUB_PORT=str(self.hub_port),
                   ASGTEACH_HUB_PROXY_API_PORT=str(self.api_port), ASGTEACH_HUB_ADMIN_TOKEN=self.token,
                   ASGTEACH_HUB_AUTH="dummy", ASGTEACH_HUB_STATE=str(self.state), ASGTEACH_HUB_IP="127.0.0.1")
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([str(ROOT / "scripts" / "hub"), "--no-install"], stdout=log,
                                     stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.starts += 1
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise Failure(f"the hub exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if requests.get(f"{self.url}/hub/api/", timeout=2).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.5)
        raise Failure(f"the hub did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """SIGTERM the hub (and its culler; the proxy, started by scripts/hub in a session of its own, and the
        students' servers keep running)."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)

    def kernel_log(self, kernel_id: str, around: int = 12) -> str:
        """What the servers logged about one kernel, with the lines after each mention (a kernel's own stderr,
        e.g. a fatal error's traceback, lands there: the spawner sets PYTHONFAULTHANDLER)."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        keep: set[int] = set()
        for i, line in enumerate(lines):
            if kernel_id in line or "Fatal Python error" in line or "KernelRestarter" in line:
                keep.update(range(i, min(len(lines), i + around)))
        return "\n".join("    " + lines[i][:300] for i in sorted(keep)[-80:]) or "(nothing about it)"

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return "(no log)"

    def api(self, method: str, path: str, **kw) -> requests.Response:
        kw.setdefault("timeout", 60)
        return net(method, f"{self.url}/hub/api{path}",
                                headers={"Authorization": f"token {self.token}"}, **kw)

    def proxy_pid(self) -> int | None:
        """The configurable-http-proxy scripts/hub started for this state folder, if it is running."""
        try:
            pid = int((self.state / "proxy.pid").read_text().strip())
            return pid if psutil.pid_exists(pid) else None
        except (OSError, ValueError):
            return None

    def server_pid(self, name: str) -> int | None:
        r = self.api("GET", f"/users/{name}")
        if not r.ok:
            return None
        server = (r.json().get("servers") or {}).get("", {})
        return (server.get("state") or {}).get("pid") if server.get("ready") else None

    def cleanup(self) -> None:
        """Stop every student's server (API, then by pid under our state folder), then the hub."""
        from concurrent.futures import ThreadPoolExecutor

        try:
            if self.proc and self.proc.poll() is None:
                names = [u["name"] for u in self.api("GET", "/users", timeout=20).json() if u.get("servers")]
                with ThreadPoolExecutor(8) as pool:   # one by one, 30 servers take minutes to stop
                    list(pool.map(lambda n: self.api("DELETE", f"/users/{n}/server", timeout=60), names))
        except (requests.RequestException, ValueError):
            pass
        self.stop()
        ours = str(self.state)
        for p in psutil.process_iter(["pid", "cwd", "environ"]):
            try:
                env = p.info.get("environ") or {}
                if (p.info.get("cwd") or "").startswith(ours) or env.get("ASGTEACH_HUB_STATE") == ours \
                        or (env.get("HOME") or "").startswith(ours):
                    if p.pid != os.getpid():
                        p.kill()
            except (psutil.Error, OSError):
                pass


# --------------------------------------------------------------------------------------------------------------
# memory sampling
# --------------------------------------------------------------------------------------------------------------

class Sampler(threading.Thread):
    """Every 2 s: RSS of each student's server + its kernels; keeps each student's largest sum."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.pids: dict[str, int] = {}
        self.peak: dict[str, float] = {}
        self.stop_event = threading.Event()

    @staticmethod
    def tree_rss(pid: int) -> float:
        try:
            p = psutil.Process(pid)
            procs = [p, *p.children(recursive=True)]
        except psutil.Error:
            return 0.0
        total = 0
        for q in procs:
            try:
                total += q.memory_info().rss
            except psutil.Error:
                pass
        return total / 2**20

    def run(self) -> None:
        while not self.stop_event.wait(2.0):
            for name, pid in list(self.pids.items()):
                self.peak[name] = max(self.peak.get(name, 0.0), self.tree_rss(pid))


# --------------------------------------------------------------------------------------------------------------
# a kernel over the websocket, as JupyterLab drives it
# --------------------------------------------------------------------------------------------------------------

class Kernel:
    def __init__(self, base: str, token: str, kernel_id: str, name: str) -> None:
        self.base, self.token, self.kernel_id, self.name = base, token, kernel_id, name
        self.session = uuid.uuid4().hex
        self.ws: websocket.WebSocket | None = None
        self.reconnects = 0
        self.resent = 0
        self.connect()

    def connect(self, patience: float = 120) -> None:
        url = (self.base.replace("http://", "ws://") + f"/api/kernels/{self.kernel_id}/channels"
               f"?session_id={self.session}")
        deadline = time.monotonic() + patience
        while True:
            try:
                self.ws = websocket.create_connection(url, header=[f"Authorization: token {self.token}"], timeout=30)
                return
            except Exception as e:  # noqa: BLE001 - the proxy may be restarting with the hub: retry
                if time.monotonic() > deadline:
                    raise Failure(f"{self.name}: kernel websocket did not reconnect: {e}") from e
                time.sleep(1)

    def state(self) -> str:
        try:
            r = net("GET", f"{self.base}/api/kernels/{self.kernel_id}",
                             headers={"Authorization": f"token {self.token}"}, timeout=10)
            return r.json().get("execution_state", "") if r.ok else ""
        except (requests.RequestException, ValueError):
            return ""

    def close(self) -> None:
        try:
            self.ws and self.ws.close()
        except Exception:  # noqa: BLE001
            pass

    def execute(self, code: str, timeout: float) -> tuple[list[dict], dict, float | None]:
        """Run one cell: (iopub outputs, execute_reply content, monotonic time of the first output or None)."""
        msg_id = uuid.uuid4().hex
        msg = {"header": {"msg_id": msg_id, "username": self.name, "session": self.session,
                          "msg_type": "execute_request", "version": "5.3", "date": ""},
               "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
               "content": {"code": code, "silent": False, "store_history": True, "user_expressions": {},
                           "allow_stdin": False, "stop_on_error": True}}
        self.ws.send(json.dumps(msg))
        outputs: list[dict] = []
        reply, idle, first = None, False, None
        deadline = time.monotonic() + timeout
        reconnected = None
        while not (reply is not None and idle):
            if time.monotonic() > deadline:
                raise Failure(f"no reply within {timeout:.0f} s")
            if reconnected and time.monotonic() - reconnected > 10 and self.state() == "idle":
                # the reply went to the lost connection and the kernel is idle: run the cell again, as a student
                # whose page reconnected does (the lessons give the same result when a cell runs twice)
                self.resent += 1
                reconnected = None
                msg_id = msg["header"]["msg_id"] = uuid.uuid4().hex
                outputs, reply, idle = [], None, False
                self.ws.send(json.dumps(msg))
            try:
                self.ws.settimeout(max(1.0, min(5.0, deadline - time.monotonic())))
                raw = self.ws.recv()
            except websocket.WebSocketTimeoutException:
                continue
            except Exception:  # noqa: BLE001 - connection lost (hub restart): reconnect (the server buffers)
                self.reconnects += 1
                self.connect()
                reconnected = time.monotonic()
                continue
            if not raw or isinstance(raw, bytes):
                continue
            m = json.loads(raw)
            parent = (m.get("parent_header") or {}).get("msg_id")
            kind = m.get("msg_type") or m["header"]["msg_type"]
            if kind == "status" and m["content"].get("execution_state") in ("restarting", "dead"):
                raise KernelDied(m["content"]["execution_state"])
            if parent != msg_id:
                continue
            if kind in ("stream", "display_data", "execute_result", "error"):
                first = first or time.monotonic()
                outputs.append(m["content"] | {"output_type": kind})
            elif kind == "execute_reply":
                reply = m["content"]
            elif kind == "status" and m["content"].get("execution_state") == "idle":
                idle = True
        return outputs, reply, first


# --------------------------------------------------------------------------------------------------------------
# one student
# --------------------------------------------------------------------------------------------------------------

@dataclass
class Student:
    name: str
    t0: float = 0.0
    first_output: float | None = None
    total: float | None = None
    rss_mib: float = 0.0
    cells: int = 0
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    fault: str = ""
    reconnects: int = 0      # kernel websockets re-opened (a dropped connection, a killed server)
    resent: int = 0          # cells run again because their reply went to a lost connection
    pull_retries: int = 0    # nbgitpuller streams started again
    unprompted: int = 0      # kernel deaths no injected fault caused (reported with the server's log)

    @property
    def ok(self) -> bool:
        return self.total is not None and not self.failures


class Run:
    def __init__(self, args: argparse.Namespace, tmp: Path) -> None:
        self.args, self.tmp = args, tmp
        self.hub = Hub(tmp)
        self.sampler = Sampler()
        self.course = tmp / "course.git"
        self.branch = ""
        self.link = ""
        self.restart_at = threading.Event()     # set when the hub restart may happen
        self.restarted = threading.Event()
        # students whose server is being killed and started again (a fault): the hub restart waits for them, since
        # a server the hub is still spawning when the hub stops is one the new hub does not know
        self.servers_restarting: set[str] = set()
        self.deadline = time.monotonic() + args.timeout
        self.students = [Student(f"student{i:02d}") for i in range(args.students)]
        self.browser_results: list[str] = []
        self.fault_notes: list[str] = []
        self.lessons = {path: self._code_cells(ROOT / path) for path in LESSONS}

    @staticmethod
    def _code_cells(path: Path) -> list[str]:
        nb = json.loads(path.read_text())
        return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]

    def left(self) -> float:
        return self.deadline - time.monotonic()

    # -- the course repository ---------------------------------------------------------------------------------
    def make_course(self) -> None:
        subprocess.run(["git", "clone", "-q", "--bare", str(ROOT), str(self.course)], check=True)
        self.branch = subprocess.run(["git", "-C", str(self.course), "symbolic-ref", "--short", "HEAD"],
                                     capture_output=True, text=True, check=True).stdout.strip()
        self.link = nbgitpuller_link(self.hub.url, self.course.as_uri(), self.branch)

    def upstream_change(self) -> None:
        """The instructor fixes a typo in lesson 00 and adds a lesson: pushed to the course repository."""
        work = self.tmp / "instructor"
        subprocess.run(["git", "clone", "-q", str(self.course), str(work)], check=True)
        nb = work / LESSONS[0]
        nb.write_text(nb.read_text().replace("welcome", "welcome", 1) + "\n")
        (work / "lessons" / "99-announcement.md").write_text("Homework is due on Friday.\n")
        git = ["git", "-C", str(work), "-c", "user.name=instructor", "-c", "user.email=i@example.invalid"]
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", "course update"], check=True)
        subprocess.run([*git, "push", "-q", "origin", f"HEAD:{self.branch}"], check=True)

    # -- a student's steps ---------------------------------------------------------------------------------------
    def login(self, s: Student) -> requests.Session:
        http = Net()
        r = http.get(f"{self.hub.url}/hub/login", timeout=60)
        xsrf = http.cookies.get("_xsrf") or re.search(r'name="_xsrf" value="([^"]+)"', r.text).group(1)
        r = http.post(f"{self.hub.url}/hub/login?next=", data={"username": s.name, "password": PASSWORD,
                                                               "_xsrf": xsrf}, timeout=60, allow_redirects=False)
        if r.status_code not in (302, 303):
            raise Failure(f"login answered {r.status_code}")
        return http

    def wait_server(self, s: Student, timeout: float) -> int:
        deadline = time.monotonic() + min(timeout, self.left())
        while time.monotonic() < deadline:
            pid = self.hub.server_pid(s.name)
            if pid:
                return pid
            time.sleep(1)
        raise Failure(f"server not ready within {timeout:.0f} s")

    def follow_link(self, s: Student, http: requests.Session) -> None:
        """The link: the hub starts the server (spawn-pending page), then nbgitpuller's page answers."""
        r = http.get(self.link, timeout=120)
        if "/git-pull" not in r.url or r.status_code != 200:
            self.wait_server(s, 600)
            r = http.get(self.link, timeout=120)
        if r.status_code != 200 or "/user/" not in r.url or "git-pull" not in r.url:
            raise Failure(f"the nbgitpuller link ended at {r.url} ({r.status_code})")

    def pull(self, s: Student, http: requests.Session, patience: float = 180) -> None:
        """nbgitpuller's API, retried like its page is reloaded when the stream breaks (a hub restart takes the
        proxy away for seconds) or another pull of this student's still holds the lock."""
        deadline = time.monotonic() + patience
        while True:
            try:
                return self._pull(s, http)
            except (requests.RequestException, Failure) as e:
                if time.monotonic() > deadline:
                    raise Failure(f"nbgitpuller kept failing for {patience:.0f} s: {e}") from e
                s.pull_retries += 1
                time.sleep(3)

    def _pull(self, s: Student, http: requests.Session) -> None:
        """What nbgitpuller's page does in JavaScript: its API streams the pull's progress."""
        q = f"repo={quote(self.course.as_uri(), safe='')}&branch={self.branch}&targetpath={TARGET}"
        with http.get(f"{self.hub.url}/user/{s.name}/git-pull/api?{q}", stream=True, timeout=300) as r:
            phase = None
            for line in r.iter_lines(decode_unicode=True):
                if line and line.startswith("data:"):
                    data = json.loads(line[5:])
                    phase = data.get("phase", phase) if isinstance(data, dict) else phase
                    if phase == "error":
                        raise Failure(f"nbgitpuller: {data.get('message')}")
            if phase != "finished":
                raise Failure(f"nbgitpuller stopped in phase {phase!r}")

    def user_token(self, s: Student) -> str:
        r = self.hub.api("POST", f"/users/{s.name}/tokens", json={"note": "class-loadtest", "expires_in": 7200})
        if not r.ok:
            raise Failure(f"token: {r.status_code} {r.text[:200]}")
        return r.json()["token"]

    def contents(self, s: Student, token: str, path: str, method: str = "GET", **kw) -> requests.Response:
        return net(method, f"{self.hub.url}/user/{s.name}/api/contents/{quote(path)}",
                                headers={"Authorization": f"token {token}"}, timeout=60, **kw)

    def save_edit(self, s: Student, token: str) -> str:
        """The student writes an answer into lesson 00 (a new first cell) and saves: their edit."""
        path = f"{TARGET}/{LESSONS[0]}"
        r = self.contents(s, token, path)
        try:
            model = r.json()
            model["content"]["cells"]
        except (ValueError, KeyError, TypeError):
            raise Failure(f"reading lesson 00 to edit it: {r.status_code} from {r.url}: {r.text[:300]!r}") from None
        marker = f"# my answer, {s.name}"
        model["content"]["cells"].insert(0, {"cell_type": "code", "execution_count": None, "id": uuid.uuid4().hex[:8],
                                             "metadata": {}, "outputs": [], "source": marker})
        r = self.contents(s, token, path, "PUT", json={"type": "notebook", "format": "json",
                                                      "content": model["content"]})
        if not r.ok:
            raise Failure(f"saving lesson 00: {r.status_code}")
        return marker

    def has_edit(self, s: Student, token: str, marker: str) -> bool:
        r = self.contents(s, token, f"{TARGET}/{LESSONS[0]}")
        return r.ok and any(marker in "".join(c["source"]) for c in r.json()["content"]["cells"])

    def start_kernel(self, s: Student, token: str, path: str) -> tuple[str, Kernel]:
        base = f"{self.hub.url}/user/{s.name}"
        r = net("POST", f"{base}/api/sessions", headers={"Authorization": f"token {token}"}, timeout=120,
                          json={"path": f"{TARGET}/{path}", "type": "notebook", "name": Path(path).name,
                                "kernel": {"name": "python3"}})
        if not r.ok:
            raise Failure(f"starting a kernel for {path}: {r.status_code} from {r.url}: {r.text[:300]!r}")
        kid = r.json()["kernel"]["id"]
        return kid, Kernel(base, token, kid, s.name)

    def run_lesson(self, s: Student, token: str, path: str, fault: str | None = None) -> None:
        """Every code cell of the lesson, in order; ``fault`` kills the server or the kernel half-way."""
        kid, k = self.start_kernel(s, token, path)
        cells = self.lessons[path]
        i = 0
        try:
            while i < len(cells):
                if fault and i == len(cells) // 2:
                    fault_now, fault = fault, None
                    k, kid = self.inject(s, token, path, fault_now, k, kid)
                    i = 0           # the student re-runs the notebook from the top in the new kernel
                    continue
                if self.left() < 0:
                    raise Failure(f"{path} cell {i}: the run's time limit was reached")
                try:
                    outputs, reply, first = k.execute(cells[i], timeout=max(5.0, min(600.0, self.left())))
                except KernelDied as e:
                    # Nothing of ours killed it (the faults are injected above, between cells). Say what the
                    # server logged about it; then do what JupyterLab offers a student: the server's restarter
                    # has already started a fresh process under the same id, so wait for it and re-run the
                    # lesson from the top. A second death of the same student's kernel fails the run.
                    log = self.hub.kernel_log(kid)
                    s.unprompted += 1
                    self.fault_notes.append(f"{s.name}: UNPROMPTED kernel death in {Path(path).name} cell {i} "
                                            f"({e}); the server's log about it:\n{log}")
                    if s.unprompted > 1:
                        raise Failure(f"{path} cell {i}: the kernel died again ({e}); server log:\n{log}") from e
                    k.close()
                    base, hdr = f"{self.hub.url}/user/{s.name}", {"Authorization": f"token {token}"}
                    if not self.wait_idle(base, hdr, kid, 120):
                        raise Failure(f"{path} cell {i}: the kernel died ({e}) and did not come back; "
                                      f"server log:\n{log}") from e
                    k = Kernel(base, token, kid, s.name)
                    i = 0
                    continue
                except Failure as e:
                    raise Failure(f"{path} cell {i}: {e}") from e
                if reply.get("status") != "ok":
                    err = next((o for o in outputs if o["output_type"] == "error"), reply)
                    raise Failure(f"{path} cell {i}: {err.get('ename')}: {err.get('evalue')}")
                if first and s.first_output is None:
                    s.first_output = first - s.t0
                s.cells += 1
                i += 1
                if path == LESSONS[0] and i == len(cells) // 2:
                    self.restart_at.set()
        finally:
            k.close()
            s.reconnects += k.reconnects
            s.resent += k.resent
            net("DELETE", f"{self.hub.url}/user/{s.name}/api/kernels/{kid}",
                            headers={"Authorization": f"token {token}"}, timeout=60)

    @staticmethod
    def wait_idle(base: str, hdr: dict, kid: str, limit: float) -> bool:
        """Has the kernel been idle at two looks 2 s apart (no restart still under way) within ``limit`` s?"""
        end, seen = time.monotonic() + limit, 0
        while time.monotonic() < end:
            r = net("GET", f"{base}/api/kernels/{kid}", headers=hdr, timeout=30)
            seen = seen + 1 if r.ok and r.json().get("execution_state") == "idle" else 0
            if seen == 2:
                return True
            time.sleep(2)
        return False

    def inject(self, s: Student, token: str, path: str, fault: str, k: Kernel, kid: str) -> tuple[Kernel, str]:
        base = f"{self.hub.url}/user/{s.name}"
        hdr = {"Authorization": f"token {token}"}
        if fault == "kernel":
            kpids = [p for p in psutil.Process(self.hub.server_pid(s.name)).children(recursive=True)
                     if "ipykernel" in " ".join(p.cmdline())]
            for p in kpids:
                p.kill()
            k.close()
            # JupyterLab's path: the kernel died, "Restart" - the same kernel id, a fresh process. The server
            # notices the death too and restarts the kernel on its own (its restarter polls every few
            # seconds); a "Restart" that meets that restart halfway gets a 500. Like a student who clicks
            # again, try again, then wait until the kernel is idle before running the lesson.
            tries = 0
            while True:
                time.sleep(1 if tries == 0 else 3)
                tries += 1
                r = net("POST", f"{base}/api/kernels/{kid}/restart", headers=hdr, timeout=120)
                if r.ok or tries == 5:
                    break
            idle = r.ok and self.wait_idle(base, hdr, kid, 60)
            ok = idle and self.has_edit(s, token, s.notes[0] if s.notes else "")
            self.fault_notes.append(f"{s.name}: kernel killed in {Path(path).name} cell {len(self.lessons[path]) // 2}"
                                    f"; restarted through the REST API ({r.status_code}, {tries} "
                                    f"{'try' if tries == 1 else 'tries'}), notebook intact: {ok}; "
                                    "re-ran the lesson from the top")
            if not ok:
                s.failures.append(f"kernel restart: {r.status_code}, edit intact: {ok}")
            return Kernel(base, token, kid, s.name), kid
        # the server: SIGKILL it and its kernels; the student goes back to the hub and starts it again
        self.servers_restarting.add(s.name)
        pid = self.hub.server_pid(s.name)
        proc = psutil.Process(pid)
        for p in [*proc.children(recursive=True), proc]:
            p.kill()
        k.close()
        t = time.monotonic()
        while self.hub.api("GET", f"/users/{s.name}").json().get("servers", {}).get(""):
            if time.monotonic() - t > 120:
                raise Failure("the hub did not notice the killed server in 120 s")
            self.hub.api("GET", f"/users/{s.name}")
            time.sleep(1)
        self.hub.api("POST", f"/users/{s.name}/server")
        try:
            new_pid = self.wait_server(s, 300)
        finally:
            self.servers_restarting.discard(s.name)
        self.sampler.pids[s.name] = new_pid
        ok = self.has_edit(s, token, s.notes[0])
        files = self.contents(s, token, f"{TARGET}/lessons").ok
        took = time.monotonic() - t
        self.fault_notes.append(f"{s.name}: server (pid {pid}) killed in {Path(path).name} cell "
                                f"{len(self.lessons[path]) // 2}; restarted from the hub in {took:.1f} s "
                                f"(pid {new_pid}); lessons present: {files}, their edit intact: {ok}; "
                                "re-ran the lesson in a new kernel")
        if not (ok and files):
            s.failures.append(f"after the server restart: lessons present {files}, edit intact {ok}")
        return self.start_kernel(s, token, path)[::-1]

    def student(self, s: Student, delay: float) -> None:
        time.sleep(delay)
        s.t0 = time.monotonic()
        step = "login"
        try:
            http = self.login(s)
            step = "following the nbgitpuller link"
            self.follow_link(s, http)
            pid = self.wait_server(s, 600)
            self.sampler.pids[s.name] = pid
            step = "nbgitpuller pull"
            self.pull(s, http)
            token = self.user_token(s)
            step = "saving an edit"
            s.notes.append(self.save_edit(s, token))
            for path in LESSONS:
                step = path
                self.run_lesson(s, token, path, fault=s.fault if path == LESSONS[1] else None)
            s.total = time.monotonic() - s.t0
            s.rss_mib = max(self.sampler.peak.get(s.name, 0.0), Sampler.tree_rss(self.sampler.pids[s.name]))
        except Failure as e:
            s.failures.append(f"{step}: {e}" if not str(e).startswith(step) else str(e))
        except Exception as e:  # noqa: BLE001 - reported with the student's name
            s.failures.append(f"{step}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=3)}")

    # -- the faults that concern everyone -------------------------------------------------------------------------
    def hub_restart(self) -> None:
        """Stop the hub mid-class and start it again: servers keep their pids and files."""
        if not self.restart_at.wait(timeout=max(1.0, self.left() - 60)):
            return
        # once every student who is still going has a running server: "users keep their servers"
        # (and no server is half way through a restart of its own: CI on 3c67ea7 restarted the hub while one was)
        while self.left() > 60 and (len(self.sampler.pids) < sum(1 for s in self.students if not s.failures)
                                    or self.servers_restarting):
            time.sleep(1)
        before = {s.name: self.hub.server_pid(s.name) for s in self.students}
        before = {k: v for k, v in before.items() if v}
        proxy_before = self.hub.proxy_pid()
        t = time.monotonic()
        self.hub.stop()
        self.hub.start()
        # A server counts as ready once the restarted hub has polled it; a busy one (re-running a lesson on two
        # shared cores) may answer that poll a few seconds late, and then read as lost although its process
        # ran on (CI failed so twice, each time on the server the fault had just restarted): ask for a while.
        after: dict[str, int | None] = {}
        patience = time.monotonic() + min(60.0, max(1.0, self.left() - 60))
        while True:
            after = {name: self.hub.server_pid(name) for name in before}
            if all(after.values()) or time.monotonic() > patience:
                break
            time.sleep(2)
        kept = [n for n, pid in before.items() if after.get(n) == pid]
        proxy = ("the proxy kept running (same pid)" if proxy_before and self.hub.proxy_pid() == proxy_before
                 else f"the proxy did NOT survive (pid {proxy_before} -> {self.hub.proxy_pid()})")
        self.fault_notes.append(f"hub restarted mid-class in {time.monotonic() - t:.1f} s: {len(kept)}/{len(before)} "
                                f"running servers kept their process (same pid) and went on; {proxy}")
        if not proxy.startswith("the proxy kept"):
            self.students[0].failures.append(f"hub restart: {proxy}: students' routes went down with the hub")
        if len(kept) != len(before):
            lost = sorted(set(before) - set(kept))
            self.fault_notes.append(f"  servers lost across the hub restart: {', '.join(lost)}")
        self.restarted.set()

    def repull(self) -> None:
        """After the class: the course changes upstream, student00 follows the link again; their edit stays."""
        s = self.students[0]
        if not s.ok:
            return
        self.upstream_change()
        http = self.login(s)
        self.follow_link(s, http)
        self.pull(s, http)
        token = self.user_token(s)
        kept = self.has_edit(s, token, s.notes[0])
        new = self.contents(s, token, f"{TARGET}/lessons/99-announcement.md").ok
        self.fault_notes.append(f"{s.name}: re-pull after an upstream change: their edit kept: {kept}, "
                                f"the new file arrived: {new}")
        if not (kept and new):
            s.failures.append(f"re-pull: edit kept {kept}, new file arrived {new}")

    # -- browsers ---------------------------------------------------------------------------------------------------
    def browser_student(self, name: str) -> None:
        sys.path.insert(0, str(ROOT / "tests"))
        from browser.harness import Lab, browser

        hub = self.hub

        class Server:  # what Lab reads of a server: its log, for failure messages
            def log_tail(self, n: int = 2500) -> str:
                return hub.log_tail(n)

        t = time.monotonic()
        with browser() as page:
            lab = Lab(page, Server(), timeout_ms=int(max(60, min(600, self.left())) * 1000))
            page.goto(f"{hub.url}/hub/login", timeout=lab.timeout)
            page.fill("input[name=username]", name)
            page.fill("input[name=password]", PASSWORD)
            page.click("input[type=submit], button[type=submit]")
            page.wait_for_url(re.compile(r".*/(hub/home|hub/spawn|user/).*"), timeout=lab.timeout)
            page.goto(self.link, timeout=lab.timeout)     # spawn, pull, then JupyterLab on lesson 00
            page.wait_for_url(re.compile(r".*/lab/tree/.*00-welcome\.ipynb.*"), timeout=lab.timeout)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=lab.timeout)
            lab.run_all()
            lab.wait_graph(0, min_nodes=3)
            ids = [i for i in lab.node_ids(0) if not i.startswith("g:")]
            page.locator(".asg-graphview").first.scroll_into_view_if_needed()   # a click must land on screen
            time.sleep(1)
            after = ""
            for node in (ids[0], ids[-1]):      # the first input, then the output: the inspector follows
                before = lab.inspector_text(0)
                lab.click_node(node, 0)
                try:
                    page.wait_for_function(
                        "([b]) => { const p = document.querySelectorAll('.asg-inspector-panel')[0];"
                        " return p && p.innerText !== b && p.innerText.trim().length > 0; }", arg=[before],
                        timeout=60_000)
                except Exception as e:  # noqa: BLE001 - with a screenshot and the page's console
                    raise AssertionError(lab.fail(f"a click on node {node} did not change the inspector")) from e
                after = lab.inspector_text(0)
            lab.screenshot(f"hub-{name}-lesson00", page.locator(".asg-graphview").first)
        head = after.strip().splitlines()[0] if after.strip() else ""
        self.browser_results.append(f"{name}: JupyterLab from the link, lesson 00 run, graph drawn "
                                    f"({len(ids)} nodes), clicks on {ids[0]} and {ids[-1]} -> inspector shows {head!r} "
                                    f"({time.monotonic() - t:.1f} s)")

    # -- the whole run ------------------------------------------------------------------------------------------------
    def run(self) -> int:
        args = self.args
        self.make_course()
        say(f"{args.students} students, course {self.course.as_uri()} ({self.branch}), time limit {args.timeout} s")
        t_start = time.monotonic()
        self.hub.start()
        say(f"hub up on {self.hub.url} in {time.monotonic() - t_start:.1f} s; link: {self.link}")
        self.sampler.start()
        if args.faults and len(self.students) >= 3:
            self.students[1].fault, self.students[2].fault = "server", "kernel"
        threads = [threading.Thread(target=self.student, args=(s, i * args.ramp), daemon=True)
                   for i, s in enumerate(self.students)]
        restart = threading.Thread(target=self.hub_restart, daemon=True) if args.faults else None
        for th in threads:
            th.start()
        if restart:
            restart.start()
        # the last students also open the link in Chromium, once their own REST run is over (nbgitpuller pulls
        # one at a time per server), one browser at a time: a browser is heavy on 2 cores
        browser_ids = range(len(self.students) - args.browsers, len(self.students)) if args.browsers else []
        browser_errors: list[str] = []
        for i in browser_ids:
            name = self.students[i].name
            try:
                threads[i].join(timeout=max(1.0, self.left() - 120))
                if restart:
                    self.restarted.wait(timeout=max(1.0, self.left() - 120))
                self.browser_student(name)
            except Exception as e:  # noqa: BLE001 - a failure names the student
                browser_errors.append(f"{name} (browser): {type(e).__name__}: {str(e)[:1500]}")
        for th in threads:
            th.join(timeout=max(1.0, self.left()))
        if restart:
            restart.join(timeout=max(1.0, self.left()))
        if args.faults:
            try:
                self.repull()
            except Exception as e:  # noqa: BLE001
                self.students[0].failures.append(f"re-pull: {type(e).__name__}: {e}")
        wall = time.monotonic() - t_start
        self.sampler.stop_event.set()
        return self.report(wall, browser_errors)

    def report(self, wall: float, browser_errors: list[str]) -> int:
        print()
        print(f"{'student':10s} {'first output':>12s} {'total':>8s} {'RSS MiB':>8s} {'cells':>6s}  notes")
        for s in self.students:
            fo = f"{s.first_output:.1f} s" if s.first_output is not None else "-"
            tot = f"{s.total:.1f} s" if s.total is not None else "-"
            mem = f"{s.rss_mib:.0f}" if s.rss_mib else "-"
            extra = "; ".join(filter(None, [f"fault: {s.fault}" if s.fault else "",
                                            f"websocket reconnected x{s.reconnects}" if s.reconnects else "",
                                            f"cell re-sent x{s.resent}" if s.resent else "",
                                            f"pull retried x{s.pull_retries}" if s.pull_retries else "",
                                            f"KERNEL DIED UNPROMPTED x{s.unprompted}" if s.unprompted else ""]))
            print(f"{s.name:10s} {fo:>12s} {tot:>8s} {mem:>8s} {s.cells:>6d}  {extra}")
        for line in self.fault_notes:
            print("fault:", line)
        for line in self.browser_results:
            print("browser:", line)
        failures = [(s.name, f) for s in self.students for f in s.failures]
        for name, f in failures:
            print(f"FAILED {name}: {f}")
        for f in browser_errors:
            print(f"FAILED {f}")
        done = [s for s in self.students if s.ok]
        totals = sorted(s.total for s in done)
        p95 = totals[min(len(totals) - 1, int(round(0.95 * (len(totals) - 1))))] if totals else float("nan")
        mems = [s.rss_mib for s in done if s.rss_mib]
        mem = statistics.mean(mems) if mems else float("nan")
        firsts = [s.first_output for s in done if s.first_output is not None]
        if firsts:
            print(f"time to first output: median {statistics.median(firsts):.1f} s, max {max(firsts):.1f} s; "
                  f"memory per student: mean {mem:.0f} MiB, max {max(mems):.0f} MiB; wall time {wall:.0f} s")
        print(f"{len(done)}/{len(self.students)} students completed (p95 {p95:.1f} s, {mem:.0f} MiB per student)")
        return 0 if len(done) == len(self.students) and not browser_errors else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="class-loadtest", description=__doc__.split("\n\n")[0])
    ap.add_argument("--students", type=int, default=5, help=f"how many students (1..{MAX_STUDENTS}, default 5)")
    ap.add_argument("--timeout", type=float, default=900, help="the whole run's time limit in seconds (default 900)")
    ap.add_argument("--ramp", type=float, default=1.0, help="seconds between two students' arrivals (default 1)")
    ap.add_argument("--browsers", type=int, default=2, help="students who also use Chromium (default 2)")
    ap.add_argument("--no-faults", dest="faults", action="store_false", help="skip the fault injections")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (hub log, homes)")
    args = ap.parse_args(argv)
    if not 1 <= args.students <= MAX_STUDENTS:
        ap.error(f"--students must be between 1 and {MAX_STUDENTS}")
    args.browsers = max(0, min(args.browsers, args.students))
    tmp = Path(tempfile.mkdtemp(prefix="asg-class-"))
    run = Run(args, tmp)

    def on_signal(signum, frame):  # Ctrl-C / timeout: clean up, then leave
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        return run.run()
    except KeyboardInterrupt:
        say("interrupted")
        return 130
    except Failure as e:
        say(f"FAILED: {e}")
        return 1
    finally:
        run.sampler.stop_event.set()
        run.hub.cleanup()
        if args.keep:
            say(f"kept {tmp} (hub.log, state/homes)")
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
