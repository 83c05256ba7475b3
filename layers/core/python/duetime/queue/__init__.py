"""SQS: the due queues and their DLQs."""
