"""The sandbox a graded submission runs in: bubblewrap, with limits, from nothing but what it needs.

A submission's code is run by :mod:`asgteach.grading.probe` inside `bubblewrap
<https://github.com/containers/bubblewrap>`_ (Debian's ``bubblewrap``, the sandbox Flatpak uses), started
by :func:`command` as::

    bwrap --unshare-all --uid 65534 --gid 65534 --die-with-parent --new-session --cap-drop ALL --clearenv
          --ro-bind <Python, its packages, asgteach, /usr, /lib...>  --proc /proc --dev /dev
          --tmpfs /tmp (its scratch, cwd /tmp/work) ... -- python -m asgteach.grading.probe

What that gives the submission:

* **new namespaces** for users, PIDs, the network, IPC, UTS and cgroups: it runs as ``nobody``, sees only
  its own processes (the judge and nbgrader are not in its ``/proc``), has no network at all, and when
  the sandbox's first process ends the kernel ends every process in it (nothing it started outlives it);
* **a file system of its own**: the Python installation, its site-packages and the asgteach package,
  read-only, and a private ``/tmp`` that disappears with it. The course directory, the gradebook,
  ``source/``, other students' submissions, the answer keys and the instructor's notebooks are not in it
  at all (nothing is bound from the course, the home folders or the checkout beyond the package);
* **limits** (:class:`Limits`): CPU seconds, memory (address space), processes and threads, file size,
  open files; the judge adds wall time per request and per submission and caps what it reads back.

:func:`available` says whether bubblewrap is installed and allowed here (user namespaces enabled); graded
mode refuses to grade without it (:class:`SandboxUnavailable` names what to install), it never falls
back to running a submission unsandboxed.
"""

from __future__ import annotations

import os
import resource
import shutil
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Limits", "SandboxUnavailable", "available", "require", "command", "spawn", "visible_paths"]


class SandboxUnavailable(RuntimeError):
    """Graded mode cannot run a submission here: no bubblewrap, or no user namespaces."""


@dataclass(frozen=True)
class Limits:
    """What one submission may use. Times in seconds, sizes in bytes."""

    #: wall time for the whole submission (every cell and every check)
    time: float = 300.0
    #: wall time for one cell or one call of the check into the submission
    request_time: float = 120.0
    #: CPU seconds for the submission's processes (RLIMIT_CPU, per process)
    cpu: int = 600
    #: address space of one process (RLIMIT_AS); lavapipe and numpy need room to map, not to use
    memory: int = 8 * 1024**3
    #: processes and threads beyond those the judge's user already runs (RLIMIT_NPROC counts them all)
    processes: int = 64
    #: the largest file it may write (RLIMIT_FSIZE) and the size of its scratch folder
    file_size: int = 64 * 1024**2
    scratch: int = 256 * 1024**2
    #: open files (RLIMIT_NOFILE)
    files: int = 256
    #: the most output (bytes) kept from one cell
    output: int = 64 * 1024
    extra_env: dict = field(default_factory=dict)


def _bwrap() -> str | None:
    """bubblewrap's path: ``$ASGTEACH_BWRAP`` when set (a test points it at nothing), else ``bwrap`` on PATH."""
    given = os.environ.get("ASGTEACH_BWRAP")
    if given is not None:
        return given if os.path.isfile(given) and os.access(given, os.X_OK) else None
    return shutil.which("bwrap")


_AVAILABLE: tuple[bool, str, str] | None = None   # (ok, why, the bwrap it was for)


def available() -> tuple[bool, str]:
    """(True, "") when a bubblewrap sandbox starts here; else (False, what is wrong and what to install)."""
    global _AVAILABLE
    bwrap = _bwrap()
    if _AVAILABLE is not None and _AVAILABLE[2] == bwrap:
        return _AVAILABLE[:2]
    if bwrap is None:
        return (False, "bubblewrap is not installed: graded mode runs every submission in its sandbox. "
                       "Install it with `sudo apt-get install bubblewrap` (Debian/Ubuntu; ./scripts/setup does)")
    try:
        proc = subprocess.run([bwrap, "--unshare-all", "--uid", "65534", "--gid", "65534", "--ro-bind", "/", "/",
                               "--proc", "/proc", "--dev", "/dev", "--die-with-parent", "--", "/bin/true"],
                              capture_output=True, text=True, timeout=30)
        ok, why = proc.returncode == 0, proc.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, why = False, str(e)
    result = (True, "") if ok else (
        False, f"bubblewrap cannot start a sandbox here ({why}). It needs user namespaces: run as root, or enable "
               "them (`sysctl kernel.unprivileged_userns_clone=1` on Debian; in a container, allow them), then "
               "grade again")
    _AVAILABLE = (*result, bwrap)
    return result


