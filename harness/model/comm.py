"""Communication models: how a transfer between stages on different ranks costs time.

Four models, chosen per case (``PipelineCase.comm_model``), for a pytest run
(``--comm-model``), on the command line (``show --comm-model``) and in
:func:`~harness.analysis.analytic.analyze`:

``stream`` (the default, and the harness's model before there was a choice)
    Send/receive jobs (``SEND_F``/``RECV_F``/``SEND_B``/``RECV_B``) on a comm
    stream per pair of ranks, FIFO per pair, as PyTorch's NCCL backend runs
    point-to-point operations on one communicator per pair
    (:func:`~harness.schedule.passes.add_communication`, :mod:`harness.plan`).
    Transfers to one peer queue behind each other. Runs on every backend.
    Placements (``comm_placement``, :mod:`harness.schedule.placement`):
    ``just-in-time`` (the default), ``eager``, ``deferred``.

``edge`` (the model of the zero-bubble repository's and PP-Schedule-Visualization's simulators)
    No send/receive jobs: a consumer on another rank starts no earlier than its
    producer's end plus the transfer time ``c`` (the cost model's ``SEND_F`` /
    ``SEND_B`` duration); transfers never wait for each other. This is the model
    of the zero-bubble repository's simulator (sail-sg/zero-bubble-pipeline-parallelism,
    arXiv:2401.10241 §3, ``T_comm``) and of Victarry/PP-Schedule-Visualization
    (``p2p_latency``); the zero-bubble paper's bubble tables assume it. ``sim`` and
    the analytic path only: the ``cpu`` and ``cuda`` backends move real data and refuse it.

``blocking`` (Megatron-LM's point-to-point without overlap; mindformers' simulator)
    Send/receive jobs on the ranks' **compute** streams, each lasting the transfer
    time, a send and its receive starting together (a rendezvous,
    :mod:`harness.plan.rendezvous`), placed so that nothing deadlocks
    (:mod:`harness.schedule.blocking_placement`: ``timed``, the default,
    ``mindformers``, ``megatron``, ``eager``). The model of mindformers'
    ``toolkit/pipeline_balance`` simulator (``SendBlockSim``/``RecBlockSim``), whose
    figures with communication it reproduces with placement ``mindformers``.
    ``sim`` and the analytic path only.

``free``
    Transfers cost nothing and no send/receive jobs are inserted (a schedule's own
    are dropped). A cost model that gives transfers a cost gets a note saying it is
    not charged.

The four agree when transfers are free (no send/receive jobs are then inserted).
With a transfer time ``c`` and uniform stages, ``edge`` reproduces the zero-bubble
repository's closed forms exactly (e.g. ZB-H2's span exceeds ``m(F+B+W)`` by
``(p-1)(F+B+2c-2W)``), ``stream`` is longer where transfers to one peer queue, and
``blocking`` longer still: both ranks stop computing for every transfer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.errors import ConfigError
from harness.model.overlap import group_ns as overlapped_group_ns
from harness.schedule.model import Job, JobKind, Schedule
from harness.schedule.passes import strip_communication

if TYPE_CHECKING:
    from harness.model.cost import CostModel

__all__ = [
    "COMM_MODELS",
    "COMM_MODEL_TEXT",
    "DEFAULT_COMM_MODEL",
    "MODELS_WITH_JOBS",
    "REAL_TRANSFER_BACKENDS",
    "check_backend",
    "check_comm_model",
    "check_comm_placement",
    "comm_assumptions",
    "comm_notes",
    "lower",
]


#: The communication models, in the order they are listed to users.
COMM_MODELS = ("free", "edge", "stream", "blocking")

#: The models with send/receive jobs.
MODELS_WITH_JOBS = ("stream", "blocking")

#: The model a case uses when it names none: today's, so earlier results do not change.
DEFAULT_COMM_MODEL = "stream"

#: Backends that move real data between streams: they can run ``stream`` and ``free``, not ``edge`` or ``blocking``.
REAL_TRANSFER_BACKENDS = ("cpu", "cuda", "mpi", "torch")


def check_comm_model(value: object, what: str = "comm_model") -> str:
    """``value`` as a model name (case and spaces ignored).

    Raises:
        ConfigError: not one of :data:`COMM_MODELS`; the message lists them with what each means.
    """
    name = value.strip().lower() if isinstance(value, str) else None
    if name not in COMM_MODELS:
        raise ConfigError(
            f"{what} must be one of free (transfers cost nothing), edge (a consumer on another rank starts at its "
            f"producer's end plus the transfer time, as the zero-bubble repository's simulator models it; sim and analysis "
            f"only), stream (send/receive jobs on a FIFO comm stream per pair of ranks, the default) or blocking "
            f"(send/receive jobs on the compute streams, a send meeting its receive, as Megatron-LM without overlap and "
            f"mindformers' simulator; sim and analysis only); got {value!r}"
        )
    return name


def check_comm_placement(value: object, comm_model: str | None = None, what: str = "comm_placement") -> str | None:
    """``value`` as a placement name of ``comm_model`` (case, spaces and ``_`` for ``-`` ignored);
    ``None`` is the model's default (``just-in-time`` under ``stream``, ``timed`` under ``blocking``).

    ``comm_model=None`` (a case whose model the run decides) takes the placements of both models
    with send/receive jobs and keeps ``None`` as it is; ``edge`` and ``free`` insert nothing
    and take those too.

    Raises:
        ConfigError: not a placement ``comm_model`` takes; under ``blocking``, one of ``stream``'s
            (``just-in-time``, ``deferred``: their order deadlocks when both ranks block).
    """
    from harness.schedule.blocking_placement import BLOCKING_PLACEMENTS, DEFAULT_BLOCKING_PLACEMENT
    from harness.schedule.placement import DEFAULT_PLACEMENT, PLACEMENTS, check_placement

    if value is None:
        if comm_model is None:
            return None
        return DEFAULT_BLOCKING_PLACEMENT if comm_model == "blocking" else DEFAULT_PLACEMENT
    name = value.strip().lower().replace("_", "-") if isinstance(value, str) else None
    if name == "jit":
        name = "just-in-time"
    if comm_model == "stream" or (comm_model != "blocking" and name not in BLOCKING_PLACEMENTS):
        try:
            return check_placement(value, what)
        except ConfigError as exc:
            if comm_model == "stream":
                raise
            raise ConfigError(f"{exc}; or under comm_model 'blocking' one of {', '.join(BLOCKING_PLACEMENTS)}") from None
    if name not in BLOCKING_PLACEMENTS:
        raise ConfigError(
            f"{what} under comm_model 'blocking' must be one of timed (each rank does its transfers in the order its "
            f"peers are ready for them, the default; never deadlocks), mindformers (mindformers' pipeline_balance "
            f"passes, 1F1B and interleaved 1F1B), megatron (Megatron-LM's 1F1B order) or eager (PyTorch's "
            f"_add_send_recv); got {value!r}"
            + (" (its order deadlocks when both ranks block for a transfer)" if name in PLACEMENTS else "")
        )
    return name


def check_backend(comm_model: str, backend: str) -> None:
    """Refuse ``edge`` and ``blocking`` on a backend that runs real transfers.

    Raises:
        ConfigError: ``comm_model`` is ``edge`` or ``blocking`` and ``backend`` is ``cpu``, ``cuda``, ``mpi`` or ``torch``.
    """
    if comm_model == "blocking" and backend in REAL_TRANSFER_BACKENDS:
        raise ConfigError(
            f"comm_model 'blocking' puts transfers on the compute streams with a rendezvous, which only the simulated clock "
            f"runs; the {backend} backend moves real data on comm streams: use comm_model 'stream' there, or run 'blocking' "
            "on --backend=sim"
        )
    if comm_model == "edge" and backend in REAL_TRANSFER_BACKENDS:
        raise ConfigError(
            f"comm_model 'edge' charges a transfer as a delay on the dependency, which only a simulation can do; the "
            f"{backend} backend moves real data: use comm_model 'stream' (send/receive jobs on comm streams) there, "
            "or run 'edge' on --backend=sim"
        )


def lower(
    schedule: Schedule, cost: CostModel, comm_model: str, comm: bool | None = None, placement: str | None = None
) -> Schedule:
    """The schedule that runs under ``comm_model``.

    ``stream``: send/receive jobs inserted as :func:`~harness.model.comm.wants_communication`
    says (``comm=None``: when transfers take time; ``True``: always; ``False``: never), placed
    as ``placement`` says (:mod:`harness.schedule.placement`: ``just-in-time``, the default,
    ``eager``, ``deferred``). ``blocking``: the same rule for inserting them, placed by
    :func:`~harness.schedule.blocking_placement.place_blocking` (``timed``, the default,
    ``mindformers``, ``megatron``, ``eager``; ``timed`` reads the durations of ``cost``); a
    schedule's own send/receive jobs keep their order and run blocking. The schedule returned
    names its placement in ``params["comm_placement"]``. ``edge`` and ``free``: without
    send/receive jobs (a schedule's own are dropped).

    Raises:
        ConfigError: ``comm=True`` with ``edge`` or ``free``, which have no send/receive jobs; a
            placement the model does not take; ``blocking`` with placement ``mindformers`` on a
            schedule it does not take.
        ScheduleError: ``blocking`` with placement ``timed`` on a compute-only schedule that
            deadlocks. Where a placement's order deadlocks under ``blocking``,
            :func:`~harness.plan.build.build_plan` says so.
    """
    placement = check_comm_placement(placement, comm_model)
    if comm_model == "stream":
        from harness.schedule.placement import add_send_recv

        return add_send_recv(schedule, placement or "just-in-time") if wants_communication(schedule, cost, comm) else schedule
    if comm_model == "blocking":
        from harness.schedule.blocking_placement import mark_blocking, place_blocking

        if schedule.has_comm:
            return mark_blocking(schedule)
        if not wants_communication(schedule, cost, comm):
            return schedule
        n_stages = schedule.num_stages

        def job_ns(job: Job) -> int:
            return int(cost.duration_ns(job, n_stages))

        def group_ns(jobs: tuple[Job, ...], durations: tuple[int, ...]) -> int:
            return int(overlapped_group_ns(cost, jobs, durations, n_stages))

        return place_blocking(schedule, placement or "timed", job_ns, group_ns)
    if comm:
        raise ConfigError(
            f"comm=True asks for send/receive jobs, but comm_model {comm_model!r} has none; "
            "use comm_model 'stream' or 'blocking' for send/receive jobs"
        )
    return strip_communication(schedule) if schedule.has_comm else schedule


def comm_notes(schedule: Schedule, cost: CostModel, comm_model: str, comm: bool | None = None) -> list[str]:
    """Notes for the summary and the report when the cost model's transfer cost is not charged:
    under ``free``, or under ``stream`` or ``blocking`` with ``comm=False`` and a compute-only schedule.
    ``schedule`` is the one before :func:`lower`."""
    if schedule.num_stages < 2:
        return []
    c = cost.duration_ns(Job(0, JobKind.SEND_F, 0), schedule.num_stages)
    if c <= 0:
        return []
    if comm_model == "free":
        return [f"comm_model 'free': the cost model gives a transfer {c:,} ns, which is not charged; "
                "use comm_model 'edge', 'stream' or 'blocking' to charge it"]
    if comm_model in MODELS_WITH_JOBS and comm is False and not schedule.has_comm and transfers_cost_time(schedule, cost):
        return [f"comm=False: no send/receive jobs, so the {c:,} ns the cost model gives a transfer is not charged "
                "(as comm_model 'free'); use comm_model 'edge' to charge it without send/receive jobs"]
    return []



#: How each communication model charges a transfer, for a case's assumptions (:func:`comm_assumptions`);
#: a model not listed here is named by its name alone.
COMM_MODEL_TEXT = {
    "free": "transfers cost nothing",
    "edge": "a consumer on another rank starts the transfer time after its producer ends; transfers never queue",
    "stream": "send/receive jobs on a FIFO comm stream per pair of ranks, beside the compute stream",
    "blocking": "send/receive jobs on the compute streams of both ranks, a send and its receive starting together",
}


def comm_assumptions(source: Schedule, lowered: Schedule, cost: CostModel, comm_model: str, placement: str | None) -> list[str]:
    """A sentence naming how a case's transfers are charged: its model (:data:`COMM_MODEL_TEXT`), the
    transfer time the cost model gives, and where send/receive jobs were placed when the model has
    them (the placement :func:`lower` used, ``lowered.params["comm_placement"]``, else ``placement``;
    :mod:`harness.schedule.placement`, :mod:`harness.schedule.blocking_placement`). ``source`` is the
    schedule before :func:`lower`, ``lowered`` the one that ran."""
    if source.num_stages < 2:
        return []
    c = cost.duration_ns(Job(0, JobKind.SEND_F, 0), source.num_stages)
    text = COMM_MODEL_TEXT.get(comm_model)
    head = f"comm model {comm_model!r}" + (f": {text}" if text else "")
    if comm_model == "free":
        return [head + (f" (the cost model's {c / 1e6:.4g} ms per transfer not charged)" if c > 0 else "")]
    if lowered.has_comm:
        used = lowered.params.get("comm_placement") or check_comm_placement(placement, comm_model)
        jobs = "its own send/receive jobs" if source.has_comm else f"send/receive jobs placed {used!r}"
        return [f"{head}; {jobs}, {c / 1e6:.4g} ms per transfer"]
    if comm_model in MODELS_WITH_JOBS:  # no send/receive jobs: transfers are free here
        why = "comm=False: no send/receive jobs" if c > 0 else "the cost model gives them 0 ns, so no send/receive jobs"
        return [f"comm model {comm_model!r}: transfers cost nothing ({why})"]
    return [f"{head}; {c / 1e6:.4g} ms per transfer"]


def transfers_cost_time(schedule: Schedule, cost: CostModel) -> bool:
    """Whether ``schedule`` should get send/receive jobs under ``cost``: it has none
    yet, has two stages or more, and a send between stages takes time (a positive
    ``SEND_F`` duration, from ``p2p_latency_ns`` or bandwidth and bytes).

    A case (``PipelineCase.comm=None``) and :func:`~harness.analysis.analytic.analyze`
    (``comm=None``) insert them exactly then."""
    if schedule.has_comm or schedule.num_stages < 2:
        return False
    return cost.duration_ns(Job(0, JobKind.SEND_F, 0), schedule.num_stages) > 0

def wants_communication(schedule: Schedule, cost: CostModel, comm: bool | None) -> bool:
    """Whether to insert send/receive jobs into ``schedule`` for a run or an analysis:
    ``comm=True`` when it has none yet, ``None`` exactly when :func:`transfers_cost_time`,
    ``False`` never. The one rule :class:`~harness.case.PipelineCase` and
    :func:`~harness.analysis.analytic.analyze` share."""
    if comm is None:
        return transfers_cost_time(schedule, cost)
    return comm and not schedule.has_comm
