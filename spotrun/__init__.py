"""spotrun: train deep-learning models fast and cheaply on AWS spot GPUs."""

__version__ = "0.1.0"
