"""spotrun's training half: an event-driven trainer and speed-up methods.

Every method is first a pure function in `spotrun.train.functional`, usable in any PyTorch loop;
`spotrun.train.methods` wraps each in a thin Algorithm for the Trainer.
"""
