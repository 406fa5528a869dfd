"""Cost models: how long each job takes (ns), how much it computes (FLOPs) and
how many bytes a send/receive moves.

Two models ship:

* :class:`FixedCost` - fixed durations per job kind (``F=1 ms, B=2 ms``), the
  setting of the published bubble formulas;
* :class:`TransformerCost` - durations derived from a GPT-style transformer
  description and a device's sustained FLOP/s.

A cost model answers per job and knows the stage count, so stages may differ
(e.g. layers that do not divide evenly).
"""

from __future__ import annotations

import difflib
import math
import numbers
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from harness.errors import ConfigError
from harness.schedule.model import Job, JobKind

__all__ = ["MAX_DURATION_NS", "CheckedCost", "CostModel", "FixedCost", "TransformerCost"]

_NS_PER_MS = 1_000_000

#: Every duration a cost model gives is below this (2**53 ns, about 104 days): times
#: stay exact in float64 and a step's sums far below int64's range; longer is a unit mistake.
MAX_DURATION_NS = 1 << 53
_MAX_DURATION_TEXT = "2**53 ns, about 104 days"


@runtime_checkable
class CostModel(Protocol):
    """What the executor and simulator need to know about a job's cost.

    Durations, FLOPs and bytes may differ by stage and job kind but not by
    micro-batch: the analytic timeline (:mod:`harness.schedule.analytics`) and
    the executor ask once per ``(stage, kind)``.
    """

    def duration_ns(self, job: Job, num_stages: int) -> int:
        """Duration of ``job`` in ns on a pipeline of ``num_stages`` stages."""

    def flops(self, job: Job, num_stages: int) -> float:
        """Floating-point operations of ``job`` (0 for communication)."""

    def nbytes(self, job: Job, num_stages: int) -> int:
        """Bytes a send/receive job moves (0 for compute)."""

    def is_uniform(self, num_stages: int) -> bool:
        """Whether every stage has the same F/B/I/W durations and transfers are free,
        the setting in which the published closed forms hold."""

    def describe(self) -> dict[str, Any]:
        """Parameters for results and reports."""


def _shown(value: object) -> str:
    """``repr(value)``, shortened for a huge integer (``10**400`` would fill the screen)."""
    text = repr(value)
    return f"{text[:8]}... ({len(text)} digits)" if isinstance(value, int) and len(text) > 24 else text


