"""The embedded runtime behind `duetime local`: moto, the API over HTTP, the Lambda emulation and workers."""

# The stores `duetime local --backend` runs on; the first is the default. "moto": the AWS-faithful mode.
BACKENDS = ("moto",)
