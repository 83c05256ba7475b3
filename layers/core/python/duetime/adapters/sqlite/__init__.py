"""The embedded adapters: the store and the due queues in one SQLite file, the same contract as on AWS."""
