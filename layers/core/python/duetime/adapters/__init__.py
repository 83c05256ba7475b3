"""The implementations of the service's ports: aws/ (DynamoDB, SQS, Secrets Manager) and sqlite/ (one file), the
same file names on both sides where they mean the same table, and what both write alike here (records.py,
cursors.py, shard_counts.py)."""
