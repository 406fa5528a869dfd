"""harness.analysis.metrics on an importer's records: overlapping jobs count once, an importer's own kinds are busy, transfers
are not, and records without enqueue times are fine (the figures the Paddle importer used to compute itself)."""

from harness.analysis.metrics import compute_metrics, metrics_to_dict
from harness.records import JobRecord, RunRecords


def test_overlapping_jobs_are_a_union_and_imported_kinds_count_as_busy():
    # rank 0: F 0-100 on compute, B 60-160 overlapping it (stream overlap), lr 170-180; SEND_F 100-400 on comm.
    # rank 1: F 200-300.  Step: 0 .. 400.
    jobs = [
        JobRecord(0, "rank0/compute", 0, "F", 0, 0, 0, 0, 100),
        JobRecord(0, "rank0/overlap", 0, "B", 0, 0, 0, 60, 160),
        JobRecord(0, "rank0/compute", 0, "lr", 0, 0, 0, 170, 180),
        JobRecord(0, "rank0/comm", 0, "SEND_F", 0, 0, 0, 100, 400),
        JobRecord(1, "rank1/compute", 1, "F", 0, 0, 0, 200, 300),
    ]
    rec = RunRecords("paddle-log", {}, 2, ["rank0/compute", "rank0/overlap", "rank0/comm", "rank1/compute"],
                     [0], [0], [400], jobs)
    m = compute_metrics(rec)
    s = m.steps[0]
    assert s.step_time_ns == 400
    assert s.busy_ns == [170, 100]  # union 0-160 (160) + lr 10; the send is not busy
    assert s.idle_ns == [230, 300]
    assert s.bubble_ratio == 530 / 800
    assert s.bubble_over_ideal == 530 / 270
    assert s.span_bubble_ratio == (180 + 100 - 270) / (180 + 100)  # rank 0 spans 0-180, rank 1 200-300
    assert m.enqueue_ns_per_job == 0.0
    d = metrics_to_dict(m)
    assert d["per_step"][0]["busy_ns"] == [170, 100] and d["stats"]["step_time_ns"]["median"] == 400
