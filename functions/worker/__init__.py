"""The worker Lambda function."""
