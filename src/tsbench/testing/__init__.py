"""Protocol test doubles shipped with the package, so benchmarks and tests can use them alike."""
