"""Tensor and sequence parallelism, and flash attention, in a transformer layer's cost: what one
GPU of a tensor-parallel group keeps, computes and communicates.

Tensor parallelism over ``t`` GPUs (Megatron-LM; Shoeybi et al., arXiv:1909.08053, §3) splits each
layer's weight GEMMs, its attention heads and the LM head's vocabulary over the group: every GPU holds
``1/t`` of the parameters, gradients and optimizer state and does ``1/t`` of the FLOPs. Sequence
parallelism (Korthikanti et al., arXiv:2205.05198, §4.2.2) also splits the layer norms and dropouts
along the sequence, so no activation is replicated.

**Activations per layer and micro-batch** (bytes, 16-bit values and 1-byte dropout masks;
Korthikanti et al. §4.1-4.2 and Table 2, which assume multi-head attention and an MLP of ``4h``):

============================================  ====================================
no tensor parallelism                         ``s b h (34 + 5 a s / h)``
tensor parallel                               ``s b h (10 + 24/t + 5 a s / (h t))``
tensor + sequence parallel                    ``s b h (34/t + 5 a s / (h t))``
selective recomputation, or flash attention   the same without the ``5 a s / h`` term
full recomputation                            ``2 s b h`` (``/t`` with sequence parallelism)
============================================  ====================================

The ``10 s b h`` that plain tensor parallelism replicates are the two layer norms' inputs, the
attention and MLP inputs and the two dropout masks; the ``5 a s^2 b`` are the attention scores,
their softmax and its dropout mask, which flash attention (Dao et al., arXiv:2205.14135) never
stores and selective recomputation re-computes. With full recomputation only each layer's input is
kept; Table 2 gives ``2 s b h``, and with sequence parallelism the kept input is this GPU's sequence
shard, ``1/t`` of it (as Megatron-LM keeps it).

A split backward (zero-bubble paper, arXiv:2401.10241, and sail-sg/zero-bubble-pipeline-parallelism
``megatron/core/pipeline_parallel/efficiency.py``: F ``+(34h + 5as)``, W ``-32h`` per token and layer)
frees at ``I`` the attention scores and ``2 s b h`` (``/t`` with sequence parallelism), and at ``W``
the rest; at ``t = 1`` that is the paper's split exactly.

**Communication.** Each layer's forward ends its attention and its MLP with an all-reduce of the
``s b h`` output elements over the group, and its backward does two more for the input gradients
(Shoeybi et al. §3, the ``g`` and ``f`` operators); with sequence parallelism each all-reduce becomes
a reduce-scatter and an all-gather of the same tensor (Korthikanti et al. §4.2.2), the same bytes on
the wire. An all-reduce of ``n`` bytes on a ring of ``t`` GPUs moves ``2 (t-1)/t n`` bytes through each
GPU's link, a reduce-scatter or an all-gather ``(t-1)/t n`` (Thakur, Rabenseifner and Gropp, "Optimization
of Collective Communication Operations in MPICH", IJHPCA 2005, §4; NVIDIA/nccl-tests
``doc/PERFORMANCE.md``, whose "bus bandwidth" is the link bandwidth of that formula). So a layer's
forward, and its backward, spend ``2 * 2 (t-1)/t * s b h * bytes_per_element / bandwidth`` in
collectives, not overlapped with its GEMMs.
"""

from __future__ import annotations

import functools
from fractions import Fraction

from harness.errors import ConfigError

__all__ = ["activation_formula", "activation_parts", "check_tensor_parallel", "collective_bytes", "layer_comm_ns",
           "tensor_parallel_assumptions"]


def check_tensor_parallel(t: int, sequence_parallel: bool, flash_attention: bool, *, heads: int, groups: int, ffn: int,
                          seq_len: int, gbytes_per_s: float | None, recompute_modes: tuple[str, ...]) -> None:
    """Refuse a tensor-parallel setting that cannot run.

    Raises:
        ConfigError: ``sequence_parallel`` or a TP bandwidth without tensor parallelism (``t = 1``); heads,
            query groups or the FFN size not divisible by ``t``; a sequence that sequence parallelism cannot
            split evenly; selective recomputation with flash attention (it has no scores to drop).
    """
    if not isinstance(sequence_parallel, bool) or not isinstance(flash_attention, bool):
        bad = "sequence_parallel" if not isinstance(sequence_parallel, bool) else "flash_attention"
        raise ConfigError(f"cost model: {bad} must be True or False")
    if t == 1:
        if sequence_parallel:
            raise ConfigError("cost model: sequence_parallel=True needs tensor_parallel_size > 1: sequence parallelism splits the "
                              "layer norms and dropouts over the tensor-parallel GPUs, and there is only one")
        if gbytes_per_s is not None:
            raise ConfigError(f"cost model: tp_gbytes_per_s={gbytes_per_s!r} is the bandwidth of the tensor-parallel collectives, "
                              "but tensor_parallel_size=1 has none: give tensor_parallel_size > 1, or leave tp_gbytes_per_s out")
    for name, value in (("num_attention_heads", heads), ("num_query_groups", groups), ("ffn_hidden_size", ffn)):
        if value % t:
            raise ConfigError(f"cost model: {name}={value} is not divisible by tensor_parallel_size={t}: tensor parallelism "
                              "gives each GPU an equal share of the heads, query groups and MLP columns")
    if sequence_parallel and seq_len % t:
        raise ConfigError(f"cost model: seq_len={seq_len} is not divisible by tensor_parallel_size={t}: sequence parallelism "
                          "gives each GPU an equal share of the sequence")
    if flash_attention:
        stages = [k for k, mode in enumerate(recompute_modes) if mode == "selective"]
        if stages:
            where = "" if len(recompute_modes) == 1 else f" (stage{'s' if len(stages) > 1 else ''} {', '.join(map(str, stages))})"
            raise ConfigError(f"cost model: recompute='selective'{where} with flash_attention=True: selective recomputation "
                              "drops the stored attention scores and re-computes them, but flash attention stores none, so it "
                              "would cost time and save nothing; choose recompute 'none' (or 'full') there")


