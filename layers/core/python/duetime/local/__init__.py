"""The embedded runtime behind `duetime local`: its backend (SQLite, or moto with the Lambda emulation), the API
over HTTP, timers, workers."""

# The stores `duetime local --backend` runs on; the first is the default. "sqlite": one durable file under
# --data-dir; "moto": the AWS-faithful mode, the real Lambda handlers over an embedded moto server.
BACKENDS = ("sqlite", "moto")