def _positive(name: str, value: float, allow_zero: bool = False, duration: bool = False, whole: bool = False) -> None:
    """A number >= 0 (> 0 unless ``allow_zero``), finite and below 2**53; a ``duration`` (ns) below
    :data:`MAX_DURATION_NS`, said so in those words; a ``whole`` number (a count) an integer, not ``8.0``."""
    if whole:  # any integer type (numpy.int64 from a sweep), not bool; the constructors make it an int
        if not isinstance(value, numbers.Integral) or isinstance(value, bool):
            raise ConfigError(f"cost model: {name} must be a whole number, got {value!r}")
    elif not isinstance(value, (int, float)) or isinstance(value, bool) or (isinstance(value, float) and math.isnan(value)):
        raise ConfigError(f"cost model: {name} must be a number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"cost model: {name} must be {'non-negative' if allow_zero else 'positive'}, got {value!r}")
    if value >= MAX_DURATION_NS:  # also inf; compared exactly, so 10**400 is no OverflowError
        if duration:
            raise ConfigError(f"cost model: {name} must be below {MAX_DURATION_NS} ns ({_MAX_DURATION_TEXT}), got {_shown(value)}")
        raise ConfigError(f"cost model: {name} must be below 2**53 = {MAX_DURATION_NS}, got {_shown(value)}")


def _transfer_ns(nbytes: int, latency_ns: int, gbytes_per_s: float | None) -> int:
    if gbytes_per_s is None:
        return latency_ns
    return latency_ns + round(nbytes / gbytes_per_s)  # GB/s == bytes/ns


def _check_transfer(nbytes: int, latency_ns: int, gbytes_per_s: float | None) -> None:
    """A send/receive (latency + bytes / bandwidth) lasts less than :data:`MAX_DURATION_NS`."""
    if gbytes_per_s is None:
        return
    ns = latency_ns + nbytes / gbytes_per_s  # a float: inf rather than an OverflowError from round()
    if ns >= MAX_DURATION_NS:
        raise ConfigError(
            f"cost model: a send/receive of {nbytes} bytes at {gbytes_per_s!r} GB/s with {latency_ns} ns latency would last "
            f"{ns:.3g} ns; transfers must last below {MAX_DURATION_NS} ns ({_MAX_DURATION_TEXT})"
        )


def _bandwidth(value: float | None) -> None:
    if value is not None:
        _positive("p2p_gbytes_per_s (gigabytes per second; divide Gbit/s by 8)", value)


#: FixedCost fields that :meth:`FixedCost.ms` takes in milliseconds under another name.
_MS_NAMES = {"forward_ns": "F", "backward_ns": "B", "backward_input_ns": "I", "backward_weight_ns": "W"}
#: The fields :meth:`FixedCost.ms` passes through as they are.
_MS_PASSED = ("optimizer_ns", "p2p_latency_ns", "p2p_gbytes_per_s", "activation_bytes")


def _check_ms_keywords(kw: dict[str, Any]) -> None:
    """Refuse keywords :meth:`FixedCost.ms` does not take, in its own name (the constructor would name ``__init__``)."""
    for key in kw:
        if key in _MS_PASSED:
            continue
        if key in _MS_NAMES:
            raise ConfigError(f"cost model: FixedCost.ms() takes {key} as {_MS_NAMES[key]}, in milliseconds")
        names = {name.lower(): name for name in ("F", "B", "I", "W", *_MS_PASSED)}  # f -> F
        close = difflib.get_close_matches(str(key).lower(), names, n=1)
        hint = f" (did you mean {names[close[0]]!r}?)" if close else ""
        raise ConfigError(
            f"cost model: FixedCost.ms() got an unexpected keyword argument {key!r}{hint}; "
            f"it takes F, B, I, W (ms) and {', '.join(_MS_PASSED)}"
        )


@dataclass(frozen=True)
class FixedCost:
    """Fixed durations per job kind, in ns.

    Args:
        forward_ns: ``T_F``, duration of a forward.
        backward_ns: duration of a full backward ``B``.
        backward_input_ns: ``T_B`` of the ZB paper (an ``I`` job); default half of ``B``.
        backward_weight_ns: ``T_W`` (a ``W`` job); default ``B - I``.
        optimizer_ns: duration of an ``OPT`` job.
        p2p_latency_ns, p2p_gbytes_per_s, activation_bytes: a send/receive
            takes ``latency + bytes / bandwidth``; bandwidth in gigabytes (not
            gigabits) per second, i.e. bytes/ns; ``None`` means transfers cost
            only the latency.

    Raises:
        ConfigError: negative or non-numeric values; a duration (or a
            transfer's) of :data:`MAX_DURATION_NS` (2**53 ns, about 104 days)
            or more; a non-positive bandwidth, or one without ``activation_bytes``
            (transfers would cost only the latency); ``activation_bytes`` not a whole number;
            ``backward_input_ns + backward_weight_ns != backward_ns`` when all
            three are given (a split backward is the same work as a full one).
    """

    forward_ns: int
    backward_ns: int
    backward_input_ns: int | None = None
    backward_weight_ns: int | None = None
    optimizer_ns: int = 0
    p2p_latency_ns: int = 0
    p2p_gbytes_per_s: float | None = None
    activation_bytes: int = 0

    def __post_init__(self) -> None:
        _positive("forward_ns", self.forward_ns, duration=True)
        _positive("backward_ns", self.backward_ns, duration=True)
        for name in ("backward_input_ns", "backward_weight_ns"):
            v = getattr(self, name)
            if v is not None:
                _positive(name, v, duration=True)
        for name in ("optimizer_ns", "p2p_latency_ns"):
            _positive(name, getattr(self, name), allow_zero=True, duration=True)
        _positive("activation_bytes", self.activation_bytes, allow_zero=True, whole=True)
        object.__setattr__(self, "activation_bytes", int(self.activation_bytes))
        _bandwidth(self.p2p_gbytes_per_s)
        if self.p2p_gbytes_per_s is not None and self.activation_bytes == 0:
            raise ConfigError(
                f"cost model: p2p_gbytes_per_s={self.p2p_gbytes_per_s!r} is given but activation_bytes is 0, so every "
                "transfer would cost only the latency; give activation_bytes (bytes per send), or leave out the bandwidth"
            )
        _check_transfer(self.activation_bytes, self.p2p_latency_ns, self.p2p_gbytes_per_s)
        i, w = self.backward_input_ns, self.backward_weight_ns
        if i is not None and w is not None and i + w != self.backward_ns:
            raise ConfigError(
                f"cost model: backward_input_ns + backward_weight_ns = {i} + {w} ns must equal backward_ns = {self.backward_ns} ns "
                "(a split backward does the same work as the full one); with FixedCost.ms give B=I+W"
            )
        if i is None and w is None:
            i = self.backward_ns // 2
        if i is None:
            i = self.backward_ns - (w or 0)
        if w is None:
            w = self.backward_ns - i
        if i <= 0 or w <= 0:
            raise ConfigError(
                f"cost model: the backward of {self.backward_ns} ns cannot split into I = {i} ns and W = {w} ns; "
                "give I or W below B (both must be positive)"
            )
        object.__setattr__(self, "_split", (int(i), int(w)))

    @classmethod
    def ms(cls, F: float, B: float, W: float | None = None, I: float | None = None, **kw: Any) -> FixedCost:  # noqa: N803
        """Durations in milliseconds: ``FixedCost.ms(F=1, B=2)``; ``W``/``I`` split ``B``.

        With ``I`` and ``W`` given and no ``B``, pass ``B=I+W``.

        Raises:
            ConfigError: a value that is not a finite number, a keyword it does
                not take (named as this method's), or see the class.
        """
        # Checked here, in the caller's names and unit: the constructor's checks would speak of forward_ns.
        _check_ms_keywords(kw)
        for name, value in (("F", F), ("B", B), ("W", W), ("I", I)):
            if value is None and name in ("W", "I"):  # optional; F and B are not
                continue
            if (not isinstance(value, (int, float)) or isinstance(value, bool)
                    or (isinstance(value, float) and not math.isfinite(value))):  # an int is finite: isfinite(10**400) overflows
                raise ConfigError(f"cost model: {name} must be a finite number of milliseconds, got {_shown(value)}")
            if value <= 0:
                raise ConfigError(f"cost model: {name} must be positive, got {value!r} ms")
            if value * _NS_PER_MS >= MAX_DURATION_NS:
                raise ConfigError(
                    f"cost model: {name} must be below {MAX_DURATION_NS / _NS_PER_MS:.6f} ms ({_MAX_DURATION_TEXT}), got {_shown(value)} ms"
                )
            if round(value * _NS_PER_MS) == 0:
                raise ConfigError(f"cost model: {name} must be at least 1 ns (0.000001 ms), got {value!r} ms")
        if I is not None and W is not None and round(I * _NS_PER_MS) + round(W * _NS_PER_MS) != round(B * _NS_PER_MS):
            raise ConfigError(
                f"cost model: I + W = {I!r} + {W!r} ms must equal B = {B!r} ms (a split backward does the same work as the full one)"
            )
        if (I is None) != (W is None):
            i, w = (I, B - I) if I is not None else (B - (W or 0), W or 0)
            if round(i * _NS_PER_MS) <= 0 or round(w * _NS_PER_MS) <= 0:
                raise ConfigError(
                    f"cost model: the backward of B = {B:g} ms cannot split into I = {i:g} ms and W = {w:g} ms; "
                    "give I or W below B (both must be positive)"
                )
        return cls(
            forward_ns=round(F * _NS_PER_MS),
            backward_ns=round(B * _NS_PER_MS),
            backward_input_ns=None if I is None else round(I * _NS_PER_MS),
            backward_weight_ns=None if W is None else round(W * _NS_PER_MS),
            **kw,
        )

    def duration_ns(self, job: Job, num_stages: int) -> int:
        kind = job.kind
        if kind is JobKind.F:
            return self.forward_ns
        if kind is JobKind.B:
            return self.backward_ns
        if kind is JobKind.I:
            return self._split[0]  # type: ignore[attr-defined, no-any-return]
        if kind is JobKind.W:
            return self._split[1]  # type: ignore[attr-defined, no-any-return]
        if kind is JobKind.OPT:
            return self.optimizer_ns
        return _transfer_ns(self.activation_bytes, self.p2p_latency_ns, self.p2p_gbytes_per_s)

    def flops(self, job: Job, num_stages: int) -> float:
        return 0.0

    def nbytes(self, job: Job, num_stages: int) -> int:
        return self.activation_bytes if job.kind.is_comm else 0

    def is_uniform(self, num_stages: int) -> bool:
        return self.p2p_latency_ns == 0 and (self.activation_bytes == 0 or not self.p2p_gbytes_per_s)

    def describe(self) -> dict[str, Any]:
        d = {"model": "fixed", **asdict(self)}
        d["backward_input_ns"], d["backward_weight_ns"] = self._split  # type: ignore[attr-defined]
        return d


@dataclass(frozen=True)
class TransformerCost:
    """Durations of a GPT-style decoder split evenly over the pipeline's stages.

    Per layer the weights hold ``12 h^2`` parameters (attention ``4 h^2``, MLP
    ``8 h^2``; biases and layer norms neglected). A forward of one micro-batch
    through a stage of ``L`` layers costs ``2 * params * tokens`` FLOPs, with
    ``tokens = micro_batch_size * seq_len`` (the 2N-per-token rule of Kaplan et
    al., "Scaling Laws for Neural Language Models", arXiv:2001.08361, §2.1),
    i.e. ``24 L h^2 t``. With ``attention=True`` the score and context products
    add ``4 L s h t`` (Narayanan et al., SC'21, arXiv:2104.04473, §5.1, eq. 3
    divided by its 4 passes: ``24 b s L h^2 (1 + s/(6h))``). A full backward
    costs 2x the forward (arXiv:2104.04473 §5.1), split into ``W`` = the weight
    GEMMs' ``24 L h^2 t`` and ``I`` = the rest, so without the attention term
    ``I = W`` (Qi et al., arXiv:2401.10241, Table 1). A job's duration is
    ``FLOPs / (tflops * 1e12)`` seconds. Not modelled: embedding and LM head
    (about ``2 t h V`` FLOPs on the last stage), activation recomputation.

    Sends and receives move one activation, ``micro_batch_size * seq_len * h``
    elements of ``bytes_per_element`` bytes, in ``p2p_latency_ns + bytes /
    bandwidth``.

    Args:
        hidden_size: ``h``.
        seq_len: ``s``, tokens per sequence.
        micro_batch_size: sequences per micro-batch.
        num_layers: transformer layers of the whole model (not per stage), spread
            over the pipeline's stages, ``p * v`` of them (earlier stages take
            one more layer when they do not divide evenly).
        tflops: sustained device throughput in TFLOP/s, i.e. 1e12 floating-point
            operations per second: what the device sustains on these GEMMs,
            not its datasheet peak.
        attention: ``True`` adds the FLOPs of the attention products, the
            ``Q K^T`` scores and the scores times ``V`` (``4 s h t`` per layer,
            quadratic in ``seq_len``; no weights, so all in ``F`` and ``I``);
            ``False`` (default) counts only the weight GEMMs, the published
            formulas' ``I = W`` setting.
        optimizer_ns: duration of an ``OPT`` job.
        bytes_per_element: activation element size (2 for bf16).
        p2p_latency_ns, p2p_gbytes_per_s: point-to-point link, both accepted
            here as in :class:`FixedCost`: latency in ns, bandwidth in gigabytes
            (not gigabits) per second, i.e. bytes/ns, applied to
            :attr:`activation_bytes`; ``None`` means transfers cost only the
            latency. Either makes a case add send/receive jobs.

    Raises:
        ConfigError: a non-positive size (or one of 2**53 or more), a size or
            layer count that is not a whole number (``8.0``), or fewer
            layers than stages or a job of :data:`MAX_DURATION_NS` or more
            (raised when durations are first asked for with that stage count).
    """

    hidden_size: int
    seq_len: int
    micro_batch_size: int
    num_layers: int
    tflops: float
    attention: bool = False
    optimizer_ns: int = 0
    bytes_per_element: int = 2
    p2p_latency_ns: int = 0
    p2p_gbytes_per_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("hidden_size", "seq_len", "micro_batch_size", "num_layers", "bytes_per_element"):
            _positive(name, getattr(self, name), whole=True)
            object.__setattr__(self, name, int(getattr(self, name)))  # numpy.int64 -> int (describe() is JSON)
        _positive("tflops", self.tflops)
        _positive("optimizer_ns", self.optimizer_ns, allow_zero=True, duration=True)
        _positive("p2p_latency_ns", self.p2p_latency_ns, allow_zero=True, duration=True)
        _bandwidth(self.p2p_gbytes_per_s)
        _check_transfer(self.activation_bytes, self.p2p_latency_ns, self.p2p_gbytes_per_s)

    def layers_of(self, stage: int, num_stages: int) -> int:
        """Layers on ``stage``: ``num_layers // num_stages``, plus one on the first
        ``num_layers % num_stages`` stages.

        Raises:
            ConfigError: fewer layers than stages.
        """
        if self.num_layers < num_stages:
            raise ConfigError(f"cost model: {self.num_layers} layers cannot be split over {num_stages} stages")
        base, extra = divmod(self.num_layers, num_stages)
        return base + (1 if stage < extra else 0)

    def _weight_and_attention_flops(self, stage: int, num_stages: int) -> tuple[float, float]:
        """Forward FLOPs of ``stage`` in its weight GEMMs (``24 L h^2 t``) and in
        attention scores/context (``4 L s h t``, 0 without ``attention``)."""
        h, s = self.hidden_size, self.seq_len
        tokens = self.micro_batch_size * s
        layers = self.layers_of(stage, num_stages)
        return 24.0 * h * h * tokens * layers, (4.0 * s * h * tokens * layers if self.attention else 0.0)

    def forward_flops(self, stage: int, num_stages: int) -> float:
        """FLOPs of one micro-batch's forward through ``stage``."""
        weights, attention = self._weight_and_attention_flops(stage, num_stages)
        return weights + attention

    def flops(self, job: Job, num_stages: int) -> float:
        """FLOPs of ``job``: F as :meth:`forward_flops`, B twice that. Split, W is the
        weight-gradient GEMMs (``24 L h^2 t``) and I the rest (``24 L h^2 t + 8 L s h t``):
        attention has no weights, so its backward is all input gradient
        (Qi et al., arXiv:2401.10241, Table 1)."""
        kind = job.kind
        if kind.is_comm or kind is JobKind.OPT:
            return 0.0
        weights, attention = self._weight_and_attention_flops(job.stage, num_stages)
        if kind is JobKind.F:
            return weights + attention
        if kind is JobKind.B:
            return 2.0 * (weights + attention)
        if kind is JobKind.W:
            return weights
        return weights + 2.0 * attention  # I

    @property
    def activation_bytes(self) -> int:
        """Bytes of one activation (or its gradient) between stages."""
        return self.micro_batch_size * self.seq_len * self.hidden_size * self.bytes_per_element

    def duration_ns(self, job: Job, num_stages: int) -> int:
        if job.kind is JobKind.OPT:
            return self.optimizer_ns
        if job.kind.is_comm:
            return _transfer_ns(self.activation_bytes, self.p2p_latency_ns, self.p2p_gbytes_per_s)
        ns = self.flops(job, num_stages) / (self.tflops * 1e3)  # 1 TFLOP/s = 1e3 FLOP/ns
        if ns >= MAX_DURATION_NS:  # a float, so inf too: checked before round() could overflow
            raise ConfigError(
                f"cost model: a {job.kind.name} job of stage {job.stage} ({self.flops(job, num_stages):.3g} FLOPs at {self.tflops!r} TFLOP/s) "
                f"would last {ns:.3g} ns; jobs must last below {MAX_DURATION_NS} ns ({_MAX_DURATION_TEXT}): check the model's sizes and tflops"
            )
        return max(1, round(ns))

    def nbytes(self, job: Job, num_stages: int) -> int:
        return self.activation_bytes if job.kind.is_comm else 0

    def is_uniform(self, num_stages: int) -> bool:
        even = self.num_layers % num_stages == 0
        free = self.p2p_latency_ns == 0 and not self.p2p_gbytes_per_s
        return even and free

    def describe(self) -> dict[str, Any]:
        return {"model": "transformer", **asdict(self)}


def _answer_problem(value: object, *, positive: bool = False, whole: bool = False, bounded: str = "") -> str | None:
    """Why ``value`` is no valid answer of a cost model (see :class:`CheckedCost`), or ``None``;
    ``bounded`` (what the value is, e.g. ``"durations"``) asks for a value below 2**53."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # None, a str, a complex...
        return f"it is {type(value).__name__}, not a number"
    if isinstance(value, numbers.Integral):
        number: float | int = int(value)
    else:
        number = float(value)
        if math.isnan(number):
            return "it is NaN"
        if not bounded and math.isinf(number):
            return "it is not finite"
        if whole and not number.is_integer() and math.isfinite(number):
            return "it is not a whole number"
    if number < 0:
        return "it is negative"
    if positive and number < 1:
        return "compute jobs must last at least 1 ns"
    if bounded and number >= MAX_DURATION_NS:  # inf too; exact for huge ints
        limit = f"2**53 ns ({_MAX_DURATION_TEXT.split(', ')[1]})" if bounded == "durations" else "2**53"
        return f"{bounded} must be below {limit}: a unit mistake?"
    return None


class CheckedCost:
    """A cost model whose answers are checked where they enter the harness, by the rules
    :class:`FixedCost` applies to its own values: a duration (ns) is a number, at least
    1 ns for a compute job (``F``, ``B``, ``I``, ``W``), at least 0 for ``OPT`` and
    send/receive jobs, and below :data:`MAX_DURATION_NS`; FLOPs are a finite number
    >= 0; bytes a whole number >= 0 and below 2**53.

    Every answer is returned as the executor uses it (durations and bytes as ``int``,
    FLOPs as ``float``), so a custom model's ``-5``, ``1e20``, ``NaN`` or ``None``
    stops the case before anything runs instead of failing later, far from its cause.

    Args:
        inner: the cost model to check.
        where: names the case in messages (e.g. ``"cases/x.py:12: case 'my case'"``).

    Raises:
        ConfigError (from each method): the answer breaks a rule above; names
            ``where``, the cost model's type, the job, the method and the value.
    """

    def __init__(self, inner: CostModel, where: str = "") -> None:
        self.inner = inner
        self.where = where

    def _fail(self, method: str, job: Job, value: object, problem: str, unit: str) -> ConfigError:
        prefix = f"{self.where}: " if self.where else ""
        shown = _shown(value) + (unit if isinstance(value, numbers.Real) and not isinstance(value, bool) else "")
        return ConfigError(
            f"{prefix}cost model {type(self.inner).__name__}: {method}({job}) gave {shown} for the "
            f"{job.kind.name} job of stage {job.stage}; {problem}"
        )

    def duration_ns(self, job: Job, num_stages: int) -> int:
        """The inner model's duration of ``job`` in ns, checked (see the class)."""
        value = self.inner.duration_ns(job, num_stages)
        compute = job.kind in (JobKind.F, JobKind.B, JobKind.I, JobKind.W)
        problem = _answer_problem(value, positive=compute, bounded="durations")
        if problem:
            raise self._fail("duration_ns", job, value, problem, " ns")
        return int(value)  # type: ignore[call-overload, no-any-return]

    def flops(self, job: Job, num_stages: int) -> float:
        """The inner model's FLOPs of ``job``, checked (see the class)."""
        value = self.inner.flops(job, num_stages)
        problem = _answer_problem(value)  # FLOPs of a big model pass 2**53: finite is enough
        if problem:
            raise self._fail("flops", job, value, problem, " FLOPs")
        return float(value)

    def nbytes(self, job: Job, num_stages: int) -> int:
        """The inner model's bytes for ``job``, checked (see the class)."""
        value = self.inner.nbytes(job, num_stages)
        problem = _answer_problem(value, whole=True, bounded="byte counts")
        if problem:
            raise self._fail("nbytes", job, value, problem, " bytes")
        return int(value)  # type: ignore[call-overload, no-any-return]

    def is_uniform(self, num_stages: int) -> bool:
        """The inner model's answer."""
        return bool(self.inner.is_uniform(num_stages))

    def describe(self) -> dict[str, Any]:
        """The inner model's description."""
        return self.inner.describe()
