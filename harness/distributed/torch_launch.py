"""How the ranks of a ``torch`` backend run start: under torchrun, or through torch's elastic launcher.

Under ``torchrun --nproc-per-node=P`` (or ``python -m torch.distributed.run``) every process is one
pipeline rank and runs its part of each case itself (:func:`in_torchrun`). Started without
torchrun (a plain ``pytest`` or ``python -m harness run``), :func:`launch` starts the ``P``
processes of one case through ``torch.distributed.launcher.api.elastic_launch``, which is what
torchrun runs, with the settings of ``torchrun --standalone``: a c10d rendezvous on
``localhost:0``, so the store binds a port the OS picks free and no port is guessed (none can be
taken between choosing and binding it); no restarts; the workers spawned. Each case pays that
start-up (``import torch`` in every process, the rendezvous: 5-20 s on a loaded 2-core machine);
there is no worker pool. Rank 0's return value comes back to the caller.

A failed worker: the elastic agent stops the others (SIGTERM, then SIGKILL) and raises
``ChildFailedError``; :func:`launch` turns it into an :class:`~harness.errors.ExecutionError`
naming the first failed rank and its error (the message the rank wrote into the launch's error
folder, else its exit code or signal). Torch missing is a
:class:`~harness.errors.BackendUnavailable` with the install command (:func:`require_torch`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from harness.errors import BackendUnavailable, ConfigError, ExecutionError

__all__ = ["INSTALL_HINT", "TORCH_VERSION", "in_torchrun", "launch", "require_torch", "torchrun_command", "torchrun_world",
           "write_rank_error"]

#: The torch release the backend is written against: the runtime's private names it uses are that
#: release's (``_PipelineScheduleRuntime``, ``_prepare_schedule_with_comms``, ``record_function`` and
#: ``_wait_batch_p2p`` as module globals of ``torch.distributed.pipelining.schedules``).
TORCH_VERSION = "2.13.0"
#: What to run where torch is missing: the CPU build first (a CUDA build is several GB), then the extra.
INSTALL_HINT = f"pip install torch=={TORCH_VERSION} (the CPU build), then pip install -e '.[torch]'"
#: The variable through which :func:`launch` gives each worker its error file's folder.
ERROR_DIR_ENV = "HARNESS_TORCH_ERROR_DIR"


def require_torch() -> str:
    """The installed torch version, where ``torch.distributed.pipelining`` is usable.

    Raises:
        BackendUnavailable: torch is missing, has no ``torch.distributed`` or no pipelining runtime
            (the message gives the install command).
    """
    try:
        import torch
        import torch.distributed as dist
        from torch.distributed.pipelining import schedules
    except ImportError as exc:
        raise BackendUnavailable(f"the torch backend needs PyTorch with torch.distributed.pipelining ({exc}); install "
                                 f"it with: {INSTALL_HINT}") from None
    if not dist.is_available():
        raise BackendUnavailable(f"this PyTorch build ({torch.__version__}) has no torch.distributed; install one with: {INSTALL_HINT}")
    if not hasattr(schedules, "_PipelineScheduleRuntime"):
        raise BackendUnavailable(f"PyTorch {torch.__version__} has no _PipelineScheduleRuntime (torch.distributed.pipelining); "
                                 f"the torch backend is written against torch {TORCH_VERSION}: {INSTALL_HINT}")
    return str(torch.__version__)


def in_torchrun(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process is a rank started by torchrun (or another elastic agent): ``TORCHELASTIC_RUN_ID``,
    or ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` all set."""
    env = os.environ if environ is None else environ
    return "TORCHELASTIC_RUN_ID" in env or all(k in env for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def torchrun_world(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """``(RANK, WORLD_SIZE)`` as torchrun gives them to this process; ``(0, 1)`` outside torchrun.

    Raises:
        ConfigError: ``RANK`` or ``WORLD_SIZE`` is not a whole number.
    """
    env = os.environ if environ is None else environ
    if not in_torchrun(env):
        return 0, 1
    try:
        return int(env.get("RANK", "0")), int(env.get("WORLD_SIZE", "1"))
    except ValueError:
        raise ConfigError(f"RANK={env.get('RANK')!r} WORLD_SIZE={env.get('WORLD_SIZE')!r}: not whole numbers; "
                          "was this process started by torchrun?") from None


def torchrun_command(p: int, argv: list[str] | None = None) -> str:
    """The exact command that runs this process's command line as ``p`` ranks under torchrun, e.g.
    ``torchrun --standalone --nproc-per-node=4 -m harness run 1F1B -p 4 -m 8 --backend torch``
    (``-m pytest ...`` for a pytest run)."""
    args = list(sys.argv if argv is None else argv)
    path = args[0].replace(os.sep, "/") if args else ""
    prog = os.path.basename(path)
    rest = args[1:]
    if path.endswith(("pytest/__main__.py", "_pytest/__main__.py")) or prog in ("pytest", "py.test"):
        head = ["-m", "pytest"]
    elif path.endswith("harness/__main__.py") or prog in ("harness", "pipeline-harness") or not path:
        head = ["-m", "harness"]
    else:
        head = [args[0]]
    return shlex.join(["torchrun", "--standalone", f"--nproc-per-node={p}", *head, *rest])


def write_rank_error(rank: int, exc: BaseException) -> None:
    """In a worker started by :func:`launch`: write this rank's error where the launcher reads it
    (the first line is the time, so the launcher can tell which rank failed first)."""
    folder = os.environ.get(ERROR_DIR_ENV)
    if not folder:
        return
    text = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ExecutionError) else str(exc)
    try:
        with open(os.path.join(folder, f"rank{rank}.txt"), "w", encoding="utf-8") as f:
            f.write(f"{time.time_ns()}\n{text}\n{traceback.format_exc()}")
    except OSError:  # the folder went with the launcher: nothing more to tell
        pass


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def launch(entry: Callable[[Any], Any], cfg: Any, p: int, *, rdzv_timeout_s: float = 300.0, port: int | None = None,
           what: str = "the case") -> Any:
    """Run ``entry(cfg)`` on ``p`` spawned ranks (module doc) and return rank 0's return value.

    Args:
        entry: a module-level function (it is pickled by reference to the spawned workers).
        cfg: its argument (pickled to every worker).
        p: the number of ranks.
        rdzv_timeout_s: how long the ranks may take to meet (s); the run's own waits are bounded by
            the process group's timeout.
        port: the rendezvous port on ``localhost``; ``None`` (default) lets the OS pick a free one.
        what: names the run in messages.

    Raises:
        ConfigError: ``port`` is taken.
        ExecutionError: the agent could not start the ranks, or a rank failed (names the first one and its
            error; the message ends with the torchrun command that runs the same thing by hand).
    """
    from torch.distributed.elastic.multiprocessing import DefaultLogsSpecs, Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    if port is not None and not _port_free(port):
        raise ConfigError(f"{what}: port {port} on localhost is taken (another process listens there): leave master_port "
                          "out, so that the OS picks a free port for the ranks' rendezvous")
    logs = tempfile.mkdtemp(prefix="harness-torch-logs-")
    errors = tempfile.mkdtemp(prefix="harness-torch-errors-")
    config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=p, run_id=str(uuid.uuid4()), rdzv_backend="c10d",
                          rdzv_endpoint=f"localhost:{port or 0}", rdzv_configs={"timeout": int(rdzv_timeout_s)},
                          max_restarts=0, monitor_interval=0.1, start_method="spawn",
                          logs_specs=DefaultLogsSpecs(log_dir=logs, redirects=Std.ALL))
    saved = os.environ.get(ERROR_DIR_ENV)
    os.environ[ERROR_DIR_ENV] = errors  # the spawned workers inherit it
    try:
        results = elastic_launch(config, entry)(cfg)
    except ChildFailedError as exc:
        raise ExecutionError(f"torch: {_describe(exc, errors)}") from None
    except Exception as exc:
        raise ExecutionError(f"torch: the elastic launcher could not run {what} on {p} ranks: {type(exc).__name__}: {exc}; "
                             f"the same by hand: {torchrun_command(p)}") from exc
    finally:
        if saved is None:
            os.environ.pop(ERROR_DIR_ENV, None)
        else:
            os.environ[ERROR_DIR_ENV] = saved
        shutil.rmtree(logs, ignore_errors=True)
        shutil.rmtree(errors, ignore_errors=True)
    return results.get(0)


