"""Benchmark helpers: ``latency.summarize`` turns times into stats, ``report`` turns the agent's
benchmark answer into ``benchmark.json``, ``host`` runs the agent's benchmark in this process."""

from pipeline.bench.latency import summarize

__all__ = ["summarize"]
