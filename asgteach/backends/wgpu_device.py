"""The GPU side of the wgpu backend: choosing an adapter, the device, shaders and pipelines.

WebGPU talks to a GPU through an *adapter* (one per driver and GPU) and a *device* (our
connection to it). asgteach only uses Vulkan adapters: that is what NVIDIA/AMD/Intel
drivers and Mesa's lavapipe (a CPU implementation of Vulkan, Debian package
``mesa-vulkan-drivers``) provide on Linux, and what CI runs its shaders on.

* ``ASGTEACH_WGPU_ADAPTER=<substring>`` picks the adapter whose name contains it
  (e.g. ``H100``, ``llvmpipe``); otherwise a discrete GPU beats an integrated one,
  which beats a CPU adapter.
* One device per process (per adapter choice) is shared by all plans, and so is the
  pipeline cache: compiling a WGSL kernel costs milliseconds (on lavapipe, much more),
  so each (op, dtype, variant) is compiled once.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..fdcapture import captured_stderr
from ..resources import shader_source, shaders_dir
from .wgpu_ffi import speed_up

__all__ = ["Gpu", "gpu", "check_available", "describe", "shaders_stamp", "NO_ADAPTER_HELP", "GPU_LOCK",
           "collector_paused"]

#: Held while a plan talks to the GPU (compile, run, bind_updates, read_params). One plan's run writes its
#: feeds into its buffers, submits, and maps its staging buffer; a second thread doing the same on
#: the same plan at the same time would map a buffer that is still mapped (wgpu panics and takes the
#: process, and a Jupyter kernel, with it). The GPU runs one submit after the other anyway, so taking
#: turns costs nothing. Re-entrant: the NaN explanation of a run reads the parameters back.
GPU_LOCK = threading.RLock()


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector paused while a plan is built (as the numpy plan does): lowering a large graph
    makes tens of thousands of small objects, none in a cycle, and the collector would rescan them again and
    again (about a fifth of a 10,000-parameter Trainer's build)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()

NO_ADAPTER_HELP = (
    "the wgpu backend needs a Vulkan adapter. On Debian/Ubuntu without a GPU, install Mesa's CPU "
    "Vulkan driver: `sudo apt-get install mesa-vulkan-drivers` (lavapipe); with a GPU, install its "
    "vendor driver (NVIDIA/AMD/Intel, which ship Vulkan). Meanwhile backend='numpy' (or 'auto') works."
)

#: threads compiling pipelines while a plan is lowered in Python (a core is left to the lowering itself)
PIPELINE_WORKERS = max(1, min(4, (os.cpu_count() or 2) - 1))

_KIND_RANK = {"DiscreteGPU": 0, "IntegratedGPU": 1, "VirtualGPU": 2, "Unknown": 3, "CPU": 4}


def _import_wgpu() -> Any:
    from . import BackendUnavailable

    try:
        import wgpu
    except ImportError as e:
        raise BackendUnavailable(f"the wgpu package is not installed ({e}); pip install 'asgteach[gpu]'") from e
    try:   # cffi's first use of each C struct parses C: ~10 ms each, ~40 of them before a first plan runs
        from wgpu.backends.wgpu_native import ffi

        speed_up(ffi)
    except ImportError:
        pass
    return wgpu


def _adapter_name(info: Any) -> str:
    return f"{info.get('device', '')} {info.get('description', '')} {info.get('vendor', '')}".strip()


def _choose_adapter(wgpu: Any) -> Any:
    from . import BackendUnavailable

    want = os.environ.get("ASGTEACH_WGPU_ADAPTER", "").strip()
    try:   # drivers print to fd 2 while they load (XDG_RUNTIME_DIR...): kept for `asgteach doctor`, not the cell
        with captured_stderr("GPU probe"):
            adapters = [a for a in wgpu.gpu.enumerate_adapters_sync() if a.info.get("backend_type") == "Vulkan"]
    except Exception as e:  # noqa: BLE001 - a broken driver install must not crash the caller
        raise BackendUnavailable(f"no WebGPU adapter could be listed ({e}); {NO_ADAPTER_HELP}") from e
    if not adapters:
        raise BackendUnavailable(f"no Vulkan adapter found; {NO_ADAPTER_HELP}")
    if want:
        chosen = [a for a in adapters if want.lower() in _adapter_name(a.info).lower()]
        if not chosen:
            names = "; ".join(_adapter_name(a.info) for a in adapters)
            raise BackendUnavailable(
                f"ASGTEACH_WGPU_ADAPTER={want!r} matches none of the Vulkan adapters here ({names}). "
                f"Unset it or pick a substring of one of those names; {NO_ADAPTER_HELP}"
            )
        adapters = chosen
    adapters.sort(key=lambda a: _KIND_RANK.get(a.info.get("adapter_type", "Unknown"), 3))
    return adapters[0]


@dataclass
class Gpu:
    """The chosen adapter and device, the limits we rely on, and the pipeline cache."""

    wgpu: Any
    adapter: Any
    device: Any
    limits: dict[str, int]
    pipelines: dict[tuple, tuple[Any, str]] = field(default_factory=dict)
    modules: dict[str, Any] = field(default_factory=dict)
    compiling: dict[tuple, Future] = field(default_factory=dict)   # (key, source) -> a prefetched pipeline
    workers: ThreadPoolExecutor | None = field(default=None, repr=False)

    @property
    def max_binding(self) -> int:
        """Largest buffer one shader may bind (lavapipe: 128 MiB)."""
        return int(self.limits["max-storage-buffer-binding-size"])

    @property
    def max_storage_buffers(self) -> int:
        """Storage buffers one fused chain may bind: up to 16 (WebGPU's default is 8)."""
        return min(16, self.batch_storage_buffers)

    @property
    def batch_storage_buffers(self) -> int:
        """Storage buffers one kernel may bind at all (asked for: up to 128): what a batch of chains shares."""
        return int(self.limits.get("max-storage-buffers-per-shader-stage", 8))

    @property
    def max_uniform_binding(self) -> int:
        return int(self.limits.get("max-uniform-buffer-binding-size", 65536))

    @property
    def uniform_align(self) -> int:
        return max(256, int(self.limits.get("min-uniform-buffer-offset-alignment", 256)))

    def pipeline(self, key: tuple, source: str, entry: str) -> Any:
        """The compute pipeline for ``key`` = (op, dtype, variant), compiled on first use.

        The source text is remembered with it, for ``plan.shader_for(node)``. A key whose
        source changed (an op unregistered and registered again with another formula) is
        compiled again. One that :meth:`prefetch` started is waited for (its error, if the
        driver refused the shader, is raised here).
        """
        hit = self.pipelines.get(key)
        if hit is None or hit[1] != source:
            pending = self.compiling.pop((key, source), None)
            pipe = pending.result() if pending is not None else self._compile(source, entry)
            hit = self.pipelines[key] = (pipe, source)
        return hit[0]

    def prefetch(self, key: tuple, source: str, entry: str) -> None:
        """Start compiling ``key``'s pipeline on a worker thread, unless it is compiled or compiling.

        A driver compiles a shader in native code that lets go of the GIL (lavapipe: LLVM,
        milliseconds each), so a plan asks for its kernels while it lowers the rest of the
        graph in Python, and the two overlap. :meth:`pipeline` collects the result.
        """
        hit = self.pipelines.get(key)
        if (hit is not None and hit[1] == source) or (key, source) in self.compiling:
            return
        if self.workers is None:
            self.workers = ThreadPoolExecutor(max_workers=PIPELINE_WORKERS, thread_name_prefix="asgteach-pipelines")
        self.compiling[(key, source)] = self.workers.submit(self._compile, source, entry)

    def _compile(self, source: str, entry: str) -> Any:
        module = self.modules.get(source)
        if module is None:
            module = self.modules[source] = self.device.create_shader_module(code=source)
        return self.device.create_compute_pipeline(
            layout=self.wgpu.AutoLayoutMode.auto, compute={"module": module, "entry_point": entry},
        )


_GPUS: dict[str, Gpu] = {}


def gpu() -> Gpu:
    """The process-wide :class:`Gpu` for the current ``ASGTEACH_WGPU_ADAPTER`` choice."""
    want = os.environ.get("ASGTEACH_WGPU_ADAPTER", "").strip()
    g = _GPUS.get(want)
    if g is None:
        wgpu = _import_wgpu()
        adapter = _choose_adapter(wgpu)
        lim = adapter.limits
        needed = {
            "max-storage-buffer-binding-size": lim["max-storage-buffer-binding-size"],
            "max-buffer-size": lim["max-buffer-size"],
            # fused chains bind up to 16 (7 inputs + an optimizer's outputs; WebGPU promises 8); a batch of
            # chains (wgpu_batch) binds each chain's buffers: up to 128
            "max-storage-buffers-per-shader-stage": min(128, lim["max-storage-buffers-per-shader-stage"]),
            "max-compute-workgroup-storage-size": lim["max-compute-workgroup-storage-size"],
            "max-compute-invocations-per-workgroup": lim["max-compute-invocations-per-workgroup"],
        }
        device = adapter.request_device_sync(required_limits=needed)
        g = _GPUS[want] = Gpu(wgpu, adapter, device, dict(device.limits))
    return g


def map_for_reading(buffer: Any, end: int) -> None:
    """Map bytes ``0..end`` of a MAP_READ buffer that the GPU wrote with a copy in a submit already made;
    waits for the GPU.

    wgpu-py's ``map_sync(READ)`` first submits an empty command buffer, for data written through a
    mapping and never submitted (wgpu-native issue 305). A plan's staging buffer is only ever written
    by the copies at the end of the run it just submitted, so it maps without that extra submit
    ("READ_NOSYNC", wgpu-py's own name for this case): one submit per run, and the run's result
    arrives about 0.1 ms sooner on lavapipe.
    """
    buffer.map_async("READ_NOSYNC", 0, end).sync_wait()


def check_available() -> None:
    """Raise BackendUnavailable (saying how to get an adapter) unless a Vulkan adapter works."""
    gpu()


def describe() -> dict[str, Any]:
    """The adapter the backend runs on: name, backend, device type, CPU flag and key limits."""
    g = gpu()
    info = g.adapter.info
    kind = info.get("adapter_type", "Unknown")
    return {
        "adapter": info.get("device", ""),
        "description": info.get("description", ""),
        "vendor": info.get("vendor", ""),
        "backend_type": info.get("backend_type", ""),
        "device_type": kind,
        "cpu_adapter": kind == "CPU",
        "note": "a CPU Vulkan driver (lavapipe): correct, but slow; timings say nothing about GPUs"
        if kind == "CPU" else "",
        "limits": {k: int(g.limits[k]) for k in (
            "max-storage-buffer-binding-size", "max-buffer-size", "max-compute-workgroup-storage-size",
            "max-compute-invocations-per-workgroup", "max-compute-workgroups-per-dimension")},
        "wgpu": g.wgpu.__version__,
    }


_TEMPLATE = re.compile(r"\{\{(\w+)\}\}")
_TEXTS: dict[str, tuple[int, str]] = {}   # family -> (file mtime, text): a plan asks hundreds of times
_DIR: list[Any] = []


def shader_text(family: str) -> str:
    """``resources.shader_source(family)``, read again only when the file changed (a compile asks for
    the same few files hundreds of times; finding the folder and reading them was ~20 % of it)."""
    if not _DIR:
        _DIR.append(shaders_dir())
    try:
        mtime = (_DIR[0] / f"{family}.wgsl").stat().st_mtime_ns
    except OSError:
        return shader_source(family)   # (its message names the known families)
    hit = _TEXTS.get(family)
    if hit is None or hit[0] != mtime:
        hit = _TEXTS[family] = (mtime, shader_source(family))
    return hit[1]


def shaders_stamp() -> tuple:
    """(file name, modification time, size) of every shader file: it changes whenever ``shader_text`` would
    read a file again, so a cache of generated WGSL keyed on it is never stale (``wgpu_plan_cache``)."""
    if not _DIR:
        _DIR.append(shaders_dir())
    try:
        with os.scandir(_DIR[0]) as it:
            return tuple(sorted((e.name, (st := e.stat()).st_mtime_ns, st.st_size) for e in it
                                if e.name.endswith(".wgsl")))
    except OSError:
        return ()


def family_source(family: str, **fill: Any) -> str:
    """WGSL for one kernel family: common.wgsl, then the family file with {{NAME}}s filled."""
    text = shader_text(family)

    def sub(m: re.Match) -> str:
        if m.group(1) not in fill:
            raise KeyError(f"shader {family}.wgsl needs a value for {{{{{m.group(1)}}}}}")
        return str(fill[m.group(1)])

    common = shader_text("common").replace("{{PARAM_VEC4S}}", str(fill.pop("PARAM_VEC4S", 16)))
    return common + "\n" + _TEMPLATE.sub(sub, text)
