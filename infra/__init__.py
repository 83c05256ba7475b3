"""duetime's AWS CDK app: one stack assembling one construct per concern."""
