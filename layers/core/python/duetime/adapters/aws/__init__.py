"""The AWS adapters: the store in DynamoDB (a module per table), the due queues in SQS, webhook secrets in Secrets
Manager, the boto3 clients they share, and the provisioning tests and benchmarks create them with."""