def _signal_name(exitcode: int) -> str:
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return f"signal {-exitcode}"


def _describe(exc: Any, errors: str) -> str:
    """The first failure of a launch: the rank whose own error was written first, else the rank the agent
    saw fail first, with its error, or its exit code or signal."""
    rank, failure = exc.get_first_failure()
    written: list[tuple[int, int, str]] = []  # (time, rank, first line)
    for name in os.listdir(errors):
        if name.startswith("rank") and name.endswith(".txt"):
            try:
                with open(os.path.join(errors, name), encoding="utf-8") as f:
                    stamp, _, rest = f.read().partition("\n")
                written.append((int(stamp), int(name[4:-4]), rest.splitlines()[0] if rest else ""))
            except (OSError, ValueError):
                continue
    written.sort()
    killed = failure.exitcode is not None and failure.exitcode < 0
    if killed and rank not in {r for _, r, _ in written}:  # it died by a signal with no error of its own: it was lost
        # the survivor's own error says the rank stopped answering (died?): known here, so said once
        said = written[0][2].removeprefix("torch: ").removeprefix(f"rank {rank} stopped answering (died?): ") if written else ""
        then = f"; then {said}" if said else ""
        return f"rank {rank} died ({_signal_name(failure.exitcode)}) without an error of its own{then}"
    if written:
        _, first, message = written[0]
        message = message.removeprefix("torch: ")  # the caller says "torch: " once
        return message if message.startswith(f"rank {first}") else f"rank {first} failed: {message}"
    what = None
    try:
        msg = failure.message
        if isinstance(msg, dict):
            text = msg.get("message") or ""
            what = text.strip().splitlines()[0] if text.strip() else None
        elif msg:
            what = str(msg).strip().splitlines()[-1]
    except Exception:
        what = None
    how = f"was killed by {_signal_name(failure.exitcode)}" if killed else f"exited with code {failure.exitcode}"
    return f"rank {rank} {how}" + (f": {what}" if what else "")
