"""The many-host drill (issue 24): `python -m bench.hosts`; see its __main__."""
