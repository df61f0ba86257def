"""Performance benchmarks; run them all with `make bench`."""
