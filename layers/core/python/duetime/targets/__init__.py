"""Callers of the handler kinds that run elsewhere: a Lambda function or an ECS task (aws), a webhook (webhook)."""
