"""SQS adapters."""
