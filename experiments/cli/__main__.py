"""``python -m experiments.cli``: the same app as the ``ctxcomp`` console script."""
from experiments.cli.app import main

main()
