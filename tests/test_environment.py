

def test_usage_leaves_the_cases_own_sibling_processes_out_of_other_load(monkeypatch):
    # An mpi run's other ranks on this host are the case's own processes, not contention.
    import harness.run.environment as env

    busy = iter([0, 3_000_000_000])
    clock = iter([0, 2_000_000_000])
    cpu = iter([0, 1_000_000_000])
    monkeypatch.setattr(env, "_machine_busy_ns", lambda: next(busy))
    monkeypatch.setattr(env.time, "perf_counter_ns", lambda: next(clock))
    monkeypatch.setattr(env.time, "process_time_ns", lambda: next(cpu))
    monkeypatch.setattr(env, "_loadavg", lambda: 0.5)
    probe = env.UsageProbe()
    usage = probe.finish(siblings_cpu_ns=1_500_000_000)
    # machine busy 3 s over 2 s of wall, 1 s of it this process, 1.5 s its sibling ranks: 0.25 cores of other load
    assert usage.other_cores == 0.25 and usage.own_cores == 0.5
