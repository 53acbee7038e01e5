"""S3 for the data set tests: the process's shared moto server, a fresh bucket per test."""

from spotlab.s3bucket import s3_bucket

__all__ = ["s3_bucket"]