def require() -> None:
    """Raise :class:`SandboxUnavailable` (with what to install) unless :func:`available`."""
    ok, why = available()
    if not ok:
        raise SandboxUnavailable("asgteach will not grade without its sandbox: " + why)


def visible_paths() -> list[Path]:
    """Everything the sandbox binds read-only: the system's libraries, Python, its packages, asgteach."""
    import asgteach

    paths = {Path(p) for p in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/alternatives",
                               "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
                               "/etc/ssl", "/etc/fonts")}
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]):
        paths.add(Path(p))
    for p in site.getsitepackages():
        paths.add(Path(p))
    package = Path(asgteach.__file__).resolve().parent
    paths.add(package)
    from .. import resources

    paths.add(resources.shaders_dir().resolve())
    executable = Path(sys.executable)
    paths.add(executable.parent)
    paths.add(executable.resolve().parent)
    out = []
    for p in sorted(paths):
        if p.exists() and not any(parent in paths and parent != p for parent in p.parents):
            out.append(p)
    return out


def command(limits: Limits, module: str = "asgteach.grading.probe") -> list[str]:
    """The bwrap command line that runs ``python -m module`` in a fresh sandbox."""
    require()
    bwrap = _bwrap()
    assert bwrap is not None
    import asgteach

    args = [bwrap, "--unshare-all", "--uid", "65534", "--gid", "65534", "--hostname", "sandbox",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv",
            # the private /tmp first: a path bound below that lies under /tmp (a checkout there) stays visible
            "--size", str(limits.scratch), "--tmpfs", "/tmp"]
    for p in visible_paths():
        args += ["--ro-bind", str(p), str(p)]
    args += ["--proc", "/proc", "--dev", "/dev",
             "--dir", "/tmp/work", "--dir", "/tmp/home", "--dir", "/tmp/run", "--chdir", "/tmp/work"]
    # the sandbox imports the very asgteach the judge runs (a checkout on PYTHONPATH, an editable install, a wheel)
    package_parent = str(Path(asgteach.__file__).resolve().parent.parent)
    env = {"HOME": "/tmp/home", "TMPDIR": "/tmp", "XDG_RUNTIME_DIR": "/tmp/run", "MPLBACKEND": "Agg",
           "MPLCONFIGDIR": "/tmp/home/mpl", "ASGTEACH_NO_PROGRESS": "1", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "LANG": "C.UTF-8", "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "ASGTEACH_SANDBOX": "1",
           "PYTHONPATH": package_parent}
    env.update(limits.extra_env)
    for k, v in env.items():
        args += ["--setenv", k, str(v)]
    args += ["--", sys.executable, "-s", "-B", "-m", module]     # no user site-packages, no bytecode written
    return args


def _user_processes() -> int:
    """How many processes and threads this user runs now (RLIMIT_NPROC counts them all)."""
    uid, count = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                st = os.stat(f"/proc/{entry}")
                if st.st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                continue
    return count


def spawn(limits: Limits) -> subprocess.Popen:
    """Start the probe in a new sandbox; its stdin and stdout are the channel (bytes), stderr a log pipe."""
    args = command(limits)
    nproc = _user_processes() + limits.processes

    def preexec() -> None:   # in the child, before bwrap starts: the limits every process inside inherits
        os.setsid()
        for which, value in ((resource.RLIMIT_CPU, limits.cpu), (resource.RLIMIT_AS, limits.memory),
                             (resource.RLIMIT_NPROC, nproc), (resource.RLIMIT_FSIZE, limits.file_size),
                             (resource.RLIMIT_NOFILE, limits.files), (resource.RLIMIT_CORE, 0)):
            resource.setrlimit(which, (value, value))

    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            close_fds=True, preexec_fn=preexec)  # noqa: PLW1509 - limits must be set in the child
