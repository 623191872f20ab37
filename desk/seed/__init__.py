"""Demo data and large generated data for benchmarks."""
