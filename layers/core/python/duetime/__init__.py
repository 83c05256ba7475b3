"""duetime: a distributed job scheduler on AWS serverless parts."""
