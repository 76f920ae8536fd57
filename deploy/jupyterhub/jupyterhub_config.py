"""JupyterHub on one machine for an asgteach class (JupyterHub 6, configurable-http-proxy, local processes).

Start it with ``./scripts/hub`` (it installs what is missing, then runs
``jupyterhub -f deploy/jupyterhub/jupyterhub_config.py`` with the settings below filled in). Everything
that differs between a laptop test and a class is an environment variable, so this file stays as it is:

=============================  =================================================================================
ASGTEACH_HUB_STATE             folder for the hub's database, cookie secret, proxy pid, logs and the students'
                               homes (``homes/<name>``); default ``<repo>/.hub/state``
ASGTEACH_HUB_IP / _PORT        where students connect; default 127.0.0.1:8000 (put TLS in front before opening it)
ASGTEACH_HUB_HUB_PORT          the hub's internal API port (8081); ASGTEACH_HUB_PROXY_API_PORT the proxy's (8001)
ASGTEACH_HUB_AUTH              ``shared`` (default: one shared password, ASGTEACH_HUB_PASSWORD), ``dummy`` (any
                               password; tests only), ``native``, ``github``, ``oauth`` (generic OAuth2/OIDC),
                               ``lti`` (LTI 1.3 from an LMS), ``pam`` (the machine's Unix accounts)
ASGTEACH_HUB_ADMIN_TOKEN       API token of the ``asgteach-admin`` service (admin role); scripts/hub makes one
ASGTEACH_HUB_ADMINS            comma-separated admin user names (default ``instructor``)
ASGTEACH_HUB_SPAWNER           ``folders`` (default: every student's server runs as the hub's Unix user, in its own
                               folder ``homes/<name>``; no Unix accounts needed) or ``system`` (one Unix account
                               per student, created on first login, servers run as that user: real isolation;
                               needs the hub to run as root)
ASGTEACH_HUB_MEM_LIMIT         per-student memory, e.g. ``2G`` (default); ASGTEACH_HUB_CPU_LIMIT cores (default 1)
ASGTEACH_HUB_CULL_TIMEOUT      seconds of inactivity before jupyterhub-idle-culler stops a server (default 3600)
ASGTEACH_HUB_VENV              the students' environment, where their servers and kernels run (default
                               ``<repo>/.hub/student-venv``, which ``scripts/hub --install-only`` builds: asgteach
                               from a wheel of this tree - the student versions of the lessons, no answer keys -
                               and JupyterLab 4, the widget extensions, jupyterhub, nbgitpuller shared from
                               ``.venv``; deploy/jupyterhub/student_side.py). Never the checkout's ``.venv``: its
                               editable asgteach finds every solution and the answer keys
ASGTEACH_HUB_PROXY             the configurable-http-proxy executable (default ``<repo>/.hub/proxy/...``)
ASGTEACH_HUB_PROXY_TOKEN       set by scripts/hub, which runs the proxy as its own process: the hub then does
                               not start or stop it (``should_start = False``) and talks to it with this token
=============================  =================================================================================

What a local-process spawner can and cannot limit
-------------------------------------------------
``LocalProcessSpawner`` does not enforce ``mem_limit``/``cpu_limit`` itself: it only passes them to the server
as ``MEM_LIMIT``/``CPU_LIMIT`` (which jupyter-resource-usage displays). This file applies what a plain process
can be given before it starts (``preexec_fn``, inherited by the kernels the server starts):

* memory: ``RLIMIT_AS`` = ASGTEACH_HUB_MEM_LIMIT, *per process* (the server and each kernel separately, not
  their sum). A kernel that allocates past it gets ``MemoryError``; the server and the other students are
  unharmed. It caps address space, not resident memory, so it is set with headroom (numpy, the wgpu adapter
  and thread stacks reserve address space they never touch).
* CPU: no share or quota is possible without cgroups. Each kernel's BLAS/OpenMP pools are sized to
  ASGTEACH_HUB_CPU_LIMIT threads (``OMP_NUM_THREADS`` ...), so one student's matmul cannot occupy every core,
  and students' processes run at ``nice`` 5, so the hub and the proxy stay responsive under load.
* processes / files: ``RLIMIT_NOFILE`` 4096 per process.

Real per-student memory and CPU limits (cgroups) need systemdspawner (a systemd machine, root), DockerSpawner,
or Kubernetes (``deploy/z2jh/values.yaml``); with ``ASGTEACH_HUB_SPAWNER=system`` each student at least runs
as their own Unix user, so files are private.

What students get
-----------------
The student versions of the lessons only: their environment (ASGTEACH_HUB_VENV) holds asgteach as a wheel holds
it, and the link (``asgteach link`` as scripts/hub prints it) pulls ``.hub/course``, a repository of the student
versions. With ``folders`` every server runs as the hub's own Unix user, which can read the whole checkout
(``lessons/`` with the solutions, ``instructor/`` with the keys, and this state folder): nothing hands a student
an answer, but one who goes looking with the terminal finds them. ``system`` closes that: scripts/hub then makes
``lessons/``, ``instructor/``, ``.git/`` and ``build/`` readable by their owner only.
"""

