"""The load drill of issue 6: `python -m bench.load` (see __main__.py)."""
