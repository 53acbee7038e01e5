"""Data sets that live in the cloud and are staged onto the machine that trains on them.

Provider-free: what a `data=` value names (spec), the shard format and its manifest
(manifest, push), putting shards in place on a disk (extract, stager, layout), progress
(progress) and the controller's side of a run's data (prepare). The S3 and EC2 calls live in
spotrun.cloud.aws (datasets.py, volumes.py); README.md in this folder describes the design.
"""
