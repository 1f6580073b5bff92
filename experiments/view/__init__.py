"""The offline HTML view of a run (``ctxcomp view``) and ``ctxcomp show``: every arm of an example side by side,
its kept text highlighted in the full context, from the report's cells and the run's traces."""
