"""Use-cases: submit, pre-load, claim, heartbeat, complete, retry, cancel."""
