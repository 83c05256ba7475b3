"""The embedded runtime behind `duetime local`: moto, the API over HTTP, timers and workers."""
