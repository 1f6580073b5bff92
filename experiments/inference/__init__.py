"""The one room for inference: the tests, the intervals they invert, sequential decisions and the planning of n.

Everything a report decides about scores comes from here, valid for any bounded scores at any n:
``paired`` (which test a cell takes, its interval and p), ``exact`` (0/1 scores of independent questions),
``betting`` (anything else, and every sequential look), ``verdicts`` (non-inferiority, the floor and ceiling
rule, Holm), ``sequential`` (anytime-valid looks), ``power`` (the n a verdict needs), ``simulation`` (the
tests over many trials at once).  ``resampling`` keeps the descriptive bootstrap and sign flip for seconds
and tokens.  The room imports numpy and scipy only (docs/metrics.md explains each method).
"""
