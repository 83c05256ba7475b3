"""The preloader Lambda function."""
