"""Designing a run before and while it reads: how many examples a decision needs and what they cost (``power``),
and runs that grow in steps until each cell is decided (``sequential``, ``grow``)."""
