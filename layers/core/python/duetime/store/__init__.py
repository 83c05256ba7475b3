"""DynamoDB adapters."""
