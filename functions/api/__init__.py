"""The api Lambda function."""
