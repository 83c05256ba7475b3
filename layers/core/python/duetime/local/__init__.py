"""The embedded runtime behind `duetime local`: its backend (SQLite or moto), the API over HTTP, timers, workers."""

# The stores `duetime local --backend` runs on; the first is the default. "sqlite": one durable file under
# --data-dir; "moto": the AWS adapters on an embedded moto server.
BACKENDS = ("sqlite", "moto")
