"""Model descriptions shared by the benchmark cases.

Durations come from :class:`harness.model.transformer.TransformerCost`: forward FLOPs
``24 L h^2 t`` per stage, backward twice that, on a device sustaining
``tflops``. 200 TFLOP/s is an H100 running bf16 at about 20 % of its dense
peak, or an A100 at about 64 %: a realistic sustained rate for a 1.3B model.
"""

from __future__ import annotations

from dataclasses import replace

from harness import TransformerCost

#: A GPT-style model of about 1.2 B parameters (24 layers, hidden 2048), as in
#: GPT-3 XL (Brown et al., 2020, Table 2.1), with sequence length 1024 and
#: micro-batch size 1. Split over 4 stages a forward is ~3.1 ms, a backward ~6.2 ms.
GPT_1B = TransformerCost(
    hidden_size=2048,
    seq_len=1024,
    micro_batch_size=1,
    num_layers=24,
    tflops=200.0,
)

#: A small model whose jobs are real NumPy GEMMs on the CPU (``workload="compute"``):
#: hidden 256, sequence 128, 8 layers, so one stage's forward is ~0.4 GFLOP.
SMALL_CPU = TransformerCost(
    hidden_size=256,
    seq_len=128,
    micro_batch_size=1,
    num_layers=8,
    tflops=0.05,
)

#: The same 1.2 B GPT with its stages on different nodes: activations of
#: 1024 x 2048 bf16 values (4 MiB) cross a 200 Gbit/s InfiniBand link (25 GB/s)
#: with 10 µs latency, about 0.18 ms per transfer.
GPT_1B_INFINIBAND = replace(GPT_1B, p2p_latency_ns=10_000, p2p_gbytes_per_s=25.0)