@functools.lru_cache(maxsize=1024)  # pure in its whole-number and text arguments; a layout search asks it per stage and candidate
def activation_parts(s: int, b: int, h: int, a: int, t: int, sequence_parallel: bool, flash_attention: bool,
                     mode: str) -> tuple[int, int]:
    """Bytes one layer's forward keeps for its backward on one GPU of the tensor-parallel group, and
    the part of them a split backward frees at ``I`` (module doc): ``(kept, freed_by_I)``; ``W`` frees
    ``kept - freed_by_I``.

    Args:
        s, b, h, a: sequence length, micro-batch size, hidden size, attention heads.
        t: tensor-parallel size (1: none).
        sequence_parallel, flash_attention: as the module doc says.
        mode: ``"none"``, ``"selective"`` or ``"full"`` recomputation.
    """
    sbh = s * b * h
    split = t if sequence_parallel else 1  # what the replicated part is divided by
    if mode == "full":
        kept = Fraction(2 * sbh, split)
        return round(kept), round(kept)
    scores = Fraction(0) if flash_attention or mode == "selective" else Fraction(5 * a * s * s * b, t)
    rest = Fraction(34 * sbh, t) if sequence_parallel else 10 * sbh + Fraction(24 * sbh, t)
    total = round(rest + scores)
    return total, min(total, round(Fraction(2 * sbh, split) + scores))


def collective_bytes(nbytes: float, t: int, all_reduce: bool = True) -> float:
    """Bytes through each GPU's link for a ring collective of ``nbytes`` over ``t`` GPUs:
    ``2 (t-1)/t nbytes`` for an all-reduce, ``(t-1)/t nbytes`` for a reduce-scatter or an all-gather
    (module doc)."""
    return (2 if all_reduce else 1) * (t - 1) / t * nbytes


def layer_comm_ns(activation_bytes: int, t: int, gbytes_per_s: float | None) -> float:
    """Time (ns) one layer's forward, or its backward, spends in tensor-parallel collectives: two
    all-reduces (or two reduce-scatter and all-gather pairs) of ``activation_bytes`` (the layer's
    ``s b h`` output) at ``gbytes_per_s`` (GB/s = bytes/ns); 0 without a bandwidth or at ``t = 1``."""
    if gbytes_per_s is None or t == 1:
        return 0.0
    return 2 * collective_bytes(activation_bytes, t) / gbytes_per_s


def activation_formula(t: int, sequence_parallel: bool, flash_attention: bool, mode: str) -> str:
    """The row of Korthikanti et al.'s Table 2 (module doc) that gives one layer's activation bytes, as text."""
    if mode == "full":
        return "2 s b h" + (f" / {t}" if sequence_parallel else "") + " (full recomputation keeps each layer's input)"
    scores = "" if flash_attention or mode == "selective" else (" + 5 a s / h" if t == 1 else f" + 5 a s / (h {t})")
    if t == 1:
        return f"s b h (34{scores})"
    return f"s b h (34/{t}{scores})" if sequence_parallel else f"s b h (10 + 24/{t}{scores})"


def tensor_parallel_assumptions(t: int, sequence_parallel: bool, gbytes_per_s: float | None, layer_ns: float) -> list[str]:
    """Sentences naming the tensor-parallel setting of a case: its degree, and how its collectives are
    charged (``layer_ns``: one layer's forward collectives, from :func:`layer_comm_ns`)."""
    if t == 1:
        return ["no tensor parallelism (TP=1): each pipeline rank is one GPU holding whole layers"]
    how = "with sequence parallelism" if sequence_parallel else "without sequence parallelism"
    out = [f"tensor parallelism TP={t} {how}: FLOPs, parameters, gradients and optimizer state per GPU divided by {t}, "
           "activations as Korthikanti et al. 2022 (arXiv:2205.05198) Table 2"]
    ops = "reduce-scatter/all-gather pairs" if sequence_parallel else "all-reduces"
    if gbytes_per_s is None:
        out.append(f"tensor-parallel collectives not charged (no tp_gbytes_per_s): each layer's 2 {ops} per pass cost 0 ns")
    else:
        out.append(f"tensor-parallel collectives charged inside F, B and I, not overlapped with compute: 2 {ops} of s b h "
                   f"elements per layer and pass, ring cost 2(t-1)/t x bytes / {gbytes_per_s:g} GB/s = {layer_ns / 1e6:.3f} ms "
                   "per layer and pass")
    return out
