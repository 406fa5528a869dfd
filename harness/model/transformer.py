"""A GPT-style decoder as a cost model: per-stage durations, activation and static memory, from the model's sizes.

:class:`TransformerCost` answers what :class:`~harness.model.cost.CostModel` asks
(duration, FLOPs, bytes moved) and what :mod:`harness.analysis.memory` asks (activation
bytes each job allocates or frees, static bytes per stage), for stages that
hold different layers: a stage layout in Megatron-Core's syntax
(:mod:`harness.model.layout`), explicit layer counts, or an even split.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from harness.errors import ConfigError
from harness.model.data_parallel import _data_parallel_fields, _dp_duration, _drop_zero_dp_fields
from harness.model.layout import StageLayout, parse_layout
from harness.model.overlap import _overlap_fields, _overlap_group_ns
from harness.model.recompute import RECOMPUTE, Recompute, check_recompute, modes_of, recompute_assumption, recompute_of
from harness.model.tensor_parallel import (
    activation_formula,
    activation_parts,
    check_tensor_parallel,
    layer_comm_ns,
    tensor_parallel_assumptions,
)
from harness.model.values import _MAX_DURATION_TEXT, MAX_DURATION_NS, _bandwidth, _check_transfer, _positive, _set_whole_ns, _transfer_ns
from harness.schedule.model import Job, JobKind, Schedule

__all__ = ["RECOMPUTE", "TransformerCost"]


def _layer_split_choices(num_layers: int, num_stages: int) -> str:
    base, extra = divmod(num_layers, num_stages)
    front = [base + 1] * extra + [base] * (num_stages - extra)
    back = [base] * (num_stages - extra) + [base + 1] * extra
    layout = "|".join(f"t*{n}" for n in front)
    return (f"give layers_per_stage={tuple(front)} (or {tuple(back)}, lighter first stages for the embedding), "
            f"or a layout such as {'E' + layout + 'L'!r}")


def _check_arguments(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse a misspelt or missing argument of ``cls`` (a dataclass) with a :class:`ConfigError`
    naming it, the closest field name, and the required ones."""
    import dataclasses
    import difflib

    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = [f.name for f in fields]
    for key in kwargs:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"cost model: {cls.__name__}() got an unexpected keyword argument {key!r}{hint}; "
                              f"it takes {', '.join(names)}")
    if len(args) > len(names):
        raise ConfigError(f"cost model: {cls.__name__}() takes at most {len(names)} arguments, got {len(args)}")
    required = [f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    given = set(names[: len(args)]) | set(kwargs)
    missing = [name for name in required if name not in given]
    if missing:
        raise ConfigError(f"cost model: {cls.__name__}() needs {', '.join(missing)} (required: {', '.join(required)})")


@dataclass(frozen=True)
class TransformerCost:
    """Durations and memory of a GPT-style decoder over the pipeline's stages.

    Per layer the weights hold ``2h^2 + 2h·h_kv + 2h·f`` parameters (query and
    output projections, key and value projections of ``h_kv = h·g/a`` for ``g``
    query groups of ``a`` heads, and the MLP's two matrices of the FFN size
    ``f``); with multi-head attention (``g = a``) and ``f = 4h`` that is the
    familiar ``12 h^2`` (biases and layer norms neglected). A forward of one
    micro-batch through ``L`` layers costs ``2 * params * tokens`` FLOPs, with
    ``tokens = micro_batch_size * seq_len`` (Kaplan et al., arXiv:2001.08361,
    §2.1), i.e. ``24 L h^2 t`` by default. With ``attention=True`` the score
    and context products add ``4 L s h t`` (Narayanan et al., SC'21,
    arXiv:2104.04473, §5.1, eq. 3 over its 4 passes). A full backward costs 2x
    the forward (arXiv:2104.04473 §5.1), split into ``W`` = the weight GEMMs and
    ``I`` = the rest (Qi et al., arXiv:2401.10241, Table 1). With ``vocab_size``
    the first stage holds the embedding (``V h`` parameters, no FLOPs to speak
    of) and the last the LM head (``V h`` parameters, ``2 t h V`` forward
    FLOPs; a tied embedding is a second copy there, as Megatron keeps it). A
    job's duration is ``FLOPs / (tflops * 1e12)`` seconds.

    **Tensor and sequence parallelism** (:mod:`harness.model.tensor_parallel`):
    with ``tensor_parallel_size=t`` each pipeline rank is a group of ``t`` GPUs
    and every figure here is one GPU's: FLOPs (so GEMM time), parameters,
    gradients and optimizer state are divided by ``t``, activations follow
    Korthikanti et al. (arXiv:2205.05198) Table 2, with or without
    ``sequence_parallel``, and ``tp_gbytes_per_s`` charges each layer's
    collectives (two all-reduces of ``s b h`` elements in the forward and two in
    the backward; ring cost ``2 (t-1)/t * bytes / bandwidth``) inside its F, B
    and I. ``flash_attention=True`` stores no attention scores.

    Which layers a stage holds: ``layout`` (Megatron-Core's syntax, e.g.
    ``"Et*5|t*6|t*6|t*7L"``; its ``E``/``L`` place the embedding and head),
    else ``layers_per_stage``, else ``num_layers`` split evenly. Layers that do
    not divide evenly over the stages are refused, with the choices spelt out:
    an uneven split is a modelling decision, never made silently.

    Memory (bytes, :mod:`harness.analysis.memory`): per layer and micro-batch a forward
    keeps ``s b h (34 + 5 a s / h)`` bytes of activations (Korthikanti et al.,
    arXiv:2205.05198, eq. 2 and Table 2, no tensor parallelism; it assumes multi-head
    attention and ``f = 4h``); ``recompute="selective"`` (or ``flash_attention``)
    keeps ``34 s b h``, ``"full"`` only each layer's input, ``2 s b h`` (§4-5); under
    tensor parallelism the rows of Table 2 for ``t``
    (:func:`~harness.model.tensor_parallel.activation_parts`). A full backward
    frees them; split, ``W`` frees the ``32 s b h`` its weight gradients read and
    ``I`` the rest (zero-bubble paper's memory model: F ``+(34h + 5as)``, W
    ``-32h`` per token and layer; with full recomputation ``I`` frees all). The
    last stage also keeps the logits, ``s b V`` fp32 values (4 bytes each;
    cross-entropy not fused; ``/t`` under tensor parallelism), until its backward.
    Static bytes per stage and GPU:
    parameters / ``t`` times ``bytes_per_param``, by default 18 (bf16 weights, fp32
    gradients, Adam's fp32 master weights and two moments; NVIDIA/Megatron-LM
    ``megatron/training/theoretical_memory_usage.py``; ``6 + 12/dp`` with the
    distributed optimizer over ``dp`` data-parallel ranks).

    Recomputation adds the work it redoes to each backward (``B``, or ``I`` when
    split): ``"full"`` the stage's layers' forward (with its tensor-parallel
    collectives), ``"selective"`` the attention core (``Q K^T``, softmax, the
    product with ``V``: ``4 s h`` FLOPs per token and layer, ``/t``). The attention
    products are charged there even with ``attention=False``, which leaves them
    out of F, B and I: recomputation costs what it redoes, so it never saves
    memory for free (the case's assumptions say so).
    :meth:`recompute_time_ns` gives that part of the backward's duration.

    Sends and receives move one activation, ``micro_batch_size * seq_len * h``
    elements of ``bytes_per_element`` bytes (``/t`` with sequence parallelism,
    each GPU sending its sequence shard), in ``p2p_latency_ns + bytes /
    bandwidth``.

    Args:
        hidden_size: ``h``.
        seq_len: ``s``, tokens per sequence.
        micro_batch_size: ``b``, sequences per micro-batch.
        num_layers: transformer layers of the whole model (not per stage), spread over
            the pipeline's ``p * v`` stages by ``layout``, ``layers_per_stage`` or evenly.
        tflops: sustained device throughput in TFLOP/s, i.e. 1e12 floating-point
            operations per second: what the device sustains on these GEMMs, not its
            datasheet peak (e.g. 200 for an H100 at about 20 % of its bf16 dense peak).
        attention: ``True`` adds the FLOPs of the attention products, the ``Q K^T``
            scores and the scores times ``V`` (``4 s h t`` per layer, quadratic in
            ``seq_len``; no weights, so all in ``F`` and ``I``); ``False`` (default)
            counts only the weight GEMMs, the published formulas' ``I = W`` setting.
        optimizer_ns: duration of an ``OPT`` job.
        unshard_ns, reshard_ns, reduce_grad_ns: durations (ns) of PyTorch's ``UNSHARD``,
            ``RESHARD`` and ``REDUCE_GRAD`` jobs; default 0 (as :class:`~harness.model.cost.FixedCost`).
        overlap_ns, overlap_ratio: an overlapped F&B group's time, as :class:`~harness.model.cost.FixedCost`'s
            (default ``F + B``, no overlap).
        bytes_per_element: activation element size (2 for bf16).
        p2p_latency_ns, p2p_gbytes_per_s: point-to-point link, both accepted here as in
            :class:`~harness.model.cost.FixedCost`: latency in ns, bandwidth in gigabytes (not
            gigabits) per second, i.e. bytes/ns (``p2p_gbytes_per_s=25`` for a 200 Gbit/s
            link), applied to :attr:`activation_bytes`; ``None`` means transfers cost only
            the latency. Either makes a case add send/receive jobs.
        layout: stage layout in Megatron-Core's syntax (:mod:`harness.model.layout`).
        layers_per_stage: transformer layers per stage (stage 0 first), instead of a layout.
        vocab_size: ``V``; 0 (default) leaves the embedding and LM head out.
        num_attention_heads: ``a``; default ``h // 128`` (GPT-3's head size of 128), at least 1.
        num_query_groups: ``g`` for grouped-query attention; default ``a`` (multi-head).
        ffn_hidden_size: ``f``; default ``4h``.
        bytes_per_param: static bytes per parameter (default 18, see above).
        recompute: ``"none"``, ``"selective"`` or ``"full"`` for every stage, or a list of
            them, one per stage (``p x v``, stage 0 first; :mod:`harness.model.recompute`):
            each stage's durations and activation bytes follow its own mode.
        tensor_parallel_size: ``t``, GPUs per pipeline rank splitting each layer (default 1: none).
        sequence_parallel: split the layer norms and dropouts along the sequence too (needs ``t > 1``).
        flash_attention: a fused attention kernel that stores no attention scores (the ``5 a s / h``
            term); its own re-computation inside the backward kernel is not charged apart.
        tp_gbytes_per_s: bandwidth (GB/s, i.e. bytes/ns) of each GPU's link in the tensor-parallel
            collectives (NCCL's "bus bandwidth"); ``None`` (default) charges them nothing.

    Raises:
        ConfigError: a non-positive size (or one of 2**53 or more), a size or
            layer count that is not a whole number (``8.0``), a layout that does
            not parse, an unknown ``recompute`` mode (or an empty list), query groups that do not divide
            the heads; ``sequence_parallel`` or ``tp_gbytes_per_s`` without tensor parallelism,
            heads, query groups or FFN size not divisible by ``t``, a sequence that sequence
            parallelism cannot split evenly, selective recomputation with flash attention; and, when durations are first asked for with a stage
            count: fewer layers than stages, layers that do not divide evenly
            without a layout or ``layers_per_stage``, a layout, layer list or
            ``recompute`` list for another stage count or layer count, or a job of
            :data:`~harness.model.values.MAX_DURATION_NS` or more.
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
    layout: str | None = None
    layers_per_stage: tuple[int, ...] | None = None
    vocab_size: int = 0
    num_attention_heads: int | None = None
    num_query_groups: int | None = None
    ffn_hidden_size: int | None = None
    bytes_per_param: float = 18.0
    recompute: Recompute = "none"
    unshard_ns: int = 0
    reshard_ns: int = 0
    reduce_grad_ns: int = 0
    overlap_ns: int | None = None
    overlap_ratio: float | None = None
    tensor_parallel_size: int = 1
    sequence_parallel: bool = False
    flash_attention: bool = False
    tp_gbytes_per_s: float | None = None

    def __new__(cls, *args: Any, **kwargs: Any) -> TransformerCost:
        if args or kwargs:  # (pickle and copy make the object with no arguments, then set its fields)
            _check_arguments(cls, args, kwargs)  # before the dataclass's __init__, whose TypeError names no choices
        return super().__new__(cls)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        _data_parallel_fields(self)
        _overlap_fields(self)
        for name in ("hidden_size", "seq_len", "micro_batch_size", "num_layers", "bytes_per_element"):
            _positive(name, getattr(self, name), whole=True)
            set_(self, name, int(getattr(self, name)))  # numpy.int64 -> int (describe() is JSON)
        _positive("vocab_size", self.vocab_size, allow_zero=True, whole=True)
        set_(self, "vocab_size", int(self.vocab_size))
        for name in ("num_attention_heads", "num_query_groups", "ffn_hidden_size"):
            if getattr(self, name) is not None:
                _positive(name, getattr(self, name), whole=True)
                set_(self, name, int(getattr(self, name)))
        heads = self.num_attention_heads or max(1, self.hidden_size // 128)
        if self.hidden_size % heads:
            raise ConfigError(f"cost model: num_attention_heads={heads} must divide hidden_size={self.hidden_size} "
                              "(each head is hidden_size / heads wide)")
        groups = self.num_query_groups or heads
        if heads % groups:
            raise ConfigError(f"cost model: num_query_groups={groups} must divide num_attention_heads={heads} "
                              "(each group shares one key and value head)")
        set_(self, "_heads", heads)
        set_(self, "_groups", groups)
        _positive("tflops", self.tflops)
        _positive("bytes_per_param", self.bytes_per_param, allow_zero=True)
        _set_whole_ns(self, "optimizer_ns")
        _set_whole_ns(self, "p2p_latency_ns")
        _bandwidth(self.p2p_gbytes_per_s)
        set_(self, "recompute", check_recompute(self.recompute))
        _positive("tensor_parallel_size", self.tensor_parallel_size, whole=True)
        set_(self, "tensor_parallel_size", int(self.tensor_parallel_size))
        if self.tp_gbytes_per_s is not None:
            _positive("tp_gbytes_per_s (gigabytes per second; divide Gbit/s by 8)", self.tp_gbytes_per_s)
        modes = (self.recompute,) if isinstance(self.recompute, str) else self.recompute
        check_tensor_parallel(self.tensor_parallel_size, self.sequence_parallel, self.flash_attention, heads=heads, groups=groups,
                              ffn=self.ffn_hidden_size or 4 * self.hidden_size, seq_len=self.seq_len,
                              gbytes_per_s=self.tp_gbytes_per_s, recompute_modes=modes)
        if self.layout is not None and self.layers_per_stage is not None:
            raise ConfigError("cost model: give a layout or layers_per_stage, not both")
        parsed: StageLayout | None = None
        if self.layout is not None:
            parsed = parse_layout(self.layout, num_layers=self.num_layers)
            missing = [what for what, there in (("E (the embedding, first stage)", any(parsed.embedding)),
                                                ("L (the LM head and loss, last stage)", any(parsed.head))) if not there]
            if self.vocab_size and missing:
                raise ConfigError(f"cost model: vocab_size={self.vocab_size} puts the embedding and the LM head on the end stages, "
                                  f"but the layout {self.layout!r} has no {' and no '.join(missing)}: add them "
                                  f"(e.g. 'E{parsed.to_text()}L'), or give vocab_size=0 to leave them out")
        if self.layers_per_stage is not None:
            if not isinstance(self.layers_per_stage, (list, tuple)) or not self.layers_per_stage:
                raise ConfigError(f"cost model: layers_per_stage must be a list of layer counts, one per stage, got {self.layers_per_stage!r}")
            for k, n in enumerate(self.layers_per_stage):
                _positive(f"layers_per_stage[{k}] (stage {k})", n, allow_zero=True, whole=True)
            set_(self, "layers_per_stage", tuple(int(n) for n in self.layers_per_stage))
            if sum(self.layers_per_stage) != self.num_layers:
                raise ConfigError(f"cost model: layers_per_stage {list(self.layers_per_stage)} holds {sum(self.layers_per_stage)} "
                                  f"layers, but num_layers is {self.num_layers}")
        set_(self, "_layout", parsed)
        _check_transfer(self.activation_bytes, self.p2p_latency_ns, self.p2p_gbytes_per_s)

    # -- what each stage holds --------------------------------------------------------------------

    def layers_of(self, stage: int, num_stages: int) -> int:
        """Transformer layers on ``stage`` of ``num_stages``.

        Raises:
            ConfigError: fewer layers than stages; a layout or ``layers_per_stage`` for
                another stage count; layers that do not divide evenly and no layout
                (the message gives the choices).
        """
        layout: StageLayout | None = self._layout  # type: ignore[attr-defined]
        if layout is not None:
            if layout.num_stages != num_stages:
                raise ConfigError(f"cost model: the stage layout {layout.text!r} has {layout.num_stages} stage(s), but the pipeline "
                                  f"has {num_stages} (p x v; list every virtual stage in model order)")
            return layout.layers[stage]
        if self.layers_per_stage is not None:
            if len(self.layers_per_stage) != num_stages:
                raise ConfigError(f"cost model: layers_per_stage gives {len(self.layers_per_stage)} stage(s), but the pipeline "
                                  f"has {num_stages} (p x v)")
            return self.layers_per_stage[stage]
        if self.num_layers < num_stages:
            raise ConfigError(f"cost model: {self.num_layers} layers cannot be split over {num_stages} stages")
        if self.num_layers % num_stages:
            raise ConfigError(f"cost model: {self.num_layers} layers do not divide evenly over {num_stages} stages; "
                              + _layer_split_choices(self.num_layers, num_stages))
        return self.num_layers // num_stages

    def _has_embedding(self, stage: int, num_stages: int) -> bool:
        layout: StageLayout | None = self._layout  # type: ignore[attr-defined]
        if not self.vocab_size:
            return False
        return layout.embedding[stage] if layout is not None else stage == 0

    def _has_head(self, stage: int, num_stages: int) -> bool:
        layout: StageLayout | None = self._layout  # type: ignore[attr-defined]
        if not self.vocab_size:
            return False
        return layout.head[stage] if layout is not None else stage == num_stages - 1

    @property
    def kv_hidden_size(self) -> int:
        """``h_kv = h * g / a``: the width of the key and value projections."""
        return self.hidden_size * self._groups // self._heads  # type: ignore[attr-defined, no-any-return]

    @property
    def params_per_layer(self) -> int:
        """Weight parameters of one layer: ``2h^2 + 2h h_kv + 2h f`` (``12 h^2`` by default)."""
        h = self.hidden_size
        f = self.ffn_hidden_size or 4 * h
        return 2 * h * h + 2 * h * self.kv_hidden_size + 2 * h * f

    def params_of(self, stage: int, num_stages: int) -> int:
        """Parameters ``stage`` holds: its layers, and the embedding / LM head (``V h`` each) where it has them."""
        n = self.layers_of(stage, num_stages) * self.params_per_layer
        vh = self.vocab_size * self.hidden_size
        return n + (vh if self._has_embedding(stage, num_stages) else 0) + (vh if self._has_head(stage, num_stages) else 0)

    # -- FLOPs and durations ----------------------------------------------------------------------

    def _parts(self, stage: int, num_stages: int) -> tuple[float, float, float]:
        """Forward FLOPs of ``stage`` on one GPU: weight GEMMs of its layers, attention products, LM
        head, each ``/t`` under tensor parallelism."""
        h, s, t = self.hidden_size, self.seq_len, self.tensor_parallel_size
        tokens = self.micro_batch_size * s
        layers = self.layers_of(stage, num_stages)
        weights = 2.0 * self.params_per_layer * tokens * layers / t
        attention = self._attention_core(stage, num_stages) if self.attention else 0.0
        head = 2.0 * tokens * h * self.vocab_size / t if self._has_head(stage, num_stages) else 0.0
        return weights, attention, head

    def _attention_core(self, stage: int, num_stages: int) -> float:
        """FLOPs of the attention products (``Q K^T`` and the scores times ``V``) of ``stage``'s layers
        on one GPU: ``4 s h`` per token and layer (arXiv:2104.04473 §5.1), ``/t``."""
        tokens = self.micro_batch_size * self.seq_len
        return 4.0 * self.seq_len * self.hidden_size * tokens * self.layers_of(stage, num_stages) / self.tensor_parallel_size

    def forward_flops(self, stage: int, num_stages: int) -> float:
        """FLOPs of one micro-batch's forward through ``stage``, on one GPU of its tensor-parallel group."""
        return sum(self._parts(stage, num_stages))

    def recompute_mode(self, stage: int, num_stages: int) -> str:
        """``stage``'s recomputation mode: ``recompute``, or its entry for ``stage`` when it is a list.

        Raises:
            ConfigError: a per-stage list for another stage count.
        """
        return recompute_of(self.recompute, stage, num_stages)

    def recompute_flops(self, stage: int, num_stages: int) -> float:
        """FLOPs a backward of ``stage`` spends redoing forward work (0 without recomputation): ``"full"``
        its layers' weight GEMMs and attention products, ``"selective"`` the attention products; the
        attention products are counted here even with ``attention=False`` (the class doc)."""
        mode = self.recompute_mode(stage, num_stages)
        if mode == "none":
            return 0.0
        weights, _, _ = self._parts(stage, num_stages)
        core = self._attention_core(stage, num_stages)
        return weights + core if mode == "full" else core

    def flops(self, job: Job, num_stages: int) -> float:
        """FLOPs of ``job`` on one GPU: F as :meth:`forward_flops`, B twice that. Split, W is the
        weight-gradient GEMMs (those of the layers and of the LM head) and I the rest:
        attention has no weights, so its backward is all input gradient
        (Qi et al., arXiv:2401.10241, Table 1). Recomputation adds
        :meth:`recompute_flops` to B, or to I when split."""
        kind = job.kind
        if kind.is_comm or kind is JobKind.OPT or kind.is_data_parallel:
            return 0.0
        weights, attention, head = self._parts(job.stage, num_stages)
        if kind is JobKind.F:
            return weights + attention + head
        if kind is JobKind.W:
            return weights + head
        extra = self.recompute_flops(job.stage, num_stages)
        if kind is JobKind.B:
            return 2.0 * (weights + attention + head) + extra
        return weights + 2.0 * attention + head + extra  # I

    @property
    def activation_bytes(self) -> int:
        """Bytes of one activation (or its gradient) between stages, per GPU: ``s b h`` elements, ``/t``
        with sequence parallelism (each GPU holds and sends its sequence shard)."""
        full = self.micro_batch_size * self.seq_len * self.hidden_size * self.bytes_per_element
        return full // self.tensor_parallel_size if self.sequence_parallel else full

    def tensor_parallel_ns(self, job: Job, num_stages: int) -> float:
        """The part of ``job``'s duration (ns, unrounded) spent in tensor-parallel collectives: per layer
        of its stage, :func:`~harness.model.tensor_parallel.layer_comm_ns` in F, in B and in I (and once
        more in a backward that fully recomputes its forward); 0 in W, at ``t = 1`` or without
        ``tp_gbytes_per_s``."""
        if job.kind not in (JobKind.F, JobKind.B, JobKind.I) or self.tp_gbytes_per_s is None:
            return 0.0
        output = self.micro_batch_size * self.seq_len * self.hidden_size * self.bytes_per_element
        per_layer = layer_comm_ns(output, self.tensor_parallel_size, self.tp_gbytes_per_s)
        passes = 1 if job.kind is JobKind.F else 1 + (self.recompute_mode(job.stage, num_stages) == "full")
        return passes * per_layer * self.layers_of(job.stage, num_stages)

    def _ns(self, flops: float, job: Job, comm_ns: float = 0.0) -> int:
        ns = flops / (self.tflops * 1e3) + comm_ns  # 1 TFLOP/s = 1e3 FLOP/ns
        if ns >= MAX_DURATION_NS:  # a float, so inf too: checked before round() could overflow
            raise ConfigError(
                f"cost model: a {job.kind.name} job of stage {job.stage} ({flops:.3g} FLOPs at {self.tflops!r} TFLOP/s) "
                f"would last {ns:.3g} ns; jobs must last below {MAX_DURATION_NS} ns ({_MAX_DURATION_TEXT}): check the model's sizes and tflops"
            )
        return round(ns)

    def duration_ns(self, job: Job, num_stages: int) -> int:
        if job.kind is JobKind.OPT:
            return self.optimizer_ns
        if job.kind.is_comm:
            return _transfer_ns(self.activation_bytes, self.p2p_latency_ns, self.p2p_gbytes_per_s)
        if job.kind.is_data_parallel:
            return _dp_duration(self, job)
        return max(1, self._ns(self.flops(job, num_stages), job, self.tensor_parallel_ns(job, num_stages)))

    def data_parallel_ns(self, job: Job, num_stages: int) -> int:
        """Duration (ns) of an ``UNSHARD``/``RESHARD``/``REDUCE_GRAD`` job: ``unshard_ns``, ``reshard_ns``
        or ``reduce_grad_ns`` (:data:`harness.model.cost.DATA_PARALLEL_METHOD`).

        Raises:
            ConfigError: ``job`` is of another kind.
        """
        return _dp_duration(self, job)

    def overlapped_group_ns(self, jobs: tuple[Job, ...], durations_ns: tuple[int, ...], num_stages: int) -> int:
        """Wall time (ns) of an overlapped group, as :meth:`harness.model.cost.FixedCost.overlapped_group_ns`."""
        return _overlap_group_ns(self, durations_ns)

    def recompute_time_ns(self, job: Job, num_stages: int) -> int:
        """The part of ``job``'s duration (ns) that redoes forward work (:meth:`recompute_flops`, and a
        full recomputation's tensor-parallel collectives): B, or I when the backward is split; 0 for
        other kinds and without recomputation."""
        mode = "none" if job.kind not in (JobKind.B, JobKind.I) else self.recompute_mode(job.stage, num_stages)
        if mode == "none":
            return 0
        comm = self.tensor_parallel_ns(Job(job.stage, JobKind.F, job.microbatch), num_stages) if mode == "full" else 0.0
        return min(self.duration_ns(job, num_stages), self._ns(self.recompute_flops(job.stage, num_stages), job, comm))

    def nbytes(self, job: Job, num_stages: int) -> int:
        return self.activation_bytes if job.kind.is_comm else 0

    # -- memory -----------------------------------------------------------------------------------

    def models_memory(self) -> bool:
        return True

    def _activation_parts(self, stage: int, num_stages: int) -> tuple[int, int, int]:
        """Bytes a forward of ``stage`` keeps on one GPU: ``(freed by W, freed by I, logits)``."""
        s, b = self.seq_len, self.micro_batch_size
        t = self.tensor_parallel_size
        layers = self.layers_of(stage, num_stages)
        kept, by_i = activation_parts(s, b, self.hidden_size, self._heads, t, self.sequence_parallel,  # type: ignore[attr-defined]
                                      self.flash_attention, self.recompute_mode(stage, num_stages))
        logits = 4 * s * b * self.vocab_size // t if self._has_head(stage, num_stages) else 0
        return layers * (kept - by_i), layers * by_i, logits

    def layer_activation_bytes(self, stage: int, num_stages: int) -> int:
        """Bytes one layer of ``stage`` keeps per micro-batch on one GPU (Korthikanti et al. Table 2 for
        this setting; :func:`~harness.model.tensor_parallel.activation_parts`)."""
        return activation_parts(self.seq_len, self.micro_batch_size, self.hidden_size, self._heads,  # type: ignore[attr-defined]
                                self.tensor_parallel_size, self.sequence_parallel, self.flash_attention,
                                self.recompute_mode(stage, num_stages))[0]

    def memory_bytes(self, job: Job, num_stages: int) -> int:
        """Signed activation bytes ``job`` allocates (F) or frees (B, I, W) on its rank (see the class doc)."""
        if job.kind not in (JobKind.F, JobKind.B, JobKind.I, JobKind.W):
            return 0
        by_w, by_i, logits = self._activation_parts(job.stage, num_stages)
        return {JobKind.F: by_w + by_i + logits, JobKind.B: -(by_w + by_i + logits),
                JobKind.I: -(by_i + logits), JobKind.W: -by_w}[job.kind]

    def static_bytes(self, stage: int, num_stages: int) -> int:
        """Parameters, gradients and optimizer state of ``stage`` on one GPU: ``params / t * bytes_per_param`` bytes."""
        return round(self.params_of(stage, num_stages) * self.bytes_per_param / self.tensor_parallel_size)

    def is_uniform(self, num_stages: int) -> bool:
        try:
            even = len({self.layers_of(k, num_stages) for k in range(num_stages)}) == 1
        except ConfigError:
            return False
        free = self.p2p_latency_ns == 0 and not self.p2p_gbytes_per_s
        same = isinstance(self.recompute, str) or len(set(self.recompute)) == 1
        return even and free and same and not self.vocab_size

    def assumptions(self, schedule: Schedule) -> list[str]:
        """Short sentences naming each modelling assumption that moves the figures of ``schedule`` under
        this model (:func:`harness.model.cost.cost_assumptions`): the tensor-parallel setting and its
        collectives, whether attention FLOPs count, the activation formula, the static bytes, the
        recomputation and its cost, and per-chunk durations where a rank holds several chunks.

        Raises:
            ConfigError: a layout, layer list or ``recompute`` list for another stage count.
        """
        n, v = schedule.num_stages, schedule.chunks_per_rank
        t, sp = self.tensor_parallel_size, self.sequence_parallel
        output = self.micro_batch_size * self.seq_len * self.hidden_size * self.bytes_per_element
        out = tensor_parallel_assumptions(t, sp, self.tp_gbytes_per_s, layer_comm_ns(output, t, self.tp_gbytes_per_s))
        out.append("attention products counted: 4 s h FLOPs per token and layer in F, twice that in the backward (attention=True)"
                   if self.attention else
                   "attention products not counted (attention=False): F, B, I and W time the weight GEMMs only, the published "
                   "formulas' I = W setting")
        modes = modes_of(self.recompute, n)
        formulas = sorted({activation_formula(t, sp, self.flash_attention, mode) for mode in modes})
        out.append("activations per layer and micro-batch: " + " or ".join(formulas) + " bytes"
                   + (", flash attention storing no attention scores" if self.flash_attention else "")
                   + " (Korthikanti et al. 2022, Table 2; multi-head attention and an MLP of 4h assumed)")
        out.append(self._static_assumption())
        backward = JobKind.I if any(job.kind is JobKind.I for _, _, job in schedule.jobs()) else JobKind.B
        first = {modes.index(mode) for mode in set(modes) - {"none"}}
        out.append(recompute_assumption(modes, self.attention, {k: self.recompute_time_ns(Job(k, backward, 0), n) for k in first}))
        if v > 1:
            layers = [self.layers_of(k, n) for k in range(n)]
            split = f"{layers[0]} on each" if len(set(layers)) == 1 else f"{min(layers)} to {max(layers)} per stage"
            out.append(f"per-chunk durations: the {self.num_layers} layers are split over p x v = {n} stages ({split}), so each "
                       f"job is one chunk's and a rank runs v={v} chunks per micro-batch")
        return out

    def _static_assumption(self) -> str:
        """The sentence naming what the static bytes and the logits assume (class doc)."""
        bpp = self.bytes_per_param
        dp = 12 / (bpp - 6) if bpp > 6 else 0.0
        why = (" (bf16 weights, fp32 gradients, Adam's fp32 master weights and two moments; Megatron-LM "
               "theoretical_memory_usage.py)" if float(bpp) == 18.0 else
               f" (the distributed optimizer over {round(dp)} data-parallel ranks: 6 + 12/{round(dp)}; 18 without it)"
               if dp > 1 and abs(dp - round(dp)) < 1e-9 else
               " (as given: 18 is bf16 weights with fp32 gradients and Adam state, 6 + 12/dp the distributed optimizer over "
               "dp data-parallel ranks)")
        t = self.tensor_parallel_size
        share = f" / TP={t}" if t > 1 else ""
        logits = ("; the last stage keeps its s b V logits in fp32 until its backward" if self.vocab_size > 0 else "")
        return (f"static memory: parameters{share} x {bpp:g} bytes{why}, the MLP as two matrices of h x f (2 h f "
                f"parameters per layer, not a gated MLP's 3 h f){logits}; nothing for the framework's own memory "
                "(CUDA context, allocator caching)")

    def describe(self) -> dict[str, Any]:
        d = {"model": "transformer", **asdict(self)}
        d["num_attention_heads"] = self._heads  # type: ignore[attr-defined]
        d["num_query_groups"] = self._groups  # type: ignore[attr-defined]
        d["ffn_hidden_size"] = self.ffn_hidden_size or 4 * self.hidden_size
        for name in ("layers_per_stage", "recompute"):
            if isinstance(d[name], tuple):
                d[name] = list(d[name])
        for name, default in (("tensor_parallel_size", 1), ("sequence_parallel", False), ("flash_attention", False),
                              ("tp_gbytes_per_s", None)):
            if d[name] == default and type(d[name]) is type(default):  # at their defaults: results as before they existed
                d.pop(name)
        return _drop_zero_dp_fields(d)
