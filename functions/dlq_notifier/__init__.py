"""The dlq_notifier Lambda function."""
