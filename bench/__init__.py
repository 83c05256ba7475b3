"""duetime's benchmarks: start lateness, throughput against moto's own ceiling, AWS calls per execution,
failure detection. `make bench` (or `python -m bench`) runs them all; they print figures, they are not tests."""
