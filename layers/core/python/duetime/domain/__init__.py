"""Pure scheduling logic: models, schedules, retry policy and state transitions (no I/O)."""
