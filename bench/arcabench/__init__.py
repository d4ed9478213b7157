"""arca benchmark harness: see bench/README.md. Entry point: bench/run (python -m arcabench.cli)."""
