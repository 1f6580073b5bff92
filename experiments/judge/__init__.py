"""LLM-judged evaluation (``ctxcomp judge``): L-Eval's pairwise protocol and HELMET's rubrics over a run's
predictions, with the judge's request texts in ``prompts/``."""
