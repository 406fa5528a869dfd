"""The cuda backend's handles: what :class:`~harness.run.device.cuda.CudaDevice` keeps per GPU, stream, event and thread.

- :class:`_Gpu`: one GPU in use - its primary context, the loaded ``kernels.cu`` module
  and prepared kernels, the internal ``aux`` stream, buffers, peers, and its mark of the
  latest cross-GPU clock alignment (:mod:`harness.run.device.cuda_clock`);
- :class:`_Stream`: a harness stream, a PyCUDA stream on one GPU plus the label of its
  last launch (for error messages and enqueue timing);
- :class:`_Event`: a harness event, one PyCUDA event per GPU it is recorded on, created
  lazily (CUDA records an event only on a stream of its own context);
- :class:`_Tls` and :class:`_Scope`: the context a thread holds pushed, and a block that
  pushes a GPU's context unless the thread already holds it (see "Contexts" in
  :mod:`harness.run.device.cuda`: every push is matched by a pop).

Plain state, no PyCUDA import: the device creates the PyCUDA objects these hold.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol


class _Gpu:
    """Per-GPU state: primary context, module, internal streams, buffers."""

    def __init__(self, index: int, ordinal: int, dev: Any, ctx: Any) -> None:
        self.index = index
        self.ordinal = ordinal
        self.dev = dev
        self.ctx = ctx
        self.module: Any = None
        self.spin: Any = None
        self.gemm: Any = None
        self.copy: Any = None
        self.timer_step: Any = None
        self.aux: Any = None  # internal stream: calibration, flush, anchors
        self.info: dict[str, Any] = {}
        self.spin_overhead_ns = 0
        self.copy_grid = 1
        self.copy_src: Any = None
        self.copy_dst: Any = None
        self.copy_bytes = 0
        self.gemm_bufs: dict[int, tuple[Any, Any, Any]] = {}
        self.flush_buf: Any = None
        self.flush_bytes = 0
        self.staging: Any = None  # pinned host buffer for host-staged copies
        self.graveyard: list[Any] = []  # replaced buffers, freed at close
        self.peers: set[int] = set()  # indices of GPUs whose memory it may access
        # Cross-GPU alignment (latest synchronize point): mark event and its
        # offset in ns from the base GPU's mark.
        self.mark: Any = None
        self.mark_offset_ns = 0


class _Stream:
    __slots__ = ("gpu", "handle", "last_label", "name", "pending")

    def __init__(self, name: str, gpu: _Gpu, handle: Any) -> None:
        self.name = name
        self.gpu = gpu
        self.handle = handle
        self.last_label = ""
        self.pending = False  # a launch waits for its end record (enqueue timing)


class _Event:
    """A harness event: one PyCUDA event per GPU it is recorded on, created lazily."""

    __slots__ = ("latest", "per_gpu", "timing")

    def __init__(self, timing: bool) -> None:
        self.timing = timing
        self.per_gpu: dict[int, Any] = {}
        self.latest: tuple[_Gpu, Any] | None = None


class _Tls(threading.local):
    def __init__(self) -> None:
        self.held: _Gpu | None = None  # our context held pushed on this thread


class _ContextOwner(Protocol):
    """What a :class:`_Scope` needs of the device (:class:`~harness.run.device.cuda.CudaDevice`): the
    per-thread record of the context it holds pushed, and the PyCUDA driver module."""

    _tls: _Tls
    _drv: Any


class _Scope:
    """Push ``gpu``'s context for a block unless this thread already holds it; pop what was pushed."""

    __slots__ = ("device", "gpu", "pushed")

    def __init__(self, device: _ContextOwner, gpu: _Gpu) -> None:
        self.device = device
        self.gpu = gpu
        self.pushed = False

    def __enter__(self) -> _Scope:
        if self.device._tls.held is not self.gpu:
            self.gpu.ctx.push()
            self.pushed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pushed:
            self.device._drv.Context.pop()