from __future__ import annotations

import os
import resource
import secrets
import shutil
import sys
from pathlib import Path

from jupyterhub.spawner import LocalProcessSpawner, SimpleLocalProcessSpawner

c = get_config()  # noqa: F821 - JupyterHub's config loader provides get_config

ROOT = Path(__file__).resolve().parents[2]
env = os.environ.get


def _size(text: str) -> int:
    """'2G', '512M', '1.5G' or a number of bytes -> bytes (JupyterHub's own ByteSpecification rules)."""
    text = text.strip().upper()
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


STATE = Path(env("ASGTEACH_HUB_STATE") or ROOT / ".hub" / "state").resolve()
HOMES = STATE / "homes"
VENV = Path(env("ASGTEACH_HUB_VENV") or ROOT / ".hub" / "student-venv")
PROXY = env("ASGTEACH_HUB_PROXY") or str(ROOT / ".hub" / "proxy" / "node_modules" / ".bin" / "configurable-http-proxy")
IP = env("ASGTEACH_HUB_IP", "127.0.0.1")
PORT = int(env("ASGTEACH_HUB_PORT", "8000"))
MEM_LIMIT = env("ASGTEACH_HUB_MEM_LIMIT", "2G")
CPU_LIMIT = float(env("ASGTEACH_HUB_CPU_LIMIT", "1"))
#: RLIMIT_AS headroom over MEM_LIMIT: address space reserved, never resident (see the module docstring)
AS_HEADROOM = _size(env("ASGTEACH_HUB_AS_HEADROOM", "2G"))
STATE.mkdir(parents=True, exist_ok=True, mode=0o700)
HOMES.mkdir(parents=True, exist_ok=True)

# --- the proxy: configurable-http-proxy from npm, on Debian's Node --------------------------------------------
if not shutil.which("node"):
    sys.exit("asgteach hub: Node.js is missing (configurable-http-proxy runs on it). "
             "Install it: sudo apt-get install nodejs npm   (or run ./scripts/hub, which does)")
if not (os.access(PROXY, os.X_OK) or shutil.which(PROXY)):
    sys.exit(f"asgteach hub: configurable-http-proxy is missing ({PROXY}). Install it: "
             f"npm install --prefix {ROOT / '.hub' / 'proxy'} configurable-http-proxy@5.3.0   "
             "(or run ./scripts/hub, which does)")
c.ConfigurableHTTPProxy.command = [PROXY]
if not os.access(VENV / "bin" / "jupyterhub-singleuser", os.X_OK):
    sys.exit(f"asgteach hub: the students' environment is missing ({VENV / 'bin' / 'jupyterhub-singleuser'}). "
             "Build it: ./scripts/hub --install-only (or: .venv/bin/python deploy/jupyterhub/student_side.py env), "
             "or point ASGTEACH_HUB_VENV at an environment where a wheel of asgteach, jupyterhub and nbgitpuller "
             "are installed")
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{env('ASGTEACH_HUB_PROXY_API_PORT', '8001')}"
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")
if env("ASGTEACH_HUB_PROXY_TOKEN"):
    # scripts/hub runs the proxy as a process of its own (and sets this token): a hub restart leaves it, and every
    # student's route in it, alone, so open pages and kernels never see the hub go down. The restarted hub checks
    # the routes against its database and adds what is missing. Without the token (``jupyterhub -f`` by hand) the
    # hub starts the proxy itself, and a hub restart takes the routes down with it for a few seconds.
    c.ConfigurableHTTPProxy.should_start = False
    c.ConfigurableHTTPProxy.auth_token = env("ASGTEACH_HUB_PROXY_TOKEN")

