"""Adapters that implement the service's ports outside AWS, and what they share with the AWS ones."""