# --- the hub ---------------------------------------------------------------------------------------------------
c.JupyterHub.bind_url = f"http://{IP}:{PORT}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(env("ASGTEACH_HUB_HUB_PORT", "8081"))
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.default_url = "/hub/home"
# A hub restart (a config change, an upgrade, a crash) must not end the students' sessions: their servers keep
# running and the restarted hub finds them again from its database (the pid of each server).
c.JupyterHub.cleanup_servers = env("ASGTEACH_HUB_CLEANUP_SERVERS", "0") == "1"
c.JupyterHub.cleanup_proxy = True
# a class logs in within minutes: let many servers start at once, but not unboundedly
c.JupyterHub.concurrent_spawn_limit = int(env("ASGTEACH_HUB_SPAWN_LIMIT", "50"))
c.JupyterHub.active_server_limit = int(env("ASGTEACH_HUB_SERVER_LIMIT", "0"))

# --- who may log in --------------------------------------------------------------------------------------------
ADMINS = {a.strip() for a in env("ASGTEACH_HUB_ADMINS", "instructor").split(",") if a.strip()}
AUTH = env("ASGTEACH_HUB_AUTH", "shared")


def _need(module: str, package: str) -> None:
    try:
        __import__(module)
    except ImportError:
        sys.exit(f"asgteach hub: ASGTEACH_HUB_AUTH={AUTH} needs {package}: "
                 f"{Path(sys.executable).parent}/pip install {package}   (into the hub's own environment)")


if AUTH == "shared":
    # one password for the class (SharedPasswordAuthenticator, JupyterHub >= 5.3): fine on a closed network for a
    # workshop; every name that logs in with it becomes a user
    c.JupyterHub.authenticator_class = "shared-password"
    c.SharedPasswordAuthenticator.user_password = env("ASGTEACH_HUB_PASSWORD") or secrets.token_urlsafe(12)
    c.Authenticator.allow_all = True
elif AUTH == "dummy":
    # any name, any password: for the load test on 127.0.0.1 only
    c.JupyterHub.authenticator_class = "dummy"
    c.Authenticator.allow_all = True
elif AUTH == "native":
    # students sign up, the instructor approves them at /hub/authorize
    _need("nativeauthenticator", "jupyterhub-nativeauthenticator")
    c.JupyterHub.authenticator_class = "native"
    c.NativeAuthenticator.open_signup = False
    c.Authenticator.allow_all = True
elif AUTH in ("github", "oauth"):
    # OAuth: GitHub (a GitHub organisation = the class) or any OAuth2/OIDC provider (the university's SSO).
    # Register the app with callback https://<hub>/hub/oauth_callback and set OAUTH_CLIENT_ID / _SECRET.
    _need("oauthenticator", "oauthenticator")
    c.JupyterHub.authenticator_class = "github" if AUTH == "github" else "generic-oauth"
    c.OAuthenticator.oauth_callback_url = env("OAUTH_CALLBACK_URL", f"http://{IP}:{PORT}/hub/oauth_callback")
    if AUTH == "github":
        c.GitHubOAuthenticator.allowed_organizations = set(filter(None, env("ASGTEACH_HUB_GITHUB_ORGS", "").split(",")))
    else:  # OIDC endpoints of the provider, e.g. https://sso.example.edu/...
        c.GenericOAuthenticator.authorize_url = env("OAUTH2_AUTHORIZE_URL", "")
        c.GenericOAuthenticator.token_url = env("OAUTH2_TOKEN_URL", "")
        c.GenericOAuthenticator.userdata_url = env("OAUTH2_USERDATA_URL", "")
        c.GenericOAuthenticator.username_claim = env("OAUTH2_USERNAME_CLAIM", "preferred_username")
        c.GenericOAuthenticator.allow_all = True
elif AUTH == "lti":
    # LTI 1.3: the course in Moodle/Canvas/... launches the hub; the LMS decides who is enrolled
    _need("ltiauthenticator", "jupyterhub-ltiauthenticator")
    c.JupyterHub.authenticator_class = "ltiauthenticator.lti13.auth.LTI13Authenticator"
    c.LTI13Authenticator.issuer = env("LTI13_ISSUER", "")
    c.LTI13Authenticator.client_id = [env("LTI13_CLIENT_ID", "")]
    c.LTI13Authenticator.authorize_url = env("LTI13_AUTHORIZE_URL", "")
    c.LTI13Authenticator.jwks_endpoint = env("LTI13_JWKS_ENDPOINT", "")
    c.Authenticator.allow_all = True
elif AUTH == "pam":
    # the machine's own accounts (JupyterHub's default); pair with ASGTEACH_HUB_SPAWNER=system
    c.JupyterHub.authenticator_class = "pam"
    c.Authenticator.allowed_users = set(filter(None, env("ASGTEACH_HUB_USERS", "").split(",")))
else:
    sys.exit(f"asgteach hub: unknown ASGTEACH_HUB_AUTH={AUTH!r}: shared, dummy, native, github, oauth, lti or pam")
c.Authenticator.admin_users = ADMINS

# --- the students' servers -------------------------------------------------------------------------------------


class _Limits:
    """rlimits, nice and thread pools for a student's server and the kernels it starts (see the docstring)."""

    def make_preexec_fn(self, name):  # noqa: D401 - JupyterHub's hook
        base = super().make_preexec_fn(name)
        mem = _size(str(self.mem_limit)) if self.mem_limit else 0
        home = self.user_home()

        def preexec():
            base()
            Path(home, ".runtime").mkdir(mode=0o700, parents=True, exist_ok=True)
            if mem:
                limit = mem + AS_HEADROOM
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
            os.nice(5)

        return preexec

    def user_env(self, env_):
        env_ = super().user_env(env_)
        home = self.user_home()
        threads = str(max(1, int(self.cpu_limit or 1)))
        env_.update({
            "PATH": f"{VENV / 'bin'}:{env_.get('PATH') or os.environ.get('PATH', '/usr/bin:/bin')}",
            "XDG_RUNTIME_DIR": str(Path(home) / ".runtime"),   # Mesa's Vulkan driver (lesson 11) wants one
            "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads,
            "NBGITPULLER_APP": "lab",
            # a kernel that crashes in C (a driver, a numpy extension) prints its Python stack into the server's
            # log, so "the kernel died" in a class comes with where
            "PYTHONFAULTHANDLER": "1",
        })
        return env_


class FolderSpawner(_Limits, SimpleLocalProcessSpawner):
    """Every student's server runs as the hub's user, in ``homes/<name>`` (its HOME and Jupyter root).

    Students' files are separate folders, not separate accounts: a student's kernel could read another's
    folder. Fine for a workshop on a machine you trust the class with; use ``system`` for anything more.
    """

    def user_home(self) -> str:
        return self.home_dir


class SystemUserSpawner(_Limits, LocalProcessSpawner):
    """One Unix account per student (created on first login), servers run as that user in its home."""

    def user_home(self) -> str:
        import pwd

        return pwd.getpwnam(self.user.name).pw_dir


if env("ASGTEACH_HUB_SPAWNER", "folders") == "system":
    c.JupyterHub.spawner_class = SystemUserSpawner
    c.LocalAuthenticator.create_system_users = True
else:
    c.JupyterHub.spawner_class = FolderSpawner
    c.SimpleLocalProcessSpawner.home_dir_template = str(HOMES / "{username}")
    if os.geteuid() == 0:   # servers run as the hub's user: Jupyter refuses root without this
        c.Spawner.args = ["--allow-root"]

c.Spawner.cmd = [str(VENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"                      # JupyterLab is the default UI (Notebook 7 at /tree)
c.Spawner.notebook_dir = "~"
c.Spawner.ip = "127.0.0.1"
c.Spawner.mem_limit = MEM_LIMIT
c.Spawner.cpu_limit = CPU_LIMIT
# 30 servers starting at once on 2 cores take a while: wait for them rather than failing the spawn
c.Spawner.start_timeout = int(env("ASGTEACH_HUB_START_TIMEOUT", "300"))
c.Spawner.http_timeout = int(env("ASGTEACH_HUB_START_TIMEOUT", "300"))
c.Spawner.args = [*(c.Spawner.args if "args" in c.Spawner else []),
    "--ServerApp.terminado_settings={'shell_command': ['/bin/bash', '-l']}",
    "--LabApp.news_url=None",
    "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
]

# --- services: the idle culler, and an admin token for scripts (the load test) ----------------------------------
c.JupyterHub.services = [
    {
        "name": "idle-culler",
        "command": [sys.executable, "-m", "jupyterhub_idle_culler",
                    f"--timeout={env('ASGTEACH_HUB_CULL_TIMEOUT', '3600')}", "--cull-every=300"],
    },
]
c.JupyterHub.load_roles = [
    {
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    },
]
if env("ASGTEACH_HUB_ADMIN_TOKEN"):
    c.JupyterHub.services.append({"name": "asgteach-admin", "api_token": env("ASGTEACH_HUB_ADMIN_TOKEN")})
    c.JupyterHub.load_roles.append({"name": "admin", "services": ["asgteach-admin"]})
